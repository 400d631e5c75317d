//! A member whose store is lost. Two of three members come back with empty stores while the
//! third, the only one that still holds the group's state, is down: they must not form a new
//! group of their own (which would hand out broker ids again and restart master epochs), and
//! once the third is back they must take its state, not the other way round. A single wiped
//! member comes back as a follower that is refilled and then counts like any other. A wiped
//! member that held entries a stale member lacks does not help the stale one lead while the
//! member that also holds them is down.

mod support;
use support::MQCONTROLLER;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use namesrv_testkit::{free_port, ControllerProps};
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use support::ask;

/// How long a request may take to connect, and to be answered.
const LIMIT: Duration = Duration::from_secs(6);

struct Group {
    dir: PathBuf,
    ports: Vec<u16>,
    nodes: Vec<Option<Child>>,
    /// Every line each node printed, across its restarts.
    lines: Vec<Arc<Mutex<Vec<String>>>>,
}

impl Group {
    fn new(dir: &Path) -> Group {
        Group {
            dir: dir.to_path_buf(),
            ports: (0..3).map(|_| free_port()).collect(),
            nodes: (0..3).map(|_| None).collect(),
            lines: (0..3).map(|_| Arc::default()).collect(),
        }
    }

    fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.ports[i])
    }

    fn store(&self, i: usize) -> PathBuf {
        self.dir.join(format!("store-{i}"))
    }

    fn start(&mut self, i: usize) {
        let props =
            ControllerProps::new((0..3).map(|j| self.addr(j)), i, self.store(i)).group("wiped");
        let conf = self.dir.join(format!("controller-{i}.conf"));
        std::fs::write(&conf, props.to_string()).unwrap();
        let mut child = Command::new(MQCONTROLLER)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let seen = self.lines[i].clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                seen.lock().unwrap().push(line);
            }
        });
        self.nodes[i] = Some(child);
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn said(&self, i: usize, what: &str) -> bool {
        self.lines[i]
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(what))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for i in 0..3 {
            self.kill(i);
        }
    }
}

/// The node among `which` that says it leads.
async fn leader(group: &Group, which: &[usize]) -> Option<usize> {
    for &i in which {
        let meta = RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO);
        if ask(&group.addr(i), meta, LIMIT)
            .await
            .is_some_and(|a| a.ext("isLeader") == Some("true"))
        {
            return Some(i);
        }
    }
    None
}

async fn leader_within(group: &Group, which: &[usize], limit: Duration) -> Option<usize> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(l) = leader(group, which).await {
            return Some(l);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// Asserts for `span` that no node among `which` says it leads.
async fn no_leader_for(group: &Group, which: &[usize], span: Duration, why: &str) {
    let waited = Instant::now();
    while waited.elapsed() < span {
        assert_eq!(leader(group, which).await, None, "{why}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until every node in `which` has said it caught up with the group.
async fn refilled(group: &Group, which: &[usize]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !which.iter().all(|&i| group.said(i, "has caught up")) {
        assert!(Instant::now() < deadline, "the wiped members are refilled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The id the leader would offer the next broker of group `w`.
async fn next_id(group: &Group, leader: usize) -> Option<i64> {
    let next = RemotingCommand::request(request::CONTROLLER_GET_NEXT_BROKER_ID)
        .with_ext("clusterName", "c")
        .with_ext("brokerName", "w");
    let answer = ask(&group.addr(leader), next, LIMIT).await?;
    (answer.code == response::SUCCESS).then(|| answer.ext("nextBrokerId")?.parse().ok())?
}

/// Takes `ids` for group `w` through the leader.
async fn take_ids(group: &Group, leader: usize, ids: std::ops::RangeInclusive<i64>) {
    for id in ids {
        let apply = RemotingCommand::request(request::CONTROLLER_APPLY_BROKER_ID)
            .with_ext("clusterName", "c")
            .with_ext("brokerName", "w")
            .with_ext("appliedBrokerId", id)
            .with_ext("registerCheckCode", format!("10.0.0.{id}:10911;1"));
        let answer = ask(&group.addr(leader), apply, LIMIT)
            .await
            .expect("an answer");
        assert_eq!(answer.code, response::SUCCESS, "{:?}", answer.remark);
    }
}

#[tokio::test]
async fn two_wiped_members_wait_for_the_one_that_kept_the_state_and_take_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut group = Group::new(dir.path());
    for i in 0..3 {
        group.start(i);
    }
    let first = leader_within(&group, &[0, 1, 2], Duration::from_secs(20))
        .await
        .expect("the group elects a leader");
    take_ids(&group, first, 1..=3).await;
    assert_eq!(next_id(&group, first).await, Some(4));

    // Every node stops; two lose their stores; only those two come back.
    for i in 0..3 {
        group.kill(i);
    }
    let kept = first;
    let wiped: Vec<usize> = (0..3).filter(|i| *i != kept).collect();
    for &i in &wiped {
        std::fs::remove_dir_all(group.store(i)).unwrap();
        group.start(i);
    }
    // They form nothing: no leader, no ids handed out again.
    no_leader_for(
        &group,
        &wiped,
        Duration::from_secs(5),
        "two empty stores formed a group",
    )
    .await;
    for &i in &wiped {
        let next = RemotingCommand::request(request::CONTROLLER_GET_NEXT_BROKER_ID)
            .with_ext("clusterName", "c")
            .with_ext("brokerName", "w");
        let answer = ask(&group.addr(i), next, LIMIT).await.expect("an answer");
        assert_ne!(answer.code, response::SUCCESS, "n{i} hands out ids");
    }

    // The member that kept the state comes back: the group is its group.
    group.start(kept);
    let leader = leader_within(&group, &[0, 1, 2], Duration::from_secs(20))
        .await
        .expect("the group elects a leader again");
    assert_eq!(
        next_id(&group, leader).await,
        Some(4),
        "ids were not handed out again"
    );
    refilled(&group, &wiped).await;

    // Refilled, they count: with the keeper gone, the two elect a leader that has the state.
    group.kill(kept);
    let leader = leader_within(&group, &wiped, Duration::from_secs(20))
        .await
        .expect("the refilled members elect a leader");
    assert_eq!(next_id(&group, leader).await, Some(4));
}

#[tokio::test]
async fn a_wiped_member_does_not_elect_a_stale_one_while_the_member_holding_the_newer_entries_is_down(
) {
    let dir = tempfile::tempdir().unwrap();
    let mut group = Group::new(dir.path());
    for i in 0..3 {
        group.start(i);
    }
    let holder = leader_within(&group, &[0, 1, 2], Duration::from_secs(20))
        .await
        .expect("the group elects a leader");
    take_ids(&group, holder, 1..=3).await;
    // One follower stops and misses ids 4-6, committed on the leader and the other follower.
    let followers: Vec<usize> = (0..3).filter(|i| *i != holder).collect();
    let (stale, wiped) = (followers[0], followers[1]);
    group.kill(stale);
    take_ids(&group, holder, 4..=6).await;
    assert_eq!(next_id(&group, holder).await, Some(7));

    // The two that hold ids 4-6 stop; one of them loses its store. The stale member and the
    // wiped one come back: together they are a majority, but electing the stale one would hand
    // ids 4-6 out again.
    group.kill(holder);
    group.kill(wiped);
    std::fs::remove_dir_all(group.store(wiped)).unwrap();
    group.start(stale);
    group.start(wiped);
    no_leader_for(
        &group,
        &[stale, wiped],
        Duration::from_secs(8),
        "the wiped member helped the stale one lead",
    )
    .await;

    // The holder is back: the group leads with every committed entry.
    group.start(holder);
    let leader = leader_within(&group, &[0, 1, 2], Duration::from_secs(20))
        .await
        .expect("the group elects a leader again");
    assert_eq!(
        next_id(&group, leader).await,
        Some(7),
        "committed ids were handed out again"
    );
    refilled(&group, &[wiped]).await;
}
