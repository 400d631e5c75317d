//! Which brokers this node hears from. Brokers send their heartbeat (904) to every controller
//! node they can reach, so every node keeps its own table and a new leader already knows who is
//! alive; the table is not replicated (liveness is a fact about now, not state).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::replicated::LiveBroker;

/// Java's default `controllerHeartBeatTimeoutMills`, used when a heartbeat does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest timeout a broker may choose for itself: the NameServer's own broker timeout.
pub const MAX_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerKey {
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
}

#[derive(Clone, Debug)]
pub struct Heartbeat {
    pub broker_addr: String,
    pub timeout: Duration,
    pub epoch: i32,
    pub max_offset: i64,
    pub confirm_offset: i64,
    pub election_priority: i32,
    /// The connection it came on: when that closes, the broker counts as gone at once.
    pub connection: u64,
}

#[derive(Clone, Debug)]
struct Entry {
    beat: Heartbeat,
    last: Instant,
}

/// The brokers alive at one moment.
pub struct Active(std::collections::HashSet<(String, String, i64)>);

impl Active {
    pub fn contains(&self, cluster_name: &str, broker_name: &str, broker_id: i64) -> bool {
        self.0
            .contains(&(cluster_name.to_string(), broker_name.to_string(), broker_id))
    }
}

/// How long a forwarded heartbeat cannot bring back a broker whose connection just closed: a
/// heartbeat a follower forwarded just before the broker died must not make it look alive to the
/// election its death starts.
const FORWARD_GRACE: Duration = Duration::from_secs(3);

/// How long a broker whose connection closed has to accept a new one before it counts as gone.
/// A broker's own host answers at once, whether its process listens (a connection accepted by
/// the kernel, however busy the broker) or died (refused); a deadline passes only when the host
/// itself is gone.
const LISTEN_PROBE: Duration = Duration::from_secs(1);

/// Whether something accepts connections at `addr` (a broker's address) now. Nothing is sent.
pub async fn listens(addr: &str) -> bool {
    matches!(
        tokio::time::timeout(LISTEN_PROBE, tokio::net::TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}

/// The node looks at its table at least every second (its silent-broker scan): a longer gap
/// between two looks means the node itself stood still.
const PAUSE_GAP: Duration = Duration::from_secs(2);

#[derive(Default)]
pub struct LiveTable {
    brokers: HashMap<BrokerKey, Entry>,
    /// Brokers whose connection closed, and when.
    closed: HashMap<BrokerKey, Instant>,
    /// When the node last looked at the table.
    last_look: Option<Instant>,
    /// Every broker this node has heard since it started, expired or not.
    heard: std::collections::HashSet<BrokerKey>,
}

/// Where a heartbeat came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// From the broker itself, on this connection.
    Direct,
    /// Forwarded by a follower that heard it: brokers that reach only some nodes still count as
    /// alive on the leader (Java's #10812).
    Follower,
}

/// One broker's entry as the status page and metrics show it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LiveView {
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub broker_addr: String,
    pub epoch: i32,
    pub max_offset: i64,
    pub election_priority: i32,
    pub silent_ms: u64,
}

impl LiveTable {
    pub fn on_heartbeat(&mut self, key: BrokerKey, mut beat: Heartbeat, via: Via, now: Instant) {
        match via {
            Via::Direct => {
                self.closed.remove(&key);
            }
            Via::Follower => {
                if self
                    .closed
                    .get(&key)
                    .is_some_and(|at| now.duration_since(*at) < FORWARD_GRACE)
                {
                    return;
                }
                // A broker's own connection, if it has one here, still tells of its death.
                beat.connection = self.brokers.get(&key).map_or(0, |e| e.beat.connection);
            }
        }
        // Where it stands in its log only moves forward, as Java keeps it: a heartbeat that a
        // follower forwarded late, or one overtaken on the way, must not lower the offset an
        // election ranks the broker by. A closed connection or an expiry starts it afresh.
        if let Some(prev) = self.brokers.get(&key) {
            let (p, b) = (&prev.beat, &beat);
            if (b.epoch, b.max_offset) <= (p.epoch, p.max_offset) {
                (beat.epoch, beat.max_offset, beat.confirm_offset) =
                    (p.epoch, p.max_offset, p.confirm_offset);
            }
        }
        self.heard.insert(key.clone());
        self.brokers.insert(key, Entry { beat, last: now });
    }

    /// Whether this node has heard the broker since it started (alive now or not).
    pub fn ever_heard(&self, broker_name: &str, broker_id: i64) -> bool {
        self.heard
            .iter()
            .any(|k| k.broker_name == broker_name && k.broker_id == broker_id)
    }

    pub fn is_active(
        &self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: i64,
        now: Instant,
    ) -> bool {
        let key = BrokerKey {
            cluster_name: cluster_name.to_string(),
            broker_name: broker_name.to_string(),
            broker_id,
        };
        self.brokers
            .get(&key)
            .is_some_and(|e| now.duration_since(e.last) <= e.beat.timeout)
    }

    /// The live members of a broker name with what the election weighs, whatever cluster they
    /// said (the controller knows a broker name in one cluster only).
    pub fn live_of(&self, broker_name: &str, now: Instant) -> BTreeMap<i64, LiveBroker> {
        self.brokers
            .iter()
            .filter(|(k, e)| {
                k.broker_name == broker_name && now.duration_since(e.last) <= e.beat.timeout
            })
            .map(|(k, e)| {
                (
                    k.broker_id,
                    LiveBroker {
                        broker_id: k.broker_id,
                        epoch: e.beat.epoch,
                        max_offset: e.beat.max_offset,
                        election_priority: e.beat.election_priority,
                    },
                )
            })
            .collect()
    }

    /// Every broker alive now: a copy, so that callers can judge liveness while holding other
    /// locks without taking this table's.
    pub fn active(&self, now: Instant) -> Active {
        Active(
            self.brokers
                .iter()
                .filter(|(_, e)| now.duration_since(e.last) <= e.beat.timeout)
                .map(|(k, _)| (k.cluster_name.clone(), k.broker_name.clone(), k.broker_id))
                .collect(),
        )
    }

    /// Removes the brokers whose heartbeat is overdue and returns them.
    pub fn expire(&mut self, now: Instant) -> Vec<BrokerKey> {
        let gone: Vec<BrokerKey> = self
            .brokers
            .iter()
            .filter(|(_, e)| now.duration_since(e.last) > e.beat.timeout)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &gone {
            self.brokers.remove(k);
        }
        self.closed
            .retain(|_, at| now.duration_since(*at) < FORWARD_GRACE);
        gone
    }

    /// Notes that the node looks at the table at `now`. A gap since the last look longer than a
    /// scan can explain means the node was paused (SIGSTOP, a stalled VM): the pause is not
    /// counted against the brokers ([`LiveTable::resumed_after`]), and its length returned.
    pub fn look(&mut self, now: Instant) -> Option<Duration> {
        let last = self
            .last_look
            .replace(now.max(self.last_look.unwrap_or(now)))?;
        let gap = now.saturating_duration_since(last);
        (gap > PAUSE_GAP).then(|| {
            self.resumed_after(gap, now);
            gap
        })
    }

    /// This node was paused (SIGSTOP, a VM stall) for `paused`: what brokers sent meanwhile is
    /// still on its way in, so their silence is counted from before the pause as if it had not
    /// happened, instead of expiring every broker at once.
    pub fn resumed_after(&mut self, paused: Duration, now: Instant) {
        for entry in self.brokers.values_mut() {
            entry.last = (entry.last + paused).min(now);
        }
    }

    /// The brokers whose heartbeats come on `connection`, with the addresses they listen at.
    pub fn heard_on(&self, connection: u64) -> Vec<(BrokerKey, String)> {
        self.brokers
            .iter()
            .filter(|(_, e)| connection != 0 && e.beat.connection == connection)
            .map(|(k, e)| (k.clone(), e.beat.broker_addr.clone()))
            .collect()
    }

    /// Removes `key` as gone with `connection`, which has closed, unless its heartbeats come on
    /// another connection by now (it reconnected); whether it was removed.
    pub fn gone_with(&mut self, key: &BrokerKey, connection: u64, now: Instant) -> bool {
        let on_it = self
            .brokers
            .get(key)
            .is_some_and(|e| e.beat.connection == connection);
        if on_it {
            self.brokers.remove(key);
            self.closed.insert(key.clone(), now);
        }
        on_it
    }

    pub fn view(&self, now: Instant) -> Vec<LiveView> {
        let mut all: Vec<LiveView> = self
            .brokers
            .iter()
            .map(|(k, e)| LiveView {
                cluster_name: k.cluster_name.clone(),
                broker_name: k.broker_name.clone(),
                broker_id: k.broker_id,
                broker_addr: e.beat.broker_addr.clone(),
                epoch: e.beat.epoch,
                max_offset: e.beat.max_offset,
                election_priority: e.beat.election_priority,
                silent_ms: now.duration_since(e.last).as_millis() as u64,
            })
            .collect();
        all.sort_by(|a, b| (&a.broker_name, a.broker_id).cmp(&(&b.broker_name, b.broker_id)));
        all
    }

    pub fn len(&self) -> usize {
        self.brokers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn key(name: &str, id: i64) -> BrokerKey {
        BrokerKey {
            cluster_name: "c".into(),
            broker_name: name.into(),
            broker_id: id,
        }
    }

    /// What the node does when `connection` closes and nothing listens at the brokers' addresses.
    fn close(table: &mut LiveTable, connection: u64, now: Instant) -> Vec<BrokerKey> {
        let heard = table.heard_on(connection);
        heard
            .into_iter()
            .filter(|(k, _)| table.gone_with(k, connection, now))
            .map(|(k, _)| k)
            .collect()
    }

    fn beat(conn: u64, epoch: i32) -> Heartbeat {
        Heartbeat {
            broker_addr: "127.0.0.1:10911".into(),
            timeout: Duration::from_secs(10),
            epoch,
            max_offset: 100,
            confirm_offset: 90,
            election_priority: 0,
            connection: conn,
        }
    }

    #[test]
    fn a_broker_is_active_until_its_own_timeout_passes() {
        let t0 = Instant::now();
        let mut table = LiveTable::default();
        table.on_heartbeat(key("a", 1), beat(1, 3), Via::Direct, t0);
        assert!(table.is_active("c", "a", 1, t0 + Duration::from_secs(10)));
        assert!(!table.is_active("c", "a", 1, t0 + Duration::from_secs(11)));
        assert!(table.expire(t0 + Duration::from_secs(5)).is_empty());
        assert_eq!(
            table.expire(t0 + Duration::from_secs(11)),
            vec![key("a", 1)]
        );
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn a_closed_connection_takes_only_its_own_brokers() {
        let t0 = Instant::now();
        let mut table = LiveTable::default();
        table.on_heartbeat(key("a", 1), beat(1, 3), Via::Direct, t0);
        table.on_heartbeat(key("a", 2), beat(2, 3), Via::Direct, t0);
        assert_eq!(close(&mut table, 1, t0), vec![key("a", 1)]);
        let alive: BTreeSet<i64> = table.live_of("a", t0).into_keys().collect();
        assert_eq!(alive, BTreeSet::from([2]));
    }

    #[test]
    fn a_broker_that_speaks_on_a_new_connection_is_not_gone_with_its_old_one() {
        let t0 = Instant::now();
        let mut table = LiveTable::default();
        table.on_heartbeat(key("a", 1), beat(1, 3), Via::Direct, t0);
        let heard = table.heard_on(1);
        assert_eq!(heard, vec![(key("a", 1), "127.0.0.1:10911".to_string())]);
        // While the node looks at its address, the broker heartbeats again on a new connection.
        table.on_heartbeat(key("a", 1), beat(2, 3), Via::Direct, t0);
        assert!(!table.gone_with(&key("a", 1), 1, t0));
        assert!(table.is_active("c", "a", 1, t0));
        assert!(table.gone_with(&key("a", 1), 2, t0));
        assert!(!table.is_active("c", "a", 1, t0));
    }

    #[tokio::test]
    async fn an_address_listens_while_a_listener_is_bound_there_and_not_after() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        assert!(listens(&addr).await);
        drop(listener);
        assert!(!listens(&addr).await);
        assert!(!listens("not an address").await);
    }

    #[test]
    fn a_forwarded_heartbeat_keeps_the_brokers_own_connection_and_cannot_revive_it_at_once() {
        let t0 = Instant::now();
        let mut table = LiveTable::default();
        table.on_heartbeat(key("a", 1), beat(7, 3), Via::Direct, t0);
        table.on_heartbeat(key("a", 1), beat(0, 3), Via::Follower, t0);
        // Still the broker's own connection: its close is its death.
        assert_eq!(close(&mut table, 7, t0), vec![key("a", 1)]);
        let soon = t0 + Duration::from_millis(500);
        table.on_heartbeat(key("a", 1), beat(0, 3), Via::Follower, soon);
        assert!(
            !table.is_active("c", "a", 1, soon),
            "a late forward does not revive it"
        );
        // A broker heard only through followers is alive, and no close of ours ends it.
        let later = t0 + Duration::from_secs(4);
        table.on_heartbeat(key("a", 2), beat(0, 3), Via::Follower, later);
        assert!(close(&mut table, 0, later).is_empty());
        assert!(table.is_active("c", "a", 2, later));
        // The broker itself speaks again: alive at once.
        table.on_heartbeat(key("a", 1), beat(8, 3), Via::Direct, soon);
        assert!(table.is_active("c", "a", 1, soon));
    }

    #[test]
    fn a_heartbeat_never_lowers_the_epoch_and_offset_an_election_ranks_on() {
        let t0 = Instant::now();
        let mut table = LiveTable::default();
        let at = |epoch, offset| {
            let mut b = beat(1, epoch);
            b.max_offset = offset;
            b
        };
        table.on_heartbeat(key("a", 1), at(3, 500), Via::Direct, t0);
        // Late, forwarded by a follower: an older offset of the same epoch.
        table.on_heartbeat(key("a", 1), at(3, 200), Via::Follower, t0);
        assert_eq!(table.live_of("a", t0)[&1].max_offset, 500);
        table.on_heartbeat(key("a", 1), at(2, 900), Via::Direct, t0);
        assert_eq!(
            (
                table.live_of("a", t0)[&1].epoch,
                table.live_of("a", t0)[&1].max_offset
            ),
            (3, 500),
            "an older epoch does not count, whatever its offset"
        );
        table.on_heartbeat(key("a", 1), at(4, 10), Via::Direct, t0);
        assert_eq!(table.live_of("a", t0)[&1].epoch, 4, "a newer epoch does");
        assert_eq!(table.live_of("a", t0)[&1].max_offset, 10);
        // A broker that left starts afresh.
        close(&mut table, 1, t0);
        table.on_heartbeat(
            key("a", 1),
            at(1, 5),
            Via::Direct,
            t0 + Duration::from_secs(4),
        );
        assert_eq!(
            table.live_of("a", t0 + Duration::from_secs(4))[&1].max_offset,
            5
        );
    }

    #[test]
    fn a_pause_of_the_node_itself_is_not_counted_as_the_brokers_silence() {
        let t0 = Instant::now();
        let mut table = LiveTable::default();
        table.on_heartbeat(key("a", 1), beat(1, 3), Via::Direct, t0);
        assert_eq!(table.look(t0), None);
        assert_eq!(
            table.look(t0 + Duration::from_secs(1)),
            None,
            "a scan's gap"
        );
        // Paused 30 s; the broker's timeout is 10 s.
        let resumed = t0 + Duration::from_secs(31);
        assert_eq!(table.look(resumed), Some(Duration::from_secs(30)));
        assert!(table.expire(resumed).is_empty());
        assert!(table.is_active("c", "a", 1, resumed));
        // A broker that really went quiet expires on its own timeout after all.
        assert_eq!(
            table.expire(resumed + Duration::from_secs(10)),
            vec![key("a", 1)]
        );
    }

    #[test]
    fn live_facts_carry_what_the_election_weighs() {
        let t0 = Instant::now();
        let mut table = LiveTable::default();
        table.on_heartbeat(key("a", 1), beat(1, 3), Via::Direct, t0);
        table.on_heartbeat(key("b", 1), beat(1, 9), Via::Direct, t0);
        let live = table.live_of("a", t0);
        assert_eq!(live.len(), 1);
        assert_eq!(live[&1].epoch, 3);
        assert_eq!(live[&1].max_offset, 100);
    }
}
