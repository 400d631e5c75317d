//! The faults a schedule is made of, how each is done to the cluster and undone, and the seeded
//! schedules themselves.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::broker::{Broker, Fleet, GROUPS, MEMBERS};
use super::cluster::{Cluster, NODES};
use super::history::{Alone, History};
use crate::support::delay::{slow_link, SlowLink};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The leader cut off from the other nodes; brokers still reach it.
    IsolateLeader,
    /// Node `alone` on one side with group `group`'s brokers; the other two nodes with the rest.
    Split { alone: usize, group: usize },
    /// Two nodes that cannot see each other, and node `middle` that sees both.
    Bridge { middle: usize },
    /// SIGSTOP of the leader.
    PauseLeader,
    /// A follower killed, then SIGSTOP of the leader: nobody has a quorum.
    PauseLeaderPeerDown,
    /// kill -9 of the leader (or of a follower), restarted when healed.
    Kill { leader: bool },
    /// The leader's disk fills up; freed and the node restarted when healed.
    FillLeaderDisk,
    /// A follower killed; a follower's store deleted and the node started again on the empty
    /// store (it must rejoin, not form or vote), so that the leader's quorum is the refilled
    /// node. The killed one is restarted when healed.
    WipeFollowerKillPeer,
    /// Group `group`'s master broker stops; started again when healed.
    CrashMaster { group: usize },
    /// Every link between nodes delayed by `delay_ms` each way and losing 5 % of its packets
    /// (brokers' links are not). Past the Raft timing's bounds no leader can hold its lease, so
    /// only safety is judged while it lasts, and the recovery after healing.
    SlowLinks { delay_ms: u64 },
}

/// The share of packets the slow links drop, each way.
const SLOW_LINK_LOSS: f64 = 0.05;

/// How many kinds of fault `Fault::pick` draws from.
pub const FAULT_KINDS: usize = 11;

impl Fault {
    pub fn name(&self) -> &'static str {
        match self {
            Fault::IsolateLeader => "isolate the leader",
            Fault::Split { .. } => "split 1/2, brokers on both sides",
            Fault::Bridge { .. } => "bridge",
            Fault::PauseLeader => "pause the leader",
            Fault::PauseLeaderPeerDown => "pause the leader, a peer down",
            Fault::Kill { leader: true } => "kill -9 the leader",
            Fault::Kill { leader: false } => "kill -9 a follower",
            Fault::FillLeaderDisk => "fill the leader's disk",
            Fault::WipeFollowerKillPeer => "wipe a follower's store, kill the other",
            Fault::CrashMaster { .. } => "crash a master broker",
            Fault::SlowLinks { .. } => "150-500 ms delay and 5 % loss between nodes",
        }
    }

    fn pick(rng: &mut fastrand::Rng) -> Fault {
        match rng.usize(..FAULT_KINDS) {
            0 => Fault::IsolateLeader,
            1 => Fault::Split {
                alone: rng.usize(..NODES),
                group: rng.usize(..GROUPS),
            },
            2 => Fault::Bridge {
                middle: rng.usize(..NODES),
            },
            3 => Fault::PauseLeader,
            4 => Fault::PauseLeaderPeerDown,
            5 => Fault::Kill { leader: true },
            6 => Fault::Kill { leader: false },
            7 => Fault::FillLeaderDisk,
            8 => Fault::WipeFollowerKillPeer,
            9 => Fault::SlowLinks {
                delay_ms: rng.u64(150..=500),
            },
            _ => Fault::CrashMaster {
                group: rng.usize(..GROUPS),
            },
        }
    }
}

pub struct Phase {
    pub faults: Vec<Fault>,
    pub hold: Duration,
}

/// Two or three phases, each one fault, sometimes with a master broker's crash on top.
pub fn schedule(seed: u64) -> Vec<Phase> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..rng.usize(2..=3))
        .map(|_| {
            let mut faults = vec![Fault::pick(&mut rng)];
            if !matches!(faults[0], Fault::CrashMaster { .. }) && rng.usize(..3) == 0 {
                faults.push(Fault::CrashMaster {
                    group: rng.usize(..GROUPS),
                });
            }
            Phase {
                faults,
                hold: Duration::from_millis(rng.u64(5_000..9_000)),
            }
        })
        .collect()
}

/// A fault in place: what must be undone, and what it means for the checks.
pub struct Done {
    pub fault: Fault,
    leader: usize,
    /// A second node the fault took down (the killed peer).
    other: Option<usize>,
    crashed: Option<Arc<Broker>>,
    slow: Vec<SlowLink>,
    /// Nodes that, by the fault, have no quorum until it is healed.
    alone: Vec<usize>,
    /// Groups whose master may rightly be unable to change its set while this holds.
    pub stuck_groups: Vec<String>,
    /// Whether some side keeps a quorum that brokers reach.
    pub majority: bool,
    /// What went wrong in doing the fault itself.
    found: Vec<String>,
}

fn other_than(leader: usize, k: usize) -> usize {
    (leader + 1 + k) % NODES
}

/// Does `fault` to the cluster, `leader` being the node that leads now.
pub fn apply(fault: Fault, leader: usize, cluster: &mut Cluster, fleet: &Fleet) -> Done {
    let mut done = Done {
        fault,
        leader,
        other: None,
        crashed: None,
        slow: Vec::new(),
        alone: Vec::new(),
        stuck_groups: Vec::new(),
        majority: true,
        found: Vec::new(),
    };
    match fault {
        Fault::IsolateLeader => {
            cluster.net.isolate(leader, true);
            done.alone.push(leader);
        }
        Fault::Split { alone, group } => {
            cluster.net.isolate(alone, true);
            for b in fleet.brokers.iter() {
                let on_alone_side = b.index / MEMBERS == group;
                for node in 0..NODES {
                    if (node == alone) != on_alone_side {
                        cluster.net.cut_extra(node, b.index, true);
                    }
                }
            }
            done.alone.push(alone);
            done.stuck_groups.push(format!("g{group}"));
        }
        Fault::Bridge { middle } => {
            let (a, b) = (other_than(middle, 0), other_than(middle, 1));
            cluster.net.cut_nodes(a, b, true);
        }
        Fault::PauseLeader => cluster.pause(leader),
        Fault::PauseLeaderPeerDown => {
            let peer = other_than(leader, 0);
            cluster.kill(peer);
            cluster.pause(leader);
            done.other = Some(peer);
            done.alone.push(other_than(leader, 1));
            done.majority = false;
        }
        Fault::Kill { leader: true } => cluster.kill(leader),
        Fault::Kill { leader: false } => {
            let peer = other_than(leader, 0);
            cluster.kill(peer);
            done.other = Some(peer);
        }
        Fault::FillLeaderDisk => cluster.fill_disk(leader),
        Fault::WipeFollowerKillPeer => {
            let (peer, wiped) = (other_than(leader, 0), other_than(leader, 1));
            cluster.kill(peer);
            cluster.kill(wiped);
            cluster.wipe(wiped);
            if let Err(e) = cluster.boot(wiped) {
                done.found.push(format!("{}: {e}", fault.name()));
            }
            done.other = Some(peer);
        }
        Fault::CrashMaster { group } => {
            let name = format!("g{group}");
            if let Some(master) = fleet.master_of(&name) {
                master.set_up(false);
                done.crashed = Some(master);
            }
            done.stuck_groups.push(name);
        }
        Fault::SlowLinks { delay_ms } => {
            let delay = Duration::from_millis(delay_ms);
            for (i, j) in [(0, 1), (0, 2), (1, 2)] {
                let link = slow_link(&cluster.net, i, j, delay, SLOW_LINK_LOSS);
                done.slow.push(link);
            }
            done.majority = false;
        }
    }
    done
}

/// Undoes the fault; the no-quorum spells it caused go to the record. Restarting a node that
/// will not come back is a violation.
pub fn heal(done: Done, from: Instant, cluster: &mut Cluster, history: &History) {
    let now = Instant::now();
    for f in &done.found {
        history.violation(f.clone());
    }
    for node in &done.alone {
        history.alone(Alone {
            node: *node,
            from,
            to: now,
        });
    }
    let restart = |cluster: &mut Cluster, node: usize| {
        let _ = cluster.exited(node);
        if !cluster.running(node) {
            if let Err(e) = cluster.boot(node) {
                history.violation(format!("{}: {e}", done.fault.name()));
            }
        }
    };
    match done.fault {
        Fault::IsolateLeader | Fault::Split { .. } | Fault::Bridge { .. } => cluster.net.heal(),
        Fault::PauseLeader => cluster.resume(done.leader),
        Fault::PauseLeaderPeerDown => {
            cluster.resume(done.leader);
            restart(cluster, done.other.unwrap());
        }
        Fault::Kill { leader: true } => restart(cluster, done.leader),
        Fault::Kill { leader: false } | Fault::WipeFollowerKillPeer => {
            restart(cluster, done.other.unwrap())
        }
        Fault::FillLeaderDisk => {
            cluster.free_disk(done.leader);
            // The node's controller stops for good when a write fails (fail-stop: a standalone
            // node exits, an embedding NameServer goes on without it); its supervisor restarts
            // the process.
            cluster.kill(done.leader);
            restart(cluster, done.leader);
        }
        Fault::CrashMaster { .. } => {
            if let Some(b) = done.crashed {
                b.set_up(true);
            }
        }
        Fault::SlowLinks { .. } => {
            for link in done.slow {
                link.remove();
            }
        }
    }
}
