//! What changed recently, for people: brokers joining, leaving and expiring, topics created and
//! deleted, write permission changes, KV writes and config updates. Bounded, and shown newest
//! first. When full, the kind holding the most events gives up its oldest: a restart storm's
//! thousands of joins and leaves cannot push out the one stale unregistration or KV write a
//! person came to look for.

use std::collections::VecDeque;

use parking_lot::Mutex;
use rocketmq_wire::codes::version;

use rocketmq_wire::clock::now_ms;

/// Events kept: a few hundred are what a person scrolls through; older ones are in the log.
pub const EVENTS_KEPT: usize = 300;

/// Characters kept of each text an event carries: names and values come from peers.
const TEXT_MAX: usize = 160;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum EventKind {
    BrokerJoined,
    BrokerLeft,
    BrokerExpired,
    StaleUnregistrationIgnored,
    TopicsCreated,
    TopicsDeleted,
    WritePermWiped,
    WritePermAdded,
    KvPut,
    KvDeleted,
    ConfigUpdated,
}

const KINDS: usize = EventKind::ConfigUpdated as usize + 1;

impl EventKind {
    /// The name the JSON endpoint gives it.
    pub fn key(self) -> &'static str {
        match self {
            EventKind::BrokerJoined => "broker-joined",
            EventKind::BrokerLeft => "broker-left",
            EventKind::BrokerExpired => "broker-expired",
            EventKind::StaleUnregistrationIgnored => "stale-unregistration-ignored",
            EventKind::TopicsCreated => "topics-created",
            EventKind::TopicsDeleted => "topics-deleted",
            EventKind::WritePermWiped => "write-perm-wiped",
            EventKind::WritePermAdded => "write-perm-added",
            EventKind::KvPut => "kv-put",
            EventKind::KvDeleted => "kv-deleted",
            EventKind::ConfigUpdated => "config-updated",
        }
    }

    /// What the status page calls it.
    pub fn label(self) -> &'static str {
        match self {
            EventKind::BrokerJoined => "broker joined",
            EventKind::BrokerLeft => "broker left",
            EventKind::BrokerExpired => "broker expired",
            EventKind::StaleUnregistrationIgnored => "stale unregistration ignored",
            EventKind::TopicsCreated => "topics created",
            EventKind::TopicsDeleted => "topics deleted",
            EventKind::WritePermWiped => "writes wiped",
            EventKind::WritePermAdded => "writes restored",
            EventKind::KvPut => "KV set",
            EventKind::KvDeleted => "KV deleted",
            EventKind::ConfigUpdated => "config updated",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub at_ms: i64,
    pub kind: EventKind,
    /// What it is about: a broker address, a topic, a KV key.
    pub what: String,
    pub detail: String,
}

impl Event {
    /// Stamped when made: registry events are made and logged under the same write lock.
    pub fn new(kind: EventKind, what: impl Into<String>, detail: impl Into<String>) -> Self {
        Event {
            at_ms: now_ms(),
            kind,
            what: clip(what.into()),
            detail: clip(detail.into()),
        }
    }
}

fn clip(mut s: String) -> String {
    if let Some((at, _)) = s.char_indices().nth(TEXT_MAX) {
        s.truncate(at);
        s.push('…');
    }
    s
}

#[derive(Default)]
pub struct EventLog(Mutex<Kept>);

/// One queue per kind, oldest first, each event with its place in the order of recording.
#[derive(Default)]
struct Kept {
    by_kind: [VecDeque<(u64, Event)>; KINDS],
    len: usize,
    next: u64,
}

impl EventLog {
    pub fn record(&self, event: Event) {
        self.extend([event]);
    }

    pub fn extend(&self, events: impl IntoIterator<Item = Event>) {
        let mut kept = self.0.lock();
        for event in events {
            if kept.len == EVENTS_KEPT {
                let fullest = kept
                    .by_kind
                    .iter_mut()
                    .max_by_key(|q| q.len())
                    .expect("there are kinds");
                fullest.pop_front();
                kept.len -= 1;
            }
            let seq = kept.next;
            kept.next += 1;
            kept.by_kind[event.kind as usize].push_back((seq, event));
            kept.len += 1;
        }
    }

    /// Every kept event, newest first.
    pub fn newest_first(&self) -> Vec<Event> {
        let kept = self.0.lock();
        let mut all: Vec<&(u64, Event)> = kept.by_kind.iter().flatten().collect();
        all.sort_unstable_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        all.into_iter().map(|(_, e)| e.clone()).collect()
    }
}

/// A broker's protocol version as RocketMQ names the release (`V5_3_3`), or the number when
/// it is negative (no release has such a number).
pub fn version_name(ordinal: i32) -> String {
    version::java_name(ordinal).unwrap_or_else(|| ordinal.to_string())
}

/// Topics created or removed by one mutation, summed up as one event rather than one per
/// topic: a broker's first registration can bring tens of thousands.
#[derive(Debug, Default)]
pub struct TopicTally {
    pub count: usize,
    /// The first few, for the event's text.
    pub names: Vec<String>,
}

const TALLY_NAMES: usize = 3;

impl TopicTally {
    pub fn add(&mut self, topic: &str) {
        self.count += 1;
        if self.names.len() < TALLY_NAMES {
            self.names.push(topic.to_string());
        }
    }

    /// `A, B, C and 7 more`.
    pub fn describe(&self) -> String {
        let mut text = self.names.join(", ");
        if self.count > self.names.len() {
            text.push_str(&format!(" and {} more", self.count - self.names.len()));
        }
        text
    }

    /// The event's subject: the topic when there is one, else how many.
    pub fn subject(&self) -> String {
        match self.names.as_slice() {
            [one] if self.count == 1 => one.clone(),
            _ => format!("{} topics", self.count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_the_newest_events_only() {
        let log = EventLog::default();
        for i in 0..EVENTS_KEPT + 20 {
            log.record(Event::new(EventKind::KvPut, format!("k{i}"), ""));
        }
        let kept = log.newest_first();
        assert_eq!(kept.len(), EVENTS_KEPT);
        assert_eq!(kept[0].what, format!("k{}", EVENTS_KEPT + 19));
        assert_eq!(kept.last().unwrap().what, "k20");
    }

    #[test]
    fn a_churning_kind_gives_up_its_own_oldest_events_before_a_rare_one_goes() {
        let log = EventLog::default();
        log.record(Event::new(
            EventKind::StaleUnregistrationIgnored,
            "rare",
            "",
        ));
        log.record(Event::new(EventKind::KvPut, "k", ""));
        for i in 0..10 * EVENTS_KEPT {
            let kind = if i % 2 == 0 {
                EventKind::BrokerJoined
            } else {
                EventKind::BrokerLeft
            };
            log.record(Event::new(kind, format!("b{i}"), ""));
        }
        let kept = log.newest_first();
        assert_eq!(kept.len(), EVENTS_KEPT);
        assert_eq!(kept[0].what, format!("b{}", 10 * EVENTS_KEPT - 1));
        let tail: Vec<_> = kept[EVENTS_KEPT - 2..]
            .iter()
            .map(|e| e.what.as_str())
            .collect();
        assert_eq!(
            tail,
            ["k", "rare"],
            "the rare ones stay, in their place in time"
        );
        let joins = kept
            .iter()
            .filter(|e| e.kind == EventKind::BrokerJoined)
            .count();
        let leaves = kept
            .iter()
            .filter(|e| e.kind == EventKind::BrokerLeft)
            .count();
        assert_eq!((joins, leaves), (149, 149));
    }

    #[test]
    fn long_texts_are_clipped_on_a_character_boundary() {
        let e = Event::new(EventKind::KvPut, "é".repeat(500), "x");
        assert_eq!(e.what.chars().count(), TEXT_MAX + 1);
        assert!(e.what.ends_with('…'));
    }

    #[test]
    fn versions_are_named_as_releases() {
        assert_eq!(version_name(479), "V5_3_3");
        assert_eq!(version_name(401), "V4_9_4");
        assert_eq!(version_name(493), "V5_4_0");
        assert_eq!(version_name(515), "V5_5_1");
        // Past Java's list, Java's own name for it; a negative number names no release.
        assert_eq!(version_name(123_456), "HIGHER_VERSION");
        assert_eq!(version_name(-3), "-3");
    }

    #[test]
    fn a_tally_names_a_few_topics_and_counts_the_rest() {
        let mut t = TopicTally::default();
        t.add("A");
        assert_eq!((t.subject(), t.describe()), ("A".into(), "A".into()));
        for name in ["B", "C", "D", "E"] {
            t.add(name);
        }
        assert_eq!(t.subject(), "5 topics");
        assert_eq!(t.describe(), "A, B, C and 2 more");
    }
}
