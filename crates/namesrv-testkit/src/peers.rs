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

impl NamesrvCluster {
    /// Starts `n` NameServers that list each other; `extra` is appended to every config file.
    pub fn start(launch: Launch, n: usize, extra: &str) -> Self {
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let peers = peer_list(&addrs);
        let mut nodes = Nodes::new(launch);
        for (i, port) in ports.iter().enumerate() {
            nodes.add(|home| {
                format!(
                    "listenPort={port}\nnamesrvPeers={peers}\nnamesrvSelfId=n{i}\n\
                     namesrvPeerStorePath={}\n{extra}",
                    home.join("peers").display()
                )
            });
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
