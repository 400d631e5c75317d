//! One topic's queue data, held compactly: the registry keeps one of these per topic, so at
//! 100k topics × 10 brokers its size is most of the server's memory. Broker names are shared
//! (`Arc<str>` from the registry's name table) and entries sit in one vector sorted by name.

use std::sync::Arc;

use rocketmq_wire::body::QueueData;

/// What a broker group offers for one topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Queues {
    pub read: i32,
    pub write: i32,
    pub perm: i32,
    pub sys_flag: i32,
}

impl Queues {
    pub fn of(qd: &QueueData) -> Self {
        Queues {
            read: qd.read_queue_nums,
            write: qd.write_queue_nums,
            perm: qd.perm,
            sys_flag: qd.topic_sys_flag,
        }
    }

    pub fn to_queue_data(self, broker_name: &str) -> QueueData {
        QueueData {
            broker_name: broker_name.to_string(),
            read_queue_nums: self.read,
            write_queue_nums: self.write,
            perm: self.perm,
            topic_sys_flag: self.sys_flag,
        }
    }
}

/// The broker groups serving a topic, ordered by broker name as routes list them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TopicQueues(Vec<(Arc<str>, Queues)>);

impl TopicQueues {
    fn position(&self, broker_name: &str) -> Result<usize, usize> {
        self.0
            .binary_search_by(|(name, _)| (**name).cmp(broker_name))
    }

    pub fn get(&self, broker_name: &str) -> Option<&Queues> {
        let i = self.position(broker_name).ok()?;
        Some(&self.0[i].1)
    }

    /// Sets a group's permission; when that changed it, the group's entry as it was.
    pub fn set_perm(&mut self, broker_name: &str, perm: i32) -> Option<(Arc<str>, Queues)> {
        let i = self.position(broker_name).ok()?;
        let (name, queues) = &mut self.0[i];
        let before = *queues;
        (std::mem::replace(&mut queues.perm, perm) != perm).then(|| (name.clone(), before))
    }

    pub fn contains(&self, broker_name: &str) -> bool {
        self.position(broker_name).is_ok()
    }

    /// Sets a group's queues: `None` if that changed nothing, else what the group had before
    /// (`Some(None)`: it was not listed).
    pub fn set(&mut self, broker_name: &Arc<str>, queues: Queues) -> Option<Option<Queues>> {
        match self.position(broker_name) {
            Ok(i) => {
                let before = std::mem::replace(&mut self.0[i].1, queues);
                (before != queues).then_some(Some(before))
            }
            Err(i) => {
                // Topics rarely gain groups after their first registrations: exact growth
                // keeps a vector per topic from carrying spare slots.
                self.0.reserve_exact(1);
                self.0.insert(i, (broker_name.clone(), queues));
                Some(None)
            }
        }
    }

    /// Takes a group out; its entry, if it was listed.
    pub fn remove(&mut self, broker_name: &str) -> Option<(Arc<str>, Queues)> {
        let i = self.position(broker_name).ok()?;
        Some(self.0.remove(i))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The groups with the registry's shared name of each.
    pub fn entries(&self) -> impl Iterator<Item = (&Arc<str>, &Queues)> {
        self.0.iter().map(|(name, q)| (name, q))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Queues)> {
        self.0.iter().map(|(name, q)| (&**name, q))
    }

    pub fn to_queue_datas(&self) -> Vec<QueueData> {
        self.iter().map(|(name, q)| q.to_queue_data(name)).collect()
    }
}

/// `n` read and write queues, read-write: what tests register.
#[cfg(test)]
pub fn rw(n: i32) -> Queues {
    Queues {
        read: n,
        write: n,
        perm: 6,
        sys_flag: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: i32) -> Queues {
        rw(n)
    }

    #[test]
    fn keeps_groups_sorted_and_reports_changes() {
        let mut t = TopicQueues::default();
        let (a, b, c): (Arc<str>, Arc<str>, Arc<str>) = ("a".into(), "b".into(), "c".into());
        assert_eq!(t.set(&c, q(8)), Some(None));
        assert_eq!(t.set(&a, q(8)), Some(None));
        assert_eq!(t.set(&b, q(4)), Some(None));
        assert_eq!(t.set(&b, q(4)), None, "same queues again is no change");
        assert_eq!(t.set(&b, q(8)), Some(Some(q(4))));
        let names: Vec<&str> = t.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(t.get("b"), Some(&q(8)));
        assert_eq!(t.remove("a"), Some((a.clone(), q(8))));
        assert_eq!(t.remove("a"), None);
        assert!(!t.contains("a") && t.contains("c"));
        assert_eq!(t.to_queue_datas()[0], q(8).to_queue_data("b"));
    }
}
