//! The topic → queues table, in copy-on-write shards. The route snapshot takes a reference to
//! each shard instead of copying every topic, so it holds the registry's lock (which
//! registrations wait for) for microseconds at any size; a shard is copied only when it
//! changes while a snapshot still holds it, and then shallowly: names and queues are shared,
//! so a copy costs a few bytes per topic rather than the topics themselves.

use std::hash::BuildHasher;
use std::sync::Arc;

use super::queues::TopicQueues;

type Shard = foldhash::HashMap<Arc<str>, Arc<TopicQueues>>;

/// Enough shards that a registration changing a few topics copies a small share of a large
/// table, few enough that a snapshot is a handful of reference counts.
const SHARDS: usize = 64;

pub struct TopicTable {
    shards: Vec<Arc<Shard>>,
    /// Picks the shard; seeded per process, so that no peer can put every topic in one shard.
    spread: foldhash::fast::RandomState,
    len: usize,
}

impl Default for TopicTable {
    fn default() -> Self {
        TopicTable {
            shards: (0..SHARDS).map(|_| Arc::default()).collect(),
            spread: foldhash::fast::RandomState::default(),
            len: 0,
        }
    }
}

impl TopicTable {
    fn shard(&self, topic: &str) -> usize {
        (self.spread.hash_one(topic) % SHARDS as u64) as usize
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, topic: &str) -> Option<&TopicQueues> {
        self.shards[self.shard(topic)].get(topic).map(|q| &**q)
    }

    pub fn contains_key(&self, topic: &str) -> bool {
        self.get(topic).is_some()
    }

    /// The topic's queues to change; copies its shard first if a snapshot holds it.
    pub fn get_mut(&mut self, topic: &str) -> Option<&mut TopicQueues> {
        let i = self.shard(topic);
        let shard = &mut self.shards[i];
        // One lookup when no snapshot holds the shard, as while a member fills its tables.
        if Arc::get_mut(shard).is_none() && !shard.contains_key(topic) {
            return None;
        }
        Arc::make_mut(shard).get_mut(topic).map(Arc::make_mut)
    }

    pub fn insert(&mut self, topic: &str, queues: TopicQueues) {
        let shard = self.shard(topic);
        if Arc::make_mut(&mut self.shards[shard])
            .insert(topic.into(), Arc::new(queues))
            .is_none()
        {
            self.len += 1;
        }
    }

    pub fn remove(&mut self, topic: &str) -> Option<TopicQueues> {
        let shard = self.shard(topic);
        if !self.shards[shard].contains_key(topic) {
            return None;
        }
        let removed = Arc::make_mut(&mut self.shards[shard]).remove(topic);
        self.len -= usize::from(removed.is_some());
        removed.map(Arc::unwrap_or_clone)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &TopicQueues)> {
        self.shards
            .iter()
            .flat_map(|s| s.iter().map(|(t, q)| (&**t, &**q)))
    }

    /// The table as it is now, kept unchanged by later changes to this one.
    pub fn snapshot(&self) -> TopicSnapshot {
        TopicSnapshot(self.shards.clone())
    }
}

/// A table as it was when [`TopicTable::snapshot`] was taken.
pub struct TopicSnapshot(Vec<Arc<Shard>>);

impl TopicSnapshot {
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TopicQueues)> {
        self.0
            .iter()
            .flat_map(|s| s.iter().map(|(t, q)| (&**t, &**q)))
    }

    /// The topics whose first broker's sys flag `pred` accepts (the broker Java's answer looks
    /// at), sorted.
    pub fn names_by_sys_flag(&self, pred: impl Fn(i32) -> bool) -> Vec<String> {
        let mut out: Vec<String> = self
            .iter()
            .filter(|(_, queues)| queues.iter().next().is_some_and(|(_, q)| pred(q.sys_flag)))
            .map(|(t, _)| t.to_string())
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::queues::rw;

    fn queues(n: i32) -> TopicQueues {
        let mut q = TopicQueues::default();
        q.set(&Arc::from("b"), rw(n));
        q
    }

    #[test]
    fn a_snapshot_keeps_the_table_as_it_was_while_the_table_changes() {
        let mut table = TopicTable::default();
        for i in 0..1000 {
            table.insert(&format!("t{i}"), queues(1));
        }
        let snapshot = table.snapshot();
        table.get_mut("t1").unwrap().set(&Arc::from("b"), rw(9));
        table.remove("t2");
        table.insert("new", queues(3));
        assert_eq!(table.len(), 1000);
        assert_eq!(table.get("t1"), Some(&queues(9)));
        assert!(!table.contains_key("t2"));
        let before: std::collections::HashMap<&str, &TopicQueues> = snapshot.iter().collect();
        assert_eq!(before.len(), 1000);
        assert_eq!(before["t1"], &queues(1));
        assert!(before.contains_key("t2"));
        assert!(!before.contains_key("new"));
        assert_eq!(table.iter().count(), 1000);
    }
}
