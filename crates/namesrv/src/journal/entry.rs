//! One journal entry: a change to a broker's or a topic's route, with its cause and source,
//! as it is written to disk (one JSON line) and answered to `nsadmin explainRoute`.

use serde::{Deserialize, Serialize};

/// Why a route changed. The names are what the journal file, the answer of ROUTE_JOURNAL and
/// the metrics call them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// This NameServer started.
    Started,
    /// A group was restored from the route snapshot at start.
    Restored,
    /// A broker joined its group: its first registration here, or from a new address.
    Registered,
    /// A registration of a member changed topics, queues or permissions.
    Updated,
    /// A registration was refused.
    Refused,
    /// The broker said it was leaving (UNREGISTER_BROKER).
    Unregistered,
    /// The connection the broker registered on closed.
    ConnectionClosed,
    /// The broker sent nothing for longer than its timeout.
    Expired,
    /// An unregistration decided before the broker registered again, left unapplied.
    StaleUnregistration,
    /// A peer NameServer said the broker unregistered there.
    LeftAtPeer,
    /// A member restored from the snapshot that no broker backed.
    Unbacked,
    /// DELETE_TOPIC_IN_NAMESRV.
    AdminDeleted,
    /// WIPE_WRITE_PERM_OF_BROKER.
    AdminWiped,
    /// ADD_WRITE_PERM_OF_BROKER.
    AdminRestored,
    /// REGISTER_TOPIC_IN_NAMESRV.
    AdminRegistered,
    /// Taken from a peer NameServer's word of a broker.
    TakenOver,
    /// A change none of the above names (and a cause a later release wrote).
    #[serde(other)]
    Changed,
}

impl Cause {
    /// Every cause in declaration order, with its name in the journal and in metrics' labels
    /// (its serde name: `every_cause_has_its_own_name` checks they agree).
    pub const ALL: [(Cause, &'static str); 17] = [
        (Cause::Started, "started"),
        (Cause::Restored, "restored"),
        (Cause::Registered, "registered"),
        (Cause::Updated, "updated"),
        (Cause::Refused, "refused"),
        (Cause::Unregistered, "unregistered"),
        (Cause::ConnectionClosed, "connection-closed"),
        (Cause::Expired, "expired"),
        (Cause::StaleUnregistration, "stale-unregistration"),
        (Cause::LeftAtPeer, "left-at-peer"),
        (Cause::Unbacked, "unbacked"),
        (Cause::AdminDeleted, "admin-deleted"),
        (Cause::AdminWiped, "admin-wiped"),
        (Cause::AdminRestored, "admin-restored"),
        (Cause::AdminRegistered, "admin-registered"),
        (Cause::TakenOver, "taken-over"),
        (Cause::Changed, "changed"),
    ];

    /// Its name in the journal and in metrics' labels.
    pub fn key(self) -> &'static str {
        Cause::ALL[self as usize].1
    }
}

/// A topic's queues on one group: `[read, write, perm]`.
pub type QueuesNote = [i32; 3];

/// One topic's route on one group, before and after (`None`: not routed there).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    pub topic: String,
    pub broker: String,
    pub was: Option<QueuesNote>,
    pub now: Option<QueuesNote>,
}

impl Move {
    /// The topic left the group's route.
    pub fn is_removal(&self) -> bool {
        self.was.is_some() && self.now.is_none()
    }
}

/// Moves as the registry notes them under its write lock: the topic names in one buffer and a
/// row per move, so that a registration of 10k new topics allocates nothing per topic while
/// route lookups wait. The journal's writer unpacks them into [`Move`]s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packed {
    names: String,
    rows: Vec<Row>,
    removals: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    /// Where the topic's name ends in `names` (it starts where the previous row's ends).
    end: usize,
    group: std::sync::Arc<str>,
    was: Option<QueuesNote>,
    now: Option<QueuesNote>,
}

impl Packed {
    pub fn push(
        &mut self,
        topic: &str,
        group: &std::sync::Arc<str>,
        was: Option<QueuesNote>,
        now: Option<QueuesNote>,
    ) {
        self.names.push_str(topic);
        self.removals += usize::from(was.is_some() && now.is_none());
        self.rows.push(Row {
            end: self.names.len(),
            group: group.clone(),
            was,
            now,
        });
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Moves that took a topic out of a group's route.
    pub fn removals(&self) -> usize {
        self.removals
    }

    /// The moves in runs of one group, in the order noted: each run's group and its range.
    pub fn runs(&self) -> Vec<(std::sync::Arc<str>, std::ops::Range<usize>)> {
        let mut runs: Vec<(std::sync::Arc<str>, std::ops::Range<usize>)> = Vec::new();
        for (i, row) in self.rows.iter().enumerate() {
            match runs.last_mut() {
                Some((group, range)) if std::sync::Arc::ptr_eq(group, &row.group) => {
                    range.end = i + 1
                }
                _ => runs.push((row.group.clone(), i..i + 1)),
            }
        }
        runs
    }

    /// Appends the rows `range` of `from`.
    pub fn extend_from(&mut self, from: &Packed, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        let start = match range.start {
            0 => 0,
            i => from.rows[i - 1].end,
        };
        let base = self.names.len();
        self.names
            .push_str(&from.names[start..from.rows[range.end - 1].end]);
        for row in &from.rows[range] {
            self.removals += usize::from(row.was.is_some() && row.now.is_none());
            self.rows.push(Row {
                end: base + row.end - start,
                ..row.clone()
            });
        }
    }

    /// The moves, unpacked.
    pub fn unpack(self) -> Vec<Move> {
        let mut start = 0;
        self.rows
            .into_iter()
            .map(|row| {
                let topic = self.names[start..row.end].to_string();
                start = row.end;
                Move {
                    topic,
                    broker: row.group.to_string(),
                    was: row.was,
                    now: row.now,
                }
            })
            .collect()
    }
}

/// A change, with who and what it concerns. Which fields are set depends on the cause.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Its place in this NameServer's journal, given when it is recorded.
    #[serde(default)]
    pub seq: u64,
    /// When, on this NameServer's clock (ms).
    pub at: i64,
    pub cause: Option<Cause>,
    /// The broker group (broker name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Expiry: how long the broker had been silent, and its timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silent_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    /// Who asked: an admin's client address (and access key when signed), or the peer a
    /// broker's word came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The topics whose route this changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<Move>,
    /// Topics this change moved that `topics` leaves out (an answer trimmed to one topic, or a
    /// change split over several lines on disk).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_topics: usize,
    /// Moves noted under the registry's lock, not yet in `topics` (see [`Packed`]).
    #[serde(skip)]
    pub packed: Packed,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Entry {
    pub fn new(cause: Cause) -> Self {
        Entry {
            at: rocketmq_wire::clock::now_ms(),
            cause: Some(cause),
            ..Default::default()
        }
    }

    pub fn broker(mut self, cluster: &str, name: &str, addr: &str, id: i64) -> Self {
        self.cluster = Some(clip(cluster));
        self.broker = Some(clip(name));
        self.addr = Some(clip(addr));
        self.id = Some(id);
        self
    }

    pub fn group(mut self, name: &str) -> Self {
        self.broker = Some(clip(name));
        self
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = clip(&detail.into());
        self
    }

    /// Moves its packed moves into `topics`.
    pub fn unpack(&mut self) {
        if !self.packed.is_empty() {
            let packed = std::mem::take(&mut self.packed);
            self.topics.extend(packed.unpack());
        }
    }

    /// Topics it moves, packed or not.
    pub fn moves(&self) -> usize {
        self.topics.len() + self.packed.len()
    }

    /// Topics it took out of a group's route, packed or not.
    pub fn removals(&self) -> usize {
        self.topics.iter().filter(|m| m.is_removal()).count() + self.packed.removals()
    }

    pub fn cause(&self) -> Cause {
        self.cause.unwrap_or(Cause::Changed)
    }
}

/// Characters kept of a text an entry carries: names come from peers, and a line must stay
/// readable.
const TEXT_MAX: usize = 512;

fn clip(s: &str) -> String {
    match s.char_indices().nth(TEXT_MAX) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_as_written_and_leaves_out_what_it_does_not_carry() {
        let mut e = Entry::new(Cause::Expired)
            .broker("c", "broker-a", "10.0.0.1:10911", 0)
            .detail("x");
        e.silent_ms = Some(121_000);
        e.timeout_ms = Some(120_000);
        e.topics.push(Move {
            topic: "T".into(),
            broker: "broker-a".into(),
            was: Some([8, 8, 6]),
            now: None,
        });
        let line = serde_json::to_string(&e).unwrap();
        assert!(line.contains("\"cause\":\"expired\""), "{line}");
        assert!(!line.contains("by"), "{line}");
        assert_eq!(serde_json::from_str::<Entry>(&line).unwrap(), e);
        assert!(e.topics[0].is_removal());
    }

    #[test]
    fn a_cause_a_later_release_wrote_reads_as_a_change() {
        let e: Entry = serde_json::from_str(r#"{"at":1,"cause":"moved-to-mars"}"#).unwrap();
        assert_eq!(e.cause(), Cause::Changed);
    }

    #[test]
    fn every_cause_has_its_own_name() {
        let names: std::collections::HashSet<_> = Cause::ALL.iter().map(|(c, _)| c.key()).collect();
        assert_eq!(names.len(), Cause::ALL.len());
        for (c, _) in Cause::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.key()));
        }
    }
}
