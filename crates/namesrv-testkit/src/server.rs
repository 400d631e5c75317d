use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use namesrv::config::Settings;
use rocketmq_wire::client::{Client, ClientError};
use rocketmq_wire::RemotingCommand;
use tempfile::TempDir;

pub const TIMEOUT: Duration = Duration::from_secs(5);

/// How a test server runs: in this process, or as a process of the binary at a path.
#[derive(Clone, Copy, Debug)]
pub struct Launch {
    binary: Option<&'static str>,
}

impl Launch {
    pub const IN_PROCESS: Launch = Launch { binary: None };

    /// The `mqnamesrv` at `path`; its own package's tests pass `env!("CARGO_BIN_EXE_mqnamesrv")`.
    pub const fn binary(path: &'static str) -> Self {
        Launch { binary: Some(path) }
    }

    pub fn start(self) -> Server {
        self.start_with("")
    }

    /// Starts with extra properties appended to the config file.
    pub fn start_with(self, props: &str) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let mut server = self.start_in(&home, props);
        server._dir = Some(dir);
        server
    }

    /// Starts with authenticated writes on, the `accessKey=secretKey` lines of `credentials` as
    /// the credentials file (kept in the server's home), and extra properties.
    pub fn start_authenticated(self, credentials: &str, props: &str) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("credentials.properties");
        std::fs::write(&creds, credentials).unwrap();
        let props = format!(
            "authenticationEnabled=true\nauthCredentialsPath={}\n{props}",
            creds.display()
        );
        let mut server = self.start_in(dir.path(), &props);
        server._dir = Some(dir);
        server
    }

    /// Starts in an existing home directory (to test what survives a restart).
    pub fn start_in(self, home: &Path, props: &str) -> Server {
        write_config(home, props);
        self.resume_in(home)
    }

    /// Starts in an existing home directory with the config file as the last server left it
    /// (to test what it persisted).
    pub fn resume_in(self, home: &Path) -> Server {
        self.resume_wrapped(home, &[])
    }

    /// As [`Launch::resume_in`], the binary run through the command `wrap` (`ip netns exec NS`);
    /// a server in this process cannot be wrapped.
    pub fn resume_wrapped(self, home: &Path, wrap: &[String]) -> Server {
        let config = home.join("namesrv.conf");
        match self.binary {
            Some(binary) => spawn_binary(Path::new(binary), home, config, wrap),
            None => {
                assert!(wrap.is_empty(), "a server in this process runs here");
                run_in_process(home, config)
            }
        }
    }
}

/// Servers of one test that know each other's fixed ports, each on its own home with its own
/// config text, so that a killed one comes back where its peers expect it.
pub struct Nodes {
    launch: Launch,
    homes: Vec<TempDir>,
    props: Vec<String>,
    /// The command each node's binary runs through (`ip netns exec NS`), if any.
    wraps: Vec<Vec<String>>,
    pub nodes: Vec<Option<Server>>,
}

impl Nodes {
    pub fn new(launch: Launch) -> Self {
        Nodes {
            launch,
            homes: Vec::new(),
            props: Vec::new(),
            wraps: Vec::new(),
            nodes: Vec::new(),
        }
    }

    /// Adds a node, not started, whose config text `props` makes from its home.
    pub fn add(&mut self, props: impl FnOnce(&Path) -> String) {
        self.add_wrapped(props, Vec::new());
    }

    /// Adds a node whose binary runs through the command `wrap` (`ip netns exec NS`).
    pub fn add_wrapped(&mut self, props: impl FnOnce(&Path) -> String, wrap: Vec<String>) {
        let home = tempfile::tempdir().unwrap();
        self.props.push(props(home.path()));
        self.homes.push(home);
        self.wraps.push(wrap);
        self.nodes.push(None);
    }

    /// Node `i` runs with `props` through `wrap` from its next start on (a pod rescheduled to
    /// another host, its home and stores kept).
    pub fn relocate(&mut self, i: usize, props: String, wrap: Vec<String>) {
        self.props[i] = props;
        self.wraps[i] = wrap;
    }

    pub fn start_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.restart(i);
        }
    }

    pub fn home(&self, i: usize) -> PathBuf {
        self.homes[i].path().to_path_buf()
    }

    /// The lines of node `i`'s log files that contain `word`, for failure reports.
    pub fn log_lines(&self, i: usize, word: &str) -> String {
        let dir = self.homes[i].path().join("logs").join("rocketmqlogs");
        let mut out = String::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            for line in text.lines().filter(|l| l.contains(word)) {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// SIGKILL for a process of its own.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut node) = self.nodes[i].take() {
            node.kill();
        }
    }

    /// Starts node `i` again on its home, store and ports.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        let home = self.homes[i].path();
        write_config(home, &self.props[i]);
        let server = self.launch.resume_wrapped(home, &self.wraps[i]);
        self.nodes[i] = Some(server);
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].is_some()
    }

    /// Node `i`, which must be running.
    pub fn node(&self, i: usize) -> &Server {
        self.nodes[i].as_ref().expect("the node runs")
    }
}

/// A config file for a server on free loopback ports, plus `props`.
pub fn write_config(home: &Path, props: &str) -> PathBuf {
    let config = home.join("namesrv.conf");
    // Both ports free ones: parallel tests would collide on the fixed defaults.
    std::fs::write(
        &config,
        format!("listenPort=0\nbindAddress=127.0.0.1\nhttpPort=0\n{props}\n"),
    )
    .unwrap();
    config
}

/// Reads a starting server's stdout until its boot line; returns the remoting address and the
/// HTTP port's base URL if it announced one.
pub fn boot_lines(child: &mut Child) -> (String, Option<String>) {
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
    // Keep draining so that the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (addr, http)
}

/// Reads a starting server's stdout until its boot line and returns the address it names.
pub fn boot_address(child: &mut Child) -> String {
    boot_lines(child).0
}

enum Running {
    Process(Child),
    InProcess {
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        stopped: mpsc::Receiver<()>,
    },
}

/// A running server with its own home directory (kept until the server is dropped, unless the
/// caller gave one).
pub struct Server {
    pub addr: String,
    /// Base URL of the HTTP port, e.g. `http://127.0.0.1:40000`.
    pub http: Option<String>,
    pub home: PathBuf,
    pub config: PathBuf,
    running: Running,
    _dir: Option<TempDir>,
}

fn spawn_binary(binary: &Path, home: &Path, config: PathBuf, wrap: &[String]) -> Server {
    let mut command = match wrap.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(binary);
            c
        }
        None => Command::new(binary),
    };
    let mut child = command
        .arg("-c")
        .arg(&config)
        .env("HOME", home)
        .env_remove("ROCKETMQ_HOME")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
    let (addr, http) = boot_lines(&mut child);
    Server {
        addr,
        http,
        home: home.to_path_buf(),
        config,
        running: Running::Process(child),
        _dir: None,
    }
}

fn run_in_process(home: &Path, config: PathBuf) -> Server {
    let mut settings = Settings::defaults(home, None);
    settings.load_file(&config).unwrap();
    let (ready_tx, ready) = mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (stopped_tx, stopped) = mpsc::channel();
    // Its own runtime, so that the server keeps serving whatever the test's runtime is doing
    // (blocking on a child process, for one).
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let on_ready = ready_tx.clone();
        let result = runtime.block_on(namesrv::run(
            settings,
            move |endpoints| {
                let _ = on_ready.send(Ok(endpoints));
            },
            async {
                let _ = stop_rx.await;
            },
            std::future::pending(),
        ));
        if let Err(e) = result {
            let _ = ready_tx.send(Err(format!("{e:#}")));
        }
        runtime.shutdown_timeout(Duration::from_secs(1));
        let _ = stopped_tx.send(());
    });
    let endpoints = ready
        .recv_timeout(Duration::from_secs(10))
        .expect("the in-process server did not start in time")
        .unwrap_or_else(|e| panic!("the in-process server failed: {e}"));
    Server {
        addr: endpoints.remoting.to_string(),
        http: endpoints.http.map(|h| format!("http://{h}")),
        home: home.to_path_buf(),
        config,
        running: Running::InProcess {
            stop: Some(stop),
            stopped,
        },
        _dir: None,
    }
}

impl Server {
    /// Starts a server in this process.
    pub fn start() -> Self {
        Launch::IN_PROCESS.start()
    }

    /// Starts a server in this process with extra properties in its config file.
    pub fn start_with(props: &str) -> Self {
        Launch::IN_PROCESS.start_with(props)
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr.as_str()).await.unwrap()
    }

    /// Stops the server at once: SIGKILL for a process; an in-process server has no such
    /// death and gets the quickest shutdown it has.
    pub fn kill(&mut self) {
        match &mut self.running {
            Running::Process(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Running::InProcess { stop, stopped } => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                    // A server still finishing a request must not hang the test forever.
                    let _ = stopped.recv_timeout(Duration::from_secs(10));
                }
            }
        }
    }

    fn child(&self) -> &Child {
        match &self.running {
            Running::Process(child) => child,
            Running::InProcess { .. } => {
                panic!("only a server started from its binary is a process of its own")
            }
        }
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.pid().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        match &mut self.running {
            Running::Process(child) => child.wait().unwrap(),
            Running::InProcess { .. } => unreachable!(),
        }
    }

    /// The HTTP port's `host:port`.
    pub fn http_addr(&self) -> &str {
        self.http
            .as_deref()
            .expect("the HTTP port is on")
            .trim_start_matches("http://")
    }

    /// Sends `request` as given to the HTTP port and reads the answer until the server closes
    /// (so: HTTP/1.0); the status code and the body.
    pub async fn http_request(&self, request: &str) -> (u16, String) {
        http_exchange(self.http_addr(), request).await
    }

    /// GETs `path` from the HTTP port, which must answer 200; the body.
    pub async fn http_get(&self, path: &str) -> String {
        let request = format!("GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.http_addr());
        let (status, body) = self.http_request(&request).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    pub fn pid(&self) -> u32 {
        self.child().id()
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

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `host:port;host:port`, as `-n` and NAMESRV_ADDR take them.
pub fn addrs(servers: &[&Server]) -> String {
    servers
        .iter()
        .map(|s| s.addr.as_str())
        .collect::<Vec<_>>()
        .join(";")
}

pub async fn call(client: &Client, cmd: RemotingCommand) -> RemotingCommand {
    client.invoke(cmd, TIMEOUT).await.expect("request failed")
}

pub async fn call_result(
    client: &Client,
    cmd: RemotingCommand,
) -> Result<RemotingCommand, ClientError> {
    client.invoke(cmd, TIMEOUT).await
}

pub fn body_text(resp: &RemotingCommand) -> String {
    String::from_utf8(resp.body.as_deref().unwrap_or_default().to_vec()).unwrap()
}

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

/// Sends `request` as given to the HTTP port at `addr` and reads the answer until the server
/// closes (so: HTTP/1.0); the status code and the body.
pub async fn http_exchange(addr: &str, request: &str) -> (u16, String) {
    try_http_exchange(addr, request)
        .await
        .unwrap_or_else(|e| panic!("{addr}: {request:?}: {e}"))
}

/// [`http_exchange`], an error when the server cannot be reached or does not answer within
/// [`TIMEOUT`]; the status is 0 when the answer is not HTTP.
pub async fn try_http_exchange(addr: &str, request: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"))??;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// A plain HTTP/1.0 GET, so that the answer ends when the connection does (no chunking).
pub async fn http_get(addr: &str, path: &str) -> (u16, String) {
    try_http_get(addr, path)
        .await
        .unwrap_or_else(|e| panic!("GET {addr}{path}: {e}"))
}

pub async fn try_http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    try_http_exchange(
        addr,
        &format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n"),
    )
    .await
}
