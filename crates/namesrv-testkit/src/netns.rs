//! A private network made by a test: one namespace per node (a controller node, a NameServer),
//! all joined by a bridge on a subnet that exists only inside the test, and blackhole routes to
//! cut links. The test process stands on the bridge, where brokers stand; it may hold more
//! addresses there, one per simulated broker, so that a broker can be cut off from some nodes
//! and not from others.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};

/// Namespaces, a bridge and veth pairs named after this process, removed on drop.
pub struct Net {
    tag: String,
    subnet: String,
    nodes: usize,
    extra: usize,
    /// The blackhole routes in place, as (namespace index, destination address).
    cuts: BTreeSet<(usize, String)>,
}

pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Net {
    /// The network of test number `test` (tests that run at once each take their own number):
    /// `nodes` namespaces and `extra` more addresses for the test process on the bridge.
    pub fn new(test: u8, nodes: usize, extra: usize) -> Option<Net> {
        let usable = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .is_ok_and(|o| o.status.success())
            && is_root();
        crate::needs(
            usable.then_some(()),
            "root and iproute2 (ip netns), for the network fault tests,",
        )?;
        let pid = std::process::id();
        let net = Net {
            tag: format!("c{test}{}", pid % 100_000),
            subnet: format!("10.{}.{}", 231 + test, pid % 250),
            nodes,
            extra,
            cuts: BTreeSet::new(),
        };
        // An address of its own: a bridge otherwise takes its lowest port's, which moves as ports
        // come and go and leaves the namespaces' ARP entries for the test process stale.
        let mac = format!("02:00:0a:{:02x}:{:02x}:01", 231 + test, pid % 250);
        ip(&[
            "link",
            "add",
            &net.bridge(),
            "address",
            &mac,
            "type",
            "bridge",
        ]);
        ip(&[
            "addr",
            "add",
            &format!("{}.1/24", net.subnet),
            "dev",
            &net.bridge(),
        ]);
        for k in 0..extra {
            let addr = format!("{}/24", net.extra_ip(k));
            ip(&["addr", "add", &addr, "dev", &net.bridge()]);
        }
        ip(&["link", "set", &net.bridge(), "up"]);
        for i in 0..nodes {
            let (ns, host, inner) = (
                net.ns(i),
                format!("{}h{i}", net.tag),
                format!("{}n{i}", net.tag),
            );
            ip(&["netns", "add", &ns]);
            ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner]);
            ip(&["link", "set", &inner, "netns", &ns]);
            ip(&["link", "set", &host, "master", &net.bridge()]);
            ip(&["link", "set", &host, "up"]);
            let addr = format!("{}/24", net.node_ip(i));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", &inner]);
            ip(&["-n", &ns, "link", "set", &inner, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        Some(net)
    }

    /// What this network's interfaces and namespaces are named after.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    pub fn ns(&self, i: usize) -> String {
        format!("{}ns{i}", self.tag)
    }

    pub fn node_ip(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, 11 + i)
    }

    /// The test process's `k`th own address on the bridge (a simulated broker's).
    pub fn extra_ip(&self, k: usize) -> String {
        assert!(k < self.extra);
        format!("{}.{}", self.subnet, 100 + k)
    }

    fn route(&mut self, ns: usize, to: String, cut: bool) {
        let present = self.cuts.contains(&(ns, to.clone()));
        if cut == present {
            return;
        }
        let verb = if cut { "add" } else { "del" };
        ip(&[
            "-n",
            &self.ns(ns),
            "route",
            verb,
            "blackhole",
            &format!("{to}/32"),
        ]);
        if cut {
            self.cuts.insert((ns, to));
        } else {
            self.cuts.remove(&(ns, to));
        }
    }

    /// Cuts (or heals) the link between nodes `i` and `j`, both ways.
    pub fn cut_nodes(&mut self, i: usize, j: usize, cut: bool) {
        let (to_j, to_i) = (self.node_ip(j), self.node_ip(i));
        self.route(i, to_j, cut);
        self.route(j, to_i, cut);
    }

    /// Cuts node `i` off from the other nodes, both ways; the bridge still reaches it.
    pub fn isolate(&mut self, i: usize, cut: bool) {
        for j in (0..self.nodes).filter(|j| *j != i) {
            self.cut_nodes(i, j, cut);
        }
    }

    /// Cuts (or heals) node `i` from the test's `k`th address: the node's answers to it vanish.
    pub fn cut_extra(&mut self, i: usize, k: usize, cut: bool) {
        let to = self.extra_ip(k);
        self.route(i, to, cut);
    }

    /// Makes `/etc/hosts` of every namespace of this network (what a process started there with
    /// `ip netns exec` reads) name these addresses: how a test moves a name to another address,
    /// or makes it resolve late or not at all, as a cluster's DNS does. Written in place, so a
    /// running process sees the change at its next lookup.
    pub fn name_hosts(&self, entries: &[(&str, &str)]) {
        let mut text = String::from("127.0.0.1 localhost\n");
        for (name, ip) in entries {
            text.push_str(&format!("{ip} {name}\n"));
        }
        for i in 0..self.nodes {
            let dir = self.etc(i);
            std::fs::create_dir_all(&dir).expect("/etc/netns is writable (root)");
            std::fs::write(dir.join("hosts"), &text).expect("the hosts file is written");
        }
    }

    /// Where `ip netns exec` finds the files it shows a namespace as its `/etc`.
    fn etc(&self, i: usize) -> std::path::PathBuf {
        std::path::Path::new("/etc/netns").join(self.ns(i))
    }

    /// Removes every cut.
    pub fn heal(&mut self) {
        for (ns, to) in std::mem::take(&mut self.cuts) {
            ip(&[
                "-n",
                &self.ns(ns),
                "route",
                "del",
                "blackhole",
                &format!("{to}/32"),
            ]);
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth pairs with it.
        let quiet = |args: &[&str]| {
            let _ = Command::new("ip").args(args).stderr(Stdio::null()).status();
        };
        for i in 0..self.nodes {
            quiet(&["netns", "del", &self.ns(i)]);
            quiet(&["link", "del", &format!("{}h{i}", self.tag)]);
            let _ = std::fs::remove_dir_all(self.etc(i));
        }
        quiet(&["link", "del", &self.bridge()]);
    }
}
