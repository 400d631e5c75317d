use rocketmq_wire::body::{
    ClusterInfo, DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigWrapper,
};
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;

use crate::server::{call, Server, TIMEOUT};

/// A broker's identity for test registrations.
#[derive(Clone, Debug)]
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

    /// REGISTER_BROKER as a 5.x broker sends it, with each topic's permission. A first
    /// registration must carry zero or at least two topics (one topic from an unknown broker is
    /// refused, as in Java).
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

    /// Registers `topics` (read-write) on a new connection to `server`, which must accept. The
    /// registration lives as long as that connection, so callers keep the returned client.
    pub async fn register_on(&self, server: &Server, topics: &[&str]) -> Client {
        let client = server.client().await;
        let topics: Vec<(&str, i32)> = topics.iter().map(|t| (*t, 6)).collect();
        let resp = client
            .invoke(self.register_request(&topics, dv(1, 0)), TIMEOUT)
            .await
            .unwrap();
        assert_eq!(resp.code, 0, "registration refused: {:?}", resp.remark);
        client
    }

    pub fn unregister_request(&self) -> RemotingCommand {
        RemotingCommand::request(request::UNREGISTER_BROKER)
            .with_ext("brokerName", self.name)
            .with_ext("brokerAddr", &self.addr)
            .with_ext("clusterName", self.cluster)
            .with_ext("brokerId", self.id)
    }

    /// BROKER_HEARTBEAT as a 5.x broker sends it.
    pub fn heartbeat_request(&self) -> RemotingCommand {
        RemotingCommand::request(request::BROKER_HEARTBEAT)
            .with_ext("clusterName", self.cluster)
            .with_ext("brokerAddr", &self.addr)
            .with_ext("brokerName", self.name)
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

/// The two topics every test broker carries, so that registrations are never "single topic".
pub const BASE_TOPICS: [(&str, i32); 2] = [("TopicTest", 6), ("TBW102", 7)];

pub fn put_kv_request(namespace: &str, key: &str, value: &str) -> RemotingCommand {
    RemotingCommand::request(request::PUT_KV_CONFIG)
        .with_ext("namespace", namespace)
        .with_ext("key", key)
        .with_ext("value", value)
}

/// GET_KV_CONFIG or DELETE_KV_CONFIG (both name one entry).
pub fn kv_request(code: i32, namespace: &str, key: &str) -> RemotingCommand {
    RemotingCommand::request(code)
        .with_ext("namespace", namespace)
        .with_ext("key", key)
}

pub fn route_request(topic: &str, version: i32) -> RemotingCommand {
    RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC)
        .with_version(version)
        .with_ext("topic", topic)
}

/// GET_BROKER_CLUSTER_INFO, which must succeed.
/// Registers `count` one-member groups `small000`, `small001`… of the cluster `b-cluster`, each
/// with the base topics, for tests of pages and lists that must stay bounded.
pub async fn register_small_brokers(client: &Client, count: usize) {
    for i in 0..count {
        let name: &'static str = Box::leak(format!("small{i:03}").into_boxed_str());
        Broker::new("b-cluster", name, 0, &format!("127.0.0.2:{}", 20000 + i))
            .register(client, &BASE_TOPICS, 1)
            .await;
    }
}

pub async fn cluster_info(client: &Client) -> ClusterInfo {
    let resp = call(
        client,
        RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
    )
    .await;
    assert_eq!(resp.code, response::SUCCESS);
    ClusterInfo::decode(resp.body.as_deref().unwrap()).unwrap()
}
