//! Changing a running group's members: real `mqcontroller` processes on loopback, changed by
//! the member requests nsadmin sends (1200–1203) while brokers that follow the controller
//! protocol heartbeat, register and fail over.

mod support;
use support::{ask, boot_node, MQCONTROLLER};

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use namesrv_testkit::{free_port, ControllerBroker, ControllerProps, ReplicaInfo};
use rocketmq_wire::body::GroupMembers;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::headers::{
    AddMemberRequestHeader, RemoveMemberRequestHeader, RequestHeader, TransferLeaderRequestHeader,
};
use rocketmq_wire::RemotingCommand;

/// Several groups of processes at once would make the measured pauses the machine's: one test
/// at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const CLUSTER: &str = "MemberCluster";
const FAST: &str = "scanNotActiveBrokerInterval=200\nscanInactiveMasterInterval=500\n";

/// Controller nodes by member number; a number's address never changes once given.
struct Group {
    dir: tempfile::TempDir,
    addrs: BTreeMap<u64, String>,
    nodes: BTreeMap<u64, Child>,
}

impl Group {
    /// Starts members 0..n, and reserves addresses for members n..n+spare.
    fn start(n: u64, spare: u64) -> Group {
        let mut group = Group {
            dir: tempfile::tempdir().unwrap(),
            addrs: (0..n + spare)
                .map(|i| (i, format!("127.0.0.1:{}", free_port())))
                .collect(),
            nodes: BTreeMap::new(),
        };
        let all: Vec<u64> = (0..n).collect();
        for i in 0..n {
            group.boot(i, &all);
        }
        group
    }

    /// Starts member `i` with a config listing `peers` (and itself), on a store of its own.
    fn boot(&mut self, i: u64, peers: &[u64]) {
        let mut listed: BTreeSet<u64> = peers.iter().copied().collect();
        listed.insert(i);
        let members = listed.iter().map(|j| (*j as usize, &self.addrs[j]));
        let store = self.dir.path().join(format!("store-{i}"));
        let props = ControllerProps::with_ids(members, i as usize, store)
            .group("members")
            .extra(FAST);
        let conf = self.dir.path().join(format!("controller-{i}.conf"));
        std::fs::write(&conf, props.to_string()).unwrap();
        let mut command = Command::new(MQCONTROLLER);
        command.arg("-c").arg(&conf);
        let log = self.dir.path().join(format!("node-{i}.log"));
        let child = boot_node(command, &log).unwrap_or_else(|e| panic!("n{i} {e}"));
        self.nodes.insert(i, child);
    }

    /// SIGKILL.
    fn kill(&mut self, i: u64) {
        if let Some(mut child) = self.nodes.remove(&i) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Every address ever given, as brokers' `controllerAddr` would list the group's hosts.
    fn all_addrs(&self) -> Vec<String> {
        self.addrs.values().cloned().collect()
    }

    fn running_addrs(&self) -> Vec<String> {
        self.nodes.keys().map(|i| self.addrs[i].clone()).collect()
    }

    /// The running member that alone says it leads for half a second.
    async fn leader(&self, limit: Duration) -> Option<u64> {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        let addrs = self.running_addrs();
        let at = support::one_leader(&addrs, Duration::from_millis(500), limit);
        at.await.map(|i| ids[i])
    }

    /// A member request to the leader, NOT_LEADER retried as nsadmin does.
    async fn admin(&self, cmd: RemotingCommand) -> RemotingCommand {
        for _ in 0..5 {
            let leader = self
                .leader(Duration::from_secs(15))
                .await
                .expect("a leader");
            let answer = ask(&self.addrs[&leader], cmd.clone(), Duration::from_secs(60))
                .await
                .expect("the leader answers");
            if answer.code != response::CONTROLLER_NOT_LEADER {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("no leader kept its office long enough to answer");
    }

    async fn members(&self) -> GroupMembers {
        let answer = self
            .admin(RemotingCommand::request(request::CONTROLLER_LIST_MEMBERS))
            .await;
        assert_eq!(answer.code, 0, "{:?}", answer.remark);
        GroupMembers::decode(answer.body.as_deref().unwrap()).unwrap()
    }

    async fn add(&self, i: u64) -> RemotingCommand {
        let id = format!("n{i}");
        let header = AddMemberRequestHeader {
            member_id: &id,
            member_address: &self.addrs[&i],
        };
        self.admin(header.to_command()).await
    }

    async fn remove(&self, i: u64) -> RemotingCommand {
        let id = format!("n{i}");
        self.admin(RemoveMemberRequestHeader { member_id: &id }.to_command())
            .await
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for i in ids {
            self.kill(i);
        }
        // What each node said, for the report of a failed test.
        if std::thread::panicking() {
            for i in self.addrs.keys() {
                let log = self.dir.path().join(format!("node-{i}.log"));
                if let Ok(text) = std::fs::read_to_string(log) {
                    let tail: Vec<&str> = text.lines().rev().take(60).collect();
                    eprintln!("--- n{i} ---");
                    for line in tail.iter().rev() {
                        eprintln!("{line}");
                    }
                }
            }
        }
    }
}

/// (id, role) of every member, by id.
fn roles(members: &GroupMembers) -> Vec<(String, String)> {
    members
        .members
        .iter()
        .map(|m| (m.id.clone(), m.role.clone()))
        .collect()
}

fn voters(members: &GroupMembers) -> Vec<String> {
    members
        .members
        .iter()
        .filter(|m| m.role != "learner")
        .map(|m| m.id.clone())
        .collect()
}

/// What the brokers saw of their group, checked against the controller's invariants: one
/// master per master epoch, epochs that only grow, a sync-state set holding its master.
#[derive(Default)]
struct Seen {
    masters: BTreeMap<i32, i64>,
    last_epoch: i32,
}

impl Seen {
    fn note(&mut self, info: &ReplicaInfo) {
        assert!(
            info.master_epoch >= self.last_epoch,
            "master epoch went back from {} to {}",
            self.last_epoch,
            info.master_epoch
        );
        self.last_epoch = info.master_epoch;
        if let Some(master) = info.master_id {
            let first = *self.masters.entry(info.master_epoch).or_insert(master);
            assert_eq!(first, master, "two masters at epoch {}", info.master_epoch);
            assert!(
                info.sync_state_set.contains(&master),
                "the sync-state set {:?} lacks its master {master}",
                info.sync_state_set
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_grows_from_three_to_five_and_back_while_brokers_heartbeat_and_a_master_fails_over()
{
    let _serial = SERIAL.lock().await;
    let mut group = Group::start(3, 2);
    group
        .leader(Duration::from_secs(20))
        .await
        .expect("a leader");
    let ctl = group.all_addrs();

    // Broker set grp: broker 1 master, broker 2 in its sync-state set; both heartbeat.
    let mut a = ControllerBroker::new(CLUSTER, "grp", "127.0.0.1:30911");
    let mut b = ControllerBroker::new(CLUSTER, "grp", "127.0.0.1:30921");
    a.heartbeat_timeout_ms = 3_000;
    b.heartbeat_timeout_ms = 3_000;
    assert_eq!(a.register(&ctl).await.unwrap().code, 0);
    assert_eq!(b.register(&ctl).await.unwrap().code, 0);
    assert_eq!(a.elect_self(&ctl).await.unwrap().code, 0);
    let info = a.replica_info(&ctl).await.unwrap();
    let set = BTreeSet::from([a.id.unwrap(), b.id.unwrap()]);
    assert_eq!(
        a.alter_sync_state_set(&ctl, &info, &set)
            .await
            .unwrap()
            .code,
        0
    );
    let seen = Arc::new(parking_lot::Mutex::new(Seen::default()));
    let a_alive = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let stop = tokio_util::sync::CancellationToken::new();
    let beats = {
        let (ctl, seen, a_alive, stop) = (ctl.clone(), seen.clone(), a_alive.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                if a_alive.load(std::sync::atomic::Ordering::SeqCst) {
                    a.heartbeat(&ctl).await;
                } else {
                    a.disconnect();
                }
                b.heartbeat(&ctl).await;
                if let Some(info) = b.replica_info(&ctl).await {
                    seen.lock().note(&info);
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            b
        })
    };

    // 3 → 5: the new nodes list the running members and themselves.
    group.boot(3, &[0, 1, 2]);
    group.boot(4, &[0, 1, 2, 3]);
    for i in [3, 4] {
        let answer = group.add(i).await;
        assert_eq!(answer.code, 0, "adding n{i}: {:?}", answer.remark);
    }
    let members = group.members().await;
    assert_eq!(voters(&members), ["n0", "n1", "n2", "n3", "n4"]);
    assert!(
        members
            .members
            .iter()
            .all(|m| m.lag.is_some_and(|l| l < 64)),
        "{members:?}"
    );

    // In a group of five the successor needs a third vote, which the others grant only once
    // their lease of the old leader has run out: the hand-over takes about that long.
    let started = Instant::now();
    let answer = group
        .admin(TransferLeaderRequestHeader { member_id: "n4" }.to_command())
        .await;
    assert_eq!(answer.code, 0, "{:?}", answer.remark);
    eprintln!("hand-over in a group of five: {:?}", started.elapsed());
    assert_eq!(group.leader(Duration::from_secs(5)).await, Some(4));

    // The master dies: broker 2 takes over, whichever node leads.
    let before = seen.lock().last_epoch;
    a_alive.store(false, std::sync::atomic::Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let failed_over = {
            let s = seen.lock();
            s.last_epoch > before && s.masters.get(&s.last_epoch) == Some(&2)
        };
        if failed_over {
            break;
        }
        assert!(Instant::now() < deadline, "broker 2 never became master");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // 5 → 3, the first two gone (one of them may lead); they are stopped once removed.
    for i in [0, 1] {
        let answer = group.remove(i).await;
        assert_eq!(answer.code, 0, "removing n{i}: {:?}", answer.remark);
        group.kill(i);
    }
    let members = group.members().await;
    assert_eq!(voters(&members), ["n2", "n3", "n4"]);

    // Three members now make the group: two of them still elect and serve, which two of the
    // five would not.
    let leader = group.leader(Duration::from_secs(15)).await.unwrap();
    let other = [2, 3, 4].into_iter().find(|i| *i != leader).unwrap();
    group.kill(other);
    group
        .leader(Duration::from_secs(15))
        .await
        .expect("two of the three remaining members elect a leader");
    stop.cancel();
    let mut b = beats.await.unwrap();
    let info = b.replica_info(&group.all_addrs()).await.unwrap();
    seen.lock().note(&info);
    assert_eq!(info.master_id, Some(2));
    assert!(info.master_epoch > before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_removes_itself_and_the_other_members_elect_a_successor() {
    let _serial = SERIAL.lock().await;
    let group = Group::start(3, 0);
    let leader = group.leader(Duration::from_secs(20)).await.unwrap();
    let answer = group.remove(leader).await;
    let started = Instant::now();
    assert_eq!(answer.code, 0, "{:?}", answer.remark);
    let body = GroupMembers::decode(answer.body.as_deref().unwrap()).unwrap();
    assert_eq!(body.leader_id, None, "the removed leader no longer leads");
    assert!(!voters(&body).contains(&format!("n{leader}")));
    // Asked only of the two that stay: the removed node is out of the group.
    let others: Vec<String> = (0..3)
        .filter(|i| *i != leader)
        .map(|i| group.addrs[&i].clone())
        .collect();
    let successor = support::one_leader(&others, Duration::ZERO, Duration::from_secs(10))
        .await
        .expect("the two others elect a leader");
    let took = started.elapsed();
    eprintln!("leader removed itself; a successor led {took:?} after the change was answered");
    // Without the removed leader asking a successor to stand, the others would wait an
    // election timeout (0.75-1 s) on top of their lease of it (1 s), counted from its last
    // heartbeat, which it sends until it steps down (about 0.3 s after answering).
    assert!(took < Duration::from_millis(2_000), "{took:?}");
    let members = group.members().await;
    assert_eq!(members.members.len(), 2, "{:?}", roles(&members));
    let _ = successor;
    // A write commits in the group of two.
    let mut broker = ControllerBroker::new(CLUSTER, "after", "127.0.0.1:30931");
    assert_eq!(broker.register(&others).await.unwrap().code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_is_replaced_by_a_fresh_one_at_a_new_address() {
    let _serial = SERIAL.lock().await;
    let mut group = Group::start(3, 1);
    group.leader(Duration::from_secs(20)).await.unwrap();
    let mut broker = ControllerBroker::new(CLUSTER, "kept", "127.0.0.1:30941");
    assert_eq!(broker.register(&group.all_addrs()).await.unwrap().code, 0);
    let id = broker.id.unwrap();

    // n2 dies for good; n3 is started on an empty store, listing the survivors.
    let leader = group.leader(Duration::from_secs(10)).await.unwrap();
    let dead = if leader == 2 { 1 } else { 2 };
    group.kill(dead);
    let survivors: Vec<u64> = [0, 1, 2].into_iter().filter(|i| *i != dead).collect();
    group.boot(3, &survivors);
    // It waits to be added: it forms no group of its own and does not lead.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        support::claims(&[group.addrs[&3].clone()]).await,
        Vec::<usize>::new()
    );

    let answer = group.remove(dead).await;
    assert_eq!(answer.code, 0, "{:?}", answer.remark);
    let answer = group.add(3).await;
    assert_eq!(answer.code, 0, "{:?}", answer.remark);
    let members = group.members().await;
    let mut expected: Vec<String> = survivors.iter().map(|i| format!("n{i}")).collect();
    expected.push("n3".into());
    assert_eq!(voters(&members), expected);
    let n3 = members.members.iter().find(|m| m.id == "n3").unwrap();
    assert_eq!(n3.address, group.addrs[&3]);

    // The old leader goes too: the other survivor and n3, which holds the state, carry on.
    group.kill(leader);
    let left: Vec<String> = group.running_addrs();
    support::one_leader(&left, Duration::ZERO, Duration::from_secs(15))
        .await
        .expect("the survivor and the new node elect a leader");
    // The old leader comes back with its old config, which lists the dead node and not n3: it
    // follows the membership its store holds.
    let old_config: Vec<u64> = vec![0, 1, 2];
    group.boot(leader, &old_config);
    let meta = || RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO);
    let peers = ask(&group.addrs[&leader], meta(), Duration::from_secs(3))
        .await
        .and_then(|m| m.ext("peers").map(String::from))
        .unwrap_or_default();
    assert!(
        peers.contains(&format!("n3:{}", group.addrs[&3])),
        "{peers}"
    );
    assert!(!peers.contains(&format!("n{dead}:")), "{peers}");
    let mut again = ControllerBroker::new(CLUSTER, "kept", "127.0.0.1:30941");
    again.id = Some(id);
    let info = again.replica_info(&left).await.expect("the state survived");
    assert_eq!(info.master_id, None);
    let registered = again.register(&left).await.unwrap();
    assert_eq!(registered.code, 0, "{:?}", registered.remark);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_would_lose_the_quorum_is_refused() {
    let _serial = SERIAL.lock().await;
    let mut group = Group::start(3, 0);
    let leader = group.leader(Duration::from_secs(20)).await.unwrap();
    let followers: Vec<u64> = (0..3).filter(|i| *i != leader).collect();
    let (dead, live) = (followers[0], followers[1]);
    group.kill(dead);
    // Removing the live follower would leave the leader and a dead node: one of two.
    let answer = group.remove(live).await;
    assert_eq!(answer.code, response::CONTROLLER_INVALID_REQUEST);
    let remark = answer.remark.unwrap_or_default();
    assert!(remark.contains("lose the quorum"), "{remark}");
    assert_eq!(group.members().await.members.len(), 3);
    // Removing the dead one leaves two of two.
    let answer = group.remove(dead).await;
    assert_eq!(answer.code, 0, "{:?}", answer.remark);
    assert_eq!(group.members().await.members.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_moves_to_the_named_node_under_a_write_load_without_a_failed_request() {
    let _serial = SERIAL.lock().await;
    let group = Group::start(3, 0);
    let leader = group.leader(Duration::from_secs(20)).await.unwrap();
    let target = (leader + 1) % 3;
    let ctl = group.all_addrs();

    // Brokers registering over and over: each 1003 is a replicated write. A request refused
    // with NOT_LEADER, or unanswered, is sent again to the leader then named, as a broker does.
    let mut broker = ControllerBroker::new(CLUSTER, "load", "127.0.0.1:30951");
    assert_eq!(broker.register(&ctl).await.unwrap().code, 0);
    let stop = tokio_util::sync::CancellationToken::new();
    let load = {
        let (ctl, stop) = (ctl.clone(), stop.clone());
        tokio::spawn(async move {
            let mut commits: Vec<Instant> = Vec::new();
            let mut failed = Vec::new();
            while !stop.is_cancelled() {
                let asked = Instant::now();
                loop {
                    match broker.register(&ctl).await {
                        Some(r) if r.code == 0 => {
                            commits.push(Instant::now());
                            break;
                        }
                        other => {
                            if asked.elapsed() > Duration::from_secs(5) {
                                failed.push(other.map(|r| (r.code, r.remark)));
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            }
            (commits, failed)
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let id = format!("n{target}");
    let answer = group
        .admin(TransferLeaderRequestHeader { member_id: &id }.to_command())
        .await;
    assert_eq!(answer.code, 0, "{:?}", answer.remark);
    assert_eq!(
        group.leader(Duration::from_secs(5)).await,
        Some(target),
        "the named node leads"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    let (commits, failed) = load.await.unwrap();
    assert!(failed.is_empty(), "requests failed: {failed:?}");
    let pause = commits
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    eprintln!(
        "{} writes committed; the longest time without a commit across the transfer: {pause:?}",
        commits.len()
    );
    assert!(commits.len() > 20, "the load ran: {}", commits.len());
    assert!(
        pause <= Duration::from_secs(1),
        "writes paused for {pause:?}"
    );
}
