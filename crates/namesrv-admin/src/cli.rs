//! The command line: mqadmin's NameServer commands under their mqadmin names and flags.

use clap::{Args, Parser, Subcommand};

/// Administers RocketMQ NameServers (the NameServer commands of mqadmin).
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
}

#[derive(Debug, Args)]
pub struct KvKey {
    #[arg(short = 's', long = "namespace")]
    pub namespace: String,
    #[arg(short = 'k', long = "key")]
    pub key: String,
}
