//! A disk that fills up under a running `mqcontroller`: its store lives on a tiny tmpfs that the
//! test fills, then brokers keep asking for ids. The node must stop for good with a non-zero
//! exit and say why (fail-stop), not linger as a member that names a leader and answers errors
//! forever.
//!
//! Needs root (to mount the tmpfs); without it the test says why and skips, unless
//! NAMESRV_TEST_REQUIRE_ALL is set (the test command sets it).

mod support;
use support::MQCONTROLLER;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use namesrv_testkit::ControllerProps;
use rocketmq_wire::codes::request;
use rocketmq_wire::RemotingCommand;

/// A tmpfs of `size` mounted at a fresh directory, unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(parent: &Path, size: &str) -> Option<SmallDisk> {
        let dir = parent.join("disk");
        std::fs::create_dir_all(&dir).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        support::able(
            mounted,
            "mounting a tmpfs (root) is needed for the failing-disk test",
        )?;
        Some(SmallDisk(dir))
    }

    /// Writes zeros until the disk is full.
    fn fill(&self) {
        let mut file = std::fs::File::create(self.0.join("filler")).unwrap();
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The node's process, killed if the test ends while it still runs.
struct Node(std::process::Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_node_whose_disk_fills_up_stops_with_an_error_instead_of_lingering() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(dir.path(), "4m") else {
        return;
    };
    let port = namesrv_testkit::free_port();
    let conf = dir.path().join("controller.conf");
    let props = ControllerProps::new([format!("127.0.0.1:{port}")], 0, disk.0.join("store"));
    std::fs::write(&conf, props.group("disk").to_string()).unwrap();
    let mut node = Node(
        Command::new(MQCONTROLLER)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = BufReader::new(node.0.stdout.take().unwrap()).lines();
    let boot = stdout.next().expect("a boot line").unwrap();
    assert!(boot.starts_with("Controller Server boot success"), "{boot}");
    std::thread::spawn(move || for _ in stdout {});
    let stderr = node.0.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let addr = format!("127.0.0.1:{port}");
    let mut led = false;
    for _ in 0..100 {
        let meta = support::ask(
            &addr,
            RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO),
            Duration::from_secs(6),
        )
        .await;
        if meta.is_some_and(|m| m.ext("isLeader") == Some("true")) {
            led = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(led, "the one-node group leads itself");

    disk.fill();
    // Brokers keep taking ids: every one is a log entry the store must write.
    let started = Instant::now();
    let mut exit = None;
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(60) {
        if let Some(status) = node.0.try_wait().unwrap() {
            exit = Some(status);
            break;
        }
        n += 1;
        let apply = RemotingCommand::request(request::CONTROLLER_APPLY_BROKER_ID)
            .with_ext("clusterName", "c")
            .with_ext("brokerName", format!("broker-{n}-{}", "x".repeat(200)))
            .with_ext("appliedBrokerId", 1)
            .with_ext(
                "registerCheckCode",
                format!("127.0.0.1:{n};{}", "y".repeat(200)),
            );
        support::ask(&addr, apply, Duration::from_secs(6)).await;
    }
    let status = exit
        .unwrap_or_else(|| panic!("the node still runs 60 s after its disk filled ({n} requests)"));
    assert!(!status.success(), "{status:?}");
    let said = said.join().unwrap().join("\n");
    assert!(
        said.contains("controller stopped"),
        "it says why it stopped: {said}"
    );
    eprintln!(
        "stopped after {n} requests, {:?} after the disk filled: {}",
        started.elapsed(),
        said.lines().last().unwrap_or_default()
    );
}
