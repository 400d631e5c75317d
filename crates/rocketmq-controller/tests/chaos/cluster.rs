//! Three controller nodes, each in its own network namespace with its store on a small tmpfs of
//! its own, that the schedule kills, pauses, restarts and starves of disk: `mqcontroller`
//! processes, or with CHAOS_NAMESRV (the path of an `mqnamesrv`) NameServers that each embed a
//! node, or with CHAOS_CONTROLLER another controller program (the Java one, as the control).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use namesrv_testkit::ControllerProps;

use crate::support::MQCONTROLLER;
use namesrv_testkit::Net;

pub const NODES: usize = 3;
pub const PORT: u16 = 19_876;
/// Where an embedding NameServer listens, in its node's namespace.
const NAMESRV_PORT: u16 = 9_876;

pub struct Cluster {
    pub net: Net,
    dir: PathBuf,
    procs: Vec<Option<Child>>,
    paused: Vec<bool>,
    /// The NameServer binary that embeds the nodes, if they are embedded.
    namesrv: Option<String>,
}

fn run(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Cluster {
    /// Mounts each node's disk and starts every node; `None` (after saying why) when the
    /// machine cannot mount a tmpfs.
    pub fn start(net: Net, dir: &Path) -> Option<Cluster> {
        for i in 0..NODES {
            let disk = dir.join(format!("disk-{i}"));
            std::fs::create_dir_all(&disk).unwrap();
            let mounted = run(
                "mount",
                &[
                    "-t",
                    "tmpfs",
                    "-o",
                    "size=256m",
                    "tmpfs",
                    disk.to_str().unwrap(),
                ],
            );
            crate::support::able(
                mounted,
                "mounting a tmpfs (root) is needed for the chaos test",
            )?;
        }
        let mut cluster = Cluster {
            net,
            dir: dir.to_path_buf(),
            procs: (0..NODES).map(|_| None).collect(),
            paused: vec![false; NODES],
            namesrv: std::env::var("CHAOS_NAMESRV")
                .ok()
                .filter(|p| !p.is_empty()),
        };
        for i in 0..NODES {
            cluster.boot(i).unwrap();
        }
        Some(cluster)
    }

    pub fn addr(&self, i: usize) -> String {
        format!("{}:{PORT}", self.net.node_ip(i))
    }

    /// The NameServers that embed the nodes; none when the nodes stand alone.
    pub fn namesrvs(&self) -> Vec<String> {
        match self.namesrv {
            Some(_) => (0..NODES)
                .map(|i| format!("{}:{NAMESRV_PORT}", self.net.node_ip(i)))
                .collect(),
            None => Vec::new(),
        }
    }

    fn disk(&self, i: usize) -> PathBuf {
        self.dir.join(format!("disk-{i}"))
    }

    /// Starts node `i` (again) and waits for its boot line; an error if it exits first.
    pub fn boot(&mut self, i: usize) -> Result<(), String> {
        assert!(self.procs[i].is_none(), "n{i} already runs");
        let conf = self.dir.join(format!("controller-{i}.conf"));
        // Snapshots every 64 entries, so that schedules build, send and install them too. The
        // Java controller reads the same file (mappedFileSize and configStorePath are its keys;
        // ours ignores them).
        let props = ControllerProps::new(
            (0..NODES).map(|j| self.addr(j)),
            i,
            self.disk(i).join("store"),
        )
        .group("chaos")
        .extra(&format!(
            "scanNotActiveBrokerInterval=1000\nscanInactiveMasterInterval=1000\n\
             controllerSnapshotEveryEntries=64\nmappedFileSize=67108864\nconfigStorePath={}\n",
            self.disk(i).join("controller.properties").display()
        ));
        std::fs::write(&conf, props.to_string()).unwrap();
        let program = match &self.namesrv {
            Some(namesrv) => {
                // The NameServer's own keys, then the controller's (one file, as Java's
                // cluster-3n-namesrv-plugin layout has it).
                let mut embedded = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&conf)
                    .unwrap();
                write!(
                    embedded,
                    "listenPort={NAMESRV_PORT}\nenableControllerInNamesrv=true\nhttpEnable=false\n\
                     kvConfigPath={}\nlogDir={}\n",
                    self.disk(i).join("kvConfig.json").display(),
                    self.dir.join(format!("logs-{i}")).display()
                )
                .unwrap();
                namesrv.clone()
            }
            // CHAOS_CONTROLLER runs another controller on the same schedules
            // (scripts/java-controller for the Java one, as the control).
            None => std::env::var("CHAOS_CONTROLLER").unwrap_or_else(|_| MQCONTROLLER.to_string()),
        };
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.net.ns(i), &program, "-c"])
            .arg(&conf);
        let log = self.dir.join(format!("node-{i}.log"));
        let child = crate::support::boot_node(command, &log).map_err(|e| format!("n{i} {e}"))?;
        self.procs[i] = Some(child);
        self.paused[i] = false;
        Ok(())
    }

    /// kill -9.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.procs[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused[i] = false;
    }

    fn signal(&mut self, i: usize, signal: &str) {
        if let Some(child) = &self.procs[i] {
            run("kill", &[signal, &child.id().to_string()]);
        }
    }

    /// SIGSTOP.
    pub fn pause(&mut self, i: usize) {
        self.signal(i, "-STOP");
        self.paused[i] = true;
    }

    /// SIGCONT.
    pub fn resume(&mut self, i: usize) {
        self.signal(i, "-CONT");
        self.paused[i] = false;
    }

    /// Whether node `i` runs; a node that exited on its own is reaped, its status given.
    pub fn exited(&mut self, i: usize) -> Option<String> {
        let child = self.procs[i].as_mut()?;
        let status = child.try_wait().ok()??;
        self.procs[i] = None;
        Some(status.to_string())
    }

    pub fn running(&self, i: usize) -> bool {
        self.procs[i].is_some()
    }

    /// Deletes node `i`'s store (the node must not run).
    pub fn wipe(&self, i: usize) {
        assert!(!self.running(i), "n{i} runs");
        let _ = std::fs::remove_dir_all(self.disk(i).join("store"));
    }

    /// Fills node `i`'s disk up.
    pub fn fill_disk(&self, i: usize) {
        let mut file = std::fs::File::create(self.disk(i).join("filler")).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
    }

    pub fn free_disk(&self, i: usize) {
        let _ = std::fs::remove_file(self.disk(i).join("filler"));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..NODES {
            if self.paused[i] {
                self.resume(i);
            }
            self.kill(i);
            let _ = Command::new("umount").arg("-l").arg(self.disk(i)).status();
        }
    }
}
