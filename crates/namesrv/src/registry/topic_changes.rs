//! Topic changes: the recorded mutations every rule changes a topic's queues through, which
//! tally the topics created and removed to tell them as one event when the mutation ends, and
//! the admin requests that change topics (delete a topic, wipe or add write permission,
//! REGISTER_TOPIC_IN_NAMESRV).

use std::sync::Arc;

use rocketmq_wire::body::QueueData;

use super::queues::{Queues, TopicQueues};
use super::tables::{entry_hash, Registry, PERM_READ, PERM_WRITE};
use crate::events::{Event, EventKind, TopicTally};
use crate::journal::{Cause, Entry};

/// What [`Registry::apply_mirror`] does: the indexes of the listed topics to set, and whether
/// the group may hold topics that are not listed.
pub(super) struct MirrorPlan {
    set: Vec<usize>,
    scan_unlisted: bool,
}

impl Registry {
    /// Tells the topics the mutation created and removed, each with why.
    pub(super) fn tell_topics(&mut self, created_why: &str, removed_why: &str) {
        for (tally, kind, why) in [
            (
                std::mem::take(&mut self.created),
                EventKind::TopicsCreated,
                created_why,
            ),
            (
                std::mem::take(&mut self.removed),
                EventKind::TopicsDeleted,
                removed_why,
            ),
        ] {
            if tally.count == 0 {
                continue;
            }
            let detail = if tally.count == 1 {
                why.to_string()
            } else {
                format!("{}; {why}", tally.describe())
            };
            self.events.push(Event::new(kind, tally.subject(), detail));
        }
    }

    /// Sets a broker group's queues of a topic; returns whether anything changed.
    pub fn set_queues(&mut self, topic: &str, qd: &QueueData) -> bool {
        let name = self.shared_name(&qd.broker_name);
        self.set_topic_queues(topic, &name, Queues::of(qd))
    }

    pub(super) fn set_topic_queues(
        &mut self,
        topic: &str,
        broker_name: &Arc<str>,
        queues: Queues,
    ) -> bool {
        // Looked up by reference first: re-registrations mostly touch known topics, and an
        // owned key for each would cost an allocation per topic.
        let before = match self.topics.get_mut(topic) {
            Some(slot) => slot.set(broker_name, queues),
            None => {
                let mut slot = TopicQueues::default();
                slot.set(broker_name, queues);
                self.topics.insert(topic, slot);
                self.changes.topic_list = true;
                self.created.add(topic);
                Some(None)
            }
        };
        let Some(before) = before else {
            return false;
        };
        self.rehash(broker_name, topic, before, Some(queues));
        self.changes.topic(topic);
        true
    }

    /// Which listed topics [`Registry::apply_mirror`] must set, worked out while route lookups
    /// go on: a peer's word of a group of 100k topics mostly repeats what is here.
    pub(super) fn plan_mirror(&self, broker_name: &str, topics: &[(&str, Queues)]) -> MirrorPlan {
        let mut set = Vec::new();
        let mut listed = 0u64;
        let mut after = self.topics_hash(broker_name);
        if self.topic_sums.is_some() && self.group_topic_count(broker_name) == 0 {
            // The group holds no topic here (a member filling its tables): each is to be set.
            return MirrorPlan {
                set: (0..topics.len()).collect(),
                scan_unlisted: false,
            };
        }
        for (i, (topic, queues)) in topics.iter().enumerate() {
            let hash = entry_hash(topic, queues);
            listed = listed.wrapping_add(hash);
            let here = self.topics.get(topic).and_then(|q| q.get(broker_name));
            if here != Some(queues) {
                if let Some(here) = here {
                    after = after.wrapping_sub(entry_hash(topic, here));
                }
                after = after.wrapping_add(hash);
                set.push(i);
            }
        }
        MirrorPlan {
            set,
            // Kept hashes tell whether the group holds topics beyond the listed ones without a
            // scan of the whole table: only then is its hash, once they are set, not theirs.
            scan_unlisted: self.topic_sums.is_none() || after != listed,
        }
    }

    /// Makes a group's topics exactly `topics` (name and queues): a peer's word of them, which
    /// replaces what a registration at the same data version would keep. Applies what
    /// [`Registry::plan_mirror`] found, the table unchanged since.
    pub(super) fn apply_mirror(
        &mut self,
        broker_name: &str,
        topics: &[(&str, Queues)],
        plan: MirrorPlan,
    ) {
        let changed_before = self.changes.topic_changes;
        if plan.scan_unlisted {
            let listed: foldhash::HashSet<&str> = topics.iter().map(|(t, _)| *t).collect();
            let unlisted: Vec<String> = self
                .topics
                .iter()
                .filter(|(topic, queues)| queues.contains(broker_name) && !listed.contains(topic))
                .map(|(topic, _)| topic.to_string())
                .collect();
            for topic in unlisted {
                self.leave_topic(&topic, broker_name);
            }
        }
        let name = self.shared_name(broker_name);
        for i in plan.set {
            let (topic, queues) = topics[i];
            self.set_topic_queues(topic, &name, queues);
        }
        if self.changes.topic_changes != changed_before {
            // Its next identical registration must be read again, not repeated.
            self.bump_group(broker_name);
        }
        self.tell_topics(
            &format!("taken from a peer's word of {broker_name}"),
            &format!("no longer listed by a peer for {broker_name}"),
        );
    }

    /// Takes a group out of a topic, and the topic out of the table when no group is left.
    pub(super) fn leave_topic(&mut self, topic: &str, broker_name: &str) -> bool {
        let Some(queues) = self.topics.get_mut(topic) else {
            return false;
        };
        let Some((name, old)) = queues.remove(broker_name) else {
            return false;
        };
        let emptied = queues.is_empty();
        self.rehash(&name, topic, Some(old), None);
        if emptied {
            self.topics.remove(topic);
            self.changes.topic_list = true;
            self.removed.add(topic);
        }
        self.changes.topic(topic);
        true
    }

    /// Changes a group's permission on a topic.
    pub(super) fn set_perm(&mut self, topic: &str, broker_name: &str, perm: i32) -> bool {
        let Some((name, old)) = self
            .topics
            .get_mut(topic)
            .and_then(|q| q.set_perm(broker_name, perm))
        else {
            return false;
        };
        self.rehash(&name, topic, Some(old), Some(Queues { perm, ..old }));
        self.changes.topic(topic);
        true
    }

    /// Sets (wipe) or restores (add) write permission on every topic of a broker group;
    /// returns how many topics the group serves.
    pub fn change_write_perm(&mut self, broker_name: &str, wipe: bool) -> usize {
        if self.superseded(broker_name) {
            return 0;
        }
        let changes: Vec<(String, i32)> = self
            .topics
            .iter()
            .filter_map(|(topic, queues)| {
                let perm = queues.get(broker_name)?.perm;
                let perm = if wipe {
                    perm & !PERM_WRITE
                } else {
                    PERM_READ | PERM_WRITE
                };
                Some((topic.to_string(), perm))
            })
            .collect();
        self.note(|| {
            let cause = if wipe {
                Cause::AdminWiped
            } else {
                Cause::AdminRestored
            };
            Entry::new(cause).group(broker_name)
        });
        for (topic, perm) in &changes {
            self.set_perm(topic, broker_name, *perm);
        }
        self.bump_group(broker_name);
        let (kind, done) = if wipe {
            (EventKind::WritePermWiped, "wiped")
        } else {
            (EventKind::WritePermAdded, "restored")
        };
        self.events.push(Event::new(
            kind,
            broker_name,
            format!("write permission {done} on {} topics", changes.len()),
        ));
        changes.len()
    }

    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) -> bool {
        let Some(queues) = self.topics.get(topic) else {
            return false;
        };
        let names: Vec<String> = match cluster {
            None => queues.iter().map(|(name, _)| name.to_string()).collect(),
            Some(cluster) => {
                let Some(names) = self.clusters.get(cluster) else {
                    return false;
                };
                names
                    .iter()
                    .filter(|n| queues.contains(n))
                    .cloned()
                    .collect()
            }
        };
        self.note(|| {
            Entry::new(Cause::AdminDeleted).detail(match cluster {
                Some(c) => format!("{topic} from cluster {c}"),
                None => topic.to_string(),
            })
        });
        let mut left = Vec::new();
        for name in names {
            if self.superseded(&name) {
                continue;
            }
            if self.leave_topic(topic, &name) {
                left.push(name.clone());
            }
            // A broker's next identical registration brings the topic back.
            self.bump_group(&name);
        }
        // Told here, with the groups it left, whether or not other groups still serve it.
        self.removed = TopicTally::default();
        if !left.is_empty() {
            self.events.push(Event::new(
                EventKind::TopicsDeleted,
                topic,
                format!(
                    "deleted from {} by an admin request{}",
                    left.join(", "),
                    if self.topics.contains_key(topic) {
                        " (other groups still serve it)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        !left.is_empty()
    }

    /// REGISTER_TOPIC_IN_NAMESRV: stores queue data of known brokers, stopping at the first
    /// unknown one as Java does.
    pub fn register_topic(&mut self, topic: &str, queue_datas: &[QueueData]) -> bool {
        self.note(|| Entry::new(Cause::AdminRegistered).detail(topic));
        let mut changed = false;
        for qd in queue_datas {
            if !self.brokers.contains_key(&qd.broker_name) {
                break;
            }
            if self.superseded(&qd.broker_name) {
                continue;
            }
            if self.set_queues(topic, qd) {
                changed = true;
                self.bump_group(&qd.broker_name);
            }
        }
        self.tell_topics("by REGISTER_TOPIC_IN_NAMESRV", "");
        changed
    }
}
