//! The command line: mqadmin's NameServer and controller commands under their mqadmin names and
//! flags.

use std::ffi::OsString;

use clap::{Args, Parser, Subcommand};

use crate::controller::id_list;

/// Administers RocketMQ NameServers and controllers (the NameServer and controller commands of
/// mqadmin).
#[derive(Debug, Parser)]
#[command(name = "nsadmin", version)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOpts,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalOpts {
    /// NameServer addresses, `host:port;host:port`. Writes go to every one, reads to the first
    /// that answers.
    #[arg(short = 'n', long = "namesrvAddr", env = "NAMESRV_ADDR", global = true)]
    pub namesrv_addr: Option<String>,
    /// Access key to sign state-changing requests with (needs --secret-key).
    #[arg(long, global = true, requires = "secret_key")]
    pub access_key: Option<String>,
    /// Secret key to sign state-changing requests with (needs --access-key).
    #[arg(long, global = true, requires = "access_key")]
    pub secret_key: Option<String>,
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Per-request timeout in milliseconds (mqadmin's default).
    #[arg(long, global = true, default_value_t = 5000)]
    pub timeout_ms: u64,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Clusters and their brokers.
    #[command(name = "clusterList")]
    ClusterList,
    /// Brokers and queues serving a topic.
    #[command(name = "topicRoute")]
    TopicRoute {
        #[arg(short = 't', long = "topic")]
        topic: String,
    },
    /// All topics, or those of one cluster.
    #[command(name = "topicList")]
    TopicList {
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
    },
    /// One KV config value.
    #[command(name = "getKvConfig")]
    GetKvConfig(KvKey),
    /// Set a KV config value on every NameServer.
    #[command(name = "updateKvConfig")]
    UpdateKvConfig {
        #[command(flatten)]
        key: KvKey,
        #[arg(short = 'v', long = "value")]
        value: String,
    },
    /// Delete a KV config value on every NameServer.
    #[command(name = "deleteKvConfig")]
    DeleteKvConfig(KvKey),
    /// Every KV config value of a namespace.
    #[command(name = "getKVListByNamespace")]
    GetKvListByNamespace {
        #[arg(short = 's', long = "namespace")]
        namespace: String,
    },
    /// The configuration of every NameServer.
    #[command(name = "getNamesrvConfig")]
    GetNamesrvConfig,
    /// Change a configuration key on every NameServer.
    #[command(name = "updateNamesrvConfig")]
    UpdateNamesrvConfig {
        #[arg(short = 'k', long = "key")]
        key: String,
        #[arg(short = 'v', long = "value")]
        value: String,
    },
    /// Clear the write permission of a broker's topics on every NameServer.
    #[command(name = "wipeWritePerm")]
    WipeWritePerm {
        #[arg(short = 'b', long = "brokerName")]
        broker: String,
    },
    /// Restore read and write permission of a broker's topics on every NameServer.
    #[command(name = "addWritePerm")]
    AddWritePerm {
        #[arg(short = 'b', long = "brokerName")]
        broker: String,
    },
    /// Remove a topic's routes (of one cluster, or all) from every NameServer. Brokers that still
    /// hold the topic register it again.
    #[command(name = "deleteTopic")]
    DeleteTopic {
        #[arg(short = 't', long = "topic")]
        topic: String,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
    },
    /// Why each NameServer of -n routes a topic the way it does, or not at all ("No route info
    /// of this topic"), in plain words from its route journal.
    #[command(name = "explainRoute")]
    ExplainRoute {
        #[arg(short = 't', long = "topic")]
        topic: String,
    },
    /// Where a broker group stands on each NameServer of -n: its members and when each was last
    /// heard, or why it left.
    #[command(name = "explainBroker")]
    ExplainBroker {
        #[arg(short = 'b', long = "brokerName")]
        broker: String,
    },
    /// The KV group's members of NameServers that agree (namesrvPeers): roles, addresses and
    /// how far each lags the leader's log.
    #[command(name = "listNamesrvMembers")]
    ListNamesrvMembers,
    /// Add a NameServer to the group of NameServers that agree: it joins as a learner and
    /// becomes a voter once caught up. Start it first, its namesrvPeers listing the members and
    /// itself.
    #[command(name = "addNamesrvMember")]
    AddNamesrvMember {
        /// The new member's id, as its namesrvSelfId (`n3`).
        #[arg(short = 'i', long = "memberId")]
        id: String,
        /// The address it serves on, `host:port`.
        #[arg(short = 'm', long = "memberAddress")]
        addr: String,
    },
    /// Remove a NameServer from the group, the leader included (it steps down).
    #[command(name = "removeNamesrvMember")]
    RemoveNamesrvMember {
        /// The member's id (`n1`).
        #[arg(short = 'i', long = "memberId")]
        id: String,
    },
    /// Hand the group's leadership to a caught-up voter.
    #[command(name = "transferNamesrvLeader")]
    TransferNamesrvLeader {
        /// The voter to lead (`n2`).
        #[arg(short = 'i', long = "memberId")]
        id: String,
    },
    /// Compare routes and KV namespaces across the NameServers of -n; exit 1 when they differ.
    Diff {
        /// KV namespaces to compare, repeatable or `;`-separated.
        #[arg(
            short = 's',
            long = "namespace",
            value_delimiter = ';',
            default_value = "ORDER_TOPIC_CONFIG"
        )]
        namespaces: Vec<String>,
    },
    /// The controller group as a node sees it: group name, leader and peers.
    #[command(name = "getControllerMetaData")]
    GetControllerMetaData {
        #[command(flatten)]
        controller: ControllerAddrs,
    },
    /// Each broker set's master and sync-state set, from the controller leader.
    #[command(name = "getSyncStateSet")]
    GetSyncStateSet {
        #[command(flatten)]
        controller: ControllerAddrs,
        #[command(flatten)]
        sets: BrokerSets,
    },
    /// Make a broker the master of its broker set (it must be alive, and in the sync-state set
    /// unless the controller elects unclean masters).
    #[command(name = "electMaster")]
    ElectMaster {
        #[command(flatten)]
        controller: ControllerAddrs,
        /// The cluster of the broker set.
        #[arg(short = 'c', long = "clusterName")]
        cluster: String,
        /// The broker set (`-bn` as in mqadmin).
        #[arg(long = "brokerName", visible_alias = "bn")]
        broker: String,
        /// The id of the broker to make master.
        #[arg(short = 'b', long = "brokerId")]
        broker_id: i64,
    },
    /// Remove brokers of a broker set, or the whole set, from the controller's metadata.
    #[command(name = "cleanBrokerMetadata")]
    CleanBrokerMetadata {
        #[command(flatten)]
        controller: ControllerAddrs,
        /// The broker set (`-bn` as in mqadmin).
        #[arg(long = "brokerName", visible_alias = "bn")]
        broker: String,
        /// The cluster of the broker set; needed unless -l is given.
        #[arg(
            short = 'c',
            long = "clusterName",
            required_unless_present = "clean_living"
        )]
        cluster: Option<String>,
        /// The broker ids to remove, `1;2;3`; without it the whole broker set.
        #[arg(short = 'b', long = "brokerControllerIdsToClean", value_parser = id_list)]
        ids: Option<String>,
        /// Remove brokers even while they are alive.
        #[arg(short = 'l', long = "cleanLivingBroker")]
        clean_living: bool,
    },
    /// The configuration of each controller node of -a.
    #[command(name = "getControllerConfig")]
    GetControllerConfig {
        #[command(flatten)]
        controller: ControllerAddrs,
    },
    /// Change a configuration key on each controller node of -a.
    #[command(name = "updateControllerConfig")]
    UpdateControllerConfig {
        #[command(flatten)]
        controller: ControllerAddrs,
        #[arg(short = 'k', long = "key")]
        key: String,
        #[arg(short = 'v', long = "value")]
        value: String,
    },
    /// The controller group's members with their roles, addresses and how far each lags the
    /// leader's log.
    #[command(name = "listControllerMembers")]
    ListControllerMembers {
        #[command(flatten)]
        controller: ControllerAddrs,
    },
    /// Add a node to the controller group: it joins as a learner and becomes a voter once it
    /// has caught up. Start the node first, its config listing the group's members and itself.
    #[command(name = "addControllerMember")]
    AddControllerMember {
        #[command(flatten)]
        controller: ControllerAddrs,
        /// The new member's id, as its controllerDLegerSelfId (`n3`).
        #[arg(short = 'i', long = "memberId")]
        id: String,
        /// The address it serves on, `host:port`.
        #[arg(short = 'm', long = "memberAddress")]
        addr: String,
    },
    /// Remove a node from the controller group, the leader included (it steps down).
    #[command(name = "removeControllerMember")]
    RemoveControllerMember {
        #[command(flatten)]
        controller: ControllerAddrs,
        /// The member's id (`n1`).
        #[arg(short = 'i', long = "memberId")]
        id: String,
    },
    /// Hand the controller group's leadership to a caught-up voter.
    #[command(name = "transferControllerLeader")]
    TransferControllerLeader {
        #[command(flatten)]
        controller: ControllerAddrs,
        /// The voter to lead (`n2`).
        #[arg(short = 'i', long = "memberId")]
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct ControllerAddrs {
    /// Controller node addresses, `host:port;host:port`; requests the leader must answer go to
    /// the leader these nodes name.
    #[arg(short = 'a', long = "controllerAddress")]
    pub addrs: String,
}

/// Which broker sets getSyncStateSet shows: one by name, or those of a cluster (whose broker
/// names the NameServers of -n know).
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct BrokerSets {
    /// One broker set.
    #[arg(short = 'b', long = "brokerName")]
    pub broker: Option<String>,
    /// Every broker set of a cluster (its broker names from the NameServers of -n).
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

/// mqadmin's options parser takes multi-letter short options such as `-bn`; clap's short
/// options are single letters, so `-bn` is passed on as its long alias `--bn`.
pub fn mqadmin_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    args.into_iter()
        .map(|arg| match arg.to_str() {
            Some("-bn") => "--bn".into(),
            Some(a) if a.starts_with("-bn=") => format!("-{a}").into(),
            _ => arg,
        })
        .collect()
}

#[derive(Debug, Args)]
pub struct KvKey {
    #[arg(short = 's', long = "namespace")]
    pub namespace: String,
    #[arg(short = 'k', long = "key")]
    pub key: String,
}
