//! What an unfriendly client or a compromised broker can do from an open port, and what the
//! server must do instead: stay within its memory and descriptors, drop half-open and silent
//! connections quickly, keep serving everyone else, and never keep a broker routable that can
//! no longer expire.

mod support;
use support::{MQNAMESRV, MQNAMESRV_PATH};

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use namesrv_testkit::*;
use rocketmq_wire::body::ClusterInfo;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Connects from a chosen loopback address (all of 127.0.0.0/8 is this machine).
async fn connect_from(source: [u8; 4], server: &str) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(server.parse().unwrap()).await
}

/// Whether the server closes `stream` within `limit` (reads EOF or a reset).
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

async fn cluster_info(server: &Server) -> ClusterInfo {
    let client = server.client().await;
    let resp = call(
        &client,
        RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
    )
    .await;
    ClusterInfo::decode(resp.body.as_deref().unwrap()).unwrap()
}

/// Route lookups from a fresh client; returns the 99th percentile latency.
async fn route_p99(server: &Server, topic: &str, lookups: usize) -> Duration {
    let client = server.client().await;
    let mut took = Vec::with_capacity(lookups);
    for _ in 0..lookups {
        let started = Instant::now();
        let resp = call(&client, route_request(topic, 479)).await;
        took.push(started.elapsed());
        assert_eq!(resp.code, response::SUCCESS);
    }
    took.sort();
    took[lookups * 99 / 100]
}

#[tokio::test]
async fn clients_that_send_part_of_a_proxy_header_and_close_release_their_descriptors() {
    let server = MQNAMESRV.start();
    let baseline = open_descriptors(server.pid());
    for batch in 0..5 {
        let conns =
            futures::future::join_all((0..200).map(|_| TcpStream::connect(server.addr.as_str())))
                .await;
        for conn in conns {
            let mut conn = conn.unwrap();
            conn.write_all(if batch % 2 == 0 { b"P" } else { b"\r\n\r" })
                .await
                .unwrap();
        }
    }
    // Every client has closed: the server must see each end at once, not at the idle timeout.
    eventually("descriptors released", Duration::from_secs(5), || async {
        open_descriptors(server.pid()) <= baseline + 5
    })
    .await;
    let client = server.client().await;
    let resp = call(&client, route_request("Nothing", 479)).await;
    assert_eq!(resp.code, response::TOPIC_NOT_EXIST);
}

#[tokio::test]
async fn a_client_that_stalls_inside_a_proxy_header_is_closed_after_a_few_seconds() {
    let server = MQNAMESRV.start();
    let mut stalled = TcpStream::connect(server.addr.as_str()).await.unwrap();
    stalled.write_all(b"PROXY TCP4 10.0.0.1").await.unwrap();
    let started = Instant::now();
    assert!(
        closed_within(&mut stalled, Duration::from_secs(8)).await,
        "still open after 8 s"
    );
    assert!(started.elapsed() >= Duration::from_secs(2));

    // A complete header is still accepted and the frame after it served.
    let mut proxied = TcpStream::connect(server.addr.as_str()).await.unwrap();
    let mut bytes = b"PROXY TCP4 10.0.0.1 10.0.0.2 5000 9876\r\n".to_vec();
    bytes.extend(frame(&route_request("Nothing", 479)));
    proxied.write_all(&bytes).await.unwrap();
    let mut len = [0u8; 4];
    tokio::time::timeout(TIMEOUT, proxied.read_exact(&mut len))
        .await
        .expect("an answer after a complete PROXY header")
        .unwrap();
}

#[tokio::test]
async fn a_silent_connection_is_closed_at_the_first_frame_deadline_but_a_speaking_one_stays() {
    let server = MQNAMESRV.start_with("serverFirstFrameTimeoutSeconds=1");
    let mut silent = TcpStream::connect(server.addr.as_str()).await.unwrap();
    let spoke = server.client().await;
    call(&spoke, route_request("Nothing", 479)).await;
    assert!(
        closed_within(&mut silent, Duration::from_secs(4)).await,
        "a silent connection outlived the first-frame deadline"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let resp = call(&spoke, route_request("Nothing", 479)).await;
    assert_eq!(
        resp.code,
        response::TOPIC_NOT_EXIST,
        "the idle limit applies once it spoke"
    );
}

#[tokio::test]
async fn a_flood_from_one_address_leaves_other_addresses_served() {
    let server = MQNAMESRV.start_with("serverMaxConnectionsPerAddress=100");
    let broker = Broker::new("FloodCluster", "steady", 0, "10.1.1.1:10911");
    let broker_conn = server.client().await;
    let resp = broker.register(&broker_conn, &BASE_TOPICS, 1).await;
    assert_eq!(resp.code, response::SUCCESS);

    let attempts =
        futures::future::join_all((0..400).map(|_| connect_from([127, 0, 0, 2], &server.addr)))
            .await;
    let mut flood: Vec<TcpStream> = attempts.into_iter().filter_map(Result::ok).collect();
    let mut closed = 0;
    for conn in &mut flood {
        if closed_within(conn, Duration::from_millis(20)).await {
            closed += 1;
        }
    }
    assert!(
        flood.len() - closed <= 100,
        "{} of {} flood connections stayed open",
        flood.len() - closed,
        flood.len()
    );

    let p99 = route_p99(&server, "TopicTest", 500).await;
    println!("route p99 during a 400-connection flood from one address: {p99:?}");
    let resp = broker.register(&broker_conn, &BASE_TOPICS, 2).await;
    assert_eq!(resp.code, response::SUCCESS, "the broker keeps registering");
}

#[tokio::test]
async fn broker_hosts_keep_a_reserve_when_floods_fill_the_server() {
    let server = MQNAMESRV.start_with("serverMaxConnections=60\nserverMaxConnectionsPerAddress=20");
    let broker = Broker::new("ReserveCluster", "kept", 0, "10.1.1.2:10911");
    let broker_conn = rocketmq_wire::client::Client::from_stream(
        connect_from([127, 0, 0, 5], &server.addr).await.unwrap(),
    );
    let resp = broker.register(&broker_conn, &BASE_TOPICS, 1).await;
    assert_eq!(resp.code, response::SUCCESS);

    // Four flooding hosts take everything open to all (54 of 60 with the broker's connection).
    let mut flood = Vec::new();
    for host in 10..14u8 {
        for _ in 0..20 {
            if let Ok(mut conn) = connect_from([127, 0, 0, host], &server.addr).await {
                if !closed_within(&mut conn, Duration::from_millis(20)).await {
                    flood.push(conn);
                }
            }
        }
    }
    assert_eq!(flood.len(), 53, "flood connections admitted");
    let mut stranger = connect_from([127, 0, 0, 30], &server.addr).await.unwrap();
    assert!(
        closed_within(&mut stranger, Duration::from_secs(1)).await,
        "a new host is refused when only the reserve is left"
    );

    // The broker's host can still open connections and register on them.
    let again = rocketmq_wire::client::Client::from_stream(
        connect_from([127, 0, 0, 5], &server.addr).await.unwrap(),
    );
    let resp = broker.register(&again, &BASE_TOPICS, 2).await;
    assert_eq!(resp.code, response::SUCCESS);
    drop(flood);
}

#[tokio::test]
async fn the_soft_open_files_limit_is_raised_to_the_hard_limit() {
    let Some(prlimit) = needs(on_path(&["prlimit"]), "prlimit (util-linux)") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("namesrv.conf");
    std::fs::write(
        &config,
        "listenPort=0\nbindAddress=127.0.0.1\nhttpEnable=false\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(&prlimit)
        .arg("--nofile=256:2048")
        .arg(MQNAMESRV_PATH)
        .arg("-c")
        .arg(&config)
        .env("HOME", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prlimit (util-linux) runs the server with lowered limits");
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    assert!(lines.any(|l| l.unwrap().contains("boot success")));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[3..5], ["2048", "2048"][..], "{line}");
}

/// Sends `bytes` on a new connection and reads one answer, or sees the connection closed.
async fn send_hostile(addr: String, bytes: Vec<u8>) -> Option<i32> {
    let mut stream = TcpStream::connect(addr.as_str()).await.unwrap();
    if stream.write_all(&bytes).await.is_err() {
        return None;
    }
    drop(bytes);
    let mut len = [0u8; 4];
    match tokio::time::timeout(Duration::from_secs(60), stream.read_exact(&mut len)).await {
        Ok(Ok(_)) => {
            let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
            stream.read_exact(&mut rest).await.ok()?;
            let cmd = rocketmq_wire::frame::decode_payload(bytes::Bytes::from(rest)).ok()?;
            Some(cmd.code)
        }
        _ => None,
    }
}

/// Just under the default frame cap of 16 MiB.
const HOSTILE_LEN: usize = 16 * 1024 * 1024 - 1024;

/// JSON text of about `len` bytes that no typed reader takes: numbers where strings belong.
fn numbers_object(prefix: &str, len: usize) -> Vec<u8> {
    let mut json = String::with_capacity(len + 64);
    json.push_str(prefix);
    let mut i = 0u64;
    while json.len() < len {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!("\"k{i}\":{i}"));
        i += 1;
    }
    json.push('}');
    json.into_bytes()
}

#[tokio::test]
async fn eight_connections_of_sixteen_mib_hostile_frames_keep_memory_bounded() {
    let server = MQNAMESRV.start();
    let broker = Broker::new("MemCluster", "steady", 0, "10.1.1.3:10911");
    let client = server.client().await;
    broker.register(&client, &BASE_TOPICS, 1).await;
    let before = server.memory_kib("VmRSS");

    let header_numbers = numbers_object(r#"{"code":105,"opaque":1,"extFields":{"#, HOSTILE_LEN);
    let header_numbers = frame_with_header(0, &header_numbers, b"");
    let qdv_body = numbers_object(r#"{"counter":"1","#, HOSTILE_LEN - 200);
    let qdv = frame(
        &RemotingCommand::request(request::QUERY_DATA_VERSION)
            .with_ext("clusterName", "MemCluster")
            .with_ext("brokerAddr", "10.1.1.3:10911")
            .with_ext("brokerName", "steady")
            .with_ext("brokerId", 0)
            .with_body(qdv_body),
    );
    let register_body = numbers_object(
        r#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"#,
        HOSTILE_LEN - 1000,
    );
    let register = frame(
        &Broker::new("MemCluster", "hostile", 0, "10.6.6.6:10911")
            .register_request(&BASE_TOPICS, dv(1, 0))
            .with_body(register_body),
    );
    let mut mapping = String::from(
        r#"{"topicConfigSerializeWrapper":{"topicConfigTable":{},"topicQueueMappingInfoMap":{"t":{"#,
    );
    let mut i = 0;
    while mapping.len() < HOSTILE_LEN - 1000 {
        mapping.push_str(&format!("\"x{i}\":[{i}],"));
        i += 1;
    }
    mapping.push_str("\"topic\":\"t\"}}}}");
    let mapping = frame(
        &Broker::new("MemCluster", "mapped", 0, "10.6.6.7:10911")
            .register_request(&BASE_TOPICS, dv(1, 0))
            .with_body(mapping.into_bytes()),
    );

    let frames = [
        header_numbers.clone(),
        header_numbers,
        qdv.clone(),
        qdv,
        register.clone(),
        register,
        mapping.clone(),
        mapping,
    ];
    let started = Instant::now();
    let attack = tokio::spawn(futures::future::join_all(
        frames
            .into_iter()
            .map(|bytes| send_hostile(server.addr.clone(), bytes)),
    ));
    let p99 = route_p99(&server, "TopicTest", 300).await;
    let outcomes = attack.await.unwrap();
    let peak = server.memory_kib("VmHWM");
    println!(
        "8 hostile 16 MiB frames: {outcomes:?} in {:?}, route p99 meanwhile {p99:?}, peak {} MiB over {} MiB before",
        started.elapsed(),
        peak / 1024,
        before / 1024
    );
    assert!(
        outcomes[2..]
            .iter()
            .all(|o| *o == Some(response::SYSTEM_ERROR)),
        "bodies too large to read leniently are refused: {outcomes:?}"
    );
    assert!(
        peak.saturating_sub(before) <= 150 * 1024,
        "peak {peak} KiB, {before} KiB before"
    );
    let resp = call(&client, route_request("TopicTest", 479)).await;
    assert_eq!(resp.code, response::SUCCESS);
}

#[tokio::test]
async fn refused_registrations_leave_no_groups_behind() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    for i in 0..300 {
        let name: &'static str = Box::leak(format!("refused-{i}").into_boxed_str());
        let broker = Broker::new("GhostCluster", name, 0, "10.2.2.2:10911");
        let resp = broker.register(&client, &[("Only", 6)], 1).await;
        assert_eq!(resp.code, response::SYSTEM_ERROR);
    }
    let info = cluster_info(&server).await;
    assert!(
        info.broker_addr_table.is_empty(),
        "{:?}",
        info.broker_addr_table.keys()
    );
    assert!(info.cluster_addr_table.is_empty());
}

#[tokio::test]
async fn an_address_under_two_broker_names_leaves_both_when_its_connection_closes() {
    let server = MQNAMESRV.start();
    let conn = server.client().await;
    let old = Broker::new("RenameCluster", "before-rename", 0, "10.3.3.3:10911");
    let new = Broker::new("RenameCluster", "after-rename", 0, "10.3.3.3:10911");
    old.register(&conn, &[("OldTopic", 6), ("Shared", 6)], 1)
        .await;
    new.register(&conn, &[("NewTopic", 6), ("Shared", 6)], 1)
        .await;
    drop(conn);
    let reader = server.client().await;
    eventually("both groups gone", Duration::from_secs(5), || async {
        cluster_info(&server).await.broker_addr_table.is_empty()
    })
    .await;
    for topic in ["OldTopic", "NewTopic", "Shared"] {
        let resp = call(&reader, route_request(topic, 479)).await;
        assert_eq!(
            resp.code,
            response::TOPIC_NOT_EXIST,
            "{topic} still routable"
        );
    }
}
