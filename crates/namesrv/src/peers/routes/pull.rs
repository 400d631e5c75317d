//! ROUTE_PULL: the registrations a peer asks for, as this NameServer holds them. A record
//! carries the broker's registration headers and its group's topics in a compact list, not a
//! REGISTER_BROKER JSON body: a restarted member takes millions of queue entries from its
//! peers, and neither side should build, escape or parse JSON for them.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::digest::{heard_of, Heard};
use crate::registry::{Queues, Registry, TopicSnapshot};

/// Bytes of topic lists one pull answers with, about (by the groups' topic counts), past the
/// first record: a group with 100k topics is megabytes. Answers are built in one pass over the
/// table, so fewer and larger ones cost less: at 300 brokers × 10k topics, answers of 4 MiB made
/// a restarted member wait 7 s for 3M queue entries, of 16 MiB under 4 s. The first answer of a
/// round is smaller, so that the asker starts applying sooner: it replays one answer while the
/// next comes. The asker says which (`keys::BYTES`); the answer is never larger than the larger.
pub const FIRST_PULL_BYTES: usize = 4 * 1024 * 1024;
pub const PULL_BYTES: usize = 16 * 1024 * 1024;

/// A broker's registration as a NameServer holds it, to be replayed by a peer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub heard: Heard,
    pub ha_server_addr: String,
    pub timeout_ms: i64,
    pub protocol: i32,
    pub acting_master: bool,
    pub zone: Option<String>,
    /// The length of [`Record::topics`], which travels after the records (see [`encode_pull`]).
    pub body_len: usize,
    /// The group's topics as this NameServer routes them, in [`write_topic`]'s layout.
    #[serde(skip)]
    pub topics: Bytes,
}

/// ROUTE_PULL's answer: the records' JSON (topic lists left out) after its length (4 bytes,
/// big-endian), then each record's topic list in order.
pub fn encode_pull(records: &[Record]) -> Result<Vec<u8>, serde_json::Error> {
    let meta = serde_json::to_vec(records)?;
    let lists: usize = records.iter().map(|r| r.topics.len()).sum();
    let mut out = Vec::with_capacity(4 + meta.len() + lists);
    out.extend_from_slice(&u32::try_from(meta.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&meta);
    for r in records {
        out.extend_from_slice(&r.topics);
    }
    Ok(out)
}

fn short() -> String {
    "a route pull answer shorter than it says".to_string()
}

/// Reads [`encode_pull`]'s layout; the topic lists share `answer`'s memory.
pub fn decode_pull(answer: Bytes) -> Result<Vec<Record>, String> {
    let len = answer.get(..4).ok_or_else(short)?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let meta = answer
        .get(4..)
        .and_then(|m| m.get(..len))
        .ok_or_else(short)?;
    let mut records: Vec<Record> = serde_json::from_slice(meta).map_err(|e| e.to_string())?;
    let mut at = 4 + len;
    for r in &mut records {
        let end = at
            .checked_add(r.body_len)
            .filter(|end| *end <= answer.len())
            .ok_or_else(short)?;
        r.topics = answer.slice(at..end);
        at = end;
    }
    Ok(records)
}

/// One topic of a list: its name's length (4 bytes), the name (UTF-8), then its read and write
/// queue counts, permission and system flag (4 bytes each); every number big-endian.
fn write_topic(out: &mut Vec<u8>, topic: &str, q: &Queues) {
    out.extend_from_slice(&u32::try_from(topic.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(topic.as_bytes());
    for n in [q.read, q.write, q.perm, q.sys_flag] {
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Reads a topic list; the names borrow `list`. Refused whole when it is cut short or a name
/// is not UTF-8.
pub fn read_topics(list: &[u8]) -> Result<Vec<(&str, Queues)>, String> {
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
        let (head, tail) = rest.split_at_checked(n).ok_or_else(short)?;
        *rest = tail;
        Ok(head)
    }
    fn int(rest: &mut &[u8]) -> Result<i32, String> {
        let b = take(rest, 4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    let mut rest = list;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = int(&mut rest)? as u32 as usize;
        let name = std::str::from_utf8(take(&mut rest, len)?)
            .map_err(|_| "a topic name in a route pull is not UTF-8".to_string())?;
        let q = Queues {
            read: int(&mut rest)?,
            write: int(&mut rest)?,
            perm: int(&mut rest)?,
            sys_flag: int(&mut rest)?,
        };
        out.push((name, q));
    }
    Ok(out)
}

/// What one topic of a list takes, about: names of 20 to 30 bytes.
const ENTRY_GUESS: usize = 48;

/// The registrations of the asked brokers still heard here, in the order asked, as many as fit
/// in `budget` bytes (at most [`PULL_BYTES`]) by their groups' topic counts (at least one), with
/// the topic table as it is: taken under the registry's lock, which this holds for microseconds.
/// Their topic lists are made by [`Pull::records`] once the lock is released: that pass costs a
/// cache miss or more per topic, a restarted member asks for every group of a table of millions
/// of queue entries, and registrations must not wait for it.
pub fn pull(r: &Registry, asked: &[Heard], budget: usize) -> Pull {
    let budget = budget.min(PULL_BYTES);
    let mut chosen = Vec::new();
    let mut guessed = 0;
    for want in asked {
        if guessed >= budget {
            break;
        }
        let Some(bd) = r.group(&want.name) else {
            continue;
        };
        if bd.cluster != want.cluster || bd.broker_addrs.get(&want.id) != Some(&want.addr) {
            continue;
        }
        let Some(live) = r.live(&want.cluster, &want.addr) else {
            continue;
        };
        guessed += r.group_topic_count(&want.name) * ENTRY_GUESS;
        chosen.push(Record {
            heard: heard_of(r, (&want.cluster, &want.name), want.id, &want.addr, live),
            ha_server_addr: live.ha_server_addr.clone(),
            timeout_ms: live.timeout_ms,
            protocol: live.version,
            acting_master: bd.enable_acting_master,
            zone: bd.zone_name.clone(),
            body_len: 0,
            topics: Bytes::new(),
        });
    }
    // Nothing to list: no need to hold the table's shards.
    let topics = (!chosen.is_empty()).then(|| r.topic_snapshot());
    Pull { chosen, topics }
}

/// A pull's answer before its topic lists are made.
pub struct Pull {
    chosen: Vec<Record>,
    topics: Option<TopicSnapshot>,
}

impl Pull {
    /// The records with their groups' topic lists, made in one pass over the table as it was
    /// when [`pull`] chose them.
    pub fn records(mut self) -> Vec<Record> {
        // One list per group, shared by its members asked together.
        let mut lists: foldhash::HashMap<String, Vec<u8>> = self
            .chosen
            .iter()
            .map(|rec| (rec.heard.name.clone(), Vec::new()))
            .collect();
        for (topic, queues) in self.topics.iter().flat_map(TopicSnapshot::iter) {
            for (name, q) in queues.iter() {
                if let Some(list) = lists.get_mut(name) {
                    write_topic(list, topic, q);
                }
            }
        }
        let lists: foldhash::HashMap<String, Bytes> = lists
            .into_iter()
            .map(|(name, list)| (name, Bytes::from(list)))
            .collect();
        for rec in &mut self.chosen {
            rec.topics = lists[&rec.heard.name].clone();
            rec.body_len = rec.topics.len();
        }
        self.chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, topics: &[(&str, Queues)]) -> Record {
        let mut list = Vec::new();
        for (t, q) in topics {
            write_topic(&mut list, t, q);
        }
        Record {
            heard: super::super::digest::tests::heard(name, "1.1.1.1:10911", (0, 1, 1), 5),
            ha_server_addr: String::new(),
            timeout_ms: 120_000,
            protocol: 0,
            acting_master: false,
            zone: None,
            body_len: list.len(),
            topics: Bytes::from(list),
        }
    }

    const Q: Queues = Queues {
        read: 8,
        write: 4,
        perm: 6,
        sys_flag: -1,
    };

    #[test]
    fn a_pull_answer_carries_each_topic_list_as_it_is_and_a_short_one_is_refused() {
        let records = [record("a", &[("TopicA", Q), ("主题", Q)]), record("b", &[])];
        let answer = Bytes::from(encode_pull(&records).unwrap());
        let read = decode_pull(answer.clone()).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].topics, records[0].topics);
        assert_eq!(
            read_topics(&read[0].topics).unwrap(),
            [("TopicA", Q), ("主题", Q)]
        );
        assert_eq!(read[1].heard.name, "b");
        assert!(read[1].topics.is_empty());
        for cut in [0, 3, 10, answer.len() - 1] {
            assert!(decode_pull(answer.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut lying = answer.to_vec();
        lying[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_pull(Bytes::from(lying)).is_err());
    }

    /// A member of `group` at `addr` taken over from a peer with `topics`.
    fn adopt(
        table: &crate::registry::RouteTable,
        group: &str,
        addr: &str,
        topics: &[(&str, Queues)],
    ) {
        let reg = crate::registry::Registration {
            from: crate::registry::Registrant {
                cluster: "c".into(),
                broker_addr: addr.into(),
                broker_name: group.into(),
                broker_id: 0,
                conn: super::super::PEER_CONNECTION,
                now_ms: 1,
            },
            ha_server_addr: String::new(),
            zone_name: None,
            timeout_ms: None,
            enable_acting_master: None,
            body: Default::default(),
            version: 0,
            listed: usize::MAX,
            changes_since: None,
            headers: 0,
            table: None,
        };
        let (outcome, _) = table.adopt("peer", reg, topics, false, (1, 1));
        assert!(matches!(
            outcome,
            crate::registry::RegisterOutcome::Registered { .. }
        ));
    }

    #[test]
    fn one_pass_answers_each_asked_group_with_its_own_topics_within_the_budget() {
        let table = crate::registry::RouteTable::default();
        table.change(Registry::hash_topics);
        let q = |n| Queues { read: n, ..Q };
        adopt(
            &table,
            "a",
            "1.1.1.1:10911",
            &[("shared", q(1)), ("only-a", q(2))],
        );
        adopt(
            &table,
            "b",
            "2.2.2.2:10911",
            &[("shared", q(3)), ("only-b", q(4))],
        );
        let digest = table.read(super::super::digest::digest);
        let asked: Vec<Heard> = ["b", "a"]
            .iter()
            .map(|name| {
                digest
                    .heard
                    .iter()
                    .find(|h| h.name == *name)
                    .unwrap()
                    .clone()
            })
            .collect();
        let answer = table.read(|r| pull(r, &asked, PULL_BYTES)).records();
        assert_eq!(answer.len(), 2);
        for (record, mut want) in answer.iter().zip([
            vec![("only-b", q(4)), ("shared", q(3))],
            vec![("only-a", q(2)), ("shared", q(1))],
        ]) {
            let mut got = read_topics(&record.topics).unwrap();
            got.sort_by_key(|(t, _)| *t);
            want.sort_by_key(|(t, _)| *t);
            assert_eq!(got, want, "{}", record.heard.name);
            assert_eq!(
                record.heard.topics,
                table.read(|r| r.topics_hash(&record.heard.name))
            );
        }
        // Past the budget after the first: that one only.
        let first = table.read(|r| pull(r, &asked, 1)).records();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].heard.name, "b");
        // Taken over again with one topic fewer: the group holds exactly the list.
        adopt(&table, "a", "1.1.1.1:10911", &[("only-a", q(5))]);
        let again = table.read(|r| pull(r, &asked[1..], PULL_BYTES)).records();
        assert_eq!(read_topics(&again[0].topics).unwrap(), [("only-a", q(5))]);
    }

    #[test]
    fn a_topic_list_cut_anywhere_or_naming_a_topic_in_bad_utf8_is_refused() {
        let list = record("a", &[("TopicA", Q), ("TopicB", Q)]).topics;
        // Each topic takes 4 + 6 + 16 bytes: a cut between two is a shorter list.
        assert_eq!(read_topics(&list[..26]).unwrap(), [("TopicA", Q)]);
        for cut in (1..list.len()).filter(|cut| *cut != 26) {
            assert!(read_topics(&list[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = list.to_vec();
        bad[4] = 0xff;
        assert!(read_topics(&bad).is_err());
        let mut huge = list.to_vec();
        huge[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(read_topics(&huge).is_err());
    }
}
