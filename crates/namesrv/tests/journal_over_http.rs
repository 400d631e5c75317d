//! The route journal on the HTTP port: `/journal` as JSON, the status page's route search, and
//! the removals and departures by cause on `/metrics`, against the real server with brokers
//! that register and go.

mod support;
use support::MQNAMESRV;

use std::time::Duration;

use namesrv_testkit::*;
use serde_json::{json, Value};

/// A name as a hostile broker or client could send it: markup, both quotes and an ampersand.
const HOSTILE: &str = "<script>alert(1)</script>\"&'";

/// [`HOSTILE`] as HTML text, escaped.
const HOSTILE_ESCAPED: &str = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&amp;&#39;";

async fn journal(server: &Server, query: &str) -> Value {
    let body = server.http_get(&format!("/journal?{query}")).await;
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// The value of the sample `series` (name and labels, as exposed) in a scrape.
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().unwrap())
}

/// The part of a page from the table with `id` to its end.
fn table<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<table id={id}>"))
        .unwrap_or_else(|| panic!("no table {id} in {page}"));
    &page[start..start + page[start..].find("</table>").unwrap()]
}

#[tokio::test]
async fn a_broker_whose_connection_closes_shows_why_its_topic_lost_its_route() {
    let server = MQNAMESRV.start();
    let broker = Broker::new("ClusterA", "broker-gone", 0, "127.0.0.1:10911");
    let conn = broker
        .register_on(&server, &["GoneTopic", "TopicTest"])
        .await;
    let before = journal(&server, "topic=GoneTopic").await;
    assert_eq!(
        before["route"],
        json!([{"broker": "broker-gone", "read": 4, "write": 4, "perm": 6}])
    );
    drop(conn);

    eventually(
        "a connection-closed entry for GoneTopic",
        Duration::from_secs(10),
        || async {
            let answer = journal(&server, "topic=GoneTopic").await;
            answer["entries"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["cause"] == "connection-closed")
        },
    )
    .await;
    let answer = journal(&server, "topic=GoneTopic").await;
    let entries = answer["entries"].as_array().unwrap();
    let causes: Vec<&str> = entries
        .iter()
        .map(|e| e["cause"].as_str().unwrap())
        .collect();
    assert_eq!(causes, ["registered", "connection-closed"], "{answer}");
    let closed = &entries[1];
    assert_eq!(closed["broker"], "broker-gone");
    assert_eq!(closed["cluster"], "ClusterA");
    assert_eq!(closed["addr"], "127.0.0.1:10911");
    assert_eq!(
        closed["topics"],
        json!([{"topic": "GoneTopic", "broker": "broker-gone", "was": [4, 4, 6], "now": null}]),
        "the answer is trimmed to the topic asked about"
    );
    assert_eq!(closed["moreTopics"], 1, "TopicTest left as well");
    assert_eq!(answer["route"], json!([]));
    assert_eq!(answer["brokers"]["broker-gone"], Value::Null);
    assert_eq!(answer["more"], false);
    assert_eq!(answer["journal"]["enabled"], true);

    let metrics = server.http_get("/metrics").await;
    let removals = |cause: &str| {
        sample(
            &metrics,
            &format!("namesrv_route_removals_total{{cause=\"{cause}\"}}"),
        )
    };
    let departures = |cause: &str| {
        sample(
            &metrics,
            &format!("namesrv_broker_departures_total{{cause=\"{cause}\"}}"),
        )
    };
    assert_eq!(removals("connection-closed"), Some(2.0), "{metrics}");
    assert_eq!(departures("connection-closed"), Some(1.0), "{metrics}");
    assert_eq!(
        removals("expired"),
        Some(0.0),
        "causes not seen are there at 0"
    );
    assert_eq!(departures("expired"), Some(0.0));
    assert!(
        sample(&metrics, "namesrv_route_journal_lines").unwrap() >= 2.0,
        "{metrics}"
    );
    assert!(sample(&metrics, "namesrv_route_journal_bytes").unwrap() > 0.0);
    assert_eq!(
        sample(&metrics, "namesrv_route_journal_dropped_total"),
        Some(0.0)
    );

    // The page tells the same, newest first, beside the route that is gone.
    let page = server.http_get("/?topic=GoneTopic").await;
    assert!(
        page.contains("No route for <code>GoneTopic</code>"),
        "{page}"
    );
    let rows: Vec<&str> = table(&page, "journal").split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 2, "{page}");
    assert!(
        rows[0].contains("<td>connection-closed</td>")
            && rows[0].contains("<td>ClusterA / broker-gone</td>")
            && rows[0].contains("<td>127.0.0.1:10911 (id 0)</td>")
            && rows[0]
                .contains("GoneTopic on broker-gone: read 4, write 4, perm 6 → none; 1 more topic"),
        "{}",
        rows[0]
    );
    assert!(rows[1].contains("<td>registered</td>"), "{}", rows[1]);
    assert!(
        table(&page, "groups-now").contains("not registered here now"),
        "{page}"
    );
    assert!(page.contains("href=\"/journal?topic=GoneTopic\""), "{page}");
}

#[tokio::test]
async fn hostile_names_are_searched_and_shown_escaped_never_raw() {
    let server = MQNAMESRV.start();
    let broker = Broker::new("ClusterA", HOSTILE, 0, "127.0.0.1:10912");
    let _conn = broker.register_on(&server, &[HOSTILE, "TopicTest"]).await;

    let by_topic = journal(&server, &format!("topic={}", url_encode(HOSTILE))).await;
    assert_eq!(by_topic["topic"], HOSTILE, "JSON carries the name as sent");
    assert_eq!(by_topic["route"][0]["broker"], HOSTILE);
    assert_eq!(by_topic["entries"][0]["topics"][0]["topic"], HOSTILE);

    for (query, table_id) in [("topic", "route"), ("broker", "groups-now")] {
        let page = server
            .http_get(&format!("/?{query}={}", url_encode(HOSTILE)))
            .await;
        assert!(
            !page.contains("<script>alert") && !page.contains("alert(1)</script>"),
            "the name is written raw on /?{query}=: {page}"
        );
        assert!(
            page.contains(&format!("value=\"{HOSTILE_ESCAPED}\"")),
            "the search box keeps the name, escaped: {page}"
        );
        assert!(
            table(&page, table_id).contains(HOSTILE_ESCAPED),
            "{table_id} names it: {page}"
        );
        let journal_rows = table(&page, "journal");
        assert!(
            journal_rows.contains("<td>registered</td>")
                && journal_rows.contains(&format!("ClusterA / {HOSTILE_ESCAPED}")),
            "{journal_rows}"
        );
        assert!(
            page.contains(&format!("/journal?{query}={}", url_encode(HOSTILE))),
            "the JSON link carries the name percent-encoded: {page}"
        );
    }
}

#[tokio::test]
async fn journal_questions_that_name_nothing_or_too_much_get_400_and_say_why() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let broker = Broker::new("ClusterA", "broker-a", 0, "127.0.0.1:10913");
    broker.register(&client, &BASE_TOPICS, 1).await;
    broker
        .register(&client, &[("TopicTest", 6), ("TBW102", 7), ("Added", 6)], 2)
        .await;
    let longest = "x".repeat(1024);
    let too_long = "x".repeat(1025);
    for (query, says) in [
        ("", "topic=NAME"),
        ("?topic=", "topic=NAME"),
        ("?limit=5", "topic=NAME"),
        ("?topic=T&broker=broker-a", "not both"),
        (&format!("?topic={too_long}"), "1025 bytes"),
        (&format!("?broker={too_long}"), "1025 bytes"),
        ("?broker=broker-a&limit=0", "limit"),
        ("?broker=broker-a&limit=501", "limit"),
        ("?broker=broker-a&limit=ten", "limit"),
    ] {
        let (status, body) = http_get(server.http_addr(), &format!("/journal{query}")).await;
        assert_eq!(status, 400, "/journal{query}: {body}");
        assert!(body.contains(says), "/journal{query}: {body}");
        assert!(!body.contains(&too_long), "the name is not echoed");
    }

    let (status, _) = http_get(server.http_addr(), &format!("/journal?topic={longest}")).await;
    assert_eq!(status, 200, "1024 bytes is a name it answers for");
    let one = journal(&server, "broker=broker-a&limit=1").await;
    assert_eq!(one["entries"].as_array().unwrap().len(), 1, "{one}");
    assert_eq!(one["entries"][0]["cause"], "updated", "the newest: {one}");
    assert_eq!(one["more"], true);
    let all = journal(&server, "broker=broker-a&limit=500").await;
    assert_eq!(all["entries"].as_array().unwrap().len(), 2, "{all}");

    // The page answers 200 whatever is typed in, and says what is wrong.
    let page = server.http_get("/?topic=T&broker=broker-a").await;
    assert!(page.contains("not both"), "{page}");
    assert!(!page.contains("<table id=journal>"));
}
