//! Chaos for controller mode: three NameServers with embedded controller nodes and two broker
//! groups of three brokers each. Every round kills or restarts a random controller node or
//! broker (never more than the group can lose), lets the survivors settle (a live master, every
//! live member in the sync-state set), and checks the invariants: one master per epoch, epochs
//! that only grow, broker ids never reused, a master for every group with a live member, and
//! NameServer routes that agree with the controller.
//!
//! `CHAOS_SEED` replays a run; `CHAOS_ROUNDS` sets its length (50 by default).

mod support;
use support::MQNAMESRV;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use namesrv_testkit::{cluster_info, ControllerBroker, ControllerCluster, ReplicaInfo};
use rocketmq_wire::client::Client;

const GROUPS: [&str; 2] = ["chaos-a", "chaos-b"];
const SETTLE_LIMIT: Duration = Duration::from_secs(40);

struct Member {
    broker: ControllerBroker,
    running: bool,
}

#[derive(Default)]
struct Invariants {
    /// (group, master epoch) → the master seen under it.
    master_of_epoch: HashMap<(String, i32), i64>,
    /// group → the highest master epoch seen.
    epoch: HashMap<String, i32>,
    /// (group, id) → the address of the broker that got it.
    owner_of_id: HashMap<(String, i64), String>,
    violations: Vec<String>,
}

impl Invariants {
    fn observe(&mut self, group: &str, info: &ReplicaInfo) {
        let last = self.epoch.entry(group.to_string()).or_insert(0);
        if info.master_epoch < *last {
            self.violations.push(format!(
                "{group}: master epoch went back from {last} to {}",
                info.master_epoch
            ));
        }
        *last = (*last).max(info.master_epoch);
        if let Some(master) = info.master_id {
            let seen = self
                .master_of_epoch
                .entry((group.to_string(), info.master_epoch))
                .or_insert(master);
            if *seen != master {
                self.violations.push(format!(
                    "{group}: two masters ({seen} and {master}) for epoch {}",
                    info.master_epoch
                ));
            }
        }
    }

    fn observe_id(&mut self, group: &str, id: i64, addr: &str) {
        let owner = self
            .owner_of_id
            .entry((group.to_string(), id))
            .or_insert_with(|| addr.to_string());
        if owner != addr {
            self.violations
                .push(format!("{group}: id {id} given to {owner} and to {addr}"));
        }
    }
}

/// One step of every running broker's life: heartbeat, learn the group's state, ask for an
/// election when there is no master, and (as master) take every live member into the
/// sync-state set; then register with the NameServers under the role it has.
async fn tick(cluster: &ControllerCluster, members: &mut [Member], inv: &mut Invariants) {
    let controllers = cluster.controllers.clone();
    // All of them, stopped ones too: a broker's connections are by position in this list.
    let namesrvs = cluster.namesrvs.clone();
    for g in GROUPS {
        let live_ids: BTreeSet<i64> = members
            .iter()
            .filter(|m| m.running && m.broker.name == g)
            .filter_map(|m| m.broker.id)
            .collect();
        for m in members
            .iter_mut()
            .filter(|m| m.running && m.broker.name == g)
        {
            let b = &mut m.broker;
            if b.id.is_none() {
                let r = b.register(&controllers).await;
                if std::env::var("CHAOS_DEBUG").is_ok() {
                    println!("register {}: {:?}", b.addr, r.map(|r| (r.code, r.remark)));
                }
                if let Some(id) = b.id {
                    inv.observe_id(g, id, &b.addr.clone());
                }
                continue;
            }
            b.heartbeat(&controllers).await;
            let Some(info) = b.replica_info(&controllers).await else {
                continue;
            };
            inv.observe(g, &info);
            match info.master_id {
                None => {
                    let _ = b.elect_self(&controllers).await;
                }
                Some(master) if Some(master) == b.id => {
                    if info.sync_state_set != live_ids && live_ids.contains(&master) {
                        let _ = b.alter_sync_state_set(&controllers, &info, &live_ids).await;
                    }
                    b.register_with_namesrvs(&namesrvs, true, &[g, "chaos-common"])
                        .await;
                }
                Some(_) => {
                    b.register_with_namesrvs(&namesrvs, false, &[g, "chaos-common"])
                        .await
                }
            }
        }
    }
}

/// Whether every group with a live member has a live master that every running NameServer
/// lists at id 0.
async fn settled(
    cluster: &ControllerCluster,
    members: &mut [Member],
    inv: &mut Invariants,
) -> bool {
    let controllers = cluster.controllers.clone();
    for g in GROUPS {
        let running: Vec<&Member> = members
            .iter()
            .filter(|m| m.running && m.broker.name == g)
            .collect();
        if running.is_empty() {
            continue;
        }
        // Every running broker must have got its id.
        let Some(live) = running
            .iter()
            .map(|m| Some((m.broker.id?, m.broker.addr.clone())))
            .collect::<Option<Vec<(i64, String)>>>()
        else {
            return false;
        };
        let Some(asker) = members.iter_mut().find(|m| m.running && m.broker.name == g) else {
            continue;
        };
        let Some(info) = asker.broker.replica_info(&controllers).await else {
            return false;
        };
        inv.observe(g, &info);
        let Some(master) = info.master_id else {
            return false;
        };
        let Some((_, master_addr)) = live.iter().find(|(id, _)| *id == master) else {
            return false;
        };
        // Settled also means caught up: every live member is back in the sync-state set, so
        // that the next round's master loss leaves someone electable (with unclean elections
        // off, a group whose set holds only a dead master rightly stays without one).
        let live_ids: BTreeSet<i64> = live.iter().map(|(id, _)| *id).collect();
        if info.sync_state_set != live_ids {
            return false;
        }
        for i in 0..controllers.len() {
            if !cluster.is_running(i) {
                continue;
            }
            let Ok(client) = Client::connect(cluster.namesrvs[i].as_str()).await else {
                return false;
            };
            let info = cluster_info(&client).await;
            let listed = info
                .broker_addr_table
                .get(g)
                .and_then(|b| b.broker_addrs.get(&0));
            if listed != Some(master_addr) {
                if std::env::var("CHAOS_DEBUG").is_ok() {
                    println!("{g}: NameServer n{i} lists {listed:?} at id 0, controller master {master_addr}; {:?}", info.broker_addr_table.get(g));
                }
                return false;
            }
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_kills_and_restarts_never_break_the_controller_invariants() {
    // A fixed seed unless one is given: which run the test command makes must not depend on
    // the clock.
    let seed: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let rounds: usize = std::env::var("CHAOS_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    println!("chaos seed {seed}, {rounds} rounds (CHAOS_SEED={seed} replays it)");
    // Seeded, so that a seed replays a run.
    let mut dice = fastrand::Rng::with_seed(seed);
    let mut cluster = ControllerCluster::start(
        MQNAMESRV,
        3,
        "scanNotActiveBrokerInterval=300\nscanInactiveMasterInterval=500\n",
    );
    assert!(
        cluster.leader(Duration::from_secs(20)).await.is_some(),
        "the controller group elects a leader"
    );
    let mut members: Vec<Member> = Vec::new();
    for (gi, g) in GROUPS.iter().enumerate() {
        for k in 0..3 {
            let mut broker = ControllerBroker::new(
                "ChaosCluster",
                g,
                &format!("127.0.0.{}:{}", 10 + gi, 30911 + k),
            );
            broker.heartbeat_timeout_ms = 1_500;
            members.push(Member {
                broker,
                running: true,
            });
        }
    }
    let mut inv = Invariants::default();
    let mut log = Vec::new();
    for round in 0..=rounds {
        if round > 0 {
            let action = dice.usize(..5);
            let what = match action {
                // A controller node dies, while a majority lives.
                0 if (0..3).filter(|i| cluster.is_running(*i)).count() == 3 => {
                    let i = dice.usize(..3);
                    cluster.kill(i);
                    format!("kill controller n{i}")
                }
                0 | 1 => match (0..3).find(|i| !cluster.is_running(*i)) {
                    Some(i) => {
                        cluster.restart(i);
                        format!("restart controller n{i}")
                    }
                    None => "nothing".to_string(),
                },
                // A broker dies, leaving its group at least one member.
                2 | 3 => {
                    let i = dice.usize(..members.len());
                    let g = members[i].broker.name;
                    let alive = members
                        .iter()
                        .filter(|m| m.running && m.broker.name == g)
                        .count();
                    if members[i].running && alive > 1 {
                        members[i].running = false;
                        members[i].broker.disconnect();
                        format!("kill broker {g}/{:?}", members[i].broker.id)
                    } else {
                        "nothing".to_string()
                    }
                }
                _ => match members.iter().position(|m| !m.running) {
                    Some(i) => {
                        members[i].running = true;
                        members[i].broker.max_offset += 1;
                        format!(
                            "restart broker {}/{:?}",
                            members[i].broker.name, members[i].broker.id
                        )
                    }
                    None => "nothing".to_string(),
                },
            };
            log.push(format!("round {round}: {what}"));
        }
        let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
        loop {
            tick(&cluster, &mut members, &mut inv).await;
            if settled(&cluster, &mut members, &mut inv).await {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                inv.violations.push(format!(
                    "round {round}: no settled master within {SETTLE_LIMIT:?}"
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if !inv.violations.is_empty() {
            for i in 0..3 {
                println!("--- node n{i}:\n{}", cluster.controller_log(i));
            }
        }
        assert!(
            inv.violations.is_empty(),
            "seed {seed}: {:#?}\nrounds:\n{}",
            inv.violations,
            log.join("\n")
        );
    }
    println!("{}", log.join("\n"));
}
