//! Starts the real `mqnamesrv` binary on a free loopback port with its own home directory, and
//! offers request builders shaped like what real brokers and clients send.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rocketmq_wire::body::{DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigWrapper};
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::request;
use rocketmq_wire::RemotingCommand;
use tempfile::TempDir;

pub const TIMEOUT: Duration = Duration::from_secs(5);

pub struct Server {
    pub addr: String,
    /// Base URL of the HTTP port, e.g. `http://127.0.0.1:40000`.
    pub http: Option<String>,
    pub home: PathBuf,
    pub config: PathBuf,
    child: Child,
    _dir: Option<TempDir>,
}

impl Server {
    pub fn start() -> Self {
        Self::start_with("")
    }

    /// Starts with extra properties appended to the config file.
    pub fn start_with(props: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let mut server = Self::start_in(&home, props);
        server._dir = Some(dir);
        server
    }

    /// Starts in an existing home directory (to test what survives a restart).
    pub fn start_in(home: &Path, props: &str) -> Self {
        let config = home.join("namesrv.conf");
        std::fs::write(
            &config,
            format!("listenPort=0\nbindAddress=127.0.0.1\nhttpPort=0\n{props}\n"),
        )
        .unwrap();
        Self::resume_in(home)
    }

    /// Starts in an existing home directory with the config file as the last server left it
    /// (to test what it persisted).
    pub fn resume_in(home: &Path) -> Self {
        let config = home.join("namesrv.conf");
        let mut child = Command::new(env!("CARGO_BIN_EXE_mqnamesrv"))
            .arg("-c")
            .arg(&config)
            .env("HOME", home)
            .env_remove("ROCKETMQ_HOME")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting mqnamesrv");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut http = None;
        let addr = loop {
            let line = lines
                .next()
                .expect("mqnamesrv exited before booting")
                .unwrap();
            if let Some(url) = line.split("HTTP port: ").nth(1) {
                http = Some(url.trim().to_string());
            }
            if let Some(rest) = line.split("boot success").nth(1) {
                break rest.rsplit(' ').next().unwrap().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Server {
            addr,
            http,
            home: home.to_path_buf(),
            config,
            child,
            _dir: None,
        }
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr.as_str()).await.unwrap()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub async fn call(client: &Client, cmd: RemotingCommand) -> RemotingCommand {
    client.invoke(cmd, TIMEOUT).await.expect("request failed")
}

pub async fn call_result(
    client: &Client,
    cmd: RemotingCommand,
) -> Result<RemotingCommand, rocketmq_wire::client::ClientError> {
    client.invoke(cmd, TIMEOUT).await
}

pub fn body_text(resp: &RemotingCommand) -> String {
    String::from_utf8(resp.body.as_deref().unwrap_or_default().to_vec()).unwrap()
}

/// A broker's identity for test registrations.
#[derive(Clone)]
pub struct Broker {
    pub cluster: &'static str,
    pub name: &'static str,
    pub id: i64,
    pub addr: String,
}

impl Broker {
    pub fn new(cluster: &'static str, name: &'static str, id: i64, addr: &str) -> Self {
        Broker {
            cluster,
            name,
            id,
            addr: addr.to_string(),
        }
    }

    pub fn ha_addr(&self) -> String {
        format!("{}-ha", self.addr)
    }

    /// REGISTER_BROKER as a 5.x broker sends it.
    pub fn register_request(
        &self,
        topics: &[(&str, i32)],
        version: DataVersion,
    ) -> RemotingCommand {
        let body = RegisterBrokerBody {
            wrapper: TopicConfigWrapper {
                data_version: version,
                topic_configs: topics
                    .iter()
                    .map(|(t, perm)| TopicConfig::new(t, 4, *perm))
                    .collect(),
                mapping_info: vec![],
            },
            filter_server_list: Some(vec![]),
        }
        .encode_json();
        RemotingCommand::request(request::REGISTER_BROKER)
            .with_ext("brokerName", self.name)
            .with_ext("brokerAddr", &self.addr)
            .with_ext("clusterName", self.cluster)
            .with_ext("haServerAddr", self.ha_addr())
            .with_ext("brokerId", self.id)
            .with_ext("enableActingMaster", false)
            .with_ext("compressed", false)
            .with_ext("bodyCrc32", rocketmq_wire::body_crc32(&body))
            .with_body(body)
    }

    pub async fn register(
        &self,
        client: &Client,
        topics: &[(&str, i32)],
        counter: i64,
    ) -> RemotingCommand {
        call(client, self.register_request(topics, dv(counter, 0))).await
    }

    pub fn unregister_request(&self) -> RemotingCommand {
        RemotingCommand::request(request::UNREGISTER_BROKER)
            .with_ext("brokerName", self.name)
            .with_ext("brokerAddr", &self.addr)
            .with_ext("clusterName", self.cluster)
            .with_ext("brokerId", self.id)
    }
}

pub fn dv(counter: i64, state_version: i64) -> DataVersion {
    DataVersion {
        counter,
        state_version,
        timestamp: 1_700_000_000_000 + counter,
    }
}

pub fn put_kv_request(namespace: &str, key: &str, value: &str) -> RemotingCommand {
    RemotingCommand::request(request::PUT_KV_CONFIG)
        .with_ext("namespace", namespace)
        .with_ext("key", key)
        .with_ext("value", value)
}

pub fn route_request(topic: &str, version: i32) -> RemotingCommand {
    RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC)
        .with_version(version)
        .with_ext("topic", topic)
}

/// The two topics every test broker carries, so that registrations are never "single topic".
pub const BASE_TOPICS: [(&str, i32); 2] = [("TopicTest", 6), ("TBW102", 7)];

/// Polls `check` until it holds, for asynchronous effects (unregistration, expiry).
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A `/proc/PID/status` memory figure of the server process in KiB (`VmRSS`, or `VmHWM` for
    /// the peak), so that tests can bound what hostile peers make it hold.
    pub fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in the server's status"))
    }
}

/// The soft limit on open files this test process (and the server it starts) runs with.
pub fn open_files_soft_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap_or(1024)
}
