//! The controller's settings, read from the same properties keys as Java's `ControllerConfig`, so
//! that a Java controller config file (DLedger or JRaft flavour) works unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocketmq_raft::members::{parse_list, Member, MemberError, Members};
use rocketmq_wire::key_table::{Binding, Blacklist};

#[derive(Clone, Debug)]
pub struct ControllerConfig {
    pub group: String,
    /// The members a fresh group is formed of (sorted by Raft id) and which of them this node is;
    /// a running group's members are those of its replicated membership, which may differ
    /// (`docs/controller.md` §5.1). A member's Raft id is the number after the shared prefix
    /// (`n0` is 0), so that it stays the same whatever members come and go.
    pub members: Members,
    pub store_path: PathBuf,
    /// The group's shared secret's file (`controllerPeerSecretPath`), if any.
    pub peer_secret_path: Option<PathBuf>,
    pub elect_unclean_master: bool,
    pub notify_broker_role_changed: bool,
    pub scan_not_active_broker_interval_ms: u64,
    pub scan_inactive_master_interval_ms: u64,
    pub elect_master_max_retry_count: u32,
    /// Log entries between two snapshots (our addition; the log before a snapshot is purged).
    pub snapshot_every_entries: u64,
    /// Raft timing (our additions): the leader's heartbeat interval, which also bounds each
    /// AppendEntries round trip, and the shortest election timeout, which is also the leader's
    /// lease. Raised together for nodes in distant data centres.
    pub raft_heartbeat_interval_ms: u64,
    pub election_timeout_ms: u64,
    /// The port's bounds (our additions, named after the NameServer's `server*` keys).
    pub port: PortLimits,
    /// Where `mqcontroller` serves metrics, probes and its status page: Java's
    /// `metricsExporterType=PROM` turns it on, at `metricsPromExporterHost` (every interface
    /// when empty) and `metricsPromExporterPort`. An embedded node is on the NameServer's page.
    pub http: Option<String>,
    /// The keys as the file and later updates gave them, which the fields above derive from.
    table: ControllerKeys,
    /// Keys of the file that are not in the table, listed by GET_CONTROLLER_CONFIG as given.
    extras: BTreeMap<String, String>,
    blacklist: Blacklist,
}

/// What the controller's port admits and how long a connection may take; fixed at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortLimits {
    /// Connections in total; a tenth of them is kept for the group's own members.
    pub max_connections: i64,
    /// Connections from one source address; 0 or less: a quarter of the total.
    pub max_connections_per_address: i64,
    pub first_frame_timeout_s: u64,
    pub idle_timeout_s: u64,
    /// A whole frame's cap, length field included; snapshot chunks (1 MiB of state, encoded)
    /// must fit, so it is never below 4 MiB.
    pub max_frame_length: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("Attribute value {0} of ControllerConfig is null or empty")]
    Missing(&'static str),
    #[error("invalid {key}: {value}")]
    Invalid { key: &'static str, value: String },
    #[error("controllerDLegerSelfId {0} is not one of controllerDLegerPeers")]
    SelfNotAPeer(String),
    #[error(
        "controllerDLegerPeers: member id {0} is not the members' common prefix followed by a \
         number (n0, n1, n2, ...); the number is the member's Raft id"
    )]
    BadMemberId(String),
    #[error("{key}=auto: {reason}")]
    NoOrdinal { key: &'static str, reason: String },
    #[error("controllerDLegerPeers: {0}")]
    Members(MemberError),
}

impl From<MemberError> for ConfigError {
    fn from(e: MemberError) -> Self {
        match e {
            MemberError::Empty => ConfigError::Missing(keys::PEERS),
            MemberError::Entry(value) => ConfigError::Invalid {
                key: keys::PEERS,
                value,
            },
            MemberError::Id(id) => ConfigError::BadMemberId(id),
            MemberError::SelfNotListed(id) => ConfigError::SelfNotAPeer(id),
            MemberError::NoOrdinal(reason) => ConfigError::NoOrdinal {
                key: keys::SELF_ID,
                reason,
            },
            other => ConfigError::Members(other),
        }
    }
}

rocketmq_wire::key_table! {
    /// Every key of Java's ControllerConfig this node reads, and ours, as given. Some are also
    /// NameServer keys (`scanNotActiveBrokerInterval`, `configBlackList`): Java hands the whole
    /// file to both, and so must an embedding server.
    pub struct ControllerKeys() {
        "controllerDLegerGroup" => group: Option<String> = None;
        "controllerDLegerPeers" => peers: Option<String> = None;
        "controllerDLegerSelfId" => self_id: Option<String> = None;
        "controllerStorePath" => store_path: Option<String> = None;
        "controllerType" => controller_type: String = "DLedger".into();
        "enableElectUncleanMaster" => enable_elect_unclean_master: bool = false;
        "notifyBrokerRoleChanged" => notify_broker_role_changed: bool = true;
        "scanNotActiveBrokerInterval" => scan_not_active_broker_interval: u64 = 5_000;
        "scanInactiveMasterInterval" => scan_inactive_master_interval: u64 = 5_000;
        "electMasterMaxRetryCount" => elect_master_max_retry_count: u64 = 3;
        "configBlackList" => config_black_list: String = "configBlackList;configStorePath".into();
        // Ours: log entries between two snapshots.
        "controllerSnapshotEveryEntries" => snapshot_every_entries: u64 = 5_000;
        // Ours: the Raft heartbeat interval, and the bound of each AppendEntries round trip.
        "controllerRaftHeartbeatIntervalMs" => raft_heartbeat_interval_ms: u64 = 250;
        // Ours: the shortest election timeout (the longest is a heartbeat more), and the
        // leader's lease.
        "controllerElectionTimeoutMs" => election_timeout_ms: u64 = 750;
        // Ours: the port's bounds, as the NameServer's `server*` keys bound its port.
        "controllerServerMaxConnections" => server_max_connections: i64 = 1024;
        "controllerServerMaxConnectionsPerAddress" => server_max_connections_per_address: i64 = 0;
        "controllerServerFirstFrameTimeoutSeconds" => server_first_frame_timeout_seconds: u64 = 30;
        "controllerServerChannelMaxIdleTimeSeconds" => server_channel_max_idle_time_seconds: u64 = 120;
        "controllerServerMaxFrameLength" => server_max_frame_length: u64 = rocketmq_wire::frame::DEFAULT_MAX_FRAME as u64;
        // Ours: a file holding the secret every node of the group shares, with which they prove
        // who they are to each other (`rocketmq_raft::peer_auth`). Empty: addresses only.
        "controllerPeerSecretPath" => peer_secret_path: String = String::new();
        "metricsExporterType" => metrics_exporter_type: String = "DISABLE".into();
        "metricsPromExporterHost" => metrics_prom_exporter_host: String = String::new();
        "metricsPromExporterPort" => metrics_prom_exporter_port: i32 = 5557;
        "jRaftGroupId" => jraft_group_id: Option<String> = None;
        "jRaftServerId" => jraft_server_id: Option<String> = None;
        "jRaftInitConf" => jraft_init_conf: Option<String> = None;
        "jRaftControllerRPCAddr" => jraft_controller_rpc_addr: Option<String> = None;
    }
}

/// The keys the code names on its own: in errors, the blacklist and the port's refusal log.
pub mod keys {
    pub const GROUP: &str = "controllerDLegerGroup";
    pub const PEERS: &str = "controllerDLegerPeers";
    pub const SELF_ID: &str = "controllerDLegerSelfId";
    pub const STORE_PATH: &str = "controllerStorePath";
    pub const TYPE: &str = "controllerType";
    pub const BLACK_LIST: &str = "configBlackList";
    pub const RAFT_HEARTBEAT: &str = "controllerRaftHeartbeatIntervalMs";
    pub const ELECTION_TIMEOUT: &str = "controllerElectionTimeoutMs";
    pub const MAX_CONNECTIONS: &str = "controllerServerMaxConnections";
    pub const MAX_CONNECTIONS_PER_ADDRESS: &str = "controllerServerMaxConnectionsPerAddress";
    pub const FIRST_FRAME_TIMEOUT: &str = "controllerServerFirstFrameTimeoutSeconds";
    pub const IDLE_TIMEOUT: &str = "controllerServerChannelMaxIdleTimeSeconds";
    pub const MAX_FRAME_LENGTH: &str = "controllerServerMaxFrameLength";
    pub const PEER_SECRET_PATH: &str = "controllerPeerSecretPath";
    pub const METRICS_EXPORTER_TYPE: &str = "metricsExporterType";
    pub const METRICS_PROM_HOST: &str = "metricsPromExporterHost";
    pub const METRICS_PROM_PORT: &str = "metricsPromExporterPort";
    pub const JRAFT_SERVER_ID: &str = "jRaftServerId";
    pub const JRAFT_INIT_CONF: &str = "jRaftInitConf";
    pub const JRAFT_RPC_ADDR: &str = "jRaftControllerRPCAddr";
}

/// Every key this controller reads.
pub const KNOWN: &[&str] = ControllerKeys::KEYS;

/// Keys a remote UPDATE_CONTROLLER_CONFIG may never change, whatever the configured blacklist
/// says: where the node keeps its state and who its peers are cannot change under a running group.
pub const ALWAYS_BLACKLISTED: &[&str] = &[
    keys::BLACK_LIST,
    keys::PEER_SECRET_PATH,
    "configStorePath",
    keys::STORE_PATH,
    keys::PEERS,
    keys::SELF_ID,
    keys::GROUP,
    keys::TYPE,
    keys::JRAFT_SERVER_ID,
    keys::JRAFT_INIT_CONF,
    keys::JRAFT_RPC_ADDR,
    // Raft's timing is fixed when the node starts, and the lease is only safe while it is the
    // timing openraft runs with.
    keys::RAFT_HEARTBEAT,
    keys::ELECTION_TIMEOUT,
    // The port is bound and bounded once, at start.
    keys::MAX_CONNECTIONS,
    keys::MAX_CONNECTIONS_PER_ADDRESS,
    keys::FIRST_FRAME_TIMEOUT,
    keys::IDLE_TIMEOUT,
    keys::MAX_FRAME_LENGTH,
    keys::METRICS_EXPORTER_TYPE,
    keys::METRICS_PROM_HOST,
    keys::METRICS_PROM_PORT,
];

/// The HTTP port's address, when Java's metrics keys ask for a Prometheus exporter. Java's
/// other exporters (OTLP_GRPC, LOG) are not served here; the port stays off for them.
fn http_address(table: &ControllerKeys) -> Result<Option<String>, ConfigError> {
    let kind = table.metrics_exporter_type.trim();
    // Java accepts the enum's name or its ordinal.
    let prom = match kind.to_ascii_uppercase().as_str() {
        "PROM" | "2" => true,
        "DISABLE" | "0" | "OTLP_GRPC" | "1" | "LOG" | "3" => false,
        _ => {
            return Err(ConfigError::Invalid {
                key: keys::METRICS_EXPORTER_TYPE,
                value: kind.to_string(),
            })
        }
    };
    if !prom {
        return Ok(None);
    }
    let host = table.metrics_prom_exporter_host.trim();
    let host = match host {
        "" => "0.0.0.0",
        h => h,
    };
    let port = u16::try_from(table.metrics_prom_exporter_port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| ConfigError::Invalid {
            key: keys::METRICS_PROM_PORT,
            value: table.metrics_prom_exporter_port.to_string(),
        })?;
    Ok(Some(if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }))
}

impl ControllerConfig {
    /// Reads the keys of a config file; `home` is where Java puts the store by default. A key
    /// of the table whose value does not convert is refused with the key named (Java would
    /// silently keep the default); values are trimmed first, so that a trailing blank is not
    /// what refuses a file.
    pub fn from_properties(props: &[(String, String)], home: &Path) -> Result<Self, ConfigError> {
        let mut table = ControllerKeys::with_defaults();
        let mut extras = BTreeMap::new();
        for (k, v) in props {
            match table.set(k, v.trim()) {
                Binding::Bound => {}
                Binding::Invalid(key) => {
                    return Err(ConfigError::Invalid {
                        key,
                        value: v.clone(),
                    })
                }
                Binding::Unknown => {
                    extras.insert(k.clone(), v.clone());
                }
            }
        }
        Self::derive(table, extras, home)
    }

    /// The running settings from the table's values.
    fn derive(
        table: ControllerKeys,
        extras: BTreeMap<String, String>,
        home: &Path,
    ) -> Result<Self, ConfigError> {
        let jraft = table.controller_type.eq_ignore_ascii_case("jRaft");
        let (group, listed, self_id) = if jraft {
            jraft_peers(&table)?
        } else {
            let group = given(&table.group)
                .unwrap_or("DefaultControllerGroup")
                .to_string();
            let listed = parse_list(given(&table.peers).ok_or(ConfigError::Missing(keys::PEERS))?)?;
            let self_id = given(&table.self_id).ok_or(ConfigError::Missing(keys::SELF_ID))?;
            (group, listed, self_id.to_string())
        };
        let members = Members::new(listed, &self_id)?;
        let store_path = given(&table.store_path).map_or_else(
            || {
                home.join(if jraft {
                    "jRaftController"
                } else {
                    "DLedgerController"
                })
            },
            PathBuf::from,
        );
        let heartbeat = table.raft_heartbeat_interval_ms.clamp(50, 10_000);
        let http = http_address(&table)?;
        Ok(ControllerConfig {
            group,
            members,
            store_path,
            peer_secret_path: Some(table.peer_secret_path.trim())
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
            elect_unclean_master: table.enable_elect_unclean_master,
            notify_broker_role_changed: table.notify_broker_role_changed,
            scan_not_active_broker_interval_ms: table.scan_not_active_broker_interval.max(100),
            scan_inactive_master_interval_ms: table.scan_inactive_master_interval.max(100),
            elect_master_max_retry_count: table.elect_master_max_retry_count.clamp(1, 100) as u32,
            snapshot_every_entries: table.snapshot_every_entries.max(1),
            raft_heartbeat_interval_ms: heartbeat,
            // Three heartbeats at least, or a follower would stand between two of them.
            election_timeout_ms: table.election_timeout_ms.max(3 * heartbeat),
            port: PortLimits {
                max_connections: table.server_max_connections.clamp(16, 1_000_000),
                max_connections_per_address: table
                    .server_max_connections_per_address
                    .min(1_000_000),
                first_frame_timeout_s: table.server_first_frame_timeout_seconds.clamp(1, 3_600),
                idle_timeout_s: table.server_channel_max_idle_time_seconds.clamp(1, 86_400),
                max_frame_length: table
                    .server_max_frame_length
                    .clamp(4 << 20, i32::MAX as u64) as usize,
            },
            http,
            // The port's TLS, as the NameServer's, is the `-c` file's alone.
            blacklist: Blacklist::new(ALWAYS_BLACKLISTED, &["tls."], &table.config_black_list),
            table,
            extras,
        })
    }

    /// A key of the config file that is not a controller key (the TLS settings, for one).
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.extras.get(key).map(String::as_str)
    }

    pub fn is_blacklisted(&self, key: &str) -> bool {
        self.blacklist.refuses(key)
    }

    /// Applies a remote update (already checked against the blacklist) as the NameServer does
    /// ([`rocketmq_wire::key_table::apply_update`]: keys of the table bound untrimmed, a value
    /// that does not convert changing nothing; extra keys of the file updated; others dropped),
    /// and the settings that can change at run time take effect.
    pub fn apply_update(&mut self, props: &[(String, String)]) {
        let mut table = self.table.clone();
        let mut extras = self.extras.clone();
        rocketmq_wire::key_table::apply_update(props, |k, v| table.set(k, v), &mut extras);
        if let Ok(updated) = Self::derive(table, extras, &self.store_path) {
            // The group, its members, the store and the fixed keys stay as the node started.
            *self = ControllerConfig {
                group: self.group.clone(),
                members: self.members.clone(),
                store_path: self.store_path.clone(),
                peer_secret_path: self.peer_secret_path.clone(),
                raft_heartbeat_interval_ms: self.raft_heartbeat_interval_ms,
                election_timeout_ms: self.election_timeout_ms,
                port: self.port,
                blacklist: self.blacklist.clone(),
                ..updated
            };
        }
    }

    /// `key=value` lines of every setting, sorted by key, as GET_CONTROLLER_CONFIG answers:
    /// the table's values as given, with what the node derived for the group, its id, the
    /// store and the members (Java lists the values its config object holds).
    pub fn listing(&self) -> String {
        let mut all = rocketmq_wire::key_table::merged(&self.extras, self.table.entries());
        all.insert(keys::GROUP, self.group.clone());
        all.insert(keys::SELF_ID, self.members.self_id().to_string());
        all.insert(keys::STORE_PATH, self.store_path.display().to_string());
        all.entry(keys::PEERS).or_insert_with(|| {
            self.members
                .list()
                .iter()
                .map(|p| format!("{}-{}", p.id, p.addr))
                .collect::<Vec<_>>()
                .join(";")
        });
        // Escaped as Java writes properties: a value holding a line break must come back as
        // one value, not as a key of its own.
        rocketmq_wire::properties::write(all.iter().map(|(k, v)| (*k, v.as_str())))
    }
}

/// A string key's value, blank counting as absent, as Java's setters see an empty property.
fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// The JRaft flavour names its members by their Raft address (`jRaftInitConf`, `jRaftServerId`)
/// and lists the addresses brokers use in the same order (`jRaftControllerRPCAddr`). Our nodes
/// talk Raft on the broker address too, so a member is its RPC address, named `n<position>`.
fn jraft_peers(table: &ControllerKeys) -> Result<(String, Vec<Member>, String), ConfigError> {
    let split = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let init = split(
        given(&table.jraft_init_conf).unwrap_or("localhost:9880,localhost:9881,localhost:9882"),
    );
    let rpc = split(
        given(&table.jraft_controller_rpc_addr)
            .unwrap_or("localhost:9770,localhost:9771,localhost:9772"),
    );
    let server = given(&table.jraft_server_id).unwrap_or("localhost:9880");
    if init.len() != rpc.len() || init.is_empty() {
        return Err(ConfigError::Invalid {
            key: keys::JRAFT_RPC_ADDR,
            value: rpc.join(","),
        });
    }
    let position = init
        .iter()
        .position(|a| a == server)
        .ok_or_else(|| ConfigError::SelfNotAPeer(server.to_string()))?;
    let peers = rpc
        .iter()
        .enumerate()
        .map(|(i, addr)| Member {
            id: format!("n{i}"),
            addr: addr.clone(),
        })
        .collect();
    let group = given(&table.jraft_group_id)
        .unwrap_or("jRaft-Controller")
        .to_string();
    Ok((group, peers, format!("n{position}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_value_holding_a_line_break_comes_back_from_the_listing_as_one_value() {
        let mut config = ControllerConfig::from_properties(
            &props(&[
                ("controllerDLegerPeers", "n0-127.0.0.1:9878"),
                ("controllerDLegerSelfId", "n0"),
                ("note", "a key of the file besides the table"),
            ]),
            Path::new("/h"),
        )
        .unwrap();
        // What a 1009 body `note=first\nconfigStorePath=/elsewhere` is read as.
        config.apply_update(&props(&[("note", "first\nconfigStorePath=/elsewhere")]));
        let listed = rocketmq_wire::properties::parse(config.listing().as_bytes()).unwrap();
        let value = |key: &str| {
            listed
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            value("note").as_deref(),
            Some("first\nconfigStorePath=/elsewhere")
        );
        assert_eq!(
            value("controllerStorePath").as_deref(),
            Some("/h/DLedgerController")
        );
        assert_eq!(value("configStorePath"), None, "no key of its own");
    }

    #[test]
    fn a_java_dledger_config_file_is_read_unchanged() {
        let c = ControllerConfig::from_properties(
            &props(&[
                ("controllerDLegerGroup", "group1"),
                (
                    "controllerDLegerPeers",
                    "n2-127.0.0.1:9858;n0-127.0.0.1:9878;n1-127.0.0.1:9868",
                ),
                ("controllerDLegerSelfId", "n1"),
                ("controllerStorePath", "/var/lib/ctl"),
                ("enableElectUncleanMaster", "true"),
                ("scanNotActiveBrokerInterval", "2000"),
                ("mappedFileSize", "67108864"),
            ]),
            Path::new("/home/u"),
        )
        .unwrap();
        assert_eq!(c.group, "group1");
        assert_eq!(
            c.members
                .list()
                .iter()
                .map(|p| p.id.as_str())
                .collect::<Vec<_>>(),
            ["n0", "n1", "n2"]
        );
        assert_eq!(c.members.self_node(), 1);
        assert_eq!(c.members.self_member().addr, "127.0.0.1:9868");
        assert_eq!(c.store_path, PathBuf::from("/var/lib/ctl"));
        assert!(c.elect_unclean_master);
        assert!(c.notify_broker_role_changed);
        assert_eq!(c.scan_not_active_broker_interval_ms, 2000);
        assert!(c.listing().contains("mappedFileSize=67108864\n"));
    }

    #[test]
    fn a_members_raft_id_is_the_number_of_its_id_not_its_position() {
        let c = ControllerConfig::from_properties(
            &props(&[
                (
                    "controllerDLegerPeers",
                    "n10-127.0.0.1:1;n2-127.0.0.1:2;n3-127.0.0.1:3",
                ),
                ("controllerDLegerSelfId", "n10"),
            ]),
            Path::new("/h"),
        )
        .unwrap();
        assert_eq!(c.members.self_node(), 10);
        assert_eq!(c.members.node_id("n7"), Some(7), "a member added later");
        assert_eq!(c.members.name(7), "n7");
        assert_eq!(c.members.get(2).unwrap().addr, "127.0.0.1:2");
        assert_eq!(
            c.members
                .list()
                .iter()
                .map(|p| p.id.as_str())
                .collect::<Vec<_>>(),
            ["n2", "n3", "n10"]
        );
        assert_eq!(c.members.node_id("x7"), None);
        assert_eq!(c.members.node_id("n07"), None);
        let c = ControllerConfig::from_properties(
            &props(&[
                ("controllerDLegerPeers", "ctl1-127.0.0.1:1;ctl2-127.0.0.1:2"),
                ("controllerDLegerSelfId", "ctl2"),
            ]),
            Path::new("/h"),
        )
        .unwrap();
        assert_eq!(
            (c.members.self_node(), c.members.name(5)),
            (2, "ctl5".into())
        );
        for (bad, me) in [
            ("a-127.0.0.1:1;b-127.0.0.1:2", "a"),
            ("n0-127.0.0.1:1;m1-127.0.0.1:2", "n0"),
        ] {
            let refused = ControllerConfig::from_properties(
                &props(&[
                    ("controllerDLegerPeers", bad),
                    ("controllerDLegerSelfId", me),
                ]),
                Path::new("/h"),
            );
            assert!(
                matches!(refused, Err(ConfigError::BadMemberId(_))),
                "{bad}: {refused:?}"
            );
        }
    }

    #[test]
    fn the_store_defaults_to_the_java_directory_under_home() {
        let c = ControllerConfig::from_properties(
            &props(&[
                ("controllerDLegerPeers", "n0-127.0.0.1:9878"),
                ("controllerDLegerSelfId", "n0"),
            ]),
            Path::new("/home/u"),
        )
        .unwrap();
        assert_eq!(c.store_path, PathBuf::from("/home/u/DLedgerController"));
    }

    #[test]
    fn a_jraft_config_maps_its_members_to_their_rpc_addresses() {
        let c = ControllerConfig::from_properties(
            &props(&[
                ("controllerType", "jRaft"),
                (
                    "jRaftInitConf",
                    "127.0.0.1:9880,127.0.0.1:9881,127.0.0.1:9882",
                ),
                ("jRaftServerId", "127.0.0.1:9881"),
                (
                    "jRaftControllerRPCAddr",
                    "127.0.0.1:9770,127.0.0.1:9771,127.0.0.1:9772",
                ),
            ]),
            Path::new("/h"),
        )
        .unwrap();
        assert_eq!(c.members.self_id(), "n1");
        assert_eq!(c.members.self_member().addr, "127.0.0.1:9771");
        assert_eq!(c.group, "jRaft-Controller");
    }

    #[test]
    fn missing_or_malformed_peers_are_refused_with_the_key_named() {
        let missing = ControllerConfig::from_properties(
            &props(&[("controllerDLegerSelfId", "n0")]),
            Path::new("/h"),
        );
        assert_eq!(missing.unwrap_err(), ConfigError::Missing(keys::PEERS));
        let stranger = ControllerConfig::from_properties(
            &props(&[
                ("controllerDLegerPeers", "n0-127.0.0.1:9878"),
                ("controllerDLegerSelfId", "n7"),
            ]),
            Path::new("/h"),
        );
        assert_eq!(
            stranger.unwrap_err(),
            ConfigError::SelfNotAPeer("n7".into())
        );
    }

    #[test]
    fn peers_and_paths_can_never_be_updated_remotely() {
        let c = ControllerConfig::from_properties(
            &props(&[
                ("controllerDLegerPeers", "n0-127.0.0.1:9878"),
                ("controllerDLegerSelfId", "n0"),
                ("configBlackList", "notifyBrokerRoleChanged"),
            ]),
            Path::new("/h"),
        )
        .unwrap();
        for key in [
            "controllerDLegerPeers",
            "controllerStorePath",
            "configBlackList",
            "controllerRaftHeartbeatIntervalMs",
            "controllerElectionTimeoutMs",
            "tls.server.mode",
            "tls.server.certPath",
        ] {
            assert!(c.is_blacklisted(key), "{key}");
        }
        assert!(c.is_blacklisted("notifyBrokerRoleChanged"));
        assert!(!c.is_blacklisted("enableElectUncleanMaster"));
    }

    #[test]
    fn an_update_changes_the_running_settings_but_not_the_group() {
        let mut c = ControllerConfig::from_properties(
            &props(&[
                ("controllerDLegerPeers", "n0-127.0.0.1:9878"),
                ("controllerDLegerSelfId", "n0"),
            ]),
            Path::new("/h"),
        )
        .unwrap();
        c.apply_update(&props(&[("enableElectUncleanMaster", "true")]));
        assert!(c.elect_unclean_master);
        assert_eq!(c.store_path, PathBuf::from("/h/DLedgerController"));
        assert!(c.listing().contains("enableElectUncleanMaster=true\n"));
    }

    #[test]
    fn a_number_that_does_not_convert_is_refused_at_start_and_ignored_in_an_update() {
        let base = [
            ("controllerDLegerPeers", "n0-127.0.0.1:9878"),
            ("controllerDLegerSelfId", "n0"),
        ];
        let mut bad = base.to_vec();
        bad.push(("scanNotActiveBrokerInterval", "5s"));
        assert_eq!(
            ControllerConfig::from_properties(&props(&bad), Path::new("/h")).unwrap_err(),
            ConfigError::Invalid {
                key: "scanNotActiveBrokerInterval",
                value: "5s".into()
            }
        );
        let mut blank = base.to_vec();
        blank.push(("scanNotActiveBrokerInterval", "2000 "));
        let mut c = ControllerConfig::from_properties(&props(&blank), Path::new("/h")).unwrap();
        assert_eq!(c.scan_not_active_broker_interval_ms, 2000);
        c.apply_update(&props(&[("scanNotActiveBrokerInterval", "soon")]));
        assert_eq!(c.scan_not_active_broker_interval_ms, 2000);
        assert!(c.listing().contains("scanNotActiveBrokerInterval=2000\n"));
        // As Java parses an update, and as the NameServer binds one: untrimmed.
        c.apply_update(&props(&[("scanNotActiveBrokerInterval", "3000 ")]));
        assert_eq!(c.scan_not_active_broker_interval_ms, 2000);
    }

    #[test]
    fn an_update_naming_a_key_the_config_does_not_have_drops_it_as_the_nameserver_does() {
        let mut c = ControllerConfig::from_properties(
            &props(&[
                ("controllerDLegerPeers", "n0-127.0.0.1:9878"),
                ("controllerDLegerSelfId", "n0"),
                ("fromTheFile", "a"),
            ]),
            Path::new("/h"),
        )
        .unwrap();
        c.apply_update(&props(&[("fromTheFile", "b"), ("neverSeen", "x")]));
        let listing = c.listing();
        assert!(listing.contains("fromTheFile=b\n"), "{listing}");
        assert!(!listing.contains("neverSeen"), "{listing}");
    }
}
