//! The controller's settings, read from the same properties keys as Java's `ControllerConfig`, so
//! that a Java controller config file (DLedger or JRaft flavour) works unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One member of the controller group: its id (`n0`) and the address it serves brokers and its
/// peers on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub id: String,
    pub addr: String,
}

#[derive(Clone, Debug)]
pub struct ControllerConfig {
    pub group: String,
    /// Sorted by id: a node's Raft id is its position here, the same on every node whatever the
    /// order of the configured list.
    pub peers: Vec<Peer>,
    pub self_id: String,
    pub store_path: PathBuf,
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
    pub config_black_list: String,
    /// The port's bounds (our additions, named after the NameServer's `server*` keys).
    pub port: PortLimits,
    /// Every key of the file, known or not, as GET_CONTROLLER_CONFIG lists them.
    pub all: BTreeMap<String, String>,
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
}

pub mod keys {
    pub const GROUP: &str = "controllerDLegerGroup";
    pub const PEERS: &str = "controllerDLegerPeers";
    pub const SELF_ID: &str = "controllerDLegerSelfId";
    pub const STORE_PATH: &str = "controllerStorePath";
    pub const TYPE: &str = "controllerType";
    pub const ELECT_UNCLEAN: &str = "enableElectUncleanMaster";
    pub const NOTIFY: &str = "notifyBrokerRoleChanged";
    pub const SCAN_NOT_ACTIVE: &str = "scanNotActiveBrokerInterval";
    pub const SCAN_INACTIVE_MASTER: &str = "scanInactiveMasterInterval";
    pub const ELECT_RETRIES: &str = "electMasterMaxRetryCount";
    pub const BLACK_LIST: &str = "configBlackList";
    /// Ours: how many log entries between two snapshots.
    pub const SNAPSHOT_EVERY: &str = "controllerSnapshotEveryEntries";
    /// Ours: the Raft heartbeat interval, and the bound of each AppendEntries round trip.
    pub const RAFT_HEARTBEAT: &str = "controllerRaftHeartbeatIntervalMs";
    /// Ours: the shortest election timeout (the longest is twice it), and the leader's lease.
    pub const ELECTION_TIMEOUT: &str = "controllerElectionTimeoutMs";
    /// Ours: the port's bounds, as the NameServer's `server*` keys bound its port.
    pub const MAX_CONNECTIONS: &str = "controllerServerMaxConnections";
    pub const MAX_CONNECTIONS_PER_ADDRESS: &str = "controllerServerMaxConnectionsPerAddress";
    pub const FIRST_FRAME_TIMEOUT: &str = "controllerServerFirstFrameTimeoutSeconds";
    pub const IDLE_TIMEOUT: &str = "controllerServerChannelMaxIdleTimeSeconds";
    pub const MAX_FRAME_LENGTH: &str = "controllerServerMaxFrameLength";
    pub const JRAFT_GROUP: &str = "jRaftGroupId";
    pub const JRAFT_SERVER_ID: &str = "jRaftServerId";
    pub const JRAFT_INIT_CONF: &str = "jRaftInitConf";
    pub const JRAFT_RPC_ADDR: &str = "jRaftControllerRPCAddr";
}

/// Every key this controller reads. Some are also NameServer keys (`scanNotActiveBrokerInterval`,
/// `configBlackList`): Java hands the whole file to both, and so must an embedding server.
pub const KNOWN: &[&str] = &[
    keys::GROUP,
    keys::PEERS,
    keys::SELF_ID,
    keys::STORE_PATH,
    keys::TYPE,
    keys::ELECT_UNCLEAN,
    keys::NOTIFY,
    keys::SCAN_NOT_ACTIVE,
    keys::SCAN_INACTIVE_MASTER,
    keys::ELECT_RETRIES,
    keys::BLACK_LIST,
    keys::SNAPSHOT_EVERY,
    keys::RAFT_HEARTBEAT,
    keys::ELECTION_TIMEOUT,
    keys::MAX_CONNECTIONS,
    keys::MAX_CONNECTIONS_PER_ADDRESS,
    keys::FIRST_FRAME_TIMEOUT,
    keys::IDLE_TIMEOUT,
    keys::MAX_FRAME_LENGTH,
    keys::JRAFT_GROUP,
    keys::JRAFT_SERVER_ID,
    keys::JRAFT_INIT_CONF,
    keys::JRAFT_RPC_ADDR,
];

/// Keys a remote UPDATE_CONTROLLER_CONFIG may never change, whatever the configured blacklist
/// says: where the node keeps its state and who its peers are cannot change under a running group.
pub const ALWAYS_BLACKLISTED: &[&str] = &[
    keys::BLACK_LIST,
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
];

impl ControllerConfig {
    /// Reads the keys from `get`; `home` is where Java puts the store by default.
    pub fn from_properties(props: &[(String, String)], home: &Path) -> Result<Self, ConfigError> {
        let all: BTreeMap<String, String> = props.iter().cloned().collect();
        let get = |k: &str| value(&all, k);
        let jraft = get(keys::TYPE).is_some_and(|t| t.eq_ignore_ascii_case("jRaft"));
        let (group, mut peers, self_id) = if jraft {
            jraft_peers(&all)?
        } else {
            let group = get(keys::GROUP)
                .unwrap_or("DefaultControllerGroup")
                .to_string();
            let peers = parse_peers(get(keys::PEERS).ok_or(ConfigError::Missing(keys::PEERS))?)?;
            let self_id = get(keys::SELF_ID)
                .ok_or(ConfigError::Missing(keys::SELF_ID))?
                .to_string();
            (group, peers, self_id)
        };
        peers.sort_by(|a, b| a.id.cmp(&b.id));
        peers.dedup_by(|a, b| a.id == b.id);
        if !peers.iter().any(|p| p.id == self_id) {
            return Err(ConfigError::SelfNotAPeer(self_id));
        }
        let store_path = get(keys::STORE_PATH).map_or_else(
            || {
                home.join(if jraft {
                    "jRaftController"
                } else {
                    "DLedgerController"
                })
            },
            PathBuf::from,
        );
        let bool_of =
            |k: &str, default: bool| get(k).map_or(default, |v| v.eq_ignore_ascii_case("true"));
        let num_of = |k: &'static str, default: u64| -> Result<u64, ConfigError> {
            get(k).map_or(Ok(default), |v| {
                v.parse().map_err(|_| ConfigError::Invalid {
                    key: k,
                    value: v.to_string(),
                })
            })
        };
        let heartbeat = num_of(keys::RAFT_HEARTBEAT, 250)?.clamp(50, 10_000);
        Ok(ControllerConfig {
            group,
            peers,
            self_id,
            store_path,
            elect_unclean_master: bool_of(keys::ELECT_UNCLEAN, false),
            notify_broker_role_changed: bool_of(keys::NOTIFY, true),
            scan_not_active_broker_interval_ms: num_of(keys::SCAN_NOT_ACTIVE, 5_000)?.max(100),
            scan_inactive_master_interval_ms: num_of(keys::SCAN_INACTIVE_MASTER, 5_000)?.max(100),
            elect_master_max_retry_count: num_of(keys::ELECT_RETRIES, 3)?.clamp(1, 100) as u32,
            snapshot_every_entries: num_of(keys::SNAPSHOT_EVERY, 5_000)?.max(1),
            raft_heartbeat_interval_ms: heartbeat,
            // Three heartbeats at least, or a follower would stand between two of them.
            election_timeout_ms: num_of(keys::ELECTION_TIMEOUT, 750)?.max(3 * heartbeat),
            config_black_list: get(keys::BLACK_LIST)
                .unwrap_or("configBlackList;configStorePath")
                .to_string(),
            port: PortLimits {
                max_connections: num_of(keys::MAX_CONNECTIONS, 1024)?.clamp(16, 1_000_000) as i64,
                max_connections_per_address: num_of(keys::MAX_CONNECTIONS_PER_ADDRESS, 0)?
                    .min(1_000_000) as i64,
                first_frame_timeout_s: num_of(keys::FIRST_FRAME_TIMEOUT, 30)?.clamp(1, 3_600),
                idle_timeout_s: num_of(keys::IDLE_TIMEOUT, 120)?.clamp(1, 86_400),
                max_frame_length: num_of(
                    keys::MAX_FRAME_LENGTH,
                    rocketmq_wire::frame::DEFAULT_MAX_FRAME as u64,
                )?
                .clamp(4 << 20, i32::MAX as u64) as usize,
            },
            all,
        })
    }

    pub fn self_peer(&self) -> &Peer {
        self.peers
            .iter()
            .find(|p| p.id == self.self_id)
            .expect("checked when the config was read")
    }

    /// This node's Raft id.
    pub fn self_node_id(&self) -> u64 {
        self.node_id(&self.self_id)
            .expect("checked when the config was read")
    }

    pub fn node_id(&self, peer_id: &str) -> Option<u64> {
        self.peers
            .iter()
            .position(|p| p.id == peer_id)
            .map(|i| i as u64)
    }

    pub fn peer(&self, node_id: u64) -> Option<&Peer> {
        self.peers.get(node_id as usize)
    }

    pub fn is_blacklisted(&self, key: &str) -> bool {
        ALWAYS_BLACKLISTED.contains(&key)
            || self
                .config_black_list
                .split(';')
                .map(str::trim)
                .any(|k| !k.is_empty() && k == key)
    }

    /// Applies a remote update (already checked against the blacklist): the settings that can
    /// change at run time take effect, every key is listed afterwards.
    pub fn apply_update(&mut self, props: &[(String, String)]) {
        let mut merged: Vec<(String, String)> = self.all.clone().into_iter().collect();
        merged.extend(props.iter().cloned());
        let home = PathBuf::new();
        if let Ok(mut updated) = ControllerConfig::from_properties(&merged, &home) {
            updated.store_path = self.store_path.clone();
            updated.peers = self.peers.clone();
            updated.self_id = self.self_id.clone();
            updated.group = self.group.clone();
            *self = updated;
        } else {
            // An unparsable number is kept as text (Java would fail the same way on restart) but
            // the running settings stay as they were.
            self.all.extend(props.iter().cloned());
        }
    }

    /// `key=value` lines of every setting, sorted by key, as GET_CONTROLLER_CONFIG answers.
    pub fn listing(&self) -> String {
        let mut all = self.all.clone();
        let defaults = [
            (keys::GROUP, self.group.clone()),
            (keys::SELF_ID, self.self_id.clone()),
            (keys::STORE_PATH, self.store_path.display().to_string()),
            (keys::ELECT_UNCLEAN, self.elect_unclean_master.to_string()),
            (keys::NOTIFY, self.notify_broker_role_changed.to_string()),
            (
                keys::SCAN_NOT_ACTIVE,
                self.scan_not_active_broker_interval_ms.to_string(),
            ),
            (
                keys::SCAN_INACTIVE_MASTER,
                self.scan_inactive_master_interval_ms.to_string(),
            ),
            (
                keys::ELECT_RETRIES,
                self.elect_master_max_retry_count.to_string(),
            ),
            (
                keys::SNAPSHOT_EVERY,
                self.snapshot_every_entries.to_string(),
            ),
            (
                keys::RAFT_HEARTBEAT,
                self.raft_heartbeat_interval_ms.to_string(),
            ),
            (keys::ELECTION_TIMEOUT, self.election_timeout_ms.to_string()),
            (keys::BLACK_LIST, self.config_black_list.clone()),
            (keys::MAX_CONNECTIONS, self.port.max_connections.to_string()),
            (
                keys::MAX_CONNECTIONS_PER_ADDRESS,
                self.port.max_connections_per_address.to_string(),
            ),
            (
                keys::FIRST_FRAME_TIMEOUT,
                self.port.first_frame_timeout_s.to_string(),
            ),
            (keys::IDLE_TIMEOUT, self.port.idle_timeout_s.to_string()),
            (
                keys::MAX_FRAME_LENGTH,
                self.port.max_frame_length.to_string(),
            ),
        ];
        for (k, v) in defaults {
            all.insert(k.to_string(), v);
        }
        all.entry(keys::PEERS.to_string()).or_insert_with(|| {
            self.peers
                .iter()
                .map(|p| format!("{}-{}", p.id, p.addr))
                .collect::<Vec<_>>()
                .join(";")
        });
        // Escaped as Java writes properties: a value holding a line break must come back as
        // one value, not as a key of its own.
        rocketmq_wire::properties::write(all.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

/// A key's value, blank counting as absent, as Java's setters see an empty property.
fn value<'a>(all: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    all.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// `n0-127.0.0.1:9878;n1-127.0.0.1:9868`: the id ends at the first `-`, the address follows.
pub fn parse_peers(text: &str) -> Result<Vec<Peer>, ConfigError> {
    let mut peers = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let invalid = || ConfigError::Invalid {
            key: keys::PEERS,
            value: entry.to_string(),
        };
        let (id, addr) = entry.split_once('-').ok_or_else(invalid)?;
        let (id, addr) = (id.trim(), addr.trim());
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if id.is_empty() || !port_ok {
            return Err(invalid());
        }
        peers.push(Peer {
            id: id.to_string(),
            addr: addr.to_string(),
        });
    }
    if peers.is_empty() {
        return Err(ConfigError::Missing(keys::PEERS));
    }
    Ok(peers)
}

/// The JRaft flavour names its members by their Raft address (`jRaftInitConf`, `jRaftServerId`)
/// and lists the addresses brokers use in the same order (`jRaftControllerRPCAddr`). Our nodes
/// talk Raft on the broker address too, so a member is its RPC address, named `n<position>`.
fn jraft_peers(all: &BTreeMap<String, String>) -> Result<(String, Vec<Peer>, String), ConfigError> {
    let get = |k: &str| value(all, k);
    let split = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let init =
        split(get(keys::JRAFT_INIT_CONF).unwrap_or("localhost:9880,localhost:9881,localhost:9882"));
    let rpc =
        split(get(keys::JRAFT_RPC_ADDR).unwrap_or("localhost:9770,localhost:9771,localhost:9772"));
    let server = get(keys::JRAFT_SERVER_ID).unwrap_or("localhost:9880");
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
        .map(|(i, addr)| Peer {
            id: format!("n{i}"),
            addr: addr.clone(),
        })
        .collect();
    let group = get(keys::JRAFT_GROUP)
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
            c.peers.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            ["n0", "n1", "n2"]
        );
        assert_eq!(c.self_node_id(), 1);
        assert_eq!(c.self_peer().addr, "127.0.0.1:9868");
        assert_eq!(c.store_path, PathBuf::from("/var/lib/ctl"));
        assert!(c.elect_unclean_master);
        assert!(c.notify_broker_role_changed);
        assert_eq!(c.scan_not_active_broker_interval_ms, 2000);
        assert!(c.listing().contains("mappedFileSize=67108864\n"));
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
        assert_eq!(c.self_id, "n1");
        assert_eq!(c.self_peer().addr, "127.0.0.1:9771");
        assert_eq!(c.group, "jRaft-Controller");
    }

    #[test]
    fn missing_or_malformed_peers_are_refused_with_the_key_named() {
        let missing = ControllerConfig::from_properties(
            &props(&[("controllerDLegerSelfId", "n0")]),
            Path::new("/h"),
        );
        assert_eq!(missing.unwrap_err(), ConfigError::Missing(keys::PEERS));
        assert!(parse_peers("n0-127.0.0.1").is_err());
        assert!(parse_peers("127.0.0.1:9878").is_err());
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
}
