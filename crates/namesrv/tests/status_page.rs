//! The status page as a person sees it: rendered by headless Chromium against a running server
//! with registered brokers, updating itself from `/status.json`; and that endpoint's shape and
//! bounds, without a browser. The screenshots are kept under the target directory
//! (`target/tmp/status-page*.png`).

mod support;
use support::MQNAMESRV;

use std::path::{Path, PathBuf};
use std::time::Duration;

use namesrv_testkit::*;
use rocketmq_wire::codes::request;
use rocketmq_wire::RemotingCommand;
use serde_json::Value;

#[tokio::test]
async fn chromium_shows_clusters_brokers_routes_and_kv() {
    let Some(chromium) = needs(
        on_path(&["chromium", "chromium-browser", "google-chrome"]),
        "headless Chromium (Debian package: chromium)",
    ) else {
        return;
    };
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let master = Broker::new("ProdCluster", "broker-a", 0, "127.0.0.1:10911");
    let slave = Broker::new("ProdCluster", "broker-a", 1, "127.0.0.1:10921");
    let other = Broker::new("ProdCluster", "broker-b", 0, "127.0.0.1:10931");
    for b in [&master, &slave, &other] {
        b.register(&client, &[("OrderTopic", 6), ("TopicTest", 6)], 1)
            .await;
    }
    call(
        &client,
        put_kv_request("ORDER_TOPIC_CONFIG", "OrderTopic", "broker-a:4;broker-b:4"),
    )
    .await;
    let url = format!("{}/?topic=OrderTopic", server.http.as_ref().unwrap());

    let dom = headless_chromium(&chromium, &["--dump-dom", &url]);
    for expected in [
        "ProdCluster",
        "broker-a",
        "broker-b",
        "127.0.0.1:10921",
        "slave",
        "V5_3_3",
        "<table id=\"route\">",
        "broker-a:4;broker-b:4",
    ] {
        assert!(
            dom.contains(expected),
            "the rendered page lacks {expected}:\n{dom}"
        );
    }
    assert_eq!(
        dom.matches("<td>master</td>").count(),
        2,
        "two masters listed"
    );
    screenshot(&chromium, &url, "status-page.png", None);
}

fn screenshot(chromium: &Path, url: &str, name: &str, budget: Option<&str>) {
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let mut args = vec![
        format!("--screenshot={}", shot.display()),
        "--window-size=1280,1400".to_string(),
    ];
    args.extend(budget.map(|b| format!("--virtual-time-budget={b}")));
    args.push(url.to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _ = std::fs::remove_file(&shot);
    headless_chromium(chromium, &args);
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a real screenshot"
    );
}

/// Virtual time Chromium lets pass before it dumps the page: past the script's first poll
/// (5 s), without waiting for it in real time.
const PAST_FIRST_POLL: &str = "--virtual-time-budget=7000";

/// The silent broker's heartbeat timeout: amber from half of it to nine tenths, time enough
/// for Chromium to start and render the page while it is.
const SILENT_TIMEOUT_MS: i64 = 30_000;

/// The part of a dumped DOM from the table with `id` to its end.
fn table<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("<table id=\"{id}\""))
        .unwrap_or_else(|| panic!("no table {id} in {dom}"));
    &dom[start..start + dom[start..].find("</table>").unwrap()]
}

/// The rows of a table (as Chromium writes them) that mention `text`.
fn rows_with<'a>(table: &'a str, text: &str) -> Vec<&'a str> {
    table
        .split("<tr>")
        .skip(1)
        .filter(|row| row.contains(text))
        .collect()
}

/// The value of the attribute `name` on the element with `id` in a dumped DOM.
fn attribute<'a>(dom: &'a str, id: &str, name: &str) -> &'a str {
    let start = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no element {id}"));
    let tag = &dom[dom[..start].rfind('<').unwrap()..];
    let tag = &tag[..tag.find('>').unwrap()];
    let value = tag
        .split(&format!(" {name}=\""))
        .nth(1)
        .unwrap_or_else(|| panic!("no {name} on {tag}"));
    &value[..value.find('"').unwrap()]
}

async fn status_json(server: &Server, query: &str) -> Value {
    serde_json::from_str(&server.http_get(&format!("/status.json{query}")).await).unwrap()
}

fn broker_row<'a>(status: &'a Value, addr: &str) -> Option<&'a Value> {
    status["brokers"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["addr"] == addr)
}

fn has_change(status: &Value, kind: &str, what: &str) -> bool {
    status["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == kind && e["what"] == what)
}

// Multi-threaded, so that the load goes on while Chromium runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_sees_charts_fill_flags_and_a_silent_broker_turn_amber_then_expire() {
    let Some(chromium) = needs(
        on_path(&["chromium", "chromium-browser", "google-chrome"]),
        "headless Chromium (Debian package: chromium)",
    ) else {
        return;
    };
    // Expiry is then checked every 200 ms, once the first delayed scan (5 s) has run.
    let server = MQNAMESRV.start_with("scanNotActiveBrokerInterval=200");
    let client = server.client().await;
    let silent = Broker::new("ProdCluster", "broker-c", 0, "127.0.0.1:10951");
    // Its connection stays open and silent: closing it would make the broker leave at once
    // instead of expiring.
    let silent_conn = server.client().await;
    let registered = call(
        &silent_conn,
        silent
            .register_request(&BASE_TOPICS, dv(1, 0))
            .with_ext("heartbeatTimeoutMillis", SILENT_TIMEOUT_MS),
    )
    .await;
    assert_eq!(registered.code, 0);
    let topics = [("OrderTopic", 6), ("TopicTest", 6)];
    let master = Broker::new("ProdCluster", "broker-a", 0, "127.0.0.1:10911");
    let slave = Broker::new("ProdCluster", "broker-a", 1, "127.0.0.1:10921");
    let lone_slave = Broker::new("ProdCluster", "broker-b", 1, "127.0.0.1:10931");
    let wiped = Broker::new("ProdCluster", "broker-d", 0, "127.0.0.1:10941");
    for b in [&master, &slave, &lone_slave, &wiped] {
        assert_eq!(b.register(&client, &topics, 1).await.code, 0);
    }
    let wipe = call(
        &client,
        RemotingCommand::request(request::WIPE_WRITE_PERM_OF_BROKER)
            .with_ext("brokerName", "broker-d"),
    )
    .await;
    assert_eq!(wipe.code, 0);
    call(&client, put_kv_request("ns", "colour", "amber")).await;
    let load_client = server.client().await;
    let load = tokio::spawn(async move {
        loop {
            call(&load_client, route_request("TopicTest", 479)).await;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });

    // The charts need one whole sampling interval (10 s) behind them, with requests in it and
    // in the next.
    eventually(
        "two points with requests",
        Duration::from_secs(30),
        || async {
            let status = status_json(&server, "").await;
            let points = status["series"]["points"].as_array().unwrap();
            points.len() >= 2 && points.iter().all(|p| !p["p99_us"].is_null())
        },
    )
    .await;
    eventually(
        "the silent broker to be late",
        Duration::from_secs(30),
        || async {
            let status = status_json(&server, "").await;
            broker_row(&status, &silent.addr).unwrap()["heartbeat"]["health"] == "late"
        },
    )
    .await;

    let url = format!("{}/", server.http.as_ref().unwrap());
    let dom = headless_chromium(&chromium, &[PAST_FIRST_POLL, "--dump-dom", &url]);
    let body = &dom[dom.find("<body").unwrap()..];
    let body = &body[..body.find('>').unwrap()];
    let polls: u32 = body
        .split("data-polls=\"")
        .nth(1)
        .and_then(|v| v[..v.find('"')?].parse().ok())
        .unwrap_or(0);
    assert!(polls >= 1, "the script updated the page: {body}");
    for chart in ["chart-rate", "chart-p99"] {
        let points: usize = attribute(&dom, chart, "data-points").parse().unwrap();
        assert!(points >= 2, "{chart} has {points} points");
        let line = &dom[dom.find(&format!("id=\"{chart}\"")).unwrap()..];
        let line = line.split("<polyline points=\"").nth(1).unwrap();
        let line = &line[..line.find('"').unwrap()];
        assert_eq!(line.split(' ').count(), points, "{chart}: {line}");
    }
    let brokers = table(&dom, "brokers");
    let silent_row = rows_with(brokers, &silent.addr);
    assert_eq!(silent_row.len(), 1, "{brokers}");
    assert!(
        silent_row[0].contains("class=\"hb-late\""),
        "amber: {}",
        silent_row[0]
    );
    assert!(
        silent_row[0].contains(&format!("/ {} s", SILENT_TIMEOUT_MS / 1000)),
        "against its own timeout: {}",
        silent_row[0]
    );
    let master_row = rows_with(brokers, &master.addr);
    assert!(
        master_row[0].contains("class=\"hb-ok\""),
        "green: {}",
        master_row[0]
    );
    assert!(master_row[0].contains("V5_3_3"), "{}", master_row[0]);
    for flagged in ["broker-b: masterless", "broker-d: read-only"] {
        assert!(dom.contains(flagged), "{flagged} is flagged");
    }
    assert!(rows_with(brokers, &lone_slave.addr)[0].contains("masterless"));
    let changes = table(&dom, "changes");
    for (change, of) in [
        ("broker joined", silent.addr.as_str()),
        ("topics created", "OrderTopic"),
        ("writes wiped", "broker-d"),
        ("KV set", "ns colour"),
    ] {
        assert!(
            rows_with(changes, of).iter().any(|r| r.contains(change)),
            "{change} of {of} is listed: {changes}"
        );
    }
    assert!(dom.contains(&format!("<title>NameServer {}</title>", server.addr)));
    assert!(dom.contains(concat!("mqnamesrv ", env!("CARGO_PKG_VERSION"))));
    screenshot(&chromium, &url, "status-page-live.png", Some("7000"));

    eventually(
        "the silent broker to expire",
        Duration::from_secs(40),
        || async {
            let status = status_json(&server, "").await;
            broker_row(&status, &silent.addr).is_none()
                && has_change(&status, "broker-expired", &silent.addr)
                && has_change(&status, "broker-left", &silent.addr)
        },
    )
    .await;
    let dom = headless_chromium(&chromium, &[PAST_FIRST_POLL, "--dump-dom", &url]);
    assert!(rows_with(table(&dom, "brokers"), &silent.addr).is_empty());
    let expired = rows_with(table(&dom, "changes"), &silent.addr);
    assert!(
        expired.iter().any(|r| r.contains("broker expired")
            && r.contains(&format!("timeout {} s", SILENT_TIMEOUT_MS / 1000))),
        "{expired:?}"
    );
    screenshot(&chromium, &url, "status-page-expired.png", Some("7000"));
    load.abort();
    drop(silent_conn);
}

#[tokio::test]
async fn status_json_shows_one_page_of_brokers_the_kept_changes_and_the_series() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    register_small_brokers(&client, 250).await;
    // More changes than are kept: 250 brokers joined, their topics, and these.
    for i in 0..60 {
        call(&client, put_kv_request("ns", &format!("k{i:03}"), "v")).await;
    }
    for _ in 0..200 {
        call(&client, route_request("TopicTest", 479)).await;
    }

    let status = status_json(&server, "").await;
    let server_view = &status["server"];
    assert_eq!(server_view["address"], server.addr.as_str());
    assert_eq!(server_view["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(server_view["ready"], true);
    assert!(server_view["uptime_s"].as_u64().unwrap() < 600);
    assert_eq!(status["topics"], 2);
    assert_eq!(
        status["clusters"],
        serde_json::json!([{"name": "b-cluster", "groups": 250, "addresses": 250}])
    );
    assert_eq!(status["flagged"], serde_json::json!([]));

    let brokers = &status["brokers"];
    assert_eq!(
        (
            &brokers["page"],
            &brokers["pages"],
            &brokers["total"],
            &brokers["first"]
        ),
        (&1.into(), &2.into(), &250.into(), &1.into())
    );
    let rows = brokers["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 200, "one page of addresses");
    let first = &rows[0];
    assert_eq!(first["name"], "small000");
    assert_eq!(first["role"], "master");
    assert_eq!(first["version"], "V5_3_3");
    assert_eq!(first["heartbeat"]["health"], "ok");
    assert_eq!(first["heartbeat"]["timeout_ms"], 120_000);
    assert!(first["heartbeat"]["age_ms"].as_i64().unwrap() < 60_000);
    assert_eq!(first["topics"], 2);

    let second = status_json(&server, "?page=2").await;
    assert_eq!(second["brokers"]["rows"].as_array().unwrap().len(), 50);
    assert_eq!(second["brokers"]["first"], 201);
    let beyond = status_json(&server, "?page=99").await;
    assert_eq!(
        beyond["brokers"]["page"], 2,
        "pages beyond the last show the last"
    );

    let changes = status["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 300, "the kept changes only");
    assert_eq!(changes[0]["kind"], "kv-put");
    assert_eq!(changes[0]["what"], "ns k059", "newest first");
    let times: Vec<i64> = changes
        .iter()
        .map(|c| c["at_ms"].as_i64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
    let count = |kind: &str| changes.iter().filter(|c| c["kind"] == kind).count();
    assert_eq!(count("kv-put"), 60);
    // The first registration created the two topics: one event, which the churn of joins
    // does not push out.
    assert_eq!(count("topics-created"), 1, "a rare kind is kept");
    assert_eq!(
        count("broker-joined"),
        300 - 60 - 1,
        "the most frequent kind gave up its oldest"
    );

    let series = &status["series"];
    assert_eq!(
        (&series["interval_s"], &series["span_s"]),
        (&10.into(), &900.into())
    );
    eventually(
        "the requests in the series",
        Duration::from_secs(15),
        || async {
            let status = status_json(&server, "").await;
            let points = status["series"]["points"].as_array().unwrap().clone();
            points.len() <= 91
                && points
                    .iter()
                    .map(|p| p["requests"].as_u64().unwrap())
                    .sum::<u64>()
                    >= 200
        },
    )
    .await;

    let page = server.http_get("/").await;
    assert!(
        page.len() < 200_000,
        "the page stays small: {} bytes",
        page.len()
    );
    let json = server.http_get("/status.json").await;
    assert!(
        json.len() < 200_000,
        "so does its data: {} bytes",
        json.len()
    );
}

#[tokio::test]
async fn the_page_names_the_address_clients_reach_never_the_wildcard_bind() {
    let advertised = MQNAMESRV.start_with("advertisedAddresses=10.1.2.3:9876;10.1.2.4:9876");
    let status = status_json(&advertised, "").await;
    assert_eq!(status["server"]["address"], "10.1.2.3:9876;10.1.2.4:9876");
    assert!(advertised
        .http_get("/")
        .await
        .contains("<title>NameServer 10.1.2.3:9876;10.1.2.4:9876</title>"));

    let wildcard = MQNAMESRV.start_with("bindAddress=0.0.0.0");
    let port = wildcard.addr.rsplit(':').next().unwrap();
    let (code, body) = wildcard
        .http_request("GET /status.json HTTP/1.0\r\nHost: ns1.example.com:9877\r\n\r\n")
        .await;
    assert_eq!(code, 200);
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status["server"]["address"],
        format!("ns1.example.com:{port}").as_str(),
        "the host the browser used, with the remoting port"
    );
    let (code, page) = wildcard.http_request("GET / HTTP/1.0\r\n\r\n").await;
    assert_eq!(code, 200);
    let title = &page[page.find("<title>").unwrap()..page.find("</title>").unwrap()];
    // The machine's name when the browser sends no host.
    assert!(title.ends_with(port), "{title}");
    assert!(!title.contains("0.0.0.0"), "{title}");
}

#[tokio::test]
async fn an_empty_server_says_what_its_empty_tables_mean() {
    let server = MQNAMESRV.start();
    let page = server.http_get("/").await;
    for line in [
        "<tr class=empty><td colspan=3>no cluster registered</td></tr>",
        "<tr class=empty><td colspan=9>no broker registered</td></tr>",
        "<tr class=empty><td colspan=3>no KV entries</td></tr>",
        "<li class=muted>no masterless or read-only groups</li>",
    ] {
        assert!(page.contains(line), "{line} missing");
    }
    // Nothing is flagged, so nothing is in the alarm colour.
    assert!(page.contains("#attention li.muted,tr.empty td{color:#777}"));
}
