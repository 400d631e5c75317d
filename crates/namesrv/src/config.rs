//! Server configuration: the Java NameServer's properties keys with their defaults, binding
//! rules, the remembered extra keys, the update blacklist and the sorted listing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocketmq_wire::key_table::{Binding, Blacklist};

/// Whether a `namesrvPeers` value lists any NameServer: the one place that tells a member of
/// NameServers that agree from a lone NameServer (the KV group and the allocator's tuning both
/// ask it).
pub fn lists_peers(namesrv_peers: &str) -> bool {
    !namesrv_peers.trim().is_empty()
}

impl ServerConfig {
    /// A key's value as the listing shows it; `None` for an unknown key or an unset value.
    pub fn get(&self, key: &str) -> Option<String> {
        self.entries()
            .into_iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v)
    }
}

rocketmq_wire::key_table! {
    /// Every key of NamesrvConfig and NettyServerConfig, under its Java property name.
    pub struct ServerConfig(home: &Path, rocketmq_home: Option<String>) {
    "rocketmqHome" => rocketmq_home: Option<String> = rocketmq_home;
    "kvConfigPath" => kv_config_path: String = home.join("namesrv").join("kvConfig.json").display().to_string();
    "configStorePath" => config_store_path: String = home.join("namesrv").join("namesrv.properties").display().to_string();
    "productEnvName" => product_env_name: String = "center".into();
    "clusterTest" => cluster_test: bool = false;
    "orderMessageEnable" => order_message_enable: bool = false;
    "returnOrderTopicConfigToBroker" => return_order_topic_config_to_broker: bool = true;
    "clientRequestThreadPoolNums" => client_request_thread_pool_nums: i32 = 8;
    "defaultThreadPoolNums" => default_thread_pool_nums: i32 = 16;
    "clientRequestThreadPoolQueueCapacity" => client_request_thread_pool_queue_capacity: i32 = 50000;
    "defaultThreadPoolQueueCapacity" => default_thread_pool_queue_capacity: i32 = 10000;
    "scanNotActiveBrokerInterval" => scan_not_active_broker_interval: i64 = 5000;
    "unRegisterBrokerQueueCapacity" => unregister_broker_queue_capacity: i32 = 3000;
    "supportActingMaster" => support_acting_master: bool = false;
    "enableAllTopicList" => enable_all_topic_list: bool = true;
    "enableTopicList" => enable_topic_list: bool = true;
    "notifyMinBrokerIdChanged" => notify_min_broker_id_changed: bool = false;
    "enableControllerInNamesrv" => enable_controller_in_namesrv: bool = false;
    "needWaitForService" => need_wait_for_service: bool = false;
    "waitSecondsForService" => wait_seconds_for_service: i32 = 45;
    "deleteTopicWithBrokerRegistration" => delete_topic_with_broker_registration: bool = false;
    "configBlackList" => config_black_list: String = "configBlackList;configStorePath;kvConfigPath".into();
    "bindAddress" => bind_address: String = "0.0.0.0".into();
    "listenPort" => listen_port: i32 = 9876;
    "serverWorkerThreads" => server_worker_threads: i32 = 8;
    "serverCallbackExecutorThreads" => server_callback_executor_threads: i32 = 0;
    "serverSelectorThreads" => server_selector_threads: i32 = 3;
    "serverOnewaySemaphoreValue" => server_oneway_semaphore_value: i32 = 256;
    "serverAsyncSemaphoreValue" => server_async_semaphore_value: i32 = 64;
    "serverChannelMaxIdleTimeSeconds" => server_channel_max_idle_time_seconds: i32 = 120;
    "serverFirstFrameTimeoutSeconds" => server_first_frame_timeout_seconds: i32 = 30;
    "serverMaxConnections" => server_max_connections: i64 = 0;
    "serverMaxConnectionsPerAddress" => server_max_connections_per_address: i64 = 0;
    "serverSocketSndBufSize" => server_socket_snd_buf_size: i32 = 0;
    "serverSocketRcvBufSize" => server_socket_rcv_buf_size: i32 = 0;
    "writeBufferHighWaterMark" => write_buffer_high_water_mark: i32 = 0;
    "writeBufferLowWaterMark" => write_buffer_low_water_mark: i32 = 0;
    "serverSocketBacklog" => server_socket_backlog: i32 = 1024;
    "serverNettyWorkerGroupEnable" => server_netty_worker_group_enable: bool = true;
    "serverPooledByteBufAllocatorEnable" => server_pooled_byte_buf_allocator_enable: bool = true;
    "enableShutdownGracefully" => enable_shutdown_gracefully: bool = false;
    "shutdownWaitTimeSeconds" => shutdown_wait_time_seconds: i32 = 30;
    "useEpollNativeSelector" => use_epoll_native_selector: bool = false;
    "maxFrameLength" => max_frame_length: i64 = rocketmq_wire::frame::DEFAULT_MAX_FRAME as i64;
    "authenticationEnabled" => authentication_enabled: bool = false;
    "httpEnable" => http_enable: bool = true;
    "httpBindAddress" => http_bind_address: String = String::new();
    "httpPort" => http_port: i32 = 9877;
    "httpHeaderReadTimeoutSeconds" => http_header_read_timeout_seconds: i32 = 5;
    "httpIdleTimeoutSeconds" => http_idle_timeout_seconds: i32 = 30;
    "httpMaxConnections" => http_max_connections: i32 = 256;
    "advertisedAddresses" => advertised_addresses: String = String::new();
    "routeSnapshotEnable" => route_snapshot_enable: bool = true;
    "logDir" => log_dir: String = home.join("logs").join("rocketmqlogs").display().to_string();
    "routeSnapshotPath" => route_snapshot_path: String = home.join("namesrv").join("routeSnapshot.json").display().to_string();
    "authCredentialsPath" => auth_credentials_path: String = home.join("namesrv").join("credentials.properties").display().to_string();
    // Ours: the NameServers that replicate the KV config with this one (`n0-host:port;n1-...`,
    // their remoting addresses), and which of them this one is. Empty: a lone NameServer.
    "namesrvPeers" => namesrv_peers: String = String::new();
    "namesrvSelfId" => namesrv_self_id: String = String::new();
    // Ours: where this NameServer keeps the KV group's Raft log and snapshots.
    "namesrvPeerStorePath" => namesrv_peer_store_path: String = home.join("namesrv").join("peers").display().to_string();
    // Ours: a file holding the secret every member of namesrvPeers shares, with which they prove
    // who they are to each other. Empty: members are told apart by their addresses only.
    "namesrvPeerSecretPath" => namesrv_peer_secret_path: String = String::new();
    // Ours: the route journal (every route change with its cause, for `nsadmin explainRoute`),
    // where it is kept and its bounds; read at start.
    "routeJournalEnable" => route_journal_enable: bool = true;
    "routeJournalPath" => route_journal_path: String = home.join("namesrv").join("journal").display().to_string();
    "routeJournalMaxBytes" => route_journal_max_bytes: i64 = 64 << 20;
    "routeJournalMaxAgeHours" => route_journal_max_age_hours: i64 = 7 * 24;
}
}

/// Keys that can never be changed remotely, whatever `configBlackList` says: any access key
/// may send UPDATE_NAMESRV_CONFIG (a broker's included), so nothing it sets may weaken the
/// server's protection or name a file the server reads or writes (writing paths was a remote
/// code execution hole in old Java versions).
/// - paths and files: the config, KV, snapshot and credentials files, logs, the home;
/// - `configBlackList` itself, which would otherwise unlock the rest;
/// - `authenticationEnabled`: switching authentication off;
/// - `bindAddress`, `httpBindAddress`: widening a loopback or internal-only listener to every
///   interface after the next restart;
/// - `advertisedAddresses`: the address server answers it to clients looking for name
///   servers, so rewriting it would send a cluster's clients to a server of the attacker's.
/// - `namesrvPeers`, `namesrvSelfId`, `namesrvPeerStorePath`, `namesrvPeerSecretPath`: who the
///   KV group's members are, how they prove it and where this one keeps its log cannot change
///   under a running group.
const ALWAYS_BLACKLISTED: [&str; 16] = [
    "configBlackList",
    "configStorePath",
    "kvConfigPath",
    "rocketmqHome",
    "authenticationEnabled",
    "authCredentialsPath",
    "routeSnapshotPath",
    "routeJournalPath",
    "logDir",
    "bindAddress",
    "httpBindAddress",
    "advertisedAddresses",
    "namesrvPeers",
    "namesrvSelfId",
    "namesrvPeerStorePath",
    "namesrvPeerSecretPath",
];

/// TLS settings decide whether traffic is encrypted and peers verified, and name certificate
/// and key files: every key under this prefix is refused, including ones added later.
const ALWAYS_BLACKLISTED_PREFIXES: &[&str] = &["tls."];

/// The effective configuration plus what Java also remembers: unknown keys of the config file,
/// and the blacklist fixed at start.
#[derive(Clone, Debug)]
pub struct Settings {
    pub server: ServerConfig,
    extras: BTreeMap<String, String>,
    blacklist: Blacklist,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("cannot parse properties: {0}")]
    Parse(String),
}

/// The blacklist a server started with these settings keeps until it stops.
fn blacklist_of(server: &ServerConfig) -> Blacklist {
    Blacklist::new(
        &ALWAYS_BLACKLISTED,
        ALWAYS_BLACKLISTED_PREFIXES,
        &server.config_black_list,
    )
}

/// Parses Java `.properties` text.
pub fn parse_properties(text: &[u8]) -> Result<Vec<(String, String)>, ConfigError> {
    rocketmq_wire::properties::parse(text).map_err(|e| ConfigError::Parse(e.to_string()))
}

impl Settings {
    /// Defaults for a user whose home is `home`, with `ROCKETMQ_HOME` if set.
    pub fn defaults(home: &Path, rocketmq_home: Option<String>) -> Self {
        let server = ServerConfig::with_defaults(home, rocketmq_home);
        let blacklist = blacklist_of(&server);
        Settings {
            server,
            extras: BTreeMap::new(),
            blacklist,
        }
    }

    /// Loads a properties file as `-c` does: it becomes where config updates are persisted.
    pub fn load_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let bytes = std::fs::read(path).map_err(|e| ConfigError::Read(path.to_path_buf(), e))?;
        for (k, v) in parse_properties(&bytes)? {
            // A value that does not convert is ignored, as Java ignores it.
            if self.server.set(&k, &v) == Binding::Unknown {
                self.extras.insert(k, v);
            }
        }
        self.server.config_store_path = path.display().to_string();
        self.blacklist = blacklist_of(&self.server);
        Ok(())
    }

    /// What the embedded controller reads: every key of the config file that is not a server
    /// key, plus the values of the server keys the controller shares with the NameServer (as
    /// Java gives the whole file to both).
    pub fn controller_properties(&self) -> Vec<(String, String)> {
        let mut props: Vec<(String, String)> = self
            .extras
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for key in rocketmq_controller::config::KNOWN {
            if let Some(value) = self.server.get(key) {
                props.push((key.to_string(), value));
            }
        }
        props
    }

    /// A key of the config file that is not a server config key (TLS settings, for one).
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.extras.get(key).map(String::as_str)
    }

    pub fn blacklisted<'a>(&self, keys: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
        self.blacklist.first_refused(keys)
    }

    /// Applies a remote update (already checked against the blacklist) as the controller does
    /// too ([`rocketmq_wire::key_table::apply_update`]).
    pub fn apply_update(&mut self, props: &[(String, String)]) {
        let server = &mut self.server;
        rocketmq_wire::key_table::apply_update(props, |k, v| server.set(k, v), &mut self.extras);
    }

    /// Every key with its value, sorted by key, as GET_NAMESRV_CONFIG and the persisted file
    /// show them.
    pub fn listing(&self) -> String {
        let all = rocketmq_wire::key_table::merged(&self.extras, self.server.entries());
        rocketmq_wire::properties::write(all.iter().map(|(k, v)| (*k, v.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_matches_the_java_default_listing() {
        let s = Settings::defaults(Path::new("/home/rocketmq"), Some("/opt/rocketmq".into()));
        let listing = s.listing();
        assert!(listing.contains("\nbindAddress=0.0.0.0\nclientRequestThreadPoolNums=8\n"));
        assert!(listing.contains("\nkvConfigPath=/home/rocketmq/namesrv/kvConfig.json\n"));
        assert!(listing.contains("\nrocketmqHome=/opt/rocketmq\n"));
        assert!(listing.ends_with("writeBufferLowWaterMark=0\n"));
        let keys: Vec<&str> = listing
            .lines()
            .map(|l| l.split('=').next().unwrap())
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn listing_reads_back_to_the_same_values() {
        let mut s = Settings::defaults(Path::new("/h"), None);
        s.server.product_env_name = "a\nkvConfigPath=/evil\\".into();
        s.server.bind_address = " x\ty".into();
        let back = parse_properties(s.listing().as_bytes()).unwrap();
        let get = |key: &str| {
            back.iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(get("productEnvName"), ["a\nkvConfigPath=/evil\\"]);
        assert_eq!(get("kvConfigPath"), ["/h/namesrv/kvConfig.json"]);
        assert_eq!(get("bindAddress"), [" x\ty"]);
    }

    #[test]
    fn listing_reads_back_to_the_same_keys() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("namesrv.conf");
        std::fs::write(
            &file,
            "myCustom\\ key=one\nfoo\\:bar=two\n\\#hashkey=three\na\\=b=four\n\\!bang=five\n\
             back\\\\slash=six\ntab\\tkey=seven\nctl\\u0001key=eight\n\\ lead=nine\n",
        )
        .unwrap();
        let mut s = Settings::defaults(dir.path(), None);
        s.load_file(&file).unwrap();
        let want = [
            ("myCustom key", "one"),
            ("foo:bar", "two"),
            ("#hashkey", "three"),
            ("a=b", "four"),
            ("!bang", "five"),
            ("back\\slash", "six"),
            ("tab\tkey", "seven"),
            ("ctl\u{1}key", "eight"),
            (" lead", "nine"),
        ];
        for (k, v) in want {
            assert_eq!(s.extra(k), Some(v), "{k:?} as loaded");
        }
        let listing = s.listing();
        let back: BTreeMap<String, String> = parse_properties(listing.as_bytes())
            .unwrap()
            .into_iter()
            .collect();
        for (k, v) in want {
            assert_eq!(
                back.get(k).map(String::as_str),
                Some(v),
                "{k:?} in\n{listing}"
            );
        }
        let server_keys = s
            .server
            .entries()
            .iter()
            .filter(|(_, v)| v.is_some())
            .count();
        assert_eq!(back.len(), want.len() + server_keys, "{listing}");
    }

    #[test]
    fn tls_and_security_keys_are_blacklisted_whatever_the_file_says() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("namesrv.conf");
        std::fs::write(&file, "configBlackList=\ntls.server.mode=enforcing\n").unwrap();
        let mut s = Settings::defaults(dir.path(), None);
        s.load_file(&file).unwrap();
        for key in [
            "tls.server.mode",
            "tls.server.need.client.auth",
            "tls.server.certPath",
            "tls.some.future.key",
            "bindAddress",
            "httpBindAddress",
            "advertisedAddresses",
            "configBlackList",
        ] {
            assert_eq!(s.blacklisted(["productEnvName", key]), Some(key));
        }
        assert_eq!(
            s.blacklisted(["productEnvName", "tlsish", "listenPort"]),
            None
        );
    }

    #[test]
    fn binding_follows_java_conversions() {
        let mut s = Settings::defaults(Path::new("/h"), None);
        assert_eq!(
            s.server.set("listenPort", "10000 "),
            Binding::Invalid("listenPort")
        );
        assert_eq!(
            s.server.listen_port, 9876,
            "ints are parsed without trimming"
        );
        s.server.set("orderMessageEnable", "TRUE");
        assert!(s.server.order_message_enable);
        s.server.set("productEnvName", "  test ");
        assert_eq!(s.server.product_env_name, "test");
        assert_eq!(s.server.set("noSuchKey", "1"), Binding::Unknown);
        assert!(!s.listing().contains("rocketmqHome"));
    }

    #[test]
    fn file_keys_are_remembered_and_path_keys_blacklisted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("namesrv.conf");
        std::fs::write(
            &file,
            "listenPort=9999\ncustomKey = x\nconfigBlackList=orderMessageEnable\n",
        )
        .unwrap();
        let mut s = Settings::defaults(dir.path(), None);
        s.load_file(&file).unwrap();
        assert_eq!(s.server.listen_port, 9999);
        assert!(s.listing().contains("customKey=x\n"));
        assert_eq!(s.server.config_store_path, file.display().to_string());
        assert_eq!(s.blacklisted(["a", "kvConfigPath"]), Some("kvConfigPath"));
        assert_eq!(
            s.blacklisted(["orderMessageEnable"]),
            Some("orderMessageEnable")
        );
        assert_eq!(s.blacklisted(["rocketmqHome"]), Some("rocketmqHome"));
        s.apply_update(&[
            ("customKey".into(), "y".into()),
            ("other".into(), "z".into()),
        ]);
        assert!(s.listing().contains("customKey=y\n"));
        assert!(!s.listing().contains("other="));
    }
}
