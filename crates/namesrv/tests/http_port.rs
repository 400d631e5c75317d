//! The HTTP port under hostile or heavy use: connections that never finish, more connections
//! than the process has descriptors for, a status page over a large registry, label values
//! that try to forge metric series, arbitrary request codes during a graceful shutdown, and
//! Host headers that name another server.

mod support;
use support::MQNAMESRV;

use std::process::Command;
use std::time::{Duration, Instant};

use namesrv_testkit::*;
use rocketmq_wire::codes::response;
use rocketmq_wire::RemotingCommand;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long until the server closes `stream`, reading whatever it sends; `None` if it is
/// still open after `limit`.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_at_the_header_timeout() {
    let server = MQNAMESRV.start_with("httpHeaderReadTimeoutSeconds=1\nhttpIdleTimeoutSeconds=60");
    let mut silent = TcpStream::connect(server.http_addr()).await.unwrap();
    let took = closed_within(&mut silent, Duration::from_secs(4)).await;
    assert!(
        took.is_some_and(|t| t >= Duration::from_millis(800)),
        "a silent connection is closed after the 1 s header timeout, not before: {took:?}"
    );
}

#[tokio::test]
async fn a_request_header_sent_byte_by_byte_is_cut_off_at_the_header_timeout() {
    let server = MQNAMESRV.start_with("httpHeaderReadTimeoutSeconds=1\nhttpIdleTimeoutSeconds=60");
    let mut slow = TcpStream::connect(server.http_addr()).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    // Traffic keeps arriving, so only the header deadline can end this.
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(5) {
        if slow.write_all(b"X").await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 512];
        match tokio::time::timeout(Duration::from_millis(200), slow.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(_)) => {
                // An error answer (408) before closing is fine.
            }
            Err(_) => {}
        }
    }
    assert!(
        closed && started.elapsed() < Duration::from_secs(3),
        "a header still unfinished after the 1 s timeout is cut off (closed: {closed}, after {:?})",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout() {
    let server = MQNAMESRV.start_with("httpHeaderReadTimeoutSeconds=60\nhttpIdleTimeoutSeconds=1");
    let mut kept = TcpStream::connect(server.http_addr()).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&answer).ends_with("ok\n") {
        let n = tokio::time::timeout(TIMEOUT, kept.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed before answering");
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    let took = closed_within(&mut kept, Duration::from_secs(4)).await;
    assert!(
        took.is_some_and(|t| t >= Duration::from_millis(800)),
        "an idle keep-alive connection is closed after the 1 s idle timeout: {took:?}"
    );
}

/// Opens `count` connections to the HTTP port and returns how many the server has not closed
/// after a moment.
async fn open_http_connections(server: &Server, count: usize) -> (Vec<TcpStream>, usize) {
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        streams.push(TcpStream::connect(server.http_addr()).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut open = 0;
    for s in &mut streams {
        if closed_within(s, Duration::from_millis(20)).await.is_none() {
            open += 1;
        }
    }
    (streams, open)
}

#[tokio::test]
async fn http_connections_beyond_the_cap_are_closed_at_once() {
    let server = MQNAMESRV.start_with("httpMaxConnections=5\nhttpIdleTimeoutSeconds=60");
    let (streams, open) = open_http_connections(&server, 20).await;
    assert_eq!(open, 5, "five connections held, the other fifteen closed");
    drop(streams);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.http_get("/healthz").await, "ok\n", "slots come back");
}

#[tokio::test]
async fn more_http_connections_than_descriptors_allow_leave_routes_served() {
    let Some(prlimit) = needs(on_path(&["prlimit"]), "prlimit (util-linux)") else {
        return;
    };
    let server = MQNAMESRV.start_with("httpIdleTimeoutSeconds=60\nhttpHeaderReadTimeoutSeconds=60");
    let limited = Command::new(&prlimit)
        .args(["--pid", &server.pid().to_string(), "--nofile=128:128"])
        .status()
        .expect("prlimit (util-linux) is needed for this test");
    assert!(limited.success());

    let (streams, open) = open_http_connections(&server, 300).await;
    assert!(
        open <= 32,
        "at most a quarter of 128 descriptors go to HTTP, {open} held"
    );
    let client = tokio::time::timeout(TIMEOUT, server.client())
        .await
        .expect("the remoting port accepts");
    let broker = Broker::new("c", "b", 0, "127.0.0.1:10911");
    broker.register(&client, &BASE_TOPICS, 1).await;
    let route = call(&client, route_request("TopicTest", 479)).await;
    assert_eq!(route.code, response::SUCCESS, "routes are still served");
    drop(streams);
}

/// The cells of each row of the table with `id`.
fn table_rows(page: &str, id: &str) -> Vec<Vec<String>> {
    let start = page
        .find(&format!("<table id={id}>"))
        .unwrap_or_else(|| panic!("no table {id} in {page}"));
    let table = &page[start..start + page[start..].find("</table>").unwrap()];
    table
        .split("<tr>")
        .skip(1)
        .filter(|row| row.starts_with("<td>"))
        .map(|row| {
            row.split("<td>")
                .skip(1)
                .map(|cell| cell.split("</td>").next().unwrap().to_string())
                .collect()
        })
        .collect()
}

/// All broker rows, page after page, as (name, topics).
async fn all_broker_rows(server: &Server) -> (Vec<(String, usize)>, Vec<usize>, String) {
    let first = server.http_get("/").await;
    let mut rows = Vec::new();
    let mut per_page = Vec::new();
    let mut page = first.clone();
    let mut number = 1;
    loop {
        let shown = table_rows(&page, "brokers");
        per_page.push(shown.len());
        rows.extend(
            shown
                .into_iter()
                .map(|r| (r[1].clone(), r[7].parse().unwrap())),
        );
        if !page.contains(&format!("?page={}\">next", number + 1)) {
            break;
        }
        number += 1;
        page = server.http_get(&format!("/?page={number}")).await;
    }
    (rows, per_page, first)
}

#[tokio::test]
async fn the_status_page_counts_topics_per_broker_pages_its_rows_and_follows_changes() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let big_topics: Vec<String> = (0..3000).map(|i| format!("Big{i}")).collect();
    let mut topics: Vec<(&str, i32)> = big_topics.iter().map(|t| (t.as_str(), 6)).collect();
    topics.extend(BASE_TOPICS);
    Broker::new("a-cluster", "big", 0, "127.0.0.1:10911")
        .register(&client, &topics, 1)
        .await;
    register_small_brokers(&client, 250).await;

    let (rows, per_page, first) = all_broker_rows(&server).await;
    assert_eq!(per_page, vec![200, 51], "251 addresses, 200 per page");
    assert_eq!(rows.len(), 251);
    assert!(rows.contains(&("big".into(), 3002)), "{:?}", &rows[..3]);
    assert!(rows.contains(&("small249".into(), 2)));
    assert!(first.contains("<p>3002 topics</p>"));
    let clusters = table_rows(&first, "clusters");
    assert_eq!(
        clusters,
        vec![
            vec!["a-cluster".to_string(), "1".into(), "1".into()],
            vec!["b-cluster".to_string(), "250".into(), "250".into()],
        ]
    );

    // A second group serving a third of the same topics and some of its own.
    let mut second: Vec<(&str, i32)> = big_topics[..1000].iter().map(|t| (t.as_str(), 6)).collect();
    let own: Vec<String> = (0..500).map(|i| format!("Own{i}")).collect();
    second.extend(own.iter().map(|t| (t.as_str(), 6)));
    second.extend(BASE_TOPICS);
    Broker::new("a-cluster", "big2", 0, "127.0.0.1:10921")
        .register(&client, &second, 1)
        .await;
    let (rows, per_page, first) = all_broker_rows(&server).await;
    assert_eq!(per_page, vec![200, 52]);
    assert!(rows.contains(&("big".into(), 3002)));
    assert!(
        rows.contains(&("big2".into(), 1502)),
        "the new group is counted"
    );
    assert!(first.contains("<p>3502 topics</p>"));

    let route = server.http_get("/?topic=Own7").await;
    assert!(route.contains("<table id=route>") && route.contains("127.0.0.1:10921"));
}

#[tokio::test]
async fn the_kv_section_of_the_status_page_is_bounded() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    for i in 0..230 {
        call(&client, put_kv_request("ns", &format!("k{i:03}"), "v")).await;
    }
    let page = server.http_get("/").await;
    assert_eq!(table_rows(&page, "kv").len(), 200);
    assert!(page.contains("30 more KV entries not shown"), "{page}");
}

/// Parses an OpenMetrics exposition with the reference Python parser; every sample as
/// (name, labels, value).
fn parse_openmetrics(
    python: &str,
    text: &str,
) -> Vec<(String, serde_json::Map<String, serde_json::Value>, f64)> {
    const SCRIPT: &str = "import sys, json\n\
from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
samples = [[s.name, s.labels, s.value] for f in text_string_to_metric_families(sys.stdin.read()) for s in f.samples]\n\
print(json.dumps(samples))\n";
    let out = pipe(Command::new(python).args(["-c", SCRIPT]), text);
    assert!(
        out.status.success(),
        "the OpenMetrics parser rejects the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    parsed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s[0].as_str().unwrap().to_string(),
                s[1].as_object().unwrap().clone(),
                s[2].as_f64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn hostile_cluster_names_come_back_from_metrics_as_label_values() {
    let Some(python) = needs(
        python_with_prometheus_client(),
        "python3 with the prometheus_client module (Debian package: python3-prometheus-client)",
    ) else {
        return;
    };
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let hostile = [
        "prod\"} 0\nnamesrv_brokers_alive{cluster=\"injected",
        "tail\n# EOF\n",
        "back\\slash\\\"quoted\\n",
    ];
    for (i, cluster) in hostile.iter().enumerate() {
        let reply = Broker::new(cluster, "b", 0, &format!("127.0.0.1:{}", 10911 + i))
            .register(&client, &BASE_TOPICS, 1)
            .await;
        assert_eq!(reply.code, response::SUCCESS);
    }
    let samples = parse_openmetrics(python, &server.http_get("/metrics").await);
    let mut alive: Vec<(String, f64)> = samples
        .iter()
        .filter(|(name, _, _)| name == "namesrv_brokers_alive")
        .map(|(_, labels, value)| {
            assert_eq!(labels.len(), 1, "{labels:?}");
            (labels["cluster"].as_str().unwrap().to_string(), *value)
        })
        .collect();
    alive.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected: Vec<(String, f64)> = hostile.iter().map(|c| (c.to_string(), 1.0)).collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(alive, expected, "each name exactly, and no forged series");
    assert!(
        samples
            .iter()
            .any(|(name, _, _)| name == "namesrv_route_snapshot_age_seconds"),
        "the exposition is read to its real end"
    );
}

#[tokio::test]
async fn arbitrary_request_codes_during_a_graceful_shutdown_count_as_other() {
    let server = MQNAMESRV.start_with("enableShutdownGracefully=true\nshutdownWaitTimeSeconds=30");
    let client = server.client().await;
    Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .unwrap();
    eventually("GO_AWAY during the shutdown wait", TIMEOUT, || async {
        call(&client, route_request("T", 479)).await.code == response::GO_AWAY
    })
    .await;
    for code in 0..300 {
        let answer = call(
            &client,
            RemotingCommand::request(30_000 + code).with_version(500),
        )
        .await;
        assert_eq!(answer.code, response::GO_AWAY);
    }
    let metrics = server.http_get("/metrics").await;
    let mut codes: Vec<&str> = metrics
        .match_indices("code=\"")
        .map(|(at, m)| {
            let value = &metrics[at + m.len()..];
            &value[..value.find('"').unwrap()]
        })
        .collect();
    codes.sort_unstable();
    codes.dedup();
    assert!(codes.contains(&"other"), "{codes:?}");
    assert!(
        codes.contains(&"105"),
        "served codes keep their label: {codes:?}"
    );
    assert!(
        codes.len() <= 3,
        "GET_ROUTEINFO_BY_TOPIC and other, at most: {codes:?}"
    );
}

async fn nsaddr_for_host(server: &Server, host: &str) -> String {
    let (status, body) = server
        .http_request(&format!(
            "GET /rocketmq/nsaddr HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        ))
        .await;
    assert_eq!(status, 200, "Host {host:?}: {body}");
    body
}

#[tokio::test]
async fn nsaddr_never_echoes_a_host_header() {
    let server = MQNAMESRV.start();
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let bound = format!("127.0.0.1:{port}");
    let long = "a".repeat(300);
    let http_port = server.http_addr().rsplit(':').next().unwrap().to_string();
    for host in [
        "attacker.example:80".to_string(),
        "ns.example.com".into(),
        format!("127.0.0.1:{http_port}"),
        "[::1]:9877".into(),
        "evil.com:1/../x".into(),
        "a b".into(),
        "<script>".into(),
        long,
    ] {
        assert_eq!(
            nsaddr_for_host(&server, &host).await,
            bound,
            "Host {host:?} answers the bound remoting address"
        );
    }
}

#[tokio::test]
async fn nsaddr_of_a_server_bound_to_every_interface_names_the_address_a_request_arrived_on() {
    let server = MQNAMESRV.start_with("bindAddress=0.0.0.0");
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    assert_eq!(
        nsaddr_for_host(&server, "attacker.example:80").await,
        format!("127.0.0.1:{port}")
    );
}
