//! A NameServer's digest of the brokers it hears, what its peers compare their routes with:
//! per broker address its group, id, data version and when it was last heard, and the brokers
//! that said they were leaving. Instants in a peer's digest are read as ages on this clock
//! ([`PeerClock`]): no decision compares two hosts' clocks.

use rocketmq_wire::RemotingCommand;
use serde::{Deserialize, Serialize};

use rocketmq_wire::codes::peer::keys::NOW;

use super::PEER_CONNECTION;
use crate::registry::{Registry, RouteTable};

/// One broker address as a NameServer hears it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heard {
    pub cluster: String,
    pub addr: String,
    pub name: String,
    pub id: i64,
    /// The data version of its last registration: (state version, timestamp, counter).
    pub version: (i64, i64, i64),
    /// When this NameServer last heard from it (registration, heartbeat, or a peer's word).
    pub last_ms: i64,
    /// A hash of its group's topics as routed here, and when they last changed here (or where
    /// the word of them came from): a broker's own registration at an unchanged data version
    /// can still change them (it brings back topics deleted meanwhile, as in Java).
    #[serde(default)]
    pub topics: u64,
    #[serde(default)]
    pub topics_ms: i64,
}

/// A broker that said it was leaving (UNREGISTER_BROKER), and when it left.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Departed {
    pub cluster: String,
    pub addr: String,
    pub at_ms: i64,
}

/// What a NameServer tells its peers of its routes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    pub heard: Vec<Heard>,
    pub departed: Vec<Departed>,
    /// The admin changes of the group's log these routes reflect (`Registry::admin_position`);
    /// absent from a member that has applied none yet, or from an older version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_position: Option<u64>,
}

impl Digest {
    /// Whether these routes reflect admin changes that routes at `mine` do not yet: a delete or
    /// a permission change made through the group shows here before the log brings it there.
    /// Taken over now, it would arrive as a peer's word, not as the admin change it is; the log
    /// brings the change itself within moments.
    pub fn ahead_of(&self, mine: Option<u64>) -> bool {
        matches!((self.admin_position, mine), (Some(theirs), Some(mine)) if theirs > mine)
    }
}

/// What this NameServer hears (every live broker address in a group), and the brokers that
/// said they were leaving.
pub fn digest(r: &Registry) -> Digest {
    let departed = r
        .announced_departures()
        .map(|(k, at_ms)| Departed {
            cluster: k.cluster.clone(),
            addr: k.addr.clone(),
            at_ms,
        })
        .collect();
    Digest {
        heard: heard_here(r),
        departed,
        admin_position: r.admin_position(),
    }
}

/// The digest entry of the broker at `addr`, member `id` of the group (`cluster`, `name`).
pub(super) fn heard_of(
    r: &Registry,
    (cluster, name): (&str, &str),
    id: i64,
    addr: &str,
    live: &crate::registry::BrokerLive,
) -> Heard {
    Heard {
        cluster: cluster.to_string(),
        addr: addr.to_string(),
        name: name.to_string(),
        id,
        version: version_of(&live.data_version),
        last_ms: live.last_update_ms,
        topics: r.topics_hash(name),
        topics_ms: r.topics_changed_at(name),
    }
}

/// A data version as digests order it.
fn version_of(dv: &rocketmq_wire::body::DataVersion) -> (i64, i64, i64) {
    (dv.state_version, dv.timestamp, dv.counter)
}

fn heard_here(r: &Registry) -> Vec<Heard> {
    let mut out = Vec::new();
    for bd in r.groups() {
        for (id, addr) in &bd.broker_addrs {
            let Some(live) = r.live(&bd.cluster, addr) else {
                continue;
            };
            let group = (bd.cluster.as_str(), bd.broker_name.as_str());
            out.push(heard_of(r, group, *id, addr, live));
        }
    }
    out
}

/// What a peer's digest asks of this NameServer: brokers to take over, brokers the peer
/// heard more lately than this one did, and brokers held here on a peer's word that told the
/// peer they were leaving.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    pub take: Vec<Heard>,
    pub heard_later: Vec<Heard>,
    pub left: Vec<Departed>,
}

impl Comparison {
    /// How many brokers the two NameServers disagree on.
    pub fn differences(&self) -> usize {
        self.take.len() + self.left.len()
    }
}

pub fn compare(r: &Registry, theirs: &Digest) -> Comparison {
    let mut c = Comparison::default();
    for d in &theirs.departed {
        if !r
            .left_at_peer(&d.cluster, &d.addr, d.at_ms, PEER_CONNECTION)
            .is_empty()
        {
            c.left.push(d.clone());
        }
    }
    for h in &theirs.heard {
        let listed = r.group(&h.name).is_some_and(|bd| {
            bd.cluster == h.cluster && bd.broker_addrs.get(&h.id) == Some(&h.addr)
        });
        match r.live(&h.cluster, &h.addr).filter(|_| listed) {
            None => {
                // Gone from here since the peer last heard of it: it stays gone.
                let left_after = r
                    .departed_at(&h.cluster, &h.addr)
                    .is_some_and(|at| at >= h.last_ms);
                if !left_after {
                    c.take.push(h.clone());
                }
            }
            Some(live) => {
                let version = version_of(&live.data_version);
                let mine = r.topics_hash(&h.name);
                if version < h.version
                    || (version == h.version
                        && mine != h.topics
                        && r.topics_changed_at(&h.name) < h.topics_ms)
                {
                    c.take.push(h.clone());
                } else if live.last_update_ms < h.last_ms {
                    c.heard_later.push(h.clone());
                }
            }
        }
    }
    c
}

/// A peer's instants read on this NameServer's clock. Members' clocks may differ by minutes:
/// every answer carrying instants also carries the answerer's clock when it answered (`now`),
/// so that each instant is taken as its age there, subtracted from this NameServer's now, and
/// never later than now. No decision compares one host's instant with another's.
#[derive(Clone, Copy, Debug)]
pub(super) struct PeerClock {
    /// This clock less the peer's, at the answer (transit included); `None` from a peer that
    /// does not say its clock: its instants are only capped at now.
    shift: Option<i64>,
    now: i64,
}

impl PeerClock {
    pub(super) fn of(answer: &RemotingCommand) -> Self {
        Self::at(answer.ext_i64(NOW), rocketmq_wire::clock::now_ms())
    }

    pub(super) fn at(peer_now: Option<i64>, now: i64) -> Self {
        PeerClock {
            shift: peer_now.map(|p| now.saturating_sub(p)),
            now,
        }
    }

    /// `t` on this clock; 0 (undated) stays 0.
    pub(super) fn local(&self, t: i64) -> i64 {
        if t == 0 {
            return 0;
        }
        t.saturating_add(self.shift.unwrap_or(0)).min(self.now)
    }

    pub(super) fn rebase(&self, h: &mut Heard) {
        h.last_ms = self.local(h.last_ms);
        h.topics_ms = self.local(h.topics_ms);
    }

    pub(super) fn rebase_digest(&self, d: &mut Digest) {
        for h in &mut d.heard {
            self.rebase(h);
        }
        for gone in &mut d.departed {
            gone.at_ms = self.local(gone.at_ms);
        }
    }
}

/// The answer to ROUTE_DIGEST: `None` when the routes are still at generation `since`, else the
/// digest and the generation it is at (or later).
pub fn digest_since(routes: &RouteTable, since: Option<u64>) -> Option<(Digest, u64)> {
    // Read before the digest: a change landing between makes the digest newer than the
    // generation it names, and the asker only asks for it once more.
    let generation = routes.generation();
    if since == Some(generation) {
        return None;
    }
    Some((routes.read(digest), generation))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn a_digest_is_ahead_only_of_routes_that_applied_fewer_admin_changes() {
        let at = |position| Digest {
            admin_position: position,
            ..Digest::default()
        };
        assert!(at(Some(5)).ahead_of(Some(4)));
        assert!(!at(Some(5)).ahead_of(Some(5)));
        assert!(!at(Some(4)).ahead_of(Some(5)));
        // Either side unknown (nothing applied yet, an older peer): not judged.
        assert!(!at(None).ahead_of(Some(1)));
        assert!(!at(Some(1)).ahead_of(None));
        // What an older peer sends reads as no position.
        let old: Digest = serde_json::from_str(r#"{"heard":[],"departed":[]}"#).unwrap();
        assert_eq!(old.admin_position, None);
    }

    #[test]
    fn a_peer_s_instants_are_read_as_ages_on_this_clock_and_never_later_than_now() {
        // The peer's clock is 90 s ahead: it heard the broker 2 s before it answered, and
        // dated the group's topics 5 s in its own future (a clock that jumped back since).
        let now = 1_000_000;
        let peer_now = now + 90_000;
        let clock = PeerClock::at(Some(peer_now), now);
        let mut h = heard("a", "1.1.1.1:10911", (0, 1, 1), peer_now - 2_000);
        h.topics_ms = peer_now + 5_000;
        let mut digest = Digest {
            admin_position: None,
            heard: vec![h],
            departed: vec![Departed {
                cluster: "c".into(),
                addr: "1.1.1.2:10911".into(),
                at_ms: peer_now - 30_000,
            }],
        };
        clock.rebase_digest(&mut digest);
        assert_eq!(digest.heard[0].last_ms, now - 2_000);
        assert_eq!(digest.heard[0].topics_ms, now, "capped at now");
        assert_eq!(digest.departed[0].at_ms, now - 30_000);
        // 90 s behind, and a peer that does not say its clock: capped only.
        let behind = PeerClock::at(Some(now - 90_000), now);
        assert_eq!(behind.local(now - 90_000 - 1_000), now - 1_000);
        let unsaid = PeerClock::at(None, now);
        assert_eq!(unsaid.local(now + 60_000), now);
        assert_eq!(unsaid.local(now - 7), now - 7);
        assert_eq!(clock.local(0), 0, "undated stays undated");
    }

    pub(in crate::peers::routes) fn heard(
        name: &str,
        addr: &str,
        version: (i64, i64, i64),
        last_ms: i64,
    ) -> Heard {
        Heard {
            cluster: "c".into(),
            addr: addr.into(),
            name: name.into(),
            id: 0,
            version,
            last_ms,
            topics: 0,
            topics_ms: 0,
        }
    }

    #[test]
    fn an_unknown_broker_is_taken_over_and_a_departed_one_only_on_newer_word() {
        let r = Registry::default();
        let theirs = Digest {
            admin_position: None,
            heard: vec![heard("a", "1.1.1.1:10911", (0, 1, 1), 5)],
            departed: Vec::new(),
        };
        let c = compare(&r, &theirs);
        assert_eq!(c.take.len(), 1);
        assert!(c.heard_later.is_empty());
    }
}
