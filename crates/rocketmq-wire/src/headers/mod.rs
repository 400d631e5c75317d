//! Typed request and response headers: the per-request objects (Java's `CommandCustomHeader`
//! classes) that travel as strings in a command's `extFields`.
//!
//! Each type reads itself from a command ([`RequestHeader::from_command`], for the server) and
//! writes itself onto one ([`RequestHeader::to_command`], for clients). Fields borrow from the
//! command they were read from, so that reading a header on the hot path copies nothing.
//!
//! Java never enforces its required fields; this server does, for the fields a handler cannot
//! work without, and answers with the remark of [`HeaderError`]. Fields Java marks required that
//! no handler needs stay optional here, so that such requests are served as Java serves them.
//! Optional numbers and booleans are read as Java reads them: an unparsable number counts as
//! absent, a boolean is true iff its text is `true` ignoring case.
//!
//! - [`controller`]: the headers of the controller's requests (RIP-44) and of its answers.

pub mod controller;

use crate::codes::request;
use crate::RemotingCommand;

/// The `extFields` key of every header field, under its Java field name.
pub mod keys {
    pub const ACCEPT_STANDARD_JSON_ONLY: &str = "acceptStandardJsonOnly";
    pub const ADD_TOPIC_COUNT: &str = "addTopicCount";
    pub const APPLIED_BROKER_ID: &str = "appliedBrokerId";
    pub const BODY_CRC32: &str = "bodyCrc32";
    pub const BROKER_ADDR: &str = "brokerAddr";
    /// The controller's requests spell the address out, unlike the NameServer's `brokerAddr`.
    pub const BROKER_ADDRESS: &str = "brokerAddress";
    pub const BROKER_CONTROLLER_IDS_TO_CLEAN: &str = "brokerControllerIdsToClean";
    pub const BROKER_ID: &str = "brokerId";
    pub const BROKER_NAME: &str = "brokerName";
    pub const CHANGED: &str = "changed";
    pub const CLUSTER: &str = "cluster";
    pub const CLUSTER_NAME: &str = "clusterName";
    pub const COMPRESSED: &str = "compressed";
    pub const CONFIRM_OFFSET: &str = "confirmOffset";
    pub const CONTROLLER_LEADER_ADDRESS: &str = "controllerLeaderAddress";
    pub const CONTROLLER_LEADER_ID: &str = "controllerLeaderId";
    pub const DESIGNATE_ELECT: &str = "designateElect";
    pub const ELECTION_PRIORITY: &str = "electionPriority";
    pub const ENABLE_ACTING_MASTER: &str = "enableActingMaster";
    pub const EPOCH: &str = "epoch";
    pub const GROUP: &str = "group";
    pub const HA_BROKER_ADDR: &str = "haBrokerAddr";
    pub const HA_SERVER_ADDR: &str = "haServerAddr";
    /// Java's spelling (sic) in the heartbeat header.
    pub const HEARTBEAT_TIMEOUT_MILLS: &str = "heartbeatTimeoutMills";
    pub const HEARTBEAT_TIMEOUT_MILLIS: &str = "heartbeatTimeoutMillis";
    pub const INVOKE_TIME: &str = "invokeTime";
    /// Java names a boolean field `isX` and the header key keeps the prefix.
    pub const IS_CLEAN_LIVING_BROKER: &str = "isCleanLivingBroker";
    pub const IS_LEADER: &str = "isLeader";
    pub const KEY: &str = "key";
    pub const LIMIT: &str = "limit";
    pub const MASTER_ADDR: &str = "masterAddr";
    pub const MASTER_ADDRESS: &str = "masterAddress";
    pub const MASTER_BROKER_ID: &str = "masterBrokerId";
    pub const MASTER_EPOCH: &str = "masterEpoch";
    pub const MAX_OFFSET: &str = "maxOffset";
    pub const MEMBER_ADDRESS: &str = "memberAddress";
    pub const MEMBER_ID: &str = "memberId";
    pub const MIN_BROKER_ADDR: &str = "minBrokerAddr";
    pub const MIN_BROKER_ID: &str = "minBrokerId";
    pub const NAMESPACE: &str = "namespace";
    pub const NEW_SYNC_STATE_SET_EPOCH: &str = "newSyncStateSetEpoch";
    pub const NEXT_BROKER_ID: &str = "nextBrokerId";
    pub const OFFLINE_BROKER_ADDR: &str = "offlineBrokerAddr";
    pub const PEERS: &str = "peers";
    pub const REGISTER_CHECK_CODE: &str = "registerCheckCode";
    pub const SYNC_STATE_SET_EPOCH: &str = "syncStateSetEpoch";
    pub const TOPIC: &str = "topic";
    pub const VALUE: &str = "value";
    pub const WIPE_TOPIC_COUNT: &str = "wipeTopicCount";
    /// Added to any request by clients and brokers in a zone (not part of Java's header classes).
    pub const ZONE_NAME: &str = "__ZONE_NAME";
    /// Added with [`ZONE_NAME`] when the client wants routes filtered by its zone.
    pub const ZONE_MODE: &str = "__ZONE_MODE";
}

/// A header the server cannot work with. Its `Display` is the remark of the SYSTEM_ERROR answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("missing header field {0}")]
    Missing(&'static str),
    #[error("header field {field} is not a number: {text}")]
    NotANumber { field: &'static str, text: String },
    /// The KV requests answer in Java's own words when either of their two fields is missing.
    #[error("namespace or key is null")]
    NamespaceOrKeyNull,
}

/// A request's header object.
pub trait RequestHeader<'a>: Sized {
    /// The request code the header belongs to.
    const CODE: i32;

    /// Reads the header; fails on the first missing or unparsable field the server requires,
    /// in the order the server has always checked them.
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError>;

    /// Adds the header's fields to `cmd`; absent optional fields are left out, as Java leaves
    /// out null fields.
    fn write(&self, cmd: RemotingCommand) -> RemotingCommand;

    /// A request carrying this header (JSON header, current version, no body).
    fn to_command(&self) -> RemotingCommand {
        self.write(RemotingCommand::request(Self::CODE))
    }
}

/// A response's header object.
pub trait ResponseHeader<'a>: Sized {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError>;

    /// Adds the header's fields to the response `cmd`.
    fn write(&self, cmd: RemotingCommand) -> RemotingCommand;
}

/// Reading fields off one command.
#[derive(Clone, Copy)]
struct Fields<'a>(&'a RemotingCommand);

impl<'a> Fields<'a> {
    fn opt(self, key: &str) -> Option<&'a str> {
        self.0.ext(key)
    }

    fn required(self, key: &'static str) -> Result<&'a str, HeaderError> {
        self.opt(key).ok_or(HeaderError::Missing(key))
    }

    fn required_i64(self, key: &'static str) -> Result<i64, HeaderError> {
        let text = self.required(key)?;
        text.parse().map_err(|_| HeaderError::NotANumber {
            field: key,
            text: text.to_string(),
        })
    }

    /// A Java `int`: a number beyond its range is as unusable as one that does not parse.
    fn required_i32(self, key: &'static str) -> Result<i32, HeaderError> {
        let text = self.required(key)?;
        text.parse().map_err(|_| HeaderError::NotANumber {
            field: key,
            text: text.to_string(),
        })
    }

    fn opt_i64(self, key: &str) -> Option<i64> {
        self.0.ext_i64(key)
    }

    fn opt_i32(self, key: &str) -> Option<i32> {
        self.opt(key)?.parse().ok()
    }

    fn opt_bool(self, key: &str) -> Option<bool> {
        self.0.ext_bool(key)
    }
}

/// Writes `value` under `key` when present.
fn put(cmd: RemotingCommand, key: &str, value: Option<impl ToString>) -> RemotingCommand {
    match value {
        Some(v) => cmd.with_ext(key, v),
        None => cmd,
    }
}

/// REGISTER_BROKER.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterBrokerHeader<'a> {
    pub broker_name: &'a str,
    pub broker_addr: &'a str,
    pub cluster_name: &'a str,
    /// Where slaves replicate from; Java marks it required, but nothing breaks without it.
    pub ha_server_addr: Option<&'a str>,
    pub broker_id: i64,
    /// Per-broker expiry; Java brokers send it only in acting-master mode.
    pub heartbeat_timeout_millis: Option<i64>,
    /// Its absence marks a 4.x broker.
    pub enable_acting_master: Option<bool>,
    /// Whether the body is the zlib binary form; Java always writes it.
    pub compressed: bool,
    /// 0 or absent: the body is not checked. Read as a long, so that an out-of-range value
    /// fails the check instead of disabling it.
    pub body_crc32: Option<i64>,
    pub zone_name: Option<&'a str>,
}

impl<'a> RequestHeader<'a> for RegisterBrokerHeader<'a> {
    const CODE: i32 = request::REGISTER_BROKER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(RegisterBrokerHeader {
            broker_name: f.required(keys::BROKER_NAME)?,
            broker_addr: f.required(keys::BROKER_ADDR)?,
            cluster_name: f.required(keys::CLUSTER_NAME)?,
            broker_id: f.required_i64(keys::BROKER_ID)?,
            ha_server_addr: f.opt(keys::HA_SERVER_ADDR),
            heartbeat_timeout_millis: f.opt_i64(keys::HEARTBEAT_TIMEOUT_MILLIS),
            enable_acting_master: f.opt_bool(keys::ENABLE_ACTING_MASTER),
            compressed: f.opt_bool(keys::COMPRESSED).unwrap_or(false),
            body_crc32: f.opt_i64(keys::BODY_CRC32),
            zone_name: f.opt(keys::ZONE_NAME),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd
            .with_ext(keys::BROKER_NAME, self.broker_name)
            .with_ext(keys::BROKER_ADDR, self.broker_addr)
            .with_ext(keys::CLUSTER_NAME, self.cluster_name)
            .with_ext(keys::BROKER_ID, self.broker_id)
            .with_ext(keys::COMPRESSED, self.compressed);
        let cmd = put(cmd, keys::HA_SERVER_ADDR, self.ha_server_addr);
        let cmd = put(
            cmd,
            keys::HEARTBEAT_TIMEOUT_MILLIS,
            self.heartbeat_timeout_millis,
        );
        let cmd = put(cmd, keys::ENABLE_ACTING_MASTER, self.enable_acting_master);
        let cmd = put(cmd, keys::BODY_CRC32, self.body_crc32);
        put(cmd, keys::ZONE_NAME, self.zone_name)
    }
}

/// The answer to REGISTER_BROKER: where a slave finds its master.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterBrokerResponseHeader<'a> {
    pub ha_server_addr: Option<&'a str>,
    pub master_addr: Option<&'a str>,
}

impl<'a> ResponseHeader<'a> for RegisterBrokerResponseHeader<'a> {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(RegisterBrokerResponseHeader {
            ha_server_addr: f.opt(keys::HA_SERVER_ADDR),
            master_addr: f.opt(keys::MASTER_ADDR),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::HA_SERVER_ADDR, self.ha_server_addr);
        put(cmd, keys::MASTER_ADDR, self.master_addr)
    }
}

/// UNREGISTER_BROKER. Every field is required: Java's batch worker gives up part-way on a
/// request without a broker id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnregisterBrokerHeader<'a> {
    pub broker_name: &'a str,
    pub broker_addr: &'a str,
    pub cluster_name: &'a str,
    pub broker_id: i64,
}

impl<'a> RequestHeader<'a> for UnregisterBrokerHeader<'a> {
    const CODE: i32 = request::UNREGISTER_BROKER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(UnregisterBrokerHeader {
            broker_name: f.required(keys::BROKER_NAME)?,
            broker_addr: f.required(keys::BROKER_ADDR)?,
            cluster_name: f.required(keys::CLUSTER_NAME)?,
            broker_id: f.required_i64(keys::BROKER_ID)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::BROKER_NAME, self.broker_name)
            .with_ext(keys::BROKER_ADDR, self.broker_addr)
            .with_ext(keys::CLUSTER_NAME, self.cluster_name)
            .with_ext(keys::BROKER_ID, self.broker_id)
    }
}

/// QUERY_DATA_VERSION. Only the cluster and address identify the live entry; the name and id
/// Java marks required are carried but never needed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryDataVersionHeader<'a> {
    pub cluster_name: &'a str,
    pub broker_addr: &'a str,
    pub broker_name: Option<&'a str>,
    pub broker_id: Option<i64>,
}

impl<'a> RequestHeader<'a> for QueryDataVersionHeader<'a> {
    const CODE: i32 = request::QUERY_DATA_VERSION;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(QueryDataVersionHeader {
            cluster_name: f.required(keys::CLUSTER_NAME)?,
            broker_addr: f.required(keys::BROKER_ADDR)?,
            broker_name: f.opt(keys::BROKER_NAME),
            broker_id: f.opt_i64(keys::BROKER_ID),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd
            .with_ext(keys::CLUSTER_NAME, self.cluster_name)
            .with_ext(keys::BROKER_ADDR, self.broker_addr);
        let cmd = put(cmd, keys::BROKER_NAME, self.broker_name);
        put(cmd, keys::BROKER_ID, self.broker_id)
    }
}

/// The answer to QUERY_DATA_VERSION: whether the broker should register again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryDataVersionResponseHeader {
    pub changed: bool,
}

impl<'a> ResponseHeader<'a> for QueryDataVersionResponseHeader {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(QueryDataVersionResponseHeader {
            changed: Fields(cmd).opt_bool(keys::CHANGED).unwrap_or(false),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::CHANGED, self.changed)
    }
}

/// BROKER_HEARTBEAT. The NameServer only needs the cluster and address; the rest is what Java
/// brokers send for a controller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerHeartbeatHeader<'a> {
    pub cluster_name: &'a str,
    pub broker_addr: &'a str,
    pub broker_name: Option<&'a str>,
    pub broker_id: Option<i64>,
    pub epoch: Option<i64>,
    pub max_offset: Option<i64>,
    pub confirm_offset: Option<i64>,
    pub heartbeat_timeout_mills: Option<i64>,
    pub election_priority: Option<i64>,
}

impl<'a> RequestHeader<'a> for BrokerHeartbeatHeader<'a> {
    const CODE: i32 = request::BROKER_HEARTBEAT;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(BrokerHeartbeatHeader {
            cluster_name: f.required(keys::CLUSTER_NAME)?,
            broker_addr: f.required(keys::BROKER_ADDR)?,
            broker_name: f.opt(keys::BROKER_NAME),
            broker_id: f.opt_i64(keys::BROKER_ID),
            epoch: f.opt_i64(keys::EPOCH),
            max_offset: f.opt_i64(keys::MAX_OFFSET),
            confirm_offset: f.opt_i64(keys::CONFIRM_OFFSET),
            heartbeat_timeout_mills: f.opt_i64(keys::HEARTBEAT_TIMEOUT_MILLS),
            election_priority: f.opt_i64(keys::ELECTION_PRIORITY),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd
            .with_ext(keys::CLUSTER_NAME, self.cluster_name)
            .with_ext(keys::BROKER_ADDR, self.broker_addr);
        let cmd = put(cmd, keys::BROKER_NAME, self.broker_name);
        let cmd = put(cmd, keys::BROKER_ID, self.broker_id);
        let cmd = put(cmd, keys::EPOCH, self.epoch);
        let cmd = put(cmd, keys::MAX_OFFSET, self.max_offset);
        let cmd = put(cmd, keys::CONFIRM_OFFSET, self.confirm_offset);
        let cmd = put(
            cmd,
            keys::HEARTBEAT_TIMEOUT_MILLS,
            self.heartbeat_timeout_mills,
        );
        put(cmd, keys::ELECTION_PRIORITY, self.election_priority)
    }
}

/// GET_BROKER_MEMBER_GROUP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetBrokerMemberGroupHeader<'a> {
    pub cluster_name: &'a str,
    pub broker_name: &'a str,
}

impl<'a> RequestHeader<'a> for GetBrokerMemberGroupHeader<'a> {
    const CODE: i32 = request::GET_BROKER_MEMBER_GROUP;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(GetBrokerMemberGroupHeader {
            cluster_name: f.required(keys::CLUSTER_NAME)?,
            broker_name: f.required(keys::BROKER_NAME)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::CLUSTER_NAME, self.cluster_name)
            .with_ext(keys::BROKER_NAME, self.broker_name)
    }
}

/// GET_ROUTEINFO_BY_TOPIC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetRouteInfoHeader<'a> {
    /// Optional on purpose: Java answers a request without a topic as one for the topic
    /// `null`, and so does this server.
    pub topic: Option<&'a str>,
    pub accept_standard_json_only: Option<bool>,
    pub zone_name: Option<&'a str>,
    pub zone_mode: Option<bool>,
}

impl<'a> GetRouteInfoHeader<'a> {
    /// The request as clients normally send it: a topic and nothing else.
    pub fn new(topic: &'a str) -> Self {
        GetRouteInfoHeader {
            topic: Some(topic),
            ..Default::default()
        }
    }
}

impl<'a> RequestHeader<'a> for GetRouteInfoHeader<'a> {
    const CODE: i32 = request::GET_ROUTEINFO_BY_TOPIC;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(GetRouteInfoHeader {
            topic: f.opt(keys::TOPIC),
            accept_standard_json_only: f.opt_bool(keys::ACCEPT_STANDARD_JSON_ONLY),
            zone_name: f.opt(keys::ZONE_NAME),
            zone_mode: f.opt_bool(keys::ZONE_MODE),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::TOPIC, self.topic);
        let cmd = put(
            cmd,
            keys::ACCEPT_STANDARD_JSON_ONLY,
            self.accept_standard_json_only,
        );
        let cmd = put(cmd, keys::ZONE_NAME, self.zone_name);
        put(cmd, keys::ZONE_MODE, self.zone_mode)
    }
}

/// The namespace and key every single-entry KV request names; either missing is answered in
/// Java's words.
fn namespace_and_key(f: Fields<'_>) -> Result<(&str, &str), HeaderError> {
    match (f.opt(keys::NAMESPACE), f.opt(keys::KEY)) {
        (Some(ns), Some(key)) => Ok((ns, key)),
        _ => Err(HeaderError::NamespaceOrKeyNull),
    }
}

/// PUT_KV_CONFIG.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PutKvConfigHeader<'a> {
    pub namespace: &'a str,
    pub key: &'a str,
    /// Absent is a Java null: the key is removed.
    pub value: Option<&'a str>,
}

impl<'a> RequestHeader<'a> for PutKvConfigHeader<'a> {
    const CODE: i32 = request::PUT_KV_CONFIG;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        let (namespace, key) = namespace_and_key(f)?;
        Ok(PutKvConfigHeader {
            namespace,
            key,
            value: f.opt(keys::VALUE),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd
            .with_ext(keys::NAMESPACE, self.namespace)
            .with_ext(keys::KEY, self.key);
        put(cmd, keys::VALUE, self.value)
    }
}

/// GET_KV_CONFIG.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetKvConfigHeader<'a> {
    pub namespace: &'a str,
    pub key: &'a str,
}

impl<'a> RequestHeader<'a> for GetKvConfigHeader<'a> {
    const CODE: i32 = request::GET_KV_CONFIG;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let (namespace, key) = namespace_and_key(Fields(cmd))?;
        Ok(GetKvConfigHeader { namespace, key })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::NAMESPACE, self.namespace)
            .with_ext(keys::KEY, self.key)
    }
}

/// The answer to GET_KV_CONFIG.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetKvConfigResponseHeader<'a> {
    pub value: Option<&'a str>,
}

impl<'a> ResponseHeader<'a> for GetKvConfigResponseHeader<'a> {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(GetKvConfigResponseHeader {
            value: Fields(cmd).opt(keys::VALUE),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        put(cmd, keys::VALUE, self.value)
    }
}

/// DELETE_KV_CONFIG.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteKvConfigHeader<'a> {
    pub namespace: &'a str,
    pub key: &'a str,
}

impl<'a> RequestHeader<'a> for DeleteKvConfigHeader<'a> {
    const CODE: i32 = request::DELETE_KV_CONFIG;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let (namespace, key) = namespace_and_key(Fields(cmd))?;
        Ok(DeleteKvConfigHeader { namespace, key })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::NAMESPACE, self.namespace)
            .with_ext(keys::KEY, self.key)
    }
}

/// GET_KVLIST_BY_NAMESPACE.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetKvListByNamespaceHeader<'a> {
    pub namespace: &'a str,
}

impl<'a> RequestHeader<'a> for GetKvListByNamespaceHeader<'a> {
    const CODE: i32 = request::GET_KVLIST_BY_NAMESPACE;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(GetKvListByNamespaceHeader {
            namespace: Fields(cmd).required(keys::NAMESPACE)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::NAMESPACE, self.namespace)
    }
}

/// WIPE_WRITE_PERM_OF_BROKER.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WipeWritePermHeader<'a> {
    pub broker_name: &'a str,
}

impl<'a> RequestHeader<'a> for WipeWritePermHeader<'a> {
    const CODE: i32 = request::WIPE_WRITE_PERM_OF_BROKER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(WipeWritePermHeader {
            broker_name: Fields(cmd).required(keys::BROKER_NAME)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::BROKER_NAME, self.broker_name)
    }
}

/// The answer to WIPE_WRITE_PERM_OF_BROKER: how many topics were touched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WipeWritePermResponseHeader {
    pub wipe_topic_count: i64,
}

impl<'a> ResponseHeader<'a> for WipeWritePermResponseHeader {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(WipeWritePermResponseHeader {
            wipe_topic_count: Fields(cmd).required_i64(keys::WIPE_TOPIC_COUNT)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::WIPE_TOPIC_COUNT, self.wipe_topic_count)
    }
}

/// ADD_WRITE_PERM_OF_BROKER.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddWritePermHeader<'a> {
    pub broker_name: &'a str,
}

impl<'a> RequestHeader<'a> for AddWritePermHeader<'a> {
    const CODE: i32 = request::ADD_WRITE_PERM_OF_BROKER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(AddWritePermHeader {
            broker_name: Fields(cmd).required(keys::BROKER_NAME)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::BROKER_NAME, self.broker_name)
    }
}

/// The answer to ADD_WRITE_PERM_OF_BROKER: how many topics were touched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddWritePermResponseHeader {
    pub add_topic_count: i64,
}

impl<'a> ResponseHeader<'a> for AddWritePermResponseHeader {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(AddWritePermResponseHeader {
            add_topic_count: Fields(cmd).required_i64(keys::ADD_TOPIC_COUNT)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::ADD_TOPIC_COUNT, self.add_topic_count)
    }
}

/// DELETE_TOPIC_IN_NAMESRV.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteTopicHeader<'a> {
    pub topic: &'a str,
    /// Absent or empty: the topic goes from every cluster.
    pub cluster_name: Option<&'a str>,
}

impl<'a> RequestHeader<'a> for DeleteTopicHeader<'a> {
    const CODE: i32 = request::DELETE_TOPIC_IN_NAMESRV;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(DeleteTopicHeader {
            topic: f.required(keys::TOPIC)?,
            cluster_name: f.opt(keys::CLUSTER_NAME),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd.with_ext(keys::TOPIC, self.topic);
        put(cmd, keys::CLUSTER_NAME, self.cluster_name)
    }
}

/// ROUTE_JOURNAL (ours): what the route journal holds about one topic or one broker group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteJournalHeader<'a> {
    pub topic: Option<&'a str>,
    pub broker_name: Option<&'a str>,
    /// Entries wanted; the server bounds it.
    pub limit: Option<i64>,
}

impl<'a> RequestHeader<'a> for RouteJournalHeader<'a> {
    const CODE: i32 = request::ROUTE_JOURNAL;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        let limit = match f.opt(keys::LIMIT) {
            None => None,
            Some(text) => Some(text.trim().parse().map_err(|_| HeaderError::NotANumber {
                field: keys::LIMIT,
                text: text.to_string(),
            })?),
        };
        Ok(RouteJournalHeader {
            topic: f.opt(keys::TOPIC),
            broker_name: f.opt(keys::BROKER_NAME),
            limit,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::TOPIC, self.topic);
        let cmd = put(cmd, keys::BROKER_NAME, self.broker_name);
        put(cmd, keys::LIMIT, self.limit)
    }
}

/// REGISTER_TOPIC_IN_NAMESRV.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterTopicHeader<'a> {
    pub topic: &'a str,
}

impl<'a> RequestHeader<'a> for RegisterTopicHeader<'a> {
    const CODE: i32 = request::REGISTER_TOPIC_IN_NAMESRV;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(RegisterTopicHeader {
            topic: Fields(cmd).required(keys::TOPIC)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::TOPIC, self.topic)
    }
}

/// GET_TOPICS_BY_CLUSTER.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetTopicsByClusterHeader<'a> {
    pub cluster: &'a str,
}

impl<'a> RequestHeader<'a> for GetTopicsByClusterHeader<'a> {
    const CODE: i32 = request::GET_TOPICS_BY_CLUSTER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(GetTopicsByClusterHeader {
            cluster: Fields(cmd).required(keys::CLUSTER)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::CLUSTER, self.cluster)
    }
}

/// NOTIFY_MIN_BROKER_ID_CHANGE, which the NameServer sends to brokers. Every field is optional
/// in Java; `brokerName` exists there but Java's NameServer never sets it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotifyMinBrokerIdChangeHeader<'a> {
    pub min_broker_id: Option<i64>,
    pub broker_name: Option<&'a str>,
    pub min_broker_addr: Option<&'a str>,
    pub offline_broker_addr: Option<&'a str>,
    pub ha_broker_addr: Option<&'a str>,
}

impl<'a> RequestHeader<'a> for NotifyMinBrokerIdChangeHeader<'a> {
    const CODE: i32 = request::NOTIFY_MIN_BROKER_ID_CHANGE;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(NotifyMinBrokerIdChangeHeader {
            min_broker_id: f.opt_i64(keys::MIN_BROKER_ID),
            broker_name: f.opt(keys::BROKER_NAME),
            min_broker_addr: f.opt(keys::MIN_BROKER_ADDR),
            offline_broker_addr: f.opt(keys::OFFLINE_BROKER_ADDR),
            ha_broker_addr: f.opt(keys::HA_BROKER_ADDR),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::MIN_BROKER_ID, self.min_broker_id);
        let cmd = put(cmd, keys::BROKER_NAME, self.broker_name);
        let cmd = put(cmd, keys::MIN_BROKER_ADDR, self.min_broker_addr);
        let cmd = put(cmd, keys::OFFLINE_BROKER_ADDR, self.offline_broker_addr);
        put(cmd, keys::HA_BROKER_ADDR, self.ha_broker_addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;

    /// Writes the header, reads it back, and checks both the value and that the command carries
    /// the request code.
    macro_rules! round_trip {
        ($ty:ident, $header:expr) => {{
            let header = $header;
            let cmd = header.to_command();
            assert_eq!(cmd.code, <$ty as RequestHeader>::CODE);
            assert_eq!($ty::from_command(&cmd), Ok(header));
        }};
    }

    fn fields(cmd: &RemotingCommand) -> Vec<(&str, &str)> {
        cmd.ext_fields
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    fn with(pairs: &[(&str, &str)]) -> RemotingCommand {
        let ext: ExtFields = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RemotingCommand {
            ext_fields: Some(ext),
            ..RemotingCommand::request(0)
        }
    }

    fn register_header() -> RegisterBrokerHeader<'static> {
        RegisterBrokerHeader {
            broker_name: "broker-a",
            broker_addr: "10.0.0.1:10911",
            cluster_name: "DefaultCluster",
            ha_server_addr: Some("10.0.0.1:10912"),
            broker_id: 0,
            heartbeat_timeout_millis: None,
            enable_acting_master: Some(false),
            compressed: false,
            body_crc32: Some(2053024402),
            zone_name: None,
        }
    }

    #[test]
    fn every_request_header_round_trips() {
        round_trip!(RegisterBrokerHeader, register_header());
        round_trip!(
            RegisterBrokerHeader,
            RegisterBrokerHeader {
                broker_id: 3,
                heartbeat_timeout_millis: Some(10_000),
                enable_acting_master: None,
                compressed: true,
                body_crc32: None,
                ha_server_addr: None,
                zone_name: Some("zone-1"),
                ..register_header()
            }
        );
        round_trip!(
            UnregisterBrokerHeader,
            UnregisterBrokerHeader {
                broker_name: "broker-a",
                broker_addr: "10.0.0.1:10911",
                cluster_name: "c",
                broker_id: 1,
            }
        );
        round_trip!(
            QueryDataVersionHeader,
            QueryDataVersionHeader {
                cluster_name: "c",
                broker_addr: "10.0.0.1:10911",
                broker_name: Some("broker-a"),
                broker_id: Some(0),
            }
        );
        round_trip!(
            QueryDataVersionHeader,
            QueryDataVersionHeader {
                cluster_name: "c",
                broker_addr: "10.0.0.1:10911",
                ..Default::default()
            }
        );
        round_trip!(
            BrokerHeartbeatHeader,
            BrokerHeartbeatHeader {
                cluster_name: "c",
                broker_addr: "10.0.0.1:10911",
                broker_name: Some("broker-a"),
                broker_id: Some(1),
                epoch: Some(2),
                max_offset: Some(3),
                confirm_offset: Some(4),
                heartbeat_timeout_mills: Some(5),
                election_priority: Some(6),
            }
        );
        round_trip!(
            GetBrokerMemberGroupHeader,
            GetBrokerMemberGroupHeader {
                cluster_name: "c",
                broker_name: "broker-a",
            }
        );
        round_trip!(GetRouteInfoHeader, GetRouteInfoHeader::new("TopicTest"));
        round_trip!(
            GetRouteInfoHeader,
            GetRouteInfoHeader {
                topic: None,
                accept_standard_json_only: Some(true),
                zone_name: Some("zone-1"),
                zone_mode: Some(false),
            }
        );
        round_trip!(
            PutKvConfigHeader,
            PutKvConfigHeader {
                namespace: "ns",
                key: "k",
                value: Some("v"),
            }
        );
        round_trip!(
            PutKvConfigHeader,
            PutKvConfigHeader {
                namespace: "ns",
                key: "k",
                value: None,
            }
        );
        round_trip!(
            GetKvConfigHeader,
            GetKvConfigHeader {
                namespace: "ns",
                key: "k",
            }
        );
        round_trip!(
            DeleteKvConfigHeader,
            DeleteKvConfigHeader {
                namespace: "ns",
                key: "k",
            }
        );
        round_trip!(
            GetKvListByNamespaceHeader,
            GetKvListByNamespaceHeader { namespace: "ns" }
        );
        round_trip!(
            WipeWritePermHeader,
            WipeWritePermHeader {
                broker_name: "broker-a"
            }
        );
        round_trip!(
            AddWritePermHeader,
            AddWritePermHeader {
                broker_name: "broker-a"
            }
        );
        round_trip!(
            DeleteTopicHeader,
            DeleteTopicHeader {
                topic: "t",
                cluster_name: Some("c"),
            }
        );
        round_trip!(
            DeleteTopicHeader,
            DeleteTopicHeader {
                topic: "t",
                cluster_name: None,
            }
        );
        round_trip!(RegisterTopicHeader, RegisterTopicHeader { topic: "t" });
        round_trip!(
            RouteJournalHeader,
            RouteJournalHeader {
                topic: Some("t"),
                broker_name: None,
                limit: Some(20),
            }
        );
        round_trip!(
            GetTopicsByClusterHeader,
            GetTopicsByClusterHeader { cluster: "c" }
        );
        round_trip!(
            NotifyMinBrokerIdChangeHeader,
            NotifyMinBrokerIdChangeHeader {
                min_broker_id: Some(1),
                broker_name: None,
                min_broker_addr: Some("10.0.0.2:10911"),
                offline_broker_addr: Some("10.0.0.1:10911"),
                ha_broker_addr: Some("10.0.0.2:10912"),
            }
        );
    }

    #[test]
    fn every_response_header_round_trips() {
        let base = RemotingCommand::response_to(&RemotingCommand::request(0), 0);
        let register = RegisterBrokerResponseHeader {
            ha_server_addr: Some("10.0.0.1:10912"),
            master_addr: Some("10.0.0.1:10911"),
        };
        let cmd = register.write(base.clone());
        assert_eq!(
            RegisterBrokerResponseHeader::from_command(&cmd),
            Ok(register)
        );
        let empty = RegisterBrokerResponseHeader::default().write(base.clone());
        assert_eq!(empty.ext_fields, None);

        let cmd = QueryDataVersionResponseHeader { changed: true }.write(base.clone());
        assert_eq!(fields(&cmd), [("changed", "true")]);
        assert!(
            QueryDataVersionResponseHeader::from_command(&cmd)
                .unwrap()
                .changed
        );

        let value = GetKvConfigResponseHeader { value: Some("v") };
        let cmd = value.write(base.clone());
        assert_eq!(GetKvConfigResponseHeader::from_command(&cmd), Ok(value));

        let cmd = WipeWritePermResponseHeader {
            wipe_topic_count: 7,
        }
        .write(base.clone());
        assert_eq!(fields(&cmd), [("wipeTopicCount", "7")]);
        assert_eq!(
            WipeWritePermResponseHeader::from_command(&cmd).map(|h| h.wipe_topic_count),
            Ok(7)
        );
        let cmd = AddWritePermResponseHeader { add_topic_count: 2 }.write(base);
        assert_eq!(fields(&cmd), [("addTopicCount", "2")]);
        assert_eq!(
            AddWritePermResponseHeader::from_command(&cmd).map(|h| h.add_topic_count),
            Ok(2)
        );
    }

    /// The keys and texts are what Java peers write and read: a rename here would break them.
    #[test]
    fn writes_the_java_field_names_and_texts() {
        let cmd = register_header().to_command();
        assert_eq!(
            fields(&cmd),
            [
                ("bodyCrc32", "2053024402"),
                ("brokerAddr", "10.0.0.1:10911"),
                ("brokerId", "0"),
                ("brokerName", "broker-a"),
                ("clusterName", "DefaultCluster"),
                ("compressed", "false"),
                ("enableActingMaster", "false"),
                ("haServerAddr", "10.0.0.1:10912"),
            ]
        );
        let cmd = GetRouteInfoHeader::new("TopicTest").to_command();
        assert_eq!(fields(&cmd), [("topic", "TopicTest")]);
        let cmd = NotifyMinBrokerIdChangeHeader {
            min_broker_id: Some(0),
            min_broker_addr: Some("a:1"),
            ..Default::default()
        }
        .to_command();
        assert_eq!(
            fields(&cmd),
            [("minBrokerAddr", "a:1"), ("minBrokerId", "0")]
        );
        assert_eq!(GetRouteInfoHeader::default().to_command().ext_fields, None);
    }

    #[test]
    fn missing_fields_are_named_in_the_order_they_are_checked() {
        let none = RemotingCommand::request(request::REGISTER_BROKER);
        let err = RegisterBrokerHeader::from_command(&none).unwrap_err();
        assert_eq!(err, HeaderError::Missing("brokerName"));
        assert_eq!(err.to_string(), "missing header field brokerName");

        let no_id = with(&[
            ("brokerName", "b"),
            ("brokerAddr", "a:1"),
            ("clusterName", "c"),
        ]);
        assert_eq!(
            UnregisterBrokerHeader::from_command(&no_id)
                .unwrap_err()
                .to_string(),
            "missing header field brokerId"
        );
        let err = QueryDataVersionHeader::from_command(&with(&[("clusterName", "c")])).err();
        assert_eq!(err, Some(HeaderError::Missing("brokerAddr")));
        let err = BrokerHeartbeatHeader::from_command(&with(&[("brokerAddr", "a:1")])).err();
        assert_eq!(err, Some(HeaderError::Missing("clusterName")));
        let err = GetBrokerMemberGroupHeader::from_command(&with(&[("clusterName", "c")])).err();
        assert_eq!(err, Some(HeaderError::Missing("brokerName")));
        let err = GetKvListByNamespaceHeader::from_command(&none);
        assert_eq!(
            err.unwrap_err().to_string(),
            "missing header field namespace"
        );
        let err = WipeWritePermHeader::from_command(&none);
        assert_eq!(err, Err(HeaderError::Missing("brokerName")));
        let err = AddWritePermHeader::from_command(&none);
        assert_eq!(err, Err(HeaderError::Missing("brokerName")));
        let err = DeleteTopicHeader::from_command(&with(&[("clusterName", "c")])).err();
        assert_eq!(err, Some(HeaderError::Missing("topic")));
        let err = RegisterTopicHeader::from_command(&none);
        assert_eq!(err, Err(HeaderError::Missing("topic")));
        let err = GetTopicsByClusterHeader::from_command(&with(&[("clusterName", "c")])).err();
        assert_eq!(err, Some(HeaderError::Missing("cluster")));
    }

    #[test]
    fn kv_requests_answer_in_java_words() {
        for cmd in [with(&[("namespace", "ns")]), with(&[("key", "k")])] {
            for err in [
                PutKvConfigHeader::from_command(&cmd).unwrap_err(),
                GetKvConfigHeader::from_command(&cmd).unwrap_err(),
                DeleteKvConfigHeader::from_command(&cmd).unwrap_err(),
            ] {
                assert_eq!(err.to_string(), "namespace or key is null");
            }
        }
    }

    #[test]
    fn required_numbers_must_parse_and_optional_ones_need_not() {
        let base = [
            ("brokerName", "b"),
            ("brokerAddr", "a:1"),
            ("clusterName", "c"),
        ];
        for text in ["abc", "1.5", " 1", ""] {
            let mut pairs = base.to_vec();
            pairs.push(("brokerId", text));
            let err = RegisterBrokerHeader::from_command(&with(&pairs)).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("header field brokerId is not a number: {text}")
            );
        }
        let mut pairs = base.to_vec();
        pairs.extend([
            ("brokerId", "1"),
            ("bodyCrc32", "x"),
            ("heartbeatTimeoutMillis", "soon"),
            ("compressed", "TRUE"),
            ("enableActingMaster", "yes"),
        ]);
        let cmd = with(&pairs);
        let h = RegisterBrokerHeader::from_command(&cmd).unwrap();
        assert_eq!(h.body_crc32, None);
        assert_eq!(h.heartbeat_timeout_millis, None);
        assert!(h.compressed);
        assert_eq!(h.enable_acting_master, Some(false));

        let cmd = with(&[("wipeTopicCount", "many")]);
        assert_eq!(
            WipeWritePermResponseHeader::from_command(&cmd)
                .unwrap_err()
                .to_string(),
            "header field wipeTopicCount is not a number: many"
        );
    }

    #[test]
    fn extra_keys_are_ignored() {
        let cmd = GetRouteInfoHeader::new("t")
            .to_command()
            .with_ext("AccessKey", "ak")
            .with_ext("lo", "true");
        assert_eq!(
            GetRouteInfoHeader::from_command(&cmd),
            Ok(GetRouteInfoHeader::new("t"))
        );
    }
}
