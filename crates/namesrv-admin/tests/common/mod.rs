//! Runs the real `mqnamesrv` and `nsadmin` binaries.
//!
//! `mqnamesrv` belongs to another package, so Cargo does not hand this test its path. It is
//! built with the Cargo that runs the tests, into the same target directory and profile as
//! `nsadmin` (a no-op when it is up to date, as after `cargo test --workspace`); set
//! `NSADMIN_TEST_MQNAMESRV` to use another binary instead.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rocketmq_wire::body::{DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigWrapper};
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::request;
use rocketmq_wire::RemotingCommand;
use tempfile::TempDir;

pub const TIMEOUT: Duration = Duration::from_secs(5);

pub fn mqnamesrv() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(path) = std::env::var_os("NSADMIN_TEST_MQNAMESRV") {
            return PathBuf::from(path);
        }
        let profile_dir = Path::new(env!("CARGO_BIN_EXE_nsadmin")).parent().unwrap();
        let target_dir = profile_dir.parent().unwrap();
        let profile = match profile_dir.file_name().unwrap().to_str().unwrap() {
            "debug" => "dev",
            other => other,
        };
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "namesrv", "--bin", "mqnamesrv"])
            .arg("--profile")
            .arg(profile)
            .arg("--target-dir")
            .arg(target_dir)
            .arg("--manifest-path")
            .arg(workspace.join("Cargo.toml"))
            .status()
            .expect("running cargo to build mqnamesrv");
        assert!(status.success(), "building mqnamesrv failed");
        profile_dir.join(format!("mqnamesrv{}", std::env::consts::EXE_SUFFIX))
    })
}

/// Reads the server's stdout until its boot line and returns the address it names.
pub fn boot_address(child: &mut Child) -> String {
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("mqnamesrv exited before booting")
            .unwrap();
        if let Some(rest) = line.split("boot success").nth(1) {
            break rest.rsplit(' ').next().unwrap().to_string();
        }
    };
    // Keep draining so that the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    addr
}

/// A config file for a server on a free loopback port, plus `props`.
pub fn write_config(home: &Path, props: &str) -> PathBuf {
    let config = home.join("namesrv.conf");
    // The monitoring HTTP listener has a fixed default port that parallel servers would share.
    std::fs::write(
        &config,
        format!("listenPort=0\nbindAddress=127.0.0.1\nhttpEnable=false\n{props}\n"),
    )
    .unwrap();
    config
}

pub struct Server {
    pub addr: String,
    pub home: PathBuf,
    child: Child,
    _dir: TempDir,
}

impl Server {
    pub fn start() -> Self {
        Self::start_with("")
    }

    /// Starts with extra properties in its config file.
    pub fn start_with(props: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let config = write_config(&home, props);
        let mut child = Command::new(mqnamesrv())
            .arg("-c")
            .arg(&config)
            .env("HOME", &home)
            .env_remove("ROCKETMQ_HOME")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting mqnamesrv");
        let addr = boot_address(&mut child);
        Server {
            addr,
            home,
            child,
            _dir: dir,
        }
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr.as_str()).await.unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `host:port;host:port` for `-n`.
pub fn addrs(servers: &[&Server]) -> String {
    servers
        .iter()
        .map(|s| s.addr.as_str())
        .collect::<Vec<_>>()
        .join(";")
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }
}

/// Runs `nsadmin` with `args` (no NAMESRV_ADDR from the environment) off the async runtime, so
/// that the test's broker connections stay served meanwhile.
pub async fn nsadmin(args: &[&str]) -> Run {
    nsadmin_env(args, &[]).await
}

pub async fn nsadmin_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let out: Output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_nsadmin"))
            .args(&args)
            .env_remove("NAMESRV_ADDR")
            .envs(env)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// A test broker. Its registration lives as long as the connection it was made on, so callers
/// keep the returned client alive.
pub struct Broker {
    pub cluster: &'static str,
    pub name: &'static str,
    pub id: i64,
    pub addr: &'static str,
}

impl Broker {
    /// REGISTER_BROKER as a 5.x broker sends it. A first registration must carry zero or at
    /// least two topics (one topic from an unknown broker is refused, as in Java).
    pub fn register_request(&self, topics: &[&str], counter: i64) -> RemotingCommand {
        let body = RegisterBrokerBody {
            wrapper: TopicConfigWrapper {
                data_version: DataVersion {
                    counter,
                    state_version: 0,
                    timestamp: 1_700_000_000_000 + counter,
                },
                topic_configs: topics.iter().map(|t| TopicConfig::new(t, 4, 6)).collect(),
                mapping_info: vec![],
            },
            filter_server_list: Some(vec![]),
        }
        .encode_json();
        RemotingCommand::request(request::REGISTER_BROKER)
            .with_ext("brokerName", self.name)
            .with_ext("brokerAddr", self.addr)
            .with_ext("clusterName", self.cluster)
            .with_ext("haServerAddr", format!("{}-ha", self.addr))
            .with_ext("brokerId", self.id)
            .with_ext("enableActingMaster", false)
            .with_ext("compressed", false)
            .with_ext("bodyCrc32", rocketmq_wire::body_crc32(&body))
            .with_body(body)
    }

    pub async fn register(&self, server: &Server, topics: &[&str]) -> Client {
        let client = server.client().await;
        let resp = client
            .invoke(self.register_request(topics, 1), TIMEOUT)
            .await
            .unwrap();
        assert_eq!(resp.code, 0, "registration refused: {:?}", resp.remark);
        client
    }
}

pub const BROKER_A: Broker = Broker {
    cluster: "ClusterX",
    name: "broker-a",
    id: 0,
    addr: "127.0.0.1:10911",
};

pub const BROKER_A_SLAVE: Broker = Broker {
    cluster: "ClusterX",
    name: "broker-a",
    id: 1,
    addr: "127.0.0.1:10921",
};

pub const BROKER_B: Broker = Broker {
    cluster: "ClusterY",
    name: "broker-b",
    id: 0,
    addr: "127.0.0.1:10931",
};
