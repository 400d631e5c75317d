//! A real network partition: three `mqcontroller` nodes, each in a network namespace of its own
//! joined by a bridge (made by the test itself, on a private subnet that exists only inside it),
//! and the leader cut off from the other two nodes by blackhole routes while the test, standing
//! where brokers stand, still reaches every node. The cut-off leader must stop calling itself
//! leader before the others elect a new one (never two leaders at once), answer requests that
//! need the group with an error within the deadline instead of hanging, and after healing the
//! group has one leader again. Raft requests forged from an address that is not a member's are
//! refused.
//!
//! Needs root and iproute2 (`ip netns`); without them the test says why and skips, unless
//! NAMESRV_TEST_REQUIRE_ALL is set (the test command sets it).

mod support;
use support::MQCONTROLLER;

use std::process::Child;
use std::time::{Duration, Instant};

use namesrv_testkit::Net;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use support::{ask, claims, one_leader};

const NODES: usize = 3;
const PORT: u16 = 19_876;
/// Longer than the election timeout (at most 2 s) and the leader lease (1 s) together, with
/// room for a loaded machine.
const STEP_DOWN_LIMIT: Duration = Duration::from_millis(3_500);

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_node(net: &Net, i: usize, dir: &std::path::Path) -> Node {
    Node(support::boot_in_namespace(
        net,
        MQCONTROLLER,
        "partition",
        i,
        NODES,
        PORT,
        dir,
        "",
    ))
}

fn addrs(net: &Net) -> Vec<String> {
    (0..NODES)
        .map(|i| format!("{}:{PORT}", net.node_ip(i)))
        .collect()
}

#[tokio::test]
async fn a_leader_cut_off_from_the_other_nodes_stops_leading_before_a_new_one_is_elected() {
    let Some(mut net) = Net::new(0, NODES, 0) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let _nodes: Vec<Node> = (0..NODES)
        .map(|i| start_node(&net, i, dir.path()))
        .collect();
    let old = one_leader(
        &addrs(&net),
        Duration::from_secs(2),
        Duration::from_secs(30),
    )
    .await
    .expect("the group elects a leader");

    net.isolate(old, true);
    let cut = Instant::now();
    // A request that needs the group, sent to the cut-off leader: answered (as not leader, or
    // as failed) within Java's 5 s bound, never left hanging.
    let next_id = RemotingCommand::request(request::CONTROLLER_GET_NEXT_BROKER_ID)
        .with_ext("clusterName", "c")
        .with_ext("brokerName", "b");
    let asked = Instant::now();
    let answer = ask(
        &format!("{}:{PORT}", net.node_ip(old)),
        next_id,
        Duration::from_secs(7),
    )
    .await
    .expect("the cut-off leader answers");
    assert_ne!(
        answer.code,
        response::SUCCESS,
        "it cannot know it still leads"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(6),
        "{:?}",
        asked.elapsed()
    );

    let mut new = None;
    let mut samples = Vec::new();
    while cut.elapsed() < Duration::from_secs(10) {
        let now = claims(&addrs(&net)).await;
        samples.push((cut.elapsed(), now.clone()));
        assert!(now.len() <= 1, "two nodes claim leadership: {samples:?}");
        if cut.elapsed() > STEP_DOWN_LIMIT {
            assert!(
                !now.contains(&old),
                "the cut-off leader still claims: {samples:?}"
            );
        }
        if let [leader] = now[..] {
            if leader != old {
                new.get_or_insert(leader);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let new = new.unwrap_or_else(|| panic!("the majority elects a leader: {samples:?}"));
    assert_ne!(new, old);

    // The majority's leader serves requests that need the group.
    let next_id = RemotingCommand::request(request::CONTROLLER_GET_NEXT_BROKER_ID)
        .with_ext("clusterName", "c")
        .with_ext("brokerName", "b");
    let answer = ask(
        &format!("{}:{PORT}", net.node_ip(new)),
        next_id,
        Duration::from_secs(5),
    )
    .await
    .expect("the new leader answers");
    assert_eq!(answer.code, response::SUCCESS, "{:?}", answer.remark);

    net.isolate(old, false);
    let healed = Instant::now();
    let leader = one_leader(&addrs(&net), Duration::ZERO, Duration::from_secs(3)).await;
    assert!(leader.is_some(), "one leader within 3 s of healing");
    let healed_in = healed.elapsed();
    // And it stays one: the healed node rejoins without a second claim.
    for _ in 0..10 {
        assert!(claims(&addrs(&net)).await.len() <= 1);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let leader = one_leader(
        &addrs(&net),
        Duration::from_secs(1),
        Duration::from_secs(10),
    )
    .await;
    // A vote with a far higher term, forged from where brokers stand (not a member's address),
    // is refused and deposes no one.
    let leader = leader.unwrap();
    let forged = format!(
        "{{\"vote\":{{\"leader_id\":{{\"term\":1000000,\"node_id\":{}}},\"committed\":false}},\
         \"last_log_id\":null}}",
        (leader + 1) % NODES
    );
    let vote = RemotingCommand::request(1191).with_body(forged.into_bytes());
    let answer = ask(
        &format!("{}:{PORT}", net.node_ip(leader)),
        vote,
        Duration::from_secs(3),
    )
    .await
    .expect("an answer");
    assert_eq!(answer.code, response::NO_PERMISSION, "{:?}", answer.remark);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        claims(&addrs(&net)).await,
        vec![leader],
        "the leader still leads"
    );

    let stepped_down = samples
        .iter()
        .find(|(_, claims)| !claims.contains(&old))
        .map(|(at, _)| *at);
    let elected = samples
        .iter()
        .find(|(_, claims)| claims.contains(&new))
        .map(|(at, _)| *at);
    eprintln!(
        "cut-off leader n{old} stopped claiming after {stepped_down:?}, n{new} claimed from \
         {elected:?}; one leader again {healed_in:?} after healing"
    );
}
