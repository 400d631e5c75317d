//! Registration rounds: which of a broker's registrations together list all of its group's
//! topics, and what leaves when such a round ends.
//!
//! A broker lists its whole topic table every period, in one registration or, with
//! `enableSplitRegistration`, in chunks sent one after another: every chunk but the last holds
//! exactly `splitRegistrationSize` topics, the last holds fewer (none when the table divides
//! evenly), and all carry the same data version. The NameServer is not told the chunk size, so
//! a round is recognised by its shape: registrations of one member at one data version, each
//! following the previous within [`QUIET_MS`], make one round; the round is complete when one
//! lists fewer topics than the one before it (the last chunk), or when nothing follows a lone
//! registration within [`QUIET_MS`] (a broker that does not split). A round of several chunks
//! that goes quiet without its last chunk is incomplete (a chunk was lost): nothing leaves.
//! A registration of one topic at a new data version is a 5.x broker's increment, never a
//! round: it only vouches for its topic.
//!
//! Two things wait for a complete round:
//! - **Restored routes are provisional.** After a start from the route snapshot, a group's
//!   restored topics are served as they were, but those that its first complete round does not
//!   list leave then, as they would never have come back on a NameServer that started empty.
//! - **`deleteTopicWithBrokerRegistration` with split registration.** Java prunes at every
//!   chunk what that chunk does not list, which leaves a split broker with its last chunk's
//!   topics. Here the first registration of a round prunes at once as Java does (the broker may
//!   not split at all); a second chunk of the same round puts back what the first pruned, and
//!   from then on the group's pruning waits for the end of its round, where a topic leaves only
//!   when no chunk of the round listed it. A group whose last round was split defers from the
//!   first chunk on.
//!
//! Nothing is tracked for a group that has neither: the registration path pays one lookup.

use std::collections::{HashMap, HashSet};

use rocketmq_wire::body::DataVersion;

use super::queues::Queues;
use super::registration::Registration;
use super::tables::Registry;
use crate::journal::{Cause, Entry};

/// How long a round may wait for its next chunk. A broker sends a chunk when every NameServer
/// it lists answered the one before (milliseconds; a few seconds when one of them cannot be
/// reached), and re-registers every 30 s (10 s at the least), so a gap this long ends a round.
pub const QUIET_MS: i64 = 5_000;

#[derive(Default)]
pub(super) struct Rounds {
    groups: HashMap<String, GroupRounds>,
}

#[derive(Default)]
struct GroupRounds {
    /// Topics restored from the snapshot that no registration of the group has listed since.
    unconfirmed: Option<HashSet<String>>,
    round: Option<Round>,
    /// The group's last round came in chunks: its pruning waits for the round's end.
    split: bool,
    /// Whether the split was told (once per group and process).
    told: bool,
}

/// A round under way.
struct Round {
    cluster: String,
    addr: String,
    id: i64,
    version: DataVersion,
    chunks: u32,
    last_count: usize,
    last_ms: i64,
    /// Topics the round listed so far, kept under `deleteTopicWithBrokerRegistration` only (a
    /// provisional topic is struck off as soon as it is listed).
    listed: HashSet<String>,
    /// The round's end prunes what it did not list (`deleteTopicWithBrokerRegistration`, its
    /// pruning deferred).
    prunes_at_end: bool,
    /// What the round's first registration pruned at once: put back if a second chunk comes.
    pruned: Vec<(String, Queues)>,
}

impl Round {
    /// Keeps the names `reg` lists, when the round's end prunes by them.
    fn list(&mut self, reg: &Registration, prunes: bool) {
        if prunes {
            self.listed.extend(listed(reg).map(str::to_string));
        }
    }

    fn continued_by(&self, reg: &Registration) -> bool {
        self.addr == reg.from.broker_addr
            && self.id == reg.from.broker_id
            && self.version == reg.body.wrapper.data_version
            && reg.from.now_ms - self.last_ms <= QUIET_MS
    }
}

/// What a registration did that its round needs to know.
pub(super) struct Counted<'a> {
    pub reg: &'a Registration,
    /// The registration is under `deleteTopicWithBrokerRegistration`.
    pub prunes: bool,
    /// What it pruned at once, with the queues it had.
    pub pruned: Vec<(String, Queues)>,
}

fn listed(reg: &Registration) -> impl Iterator<Item = &str> {
    reg.body
        .wrapper
        .topic_configs
        .iter()
        .filter_map(|tc| tc.topic_name.as_deref())
}

impl Registry {
    /// Holds every group's topics as provisional: called once, on routes restored from the
    /// snapshot.
    pub fn hold_restored_topics(&mut self) {
        let mut by_group: HashMap<&str, HashSet<String>> = HashMap::new();
        for (topic, queues) in self.topics.iter() {
            for (name, _) in queues.iter() {
                by_group.entry(name).or_default().insert(topic.to_string());
            }
        }
        for (name, topics) in by_group {
            self.rounds
                .groups
                .entry(name.to_string())
                .or_default()
                .unconfirmed = Some(topics);
        }
    }

    /// How many restored topics of the group wait for its first complete round.
    pub fn provisional_topics(&self, broker_name: &str) -> usize {
        self.rounds
            .groups
            .get(broker_name)
            .and_then(|g| g.unconfirmed.as_ref())
            .map_or(0, HashSet::len)
    }

    /// Whether a registration's own pruning waits for its round's end.
    pub(super) fn defers_pruning(&self, reg: &Registration) -> bool {
        self.rounds
            .groups
            .get(&reg.from.broker_name)
            .is_some_and(|g| g.split || g.round.as_ref().is_some_and(|r| r.continued_by(reg)))
    }

    /// Whether the group's registrations must be read whole: its round needs their names.
    pub(super) fn needs_whole_tables(&self, broker_name: &str) -> bool {
        self.rounds
            .groups
            .get(broker_name)
            .is_some_and(|g| g.unconfirmed.is_some())
    }

    /// Counts a registration of a broker speaking for its group's topics towards the group's
    /// round, and ends the round when this was its last chunk.
    pub(super) fn count_round(&mut self, counted: Counted<'_>) {
        let Counted {
            reg,
            prunes,
            pruned,
        } = counted;
        let name = &reg.from.broker_name;
        let Some(group) = self.rounds.groups.get_mut(name.as_str()) else {
            if prunes && reg.listed > 1 {
                self.rounds.groups.entry(name.clone()).or_default().round =
                    Some(first_chunk(reg, prunes, false, pruned));
            }
            return;
        };
        if let Some(unconfirmed) = &mut group.unconfirmed {
            for topic in listed(reg) {
                unconfirmed.remove(topic);
            }
        }
        if !prunes && group.unconfirmed.is_none() {
            // Nothing waits for this group's rounds any more.
            self.rounds.groups.remove(name.as_str());
            return;
        }
        let (split, mut restore, last) = match &mut group.round {
            Some(round) if round.continued_by(reg) => {
                round.chunks += 1;
                round.list(reg, prunes);
                let restore = if round.chunks == 2 {
                    round.prunes_at_end |= prunes;
                    std::mem::take(&mut round.pruned)
                } else {
                    Vec::new()
                };
                let last = reg.listed < round.last_count;
                round.last_count = reg.listed;
                round.last_ms = reg.from.now_ms;
                (round.chunks == 2 && prunes, restore, last)
            }
            _ if reg.listed > 1 => {
                // A new round: one under way is left unfinished (the broker started over at
                // another data version, or another member speaks for the group now).
                group.round = Some(first_chunk(reg, prunes, prunes && group.split, pruned));
                (false, Vec::new(), false)
            }
            Some(round) => {
                // A 5.x broker's increment: its topic is listed now.
                round.list(reg, prunes);
                (false, Vec::new(), false)
            }
            None => (false, Vec::new(), false),
        };
        let tell = split && !std::mem::replace(&mut group.told, true);
        if !restore.is_empty() {
            // The second chunk showed the round is split: what the first pruned may be in any
            // chunk, so it waits for the round's end like the rest.
            let shared = self.shared_name(name);
            restore.retain(|(topic, _)| {
                !self
                    .topics
                    .get(topic)
                    .is_some_and(|q| q.contains(name.as_str()))
            });
            for (topic, queues) in &restore {
                self.set_topic_queues(topic, &shared, *queues);
            }
            self.tell_topics(
                &format!(
                    "put back for {name}: it registers in chunks, and a later one may list them"
                ),
                "",
            );
        }
        if tell {
            self.note(|| {
                Entry::new(Cause::Updated)
                    .broker(
                        &reg.from.cluster,
                        name,
                        &reg.from.broker_addr,
                        reg.from.broker_id,
                    )
                    .detail(
                        "registers its topics in chunks (enableSplitRegistration): under \
                         deleteTopicWithBrokerRegistration a topic leaves only when no chunk of \
                         a round lists it",
                    )
            });
            tracing::info!(
                broker = %name,
                addr = %reg.from.broker_addr,
                "the broker registers its topics in chunks (enableSplitRegistration): \
                 deleteTopicWithBrokerRegistration removes a topic only when no chunk of a \
                 round lists it"
            );
        }
        if last {
            self.end_round(name, true);
        }
    }

    /// Ends every round that waited longer than [`QUIET_MS`] for its next chunk, and forgets
    /// the rounds of groups that are gone.
    pub fn end_quiet_rounds(&mut self, now_ms: i64) {
        if self.rounds.groups.is_empty() {
            return;
        }
        let brokers = &self.brokers;
        self.rounds
            .groups
            .retain(|name, _| brokers.contains_key(name.as_str()));
        let quiet: Vec<String> = self
            .rounds
            .groups
            .iter()
            .filter(|(_, g)| {
                g.round
                    .as_ref()
                    .is_some_and(|r| now_ms - r.last_ms > QUIET_MS)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in quiet {
            self.end_round(&name, false);
        }
    }

    /// A peer's word of the group replaced its topics: it is as current as a round.
    pub(super) fn round_settled_by_peer(&mut self, broker_name: &str) {
        if let Some(group) = self.rounds.groups.get_mut(broker_name) {
            group.unconfirmed = None;
        }
    }

    /// Ends the group's round: when it was complete (its last chunk came, or it was one lone
    /// registration), what it did not list leaves as its rules say.
    fn end_round(&mut self, name: &str, last_chunk: bool) {
        let Some(group) = self.rounds.groups.get_mut(name) else {
            return;
        };
        let Some(round) = group.round.take() else {
            return;
        };
        group.split = round.chunks > 1;
        if !(last_chunk || round.chunks == 1) {
            // Incomplete: a chunk was lost. What is provisional stays so for the next round.
            return;
        }
        // Provisional topics a registration listed were struck off as it came.
        let mut leaving: HashSet<String> = group.unconfirmed.take().unwrap_or_default();
        let provisional = !leaving.is_empty();
        if !group.split {
            // A group that prunes at once and holds nothing provisional needs no state until
            // its next registration.
            self.rounds.groups.remove(name);
        }
        if round.prunes_at_end {
            leaving.extend(
                self.topics
                    .iter()
                    .filter(|(topic, q)| q.contains(name) && !round.listed.contains(*topic))
                    .map(|(topic, _)| topic.to_string()),
            );
        }
        let mut left = 0;
        for topic in &leaving {
            left += usize::from(self.leave_topic(topic, name));
        }
        if left == 0 {
            return;
        }
        self.bump_group(name);
        let why = if provisional && !round.prunes_at_end {
            format!(
                "its first complete registration round since this NameServer started from \
                 the route snapshot does not list {left} of the topics restored for it"
            )
        } else {
            format!(
                "no registration of its last round ({} chunks) lists {left} of its topics \
                 (deleteTopicWithBrokerRegistration)",
                round.chunks
            )
        };
        self.note(|| {
            Entry::new(Cause::Updated)
                .broker(&round.cluster, name, &round.addr, round.id)
                .detail(why)
        });
        self.tell_topics("", &format!("no longer listed by {name} ({})", round.addr));
    }
}

fn first_chunk(
    reg: &Registration,
    prunes: bool,
    prunes_at_end: bool,
    pruned: Vec<(String, Queues)>,
) -> Round {
    let mut round = Round {
        cluster: reg.from.cluster.clone(),
        addr: reg.from.broker_addr.clone(),
        id: reg.from.broker_id,
        version: reg.body.wrapper.data_version,
        chunks: 1,
        last_count: reg.listed,
        last_ms: reg.from.now_ms,
        listed: HashSet::new(),
        prunes_at_end,
        pruned,
    };
    round.list(reg, prunes);
    round
}
