//! Programs outside the workspace that some tests need, and running command-line tools.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Set (to anything but empty) by the full suite, where every tool is installed: there a
/// missing tool is a failure, not a skipped test.
pub const REQUIRE_ALL: &str = "NAMESRV_TEST_REQUIRE_ALL";

/// `found`, if the tool a test needs was found. If not, the test fails when [`REQUIRE_ALL`] is
/// set; otherwise this says on the terminal which test skips and why, and returns `None` for
/// the test to return early.
pub fn needs<T>(found: Option<T>, what: &str) -> Option<T> {
    if found.is_some() {
        return found;
    }
    if std::env::var_os(REQUIRE_ALL).is_some_and(|v| !v.is_empty()) {
        panic!("{what} is needed for this test ({REQUIRE_ALL} is set, so it cannot skip)");
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    // Straight to the descriptor: the test harness captures eprintln! of passing tests, and a
    // skip must be seen.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {what} is missing (set {REQUIRE_ALL}=1 to make this a failure)"
    );
    None
}

/// The first of `names` found in a directory of PATH.
/// Runs `command` with `input` on its standard input and collects what it printed.
pub fn pipe(command: &mut std::process::Command, input: &str) -> std::process::Output {
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// A Python interpreter that has the `prometheus_client` module.
pub fn python_with_prometheus_client() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"].into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import prometheus_client"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// What a command-line tool did.
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

impl From<Output> for Run {
    fn from(out: Output) -> Self {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }
}

/// Runs `cmd` to completion off the async runtime, so that the test's connections (a broker's
/// registration, an in-process server) stay served meanwhile.
pub async fn run_off_runtime(mut cmd: Command) -> Run {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
        .into()
}

/// Runs headless Chromium with `args` (a `--dump-dom URL`, say); what it printed.
pub fn headless_chromium(chromium: &Path, args: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(chromium)
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
