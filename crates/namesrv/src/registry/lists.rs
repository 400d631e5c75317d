//! What consoles and admin tools poll that is made from the whole topic table, kept ready: the
//! topic lists (GET_ALL_TOPIC_LIST_FROM_NAMESERVER and GET_TOPICS_BY_CLUSTER) and how many
//! topics each broker group serves, writably or not (the status page).
//!
//! At a million topics, listing, sorting and encoding the table takes most of a second: built
//! on demand, the first ask after a change waited that long, and a cluster's list was read off
//! the whole table under the registry's lock, holding every registration up meanwhile. Here
//! both are built together, once per change of the table, from its copy-on-write view (no lock
//! held while building), by whoever needs them first: the keeper once changes pause, or a
//! request that finds them older than the table, which then waits for the one build under way
//! rather than starting its own.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use rocketmq_wire::body::TopicList;

use super::topic_table::TopicSnapshot;
use super::PERM_WRITE;

/// What the lists are built from, taken under the registry's read lock in microseconds.
pub struct Captured {
    /// The table's list generation when it was taken.
    pub generation: u64,
    pub topics: TopicSnapshot,
    /// Each cluster's broker names.
    pub clusters: Vec<(String, BTreeSet<String>)>,
}

/// The encoded lists at one generation of the table.
pub struct Lists {
    generation: u64,
    all: Bytes,
    by_cluster: HashMap<String, Bytes>,
    served: HashMap<Arc<str>, Served>,
}

/// The topics one broker group serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    pub topics: usize,
    /// Of those, the ones it serves writably.
    pub writable: usize,
}

impl Lists {
    /// Every topic, sorted.
    pub fn all(&self) -> Bytes {
        self.all.clone()
    }

    /// The topics served by a broker of `cluster`, sorted; none for a cluster not known.
    pub fn of_cluster(&self, cluster: &str) -> Bytes {
        self.by_cluster
            .get(cluster)
            .cloned()
            .unwrap_or_else(|| Bytes::from(TopicList::encode_names([], 0, None)))
    }

    /// The topics the group `broker_name` serves.
    pub fn served_by(&self, broker_name: &str) -> Served {
        self.served.get(broker_name).copied().unwrap_or_default()
    }

    fn build(captured: Captured) -> Lists {
        let mut topics: Vec<(&str, &super::TopicQueues)> = captured.topics.iter().collect();
        topics.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let all = TopicList::encode_names(topics.iter().map(|(t, _)| *t), topics.len(), None);
        // Which clusters each broker name belongs to (nearly always one).
        let mut clusters_of: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, (_, names)) in captured.clusters.iter().enumerate() {
            for name in names {
                clusters_of.entry(name.as_str()).or_default().push(i);
            }
        }
        let mut members: Vec<Vec<&str>> = vec![Vec::new(); captured.clusters.len()];
        let mut seen = Vec::new();
        let mut served: HashMap<Arc<str>, Served> = HashMap::new();
        for (topic, queues) in &topics {
            seen.clear();
            for (broker, q) in queues.entries() {
                // Counted by the name the topic holds: a lookup, no copy of the name per topic.
                let counts = match served.get_mut(&**broker) {
                    Some(counts) => counts,
                    None => served.entry(broker.clone()).or_default(),
                };
                counts.topics += 1;
                counts.writable += usize::from(q.perm & PERM_WRITE != 0);
                for &i in clusters_of.get(&**broker).into_iter().flatten() {
                    if !seen.contains(&i) {
                        seen.push(i);
                        members[i].push(topic);
                    }
                }
            }
        }
        let by_cluster = captured
            .clusters
            .iter()
            .zip(members)
            .map(|((cluster, _), names)| {
                let body = TopicList::encode_names(names.iter().copied(), names.len(), None);
                (cluster.clone(), Bytes::from(body))
            })
            .collect();
        Lists {
            generation: captured.generation,
            all: Bytes::from(all),
            by_cluster,
            served,
        }
    }
}

#[derive(Default)]
pub struct TopicLists {
    newest: Mutex<Option<Arc<Lists>>>,
    /// Held while building: one build at a time, and whoever waited for it takes its result.
    building: Mutex<()>,
}

impl TopicLists {
    /// Lists at least as new as `generation`: the newest built, or built now from `capture`.
    pub fn at_least(&self, generation: u64, capture: impl FnOnce() -> Captured) -> Arc<Lists> {
        if let Some(lists) = self.newest_from(generation) {
            return lists;
        }
        let _building = self.building.lock();
        if let Some(lists) = self.newest_from(generation) {
            return lists;
        }
        let lists = Arc::new(Lists::build(capture()));
        // A build is never replaced by an older one: builds are one at a time.
        *self.newest.lock() = Some(lists.clone());
        lists
    }

    /// The generation of the newest lists built, if any.
    pub fn newest_generation(&self) -> Option<u64> {
        self.newest.lock().as_ref().map(|l| l.generation)
    }

    fn newest_from(&self, generation: u64) -> Option<Arc<Lists>> {
        self.newest
            .lock()
            .as_ref()
            .filter(|l| l.generation >= generation)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::queues::rw;
    use crate::registry::topic_table::TopicTable;
    use crate::registry::TopicQueues;

    fn served_by(brokers: &[&str]) -> TopicQueues {
        let mut q = TopicQueues::default();
        for b in brokers {
            q.set(&Arc::from(*b), rw(4));
        }
        q
    }

    fn names(body: &Bytes) -> Vec<String> {
        TopicList::decode(body).unwrap().topic_list
    }

    fn captured(generation: u64, table: &TopicTable) -> Captured {
        Captured {
            generation,
            topics: table.snapshot(),
            clusters: vec![
                ("c1".into(), BTreeSet::from(["a".into(), "b".into()])),
                ("c2".into(), BTreeSet::from(["b".into(), "z".into()])),
            ],
        }
    }

    #[test]
    fn each_cluster_lists_the_topics_any_of_its_brokers_serves_sorted_and_once() {
        let mut table = TopicTable::default();
        table.insert("t3", served_by(&["a", "b"]));
        table.insert("t1", served_by(&["z"]));
        table.insert("t2", served_by(&["a"]));
        table.insert("t0", served_by(&["elsewhere"]));
        let lists = Lists::build(captured(7, &table));
        assert_eq!(lists.generation, 7);
        assert_eq!(names(&lists.all()), ["t0", "t1", "t2", "t3"]);
        assert_eq!(names(&lists.of_cluster("c1")), ["t2", "t3"]);
        assert_eq!(names(&lists.of_cluster("c2")), ["t1", "t3"]);
        assert!(names(&lists.of_cluster("unknown")).is_empty());
        assert_eq!(
            lists.served_by("a"),
            Served {
                topics: 2,
                writable: 2
            }
        );
        assert_eq!(lists.served_by("nobody"), Served::default());
    }

    #[test]
    fn lists_are_rebuilt_only_when_older_than_asked_for() {
        let mut table = TopicTable::default();
        table.insert("t1", served_by(&["a"]));
        let lists = TopicLists::default();
        assert_eq!(lists.newest_generation(), None);
        let first = lists.at_least(1, || captured(1, &table));
        table.insert("t2", served_by(&["a"]));
        let again = lists.at_least(1, || panic!("the lists of generation 1 are built"));
        assert!(Arc::ptr_eq(&first, &again));
        let newer = lists.at_least(2, || captured(2, &table));
        assert_eq!(names(&newer.all()), ["t1", "t2"]);
        assert_eq!(lists.newest_generation(), Some(2));
    }
}
