//! `bin/mqnamesrv` and `bin/mqshutdown namesrv` start and stop a real server. (Here, with the
//! server's tests, because only this package's tests are handed the server binary's path.)
//!
//! Both scripts get MQNAMESRV_BIN pointing at a private link to the server binary, so that
//! mqshutdown stops only the server this test started, not other servers on the machine.

mod support;
use support::MQNAMESRV_PATH;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use namesrv_testkit::*;

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bin")
        .join(name)
}

fn mqshutdown(bin: &Path, args: &[&str]) -> Run {
    Command::new(script("mqshutdown"))
        .args(args)
        .env("MQNAMESRV_BIN", bin)
        .output()
        .unwrap()
        .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_in_the_foreground_and_shut_down_with_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("mqnamesrv");
    if std::fs::hard_link(MQNAMESRV_PATH, &bin).is_err() {
        std::fs::copy(MQNAMESRV_PATH, &bin).unwrap();
    }
    let config = write_config(dir.path(), "");
    let mut server = Command::new(script("mqnamesrv"))
        .arg("-c")
        .arg(&config)
        .env("MQNAMESRV_BIN", &bin)
        .env("HOME", dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = boot_address(&mut server);
    let client = rocketmq_wire::client::Client::connect(addr.as_str())
        .await
        .unwrap();
    cluster_info(&client).await;

    // The script execs the server, so the process it started is the server.
    let pid = server.id();
    let stop = mqshutdown(&bin, &["namesrv"]);
    assert_eq!(stop.code, 0, "{}{}", stop.stdout, stop.stderr);
    assert_eq!(
        stop.stdout,
        format!(
            "The mqnamesrv({pid}) is running...\nSend shutdown request to mqnamesrv({pid}) OK\n"
        )
    );
    // mqshutdown returned only once the server had exited: it is already waitable.
    let status = server.try_wait().unwrap().expect("server still running");
    assert!(status.success(), "{status:?}");

    let again = mqshutdown(&bin, &["namesrv"]);
    assert_eq!(
        (again.code, again.stdout.as_str()),
        (1, "No mqnamesrv running.\n")
    );
    let usage = mqshutdown(&bin, &["broker"]);
    assert_eq!(usage.code, 1);
    assert!(usage.stdout.contains("Usage: mqshutdown namesrv"));
}

#[test]
fn a_missing_binary_is_reported() {
    let out = Command::new(script("mqnamesrv"))
        .env("MQNAMESRV_BIN", "/nonexistent/mqnamesrv")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mqnamesrv binary not found"));
}
