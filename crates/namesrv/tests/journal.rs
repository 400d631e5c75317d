//! The route journal through ROUTE_JOURNAL (1230) against the real server: what survives kill -9
//! (a torn last line included), its bound under a flood of changing registrations, and the
//! answers to malformed questions.

mod support;
use support::MQNAMESRV;

use std::path::Path;
use std::time::Duration;

use namesrv_testkit::*;
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use serde_json::Value;

async fn journal(client: &Client, key: &str, name: &str) -> Value {
    let resp = call(
        client,
        RemotingCommand::request(request::ROUTE_JOURNAL).with_ext(key, name),
    )
    .await;
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    serde_json::from_slice(resp.body.as_deref().unwrap()).unwrap()
}

fn causes(answer: &Value) -> Vec<&str> {
    answer["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["cause"].as_str().unwrap())
        .collect()
}

fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_written_before_a_kill_are_there_after_it_and_a_torn_last_line_is_skipped() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("journal");
    let props = format!("routeJournalPath={}\n", dir.display());
    let mut server = MQNAMESRV.start_in(home.path(), &props);
    let a = Broker::new("C", "broker-a", 0, "127.0.0.1:10911");
    let kept = a.register_on(&server, &["Before", "Also"]).await;
    drop(kept);
    let client = server.client().await;
    eventually("the closed connection journaled", TIMEOUT, || async {
        causes(&journal(&client, "topic", "Before").await) == ["registered", "connection-closed"]
    })
    .await;
    server.kill();

    // A crash in the middle of a write leaves half a line at the end of the last segment.
    let last = segments(&dir).pop().expect("a segment was written");
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(br#"{"seq":999,"at":1,"cause":"expi"#);
    std::fs::write(&last, bytes).unwrap();

    let server = MQNAMESRV.resume_in(home.path());
    let client = server.client().await;
    let answer = journal(&client, "topic", "Before").await;
    assert_eq!(
        causes(&answer),
        ["registered", "connection-closed"],
        "{answer}"
    );
    assert_eq!(answer["journal"]["skipped"], 1, "{answer}");
    assert_eq!(answer["route"], serde_json::json!([]));
    assert!(answer["brokers"]["broker-a"].is_null(), "{answer}");
    // Numbers go on after the restart, and the restart itself is an entry.
    let b = Broker::new("C", "broker-b", 0, "127.0.0.1:10912");
    let _b = b.register_on(&server, &["After", "Also"]).await;
    let also = journal(&client, "topic", "Also").await;
    let entries = also["entries"].as_array().unwrap();
    assert_eq!(
        causes(&also),
        ["registered", "connection-closed", "registered"]
    );
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let started = journal(&client, "brokerName", "broker-b").await;
    assert_eq!(causes(&started), ["registered"]);
    assert_eq!(segments(&dir).len(), 2, "a new segment per start");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_changing_registrations_does_not_grow_the_journal_past_its_bound() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("journal");
    // The smallest bound there is (1 MiB), in segments of 256 KiB.
    let props = format!(
        "routeJournalPath={}\nrouteJournalMaxBytes=1\n",
        dir.display()
    );
    let server = MQNAMESRV.start_in(home.path(), &props);
    let client = server.client().await;
    let a = Broker::new("C", "broker-a", 0, "127.0.0.1:10911");
    // Each registration moves 400 topics to a new permission: about 9 KiB of journal each.
    let topics: Vec<String> = (0..400).map(|i| format!("FloodTopic-{i:04}")).collect();
    for round in 0..600 {
        let perm = if round % 2 == 0 { 6 } else { 4 };
        let listed: Vec<(&str, i32)> = topics.iter().map(|t| (t.as_str(), perm)).collect();
        let resp = a.register(&client, &listed, round + 1).await;
        assert_eq!(resp.code, 0);
    }
    let answer = journal(&client, "topic", "FloodTopic-0001").await;
    let entries = answer["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 50, "the newest of them, bounded");
    assert_eq!(answer["more"], true);
    // The writer trims once a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let on_disk: u64 = segments(&dir)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(
        on_disk <= (1 << 20) + (256 << 10) + (64 << 10),
        "{on_disk} bytes on disk"
    );
    let stats = journal(&client, "brokerName", "broker-a").await["journal"].clone();
    assert_eq!(stats["dropped"], 0, "{stats}");
    let lines = stats["lines"].as_u64().unwrap();
    assert!(lines < 600, "the oldest were deleted: {stats}");
    assert!(stats["bytes"].as_u64().unwrap() <= on_disk, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_questions_get_a_clear_error_and_the_journal_can_be_turned_off() {
    let server = Server::start_with("routeJournalEnable=false\n");
    let client = server.client().await;
    let ask = |cmd: RemotingCommand| {
        let client = client.clone();
        async move { call(&client, cmd).await }
    };
    let bare = RemotingCommand::request(request::ROUTE_JOURNAL);
    let neither = ask(bare.clone()).await;
    assert_eq!(neither.code, response::SYSTEM_ERROR);
    assert!(neither.remark.unwrap().contains("one topic"));
    let both = ask(bare
        .clone()
        .with_ext("topic", "T")
        .with_ext("brokerName", "b"))
    .await;
    assert_eq!(both.code, response::SYSTEM_ERROR);
    let long = ask(bare.clone().with_ext("topic", "x".repeat(5000))).await;
    assert_eq!(long.code, response::SYSTEM_ERROR);
    let limit = ask(bare.clone().with_ext("topic", "T").with_ext("limit", "ten")).await;
    assert_eq!(limit.code, response::SYSTEM_ERROR);
    assert!(limit.remark.unwrap().contains("limit"));

    let a = Broker::new("C", "broker-a", 0, "127.0.0.1:10911");
    let _a = a.register_on(&server, &["T", "U"]).await;
    let answer = journal(&client, "topic", "T").await;
    assert_eq!(answer["journal"]["enabled"], false);
    assert_eq!(causes(&answer), Vec::<&str>::new());
    assert_eq!(answer["route"][0]["broker"], "broker-a", "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_registration_is_journaled_with_why_and_floods_of_them_are_capped() {
    let server = Server::start();
    let client = server.client().await;
    let a = Broker::new("C", "broker-a", 0, "127.0.0.1:10911");
    let bad_crc = a
        .register_request(&[("T", 6), ("U", 6)], dv(1, 0))
        .with_ext("bodyCrc32", 12345);
    assert_ne!(call(&client, bad_crc.clone()).await.code, response::SUCCESS);
    let answer = journal(&client, "brokerName", "broker-a").await;
    assert_eq!(causes(&answer), ["refused"], "{answer}");
    assert!(answer["entries"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("crc32"));
    // A topic question carries the latest refusals: they name no topic.
    let topic = journal(&client, "topic", "T").await;
    assert_eq!(topic["refusals"][0]["broker"], "broker-a", "{topic}");
    let began = std::time::Instant::now();
    for _ in 0..200 {
        call(&client, bad_crc.clone()).await;
    }
    let seconds = began.elapsed().as_secs() + 2;
    let all = call(
        &client,
        RemotingCommand::request(request::ROUTE_JOURNAL)
            .with_ext("brokerName", "broker-a")
            .with_ext("limit", 500),
    )
    .await;
    let answer: Value = serde_json::from_slice(all.body.as_deref().unwrap()).unwrap();
    let kept = answer["entries"].as_array().unwrap().len() as u64;
    assert!(
        kept <= 20 * seconds,
        "{kept} refusals journaled in {seconds} s"
    );
    assert!(answer["journal"]["refusalsSuppressed"].as_u64().unwrap() > 0);
}
