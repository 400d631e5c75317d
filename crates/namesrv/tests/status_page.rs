//! The status page as a person sees it: rendered by headless Chromium against a running server
//! with registered brokers. The screenshot is kept under the target directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use namesrv_testkit::*;

const MQNAMESRV: Launch = Launch::binary(env!("CARGO_BIN_EXE_mqnamesrv"));

fn headless(chromium: &Path, args: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .output()
        .expect("running chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

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

    let dom = headless(&chromium, &["--dump-dom", &url]);
    for expected in [
        "ProdCluster",
        "broker-a",
        "broker-b",
        "127.0.0.1:10921",
        "slave",
        "5.3.3",
        "<table id=\"route\">",
        "broker-a:4;broker-b:4",
    ] {
        assert!(
            dom.contains(expected),
            "the rendered page lacks {expected}:\n{dom}"
        );
    }
    assert_eq!(dom.matches("master").count(), 2, "two masters listed");

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    headless(
        &chromium,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,900",
            &url,
        ],
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a real screenshot"
    );
}
