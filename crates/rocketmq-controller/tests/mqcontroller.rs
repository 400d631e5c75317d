//! The standalone `mqcontroller` binary, as an operator starts Java's `ControllerStartup`: a Java
//! controller config file, the boot line, the port, a bad config refused with the key named.

mod support;
use support::MQCONTROLLER;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use namesrv_testkit::{closed_within, free_port, ControllerProps};
use rocketmq_wire::client::Client;
use rocketmq_wire::RemotingCommand;

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary on `conf` and waits for its boot line; the address it names.
fn start(conf: &std::path::Path) -> (Node, String) {
    let mut child = Command::new(MQCONTROLLER)
        .arg("-c")
        .arg(conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = boot_line(&mut lines);
    std::thread::spawn(move || for _ in lines {});
    let addr = line.rsplit(' ').next().unwrap().to_string();
    (Node(child), addr)
}

/// The boot line, past the log lines a node may print first on the same output (a one-node
/// group can elect itself before the line is printed).
fn boot_line(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> String {
    lines
        .map(|l| l.unwrap())
        .find(|l| l.starts_with("Controller Server boot success"))
        .expect("mqcontroller exited before booting")
}

async fn metadata(addr: &str) -> RemotingCommand {
    let client = Client::connect(addr).await.unwrap();
    client
        .invoke(RemotingCommand::request(1005), Duration::from_secs(5))
        .await
        .unwrap()
}

/// The node's metadata once it says it leads (a one-node group elects itself within 10 s).
async fn leading(addr: &str) -> RemotingCommand {
    for _ in 0..100 {
        let m = metadata(addr).await;
        if m.ext("isLeader") == Some("true") {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("a one-node group elects itself");
}

#[tokio::test]
async fn a_java_controller_config_file_starts_a_one_node_group_that_leads_itself() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = dir.path().join("controller.conf");
    // The quick-start file of Java's distribution, with its DLedger-only keys.
    std::fs::write(
        &conf,
        format!(
            "controllerDLegerGroup = group1\ncontrollerDLegerPeers = n0-127.0.0.1:{port}\n\
             controllerDLegerSelfId = n0\ncontrollerStorePath = {}\nmappedFileSize = 67108864\n\
             enableElectUncleanMaster = false\nnotifyBrokerRoleChanged = true\n",
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    let (_node, addr) = start(&conf);
    assert_eq!(addr, format!("127.0.0.1:{port}"));
    let m = leading(&addr).await;
    assert_eq!(m.ext("group"), Some("group1"));
    assert_eq!(m.ext("controllerLeaderId"), Some("n0"));
    assert_eq!(
        m.ext("peers"),
        Some(format!("n0:127.0.0.1:{port};").as_str())
    );
    assert!(dir.path().join("store").join("raft.redb").exists());
}

#[test]
fn a_config_without_peers_is_refused_with_the_key_named() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("controller.conf");
    std::fs::write(&conf, "controllerDLegerSelfId=n0\n").unwrap();
    let out = Command::new(MQCONTROLLER)
        .arg("-c")
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("controllerDLegerPeers"), "{err}");
}

#[test]
fn print_config_item_lists_every_key_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("controller.conf");
    std::fs::write(
        &conf,
        "controllerType=jRaft\njRaftInitConf=127.0.0.1:9880,127.0.0.1:9881\n\
         jRaftServerId=127.0.0.1:9881\njRaftControllerRPCAddr=127.0.0.1:9770,127.0.0.1:9771\n",
    )
    .unwrap();
    let out = Command::new(MQCONTROLLER)
        .arg("-c")
        .arg(&conf)
        .arg("-p")
        .output()
        .unwrap();
    assert!(out.status.success());
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("controllerDLegerSelfId=n1\n"), "{listing}");
    assert!(
        listing.contains("scanNotActiveBrokerInterval=5000\n"),
        "{listing}"
    );
}

#[tokio::test]
async fn the_port_is_bounded_by_its_keys_per_address_and_for_silent_connections() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = dir.path().join("controller.conf");
    let props = ControllerProps::new([format!("127.0.0.1:{port}")], 0, dir.path().join("store"))
        .extra(
            "controllerServerMaxConnectionsPerAddress=6\n\
             controllerServerFirstFrameTimeoutSeconds=1\n",
        );
    std::fs::write(&conf, props.to_string()).unwrap();
    let (_node, addr) = start(&conf);

    // Six connections from this address are admitted (and closed after a second of silence);
    // a seventh is closed at once.
    let mut held = Vec::new();
    for _ in 0..6 {
        held.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let mut seventh = tokio::net::TcpStream::connect(&addr).await.unwrap();
    assert!(
        closed_within(&mut seventh, Duration::from_millis(500)).await,
        "a connection over controllerServerMaxConnectionsPerAddress stays open"
    );
    for stream in &mut held {
        assert!(
            closed_within(stream, Duration::from_secs(3)).await,
            "a connection that never sent a frame outlived controllerServerFirstFrameTimeoutSeconds"
        );
    }
    // Their places came back: the node answers again.
    let m = metadata(&addr).await;
    assert_eq!(m.ext("group"), Some("DefaultControllerGroup"));
}

/// As a StatefulSet's container runs it: PID 1 of its own PID namespace (which ignores a signal
/// it has no handler for), its host named like a pod, one config for every pod
/// (`controllerDLegerSelfId=auto`). It takes member n0 from the name `mqcontroller-0`, leads its
/// one-node group, and exits 0 on SIGTERM, as `kubectl delete pod` sends it.
#[tokio::test]
async fn as_a_pod_s_pid_1_it_takes_its_id_from_its_name_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = dir.path().join("controller.conf");
    std::fs::write(
        &conf,
        format!(
            "controllerDLegerPeers=n0-127.0.0.1:{port}\ncontrollerDLegerSelfId=auto\n\
             controllerStorePath={}\n",
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    let mut pod = Command::new("unshare")
        .args(["--pid", "--fork", "--uts", "sh", "-c"])
        .arg("hostname mqcontroller-0 && exec \"$0\" -c \"$1\"")
        .arg(MQCONTROLLER)
        .arg(&conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(pod.stdout.take().unwrap()).lines();
    boot_line(&mut lines);
    std::thread::spawn(move || for _ in lines {});
    let addr = format!("127.0.0.1:{port}");
    let m = leading(&addr).await;
    assert_eq!(
        m.ext("controllerLeaderId"),
        Some("n0"),
        "the pod's name made it n0"
    );

    // The controller is the forked child of `unshare`: PID 1 inside, this pid outside.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", pod.id())).unwrap();
    let pid1 = children
        .split_whitespace()
        .next()
        .expect("unshare forked the pod's PID 1");
    let status = Command::new("kill").args(["-TERM", pid1]).status().unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = pod.try_wait().unwrap() {
            break exit;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "PID 1 ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit:?}");
}

/// A pod starts before its name is published: a node whose own listed name does not resolve yet
/// waits for it (instead of exiting for its supervisor to restart it), and starts once the name
/// points at its address.
#[test]
fn a_node_whose_own_name_resolves_late_waits_for_it() {
    let Some(net) = namesrv_testkit::Net::new(7, 1, 0) else {
        return;
    };
    net.name_hosts(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = dir.path().join("controller.conf");
    std::fs::write(
        &conf,
        format!(
            "controllerDLegerPeers=n0-ctl-0.late.test:{port}\ncontrollerDLegerSelfId=n0\n\
             controllerStorePath={}\n",
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    let mut node = Node(
        Command::new("ip")
            .args(["netns", "exec", &net.ns(0), MQCONTROLLER, "-c"])
            .arg(&conf)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = node.0.stdout.take().unwrap();
    let (lines, read) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        node.0.try_wait().unwrap().is_none(),
        "it exited while its name did not resolve"
    );
    let booted = |line: &String| line.starts_with("Controller Server boot success");
    assert!(
        !read.try_iter().any(|l| booted(&l)),
        "it booted without its address"
    );
    let ip = net.node_ip(0);
    net.name_hosts(&[("ctl-0.late.test", &ip)]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let line = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = read
            .recv_timeout(left)
            .expect("it started once its name resolved");
        if booted(&line) {
            break line;
        }
    };
    assert!(line.ends_with(&format!("{ip}:{port}")), "{line}");
}
