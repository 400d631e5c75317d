//! Crash safety of the KV store: kill -9 at random moments while acknowledged writes go on,
//! and disk errors that must be answered as errors instead of being lost silently.

mod support;
use support::MQNAMESRV;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use namesrv_testkit::*;
use rocketmq_wire::body::KvTable;
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;

const NAMESPACE: &str = "crash";

/// xorshift64*: random enough for kill timing, and the seed is printed to replay a failure.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn put(key: &str, value: &str) -> RemotingCommand {
    RemotingCommand::request(request::PUT_KV_CONFIG)
        .with_ext("namespace", NAMESPACE)
        .with_ext("key", key)
        .with_ext("value", value)
}

async fn namespace(client: &Client) -> BTreeMap<String, String> {
    let resp = call(
        client,
        RemotingCommand::request(request::GET_KVLIST_BY_NAMESPACE).with_ext("namespace", NAMESPACE),
    )
    .await;
    match resp.code {
        response::QUERY_NOT_FOUND => BTreeMap::new(),
        response::SUCCESS => {
            KvTable::decode(resp.body.as_deref().unwrap())
                .unwrap()
                .table
        }
        code => panic!("GET_KVLIST_BY_NAMESPACE answered {code}"),
    }
}

/// Writes one key after another, each waiting for its acknowledgement, until the connection
/// dies; returns what was acknowledged and the write that was in flight.
async fn write_until_killed(
    client: Client,
    iteration: usize,
    filler: usize,
) -> (Vec<(String, String)>, Option<(String, String)>) {
    let mut acked = Vec::new();
    for n in 0.. {
        let key = format!("k{iteration}-{n}");
        let value = format!("v{iteration}-{n}-{}", "x".repeat((n * 37 + filler) % 200));
        match call_result(&client, put(&key, &value)).await {
            Ok(resp) => {
                assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
                acked.push((key, value));
            }
            Err(_) => return (acked, Some((key, value))),
        }
    }
    unreachable!()
}

#[tokio::test]
async fn acknowledged_kv_writes_survive_kill_9() {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let kv_file = dir.path().join("namesrv/kvConfig.json");
    let mut durable: BTreeMap<String, String> = BTreeMap::new();
    let mut in_flight: Option<(String, String)> = None;
    let mut total_acked = 0;
    for iteration in 0..100 {
        let mut server = MQNAMESRV.start_in(dir.path(), "");
        let client = server.client().await;
        let stored = namespace(&client).await;
        // The write cut short by the kill may have landed or not; if it did, it is durable now.
        if let Some((key, value)) = in_flight.take() {
            if stored.get(&key) == Some(&value) {
                durable.insert(key, value);
            }
        }
        assert_eq!(stored, durable, "iteration {iteration} (seed {seed})");
        let file = namesrv::kv::KvStore::open(kv_file.clone())
            .unwrap_or_else(|e| panic!("iteration {iteration}: KV file unreadable: {e}"));
        assert_eq!(file.namespace(NAMESPACE).unwrap_or_default(), durable);

        let writer = tokio::spawn(write_until_killed(
            client,
            iteration,
            rng.below(200) as usize,
        ));
        tokio::time::sleep(Duration::from_millis(20 + rng.below(100))).await;
        server.kill();
        let (acked, cut) = tokio::time::timeout(TIMEOUT * 2, writer)
            .await
            .expect("the writer noticed the kill")
            .unwrap();
        total_acked += acked.len();
        durable.extend(acked);
        in_flight = cut;
    }
    println!("{total_acked} acknowledged writes over 100 kills");
    assert!(total_acked >= 100, "the kills left too few writes to test");
}

/// Starts in `home` with `kvConfigPath` pointing at `kv_path` (which cannot be written) and
/// checks that writes are refused with an error naming the file, and that nothing is applied.
async fn kv_writes_fail_loudly(home: &Path, kv_path: &Path, reason: &str) {
    let server = MQNAMESRV.start_in(home, &format!("kvConfigPath={}", kv_path.display()));
    let client = server.client().await;
    let resp = call(&client, put("k", "v")).await;
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    let remark = resp.remark.unwrap_or_default();
    assert!(
        remark.starts_with(&format!("cannot write KV file {}", kv_path.display()))
            && remark.contains(reason),
        "remark: {remark}"
    );
    let get = RemotingCommand::request(request::GET_KV_CONFIG)
        .with_ext("namespace", NAMESPACE)
        .with_ext("key", "k");
    assert_eq!(call(&client, get).await.code, response::QUERY_NOT_FOUND);
    let delete = RemotingCommand::request(request::DELETE_KV_CONFIG)
        .with_ext("namespace", NAMESPACE)
        .with_ext("key", "k");
    assert_eq!(call(&client, delete).await.code, response::SYSTEM_ERROR);
    let info = call(
        &client,
        RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
    )
    .await;
    assert_eq!(info.code, response::SUCCESS, "server stopped serving");
}

#[tokio::test]
async fn kv_path_under_a_regular_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "not a directory").unwrap();
    kv_writes_fail_loudly(dir.path(), &blocker.join("kv.json"), "os error").await;
}

/// /proc refuses new directories even to root, as a read-only filesystem would.
#[tokio::test]
async fn kv_path_on_an_unwritable_filesystem_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    kv_writes_fail_loudly(
        dir.path(),
        Path::new("/proc/namesrv-test/kv.json"),
        "os error",
    )
    .await;
}

/// A config update that cannot be persisted is refused and not applied.
#[tokio::test]
async fn unpersistable_config_update_is_an_error() {
    let server = MQNAMESRV.start_with("");
    std::fs::remove_file(&server.config).unwrap();
    std::fs::create_dir(&server.config).unwrap();
    let client = server.client().await;
    let update = RemotingCommand::request(request::UPDATE_NAMESRV_CONFIG)
        .with_body(&b"orderMessageEnable=true\n"[..]);
    let resp = call(&client, update).await;
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    let remark = resp.remark.unwrap_or_default();
    assert!(
        remark.starts_with(&format!(
            "cannot persist config to {}",
            server.config.display()
        )),
        "remark: {remark}"
    );
    let listing = body_text(
        &call(
            &client,
            RemotingCommand::request(request::GET_NAMESRV_CONFIG),
        )
        .await,
    );
    assert!(
        listing.contains("\norderMessageEnable=false\n"),
        "{listing}"
    );
}
