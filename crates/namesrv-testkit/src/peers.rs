//! NameServers that are each other's peers (`namesrvPeers`), which replicate the KV config
//! among themselves, on fixed ports so that a killed one comes back where the others expect it.

use std::time::Duration;

use rocketmq_wire::client::Client;

use crate::controller::free_port;
use crate::server::{eventually, Launch, Nodes};

pub struct NamesrvCluster {
    nodes: Nodes,
    /// Each NameServer's remoting address, in node order (`n0`, `n1`, ...).
    pub addrs: Vec<String>,
}

impl std::ops::Deref for NamesrvCluster {
    type Target = Nodes;
    fn deref(&self) -> &Nodes {
        &self.nodes
    }
}

impl std::ops::DerefMut for NamesrvCluster {
    fn deref_mut(&mut self) -> &mut Nodes {
        &mut self.nodes
    }
}

/// `namesrvPeers` for members at `addrs`: `n0-ADDR;n1-ADDR;...`.
fn peer_list(addrs: &[String]) -> String {
    let members: Vec<String> = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("n{i}-{a}"))
        .collect();
    members.join(";")
}

/// The command that runs a program with its wall clock `skew_s` seconds off (none for 0):
/// libfaketime preloaded into the program itself (Debian's `faketime` wrapper forks, and a
/// SIGKILL would then leave the program running), its monotonic clock left real.
pub fn skewed(skew_s: i64) -> Vec<String> {
    if skew_s == 0 {
        return Vec::new();
    }
    vec![
        "env".into(),
        format!("LD_PRELOAD={}", faketime_library()),
        format!("FAKETIME={skew_s:+}"),
        "FAKETIME_DONT_FAKE_MONOTONIC=1".into(),
    ]
}

/// Where libfaketime's thread-safe build is (Debian's `faketime` package).
fn faketime_library() -> String {
    let candidates = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|dir| dir.path().join("faketime/libfaketimeMT.so.1"))
        .chain([std::path::PathBuf::from(
            "/usr/lib/faketime/libfaketimeMT.so.1",
        )]);
    for path in candidates {
        if path.exists() {
            return path.display().to_string();
        }
    }
    panic!("libfaketime is not installed (Debian package faketime; scripts/install-test-tools)")
}

/// The command that runs a program in a UTS namespace of its own named `host` (`unshare`, then
/// `hostname`; the shell execs the program, whose pid stays the one started).
pub fn named_host(host: &str) -> Vec<String> {
    vec![
        "unshare".into(),
        "--uts".into(),
        "sh".into(),
        "-c".into(),
        format!("hostname {host} && exec \"$0\" \"$@\""),
    ]
}

fn netns_wrap(net: &crate::Net, ns: usize) -> Vec<String> {
    ["ip", "netns", "exec", &net.ns(ns)]
        .map(String::from)
        .to_vec()
}

/// The config of member `id` of `addrs`, bound to namespace `ns`'s address.
fn named_props<'a>(
    net: &'a crate::Net,
    ns: usize,
    port: u16,
    addrs: &'a [String],
    id: usize,
    extra: &'a str,
) -> impl Fn(&std::path::Path) -> String + 'a {
    let ip = net.node_ip(ns);
    let peers = peer_list(addrs);
    move |home| {
        format!(
            "listenPort={port}\nbindAddress={ip}\nhttpBindAddress={ip}\n\
             namesrvPeers={peers}\nnamesrvSelfId=n{id}\n\
             namesrvPeerStorePath={}\n{extra}",
            home.join("peers").display()
        )
    }
}

impl NamesrvCluster {
    /// Starts `n` NameServers that list each other; `extra` is appended to every config file.
    pub fn start(launch: Launch, n: usize, extra: &str) -> Self {
        Self::start_skewed(launch, &vec![0; n], extra)
    }

    /// Starts NameServers that list each other, one per entry of `skews_s`, each with a wall
    /// clock that many seconds off (libfaketime, the monotonic clock left real: hosts whose
    /// clocks differ); `extra` is appended to every config file.
    pub fn start_skewed(launch: Launch, skews_s: &[i64], extra: &str) -> Self {
        Self::start_wrapped(
            launch,
            skews_s.len(),
            |i| format!("n{i}"),
            |i| skewed(skews_s[i]),
            extra,
        )
    }

    /// NameServers that list each other and all read the same self id, `namesrvSelfId=auto`:
    /// node `i` runs in a UTS namespace of its own whose host name is `{pod}-{i}`, as a
    /// StatefulSet's pod is named. `extra` is appended to every config file.
    pub fn start_as_pods(launch: Launch, n: usize, pod: &str, extra: &str) -> Self {
        Self::start_wrapped(
            launch,
            n,
            |_| "auto".into(),
            |i| named_host(&format!("{pod}-{i}")),
            extra,
        )
    }

    /// `n` NameServers on loopback that list each other: node `i` reads `namesrvSelfId` as
    /// `self_id(i)` and runs under the command `wrap(i)`; `extra` is appended to every config
    /// file, `{home}` in it replaced by the node's home.
    fn start_wrapped(
        launch: Launch,
        n: usize,
        self_id: impl Fn(usize) -> String,
        wrap: impl Fn(usize) -> Vec<String>,
        extra: &str,
    ) -> Self {
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let peers = peer_list(&addrs);
        let mut nodes = Nodes::new(launch);
        for (i, port) in ports.iter().enumerate() {
            let id = self_id(i);
            nodes.add_wrapped(
                |home| {
                    format!(
                        "listenPort={port}\nnamesrvPeers={peers}\nnamesrvSelfId={id}\n\
                         namesrvPeerStorePath={}\n{}",
                        home.join("peers").display(),
                        extra.replace("{home}", &home.display().to_string())
                    )
                },
                wrap(i),
            );
        }
        nodes.start_all();
        NamesrvCluster { nodes, addrs }
    }

    /// Three NameServers each in a namespace of `net`, at its node addresses; `extra` is
    /// appended to every config file. Their links can then be cut with `net`.
    pub fn start_in_net(launch: Launch, net: &crate::Net, n: usize, extra: &str) -> Self {
        let port = crate::controller::free_port();
        let addrs: Vec<String> = (0..n)
            .map(|i| format!("{}:{port}", net.node_ip(i)))
            .collect();
        let peers = peer_list(&addrs);
        let mut nodes = Nodes::new(launch);
        for i in 0..n {
            let wrap = ["ip", "netns", "exec", &net.ns(i)]
                .map(String::from)
                .to_vec();
            let ip = net.node_ip(i);
            nodes.add_wrapped(
                |home| {
                    format!(
                        "listenPort={port}\nbindAddress={ip}\nhttpBindAddress={ip}\n\
                         namesrvPeers={peers}\nnamesrvSelfId=n{i}\n\
                         namesrvPeerStorePath={}\n{extra}",
                        home.join("peers").display()
                    )
                },
                wrap,
            );
        }
        nodes.start_all();
        NamesrvCluster { nodes, addrs }
    }

    /// NameServers named by host name (`names`, resolved through the namespaces' hosts files,
    /// [`crate::Net::name_hosts`]), node `i` in namespace `i` of `net` at its address there,
    /// all on one port; `extra` is appended to every config file.
    pub fn start_named_in_net(
        launch: Launch,
        net: &crate::Net,
        names: &[&str],
        extra: &str,
    ) -> Self {
        let port = crate::controller::free_port();
        let addrs: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
        let mut nodes = Nodes::new(launch);
        for i in 0..names.len() {
            let props = named_props(net, i, port, &addrs, i, extra);
            nodes.add_wrapped(|home| props(home), netns_wrap(net, i));
        }
        nodes.start_all();
        NamesrvCluster { nodes, addrs }
    }

    /// Kills node `i` (of [`NamesrvCluster::start_named_in_net`]) and starts it again in
    /// namespace `ns` of `net`, at the address there, on its home and stores: a pod rescheduled
    /// to another host under the same name. The name is the test's to move.
    pub fn move_named(&mut self, i: usize, net: &crate::Net, ns: usize, extra: &str) {
        let port: u16 = self.addrs[i]
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .expect("a member address with a port");
        self.nodes.kill(i);
        let props = named_props(net, ns, port, &self.addrs, i, extra)(&self.nodes.home(i));
        self.nodes.relocate(i, props, netns_wrap(net, ns));
        self.nodes.restart(i);
    }

    /// Starts one more NameServer on loopback, its `namesrvPeers` listing the members and
    /// itself, as an operator starts one to add to the group (the others' configs are left as
    /// they are); its index. `extra` is appended to its config file.
    pub fn start_new_member(&mut self, extra: &str) -> usize {
        let port = free_port();
        self.addrs.push(format!("127.0.0.1:{port}"));
        let peers = peer_list(&self.addrs);
        let i = self.addrs.len() - 1;
        self.nodes.add(|home| {
            format!(
                "listenPort={port}\nnamesrvPeers={peers}\nnamesrvSelfId=n{i}\n\
                 namesrvPeerStorePath={}\n{extra}",
                home.join("peers").display()
            )
        });
        self.nodes.restart(i);
        i
    }

    pub async fn client(&self, i: usize) -> Client {
        self.node(i).client().await
    }

    /// Waits until every running node says it is ready (`/readyz`).
    pub async fn ready(&self, limit: Duration) {
        for i in 0..self.nodes.nodes.len() {
            if !self.is_running(i) {
                continue;
            }
            self.node_ready(i, limit).await;
        }
    }

    pub async fn node_ready(&self, i: usize, limit: Duration) {
        let node = self.node(i);
        eventually(&format!("node {i} ready"), limit, || async {
            node.http_request("GET /readyz HTTP/1.0\r\n\r\n").await.0 == 200
        })
        .await;
    }
}
