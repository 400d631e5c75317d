//! The `mqnamesrv` command line and process lifecycle.

mod support;
use support::{MQNAMESRV, MQNAMESRV_PATH};

use std::process::Command;

use namesrv_testkit::*;
use rocketmq_wire::codes::request;
use rocketmq_wire::RemotingCommand;

fn mqnamesrv(args: &[&str], home: &std::path::Path) -> std::process::Output {
    Command::new(MQNAMESRV_PATH)
        .args(args)
        .env("HOME", home)
        .output()
        .unwrap()
}

#[test]
fn print_config_help_and_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("ns.properties");
    std::fs::write(&conf, "listenPort=10001\norderMessageEnable=true\n").unwrap();
    let out = mqnamesrv(&["-c", conf.to_str().unwrap(), "-p"], dir.path());
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("load config properties file OK"));
    assert!(text.contains("\nlistenPort=10001\n"));
    assert!(text.contains("\norderMessageEnable=true\n"));
    assert!(text.contains(&format!(
        "kvConfigPath={}/namesrv/kvConfig.json",
        dir.path().display()
    )));

    assert!(mqnamesrv(&["-h"], dir.path()).status.success());
    let bad = mqnamesrv(&["--nope"], dir.path());
    assert_eq!(bad.status.code(), Some(1));
    let missing = mqnamesrv(&["-c", "/nonexistent/file"], dir.path());
    assert!(!missing.status.success());
}

#[test]
fn corrupt_kv_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("namesrv")).unwrap();
    std::fs::write(dir.path().join("namesrv/kvConfig.json"), "{oops").unwrap();
    let conf = dir.path().join("ns.properties");
    std::fs::write(&conf, "listenPort=0\nbindAddress=127.0.0.1\n").unwrap();
    let out = mqnamesrv(&["-c", conf.to_str().unwrap()], dir.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("kvConfig.json"));
}

#[tokio::test]
async fn sigterm_stops_gracefully() {
    let mut server = MQNAMESRV.start();
    let client = server.client().await;
    let put = RemotingCommand::request(request::PUT_KV_CONFIG)
        .with_ext("namespace", "ns")
        .with_ext("key", "k")
        .with_ext("value", "v");
    assert_eq!(call(&client, put).await.code, 0);
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(server.home.join("namesrv/kvConfig.json").exists());
    let logs: String = std::fs::read_dir(server.home.join("logs/rocketmqlogs"))
        .expect("Java's log location")
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(logs.contains("boot success"), "logs: {logs}");
    assert!(logs.contains("shutting down"));
}

/// Sends SIGTERM and waits until the server answers GO_AWAY, as it does during the graceful
/// shutdown wait.
async fn sigterm_until_go_away(server: &Server, client: &rocketmq_wire::client::Client) {
    let pid = server.pid().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    eventually(
        "GO_AWAY during the shutdown wait",
        std::time::Duration::from_secs(2),
        || async {
            call(client, route_request("T", 479)).await.code
                == rocketmq_wire::codes::response::GO_AWAY
        },
    )
    .await;
}

#[tokio::test]
async fn graceful_shutdown_sends_newer_clients_away_first() {
    let mut server =
        MQNAMESRV.start_with("enableShutdownGracefully=true\nshutdownWaitTimeSeconds=2");
    let client = server.client().await;
    sigterm_until_go_away(&server, &client).await;
    let away = call(&client, route_request("T", 479)).await;
    assert_eq!(away.remark.as_deref(), Some("please go away"));
    let old = call(&client, route_request("T", 475)).await;
    assert_eq!(
        old.code,
        rocketmq_wire::codes::response::TOPIC_NOT_EXIST,
        "clients up to 5.3.1 do not know GO_AWAY and are still served"
    );
    let started = std::time::Instant::now();
    assert!(server.terminate().success());
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
}

#[tokio::test]
async fn a_second_signal_cuts_the_graceful_wait_short() {
    let mut server =
        MQNAMESRV.start_with("enableShutdownGracefully=true\nshutdownWaitTimeSeconds=60");
    let client = server.client().await;
    sigterm_until_go_away(&server, &client).await;
    let started = std::time::Instant::now();
    assert!(server.terminate().success(), "a second SIGTERM");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "exited {:?} after the second signal",
        started.elapsed()
    );
}
