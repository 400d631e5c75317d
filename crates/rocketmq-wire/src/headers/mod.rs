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
//! Every header is declared by one table (`header!`): the struct, its code and the key of each
//! field; how a field is read and written follows from its type, so a header has no hand-written
//! reading or writing to drift from its table.
//!
//! - [`controller`]: the headers of the controller's requests (RIP-44) and of its answers;
//! - `field`: how a field of each type is read and written, and the `header!` table.

pub mod controller;
mod field;

use crate::RemotingCommand;
use field::header;

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

header! {
    /// REGISTER_BROKER.
    pub struct RegisterBrokerHeader<'a>: request REGISTER_BROKER {
        broker_name: &'a str = BROKER_NAME,
        broker_addr: &'a str = BROKER_ADDR,
        cluster_name: &'a str = CLUSTER_NAME,
        /// Where slaves replicate from; Java marks it required, but nothing breaks without it.
        ha_server_addr: Option<&'a str> = HA_SERVER_ADDR,
        broker_id: i64 = BROKER_ID,
        /// Per-broker expiry; Java brokers send it only in acting-master mode.
        heartbeat_timeout_millis: Option<i64> = HEARTBEAT_TIMEOUT_MILLIS,
        /// Its absence marks a 4.x broker.
        enable_acting_master: Option<bool> = ENABLE_ACTING_MASTER,
        /// Whether the body is the zlib binary form; Java always writes it.
        compressed: bool = COMPRESSED,
        /// 0 or absent: the body is not checked. Read as a long, so that an out-of-range value
        /// fails the check instead of disabling it.
        body_crc32: Option<i64> = BODY_CRC32,
        zone_name: Option<&'a str> = ZONE_NAME,
    }
}

header! {
    /// The answer to REGISTER_BROKER: where a slave finds its master.
    pub struct RegisterBrokerResponseHeader<'a>: response {
        ha_server_addr: Option<&'a str> = HA_SERVER_ADDR,
        master_addr: Option<&'a str> = MASTER_ADDR,
    }
}

header! {
    /// UNREGISTER_BROKER. Every field is required: Java's batch worker gives up part-way on a
    /// request without a broker id.
    pub struct UnregisterBrokerHeader<'a>: request UNREGISTER_BROKER {
        broker_name: &'a str = BROKER_NAME,
        broker_addr: &'a str = BROKER_ADDR,
        cluster_name: &'a str = CLUSTER_NAME,
        broker_id: i64 = BROKER_ID,
    }
}

header! {
    /// QUERY_DATA_VERSION. Only the cluster and address identify the live entry; the name and id
    /// Java marks required are carried but never needed.
    pub struct QueryDataVersionHeader<'a>: request QUERY_DATA_VERSION {
        cluster_name: &'a str = CLUSTER_NAME,
        broker_addr: &'a str = BROKER_ADDR,
        broker_name: Option<&'a str> = BROKER_NAME,
        broker_id: Option<i64> = BROKER_ID,
    }
}

header! {
    /// The answer to QUERY_DATA_VERSION: whether the broker should register again.
    pub struct QueryDataVersionResponseHeader: response {
        changed: bool = CHANGED,
    }
}

header! {
    /// BROKER_HEARTBEAT. The NameServer only needs the cluster and address; the rest is what Java
    /// brokers send for a controller.
    pub struct BrokerHeartbeatHeader<'a>: request BROKER_HEARTBEAT {
        cluster_name: &'a str = CLUSTER_NAME,
        broker_addr: &'a str = BROKER_ADDR,
        broker_name: Option<&'a str> = BROKER_NAME,
        broker_id: Option<i64> = BROKER_ID,
        epoch: Option<i64> = EPOCH,
        max_offset: Option<i64> = MAX_OFFSET,
        confirm_offset: Option<i64> = CONFIRM_OFFSET,
        heartbeat_timeout_mills: Option<i64> = HEARTBEAT_TIMEOUT_MILLS,
        election_priority: Option<i64> = ELECTION_PRIORITY,
    }
}

header! {
    /// GET_BROKER_MEMBER_GROUP.
    pub struct GetBrokerMemberGroupHeader<'a>: request GET_BROKER_MEMBER_GROUP {
        cluster_name: &'a str = CLUSTER_NAME,
        broker_name: &'a str = BROKER_NAME,
    }
}

header! {
    /// GET_ROUTEINFO_BY_TOPIC.
    pub struct GetRouteInfoHeader<'a>: request GET_ROUTEINFO_BY_TOPIC {
        /// Optional on purpose: Java answers a request without a topic as one for the topic
        /// `null`, and so does this server.
        topic: Option<&'a str> = TOPIC,
        accept_standard_json_only: Option<bool> = ACCEPT_STANDARD_JSON_ONLY,
        zone_name: Option<&'a str> = ZONE_NAME,
        zone_mode: Option<bool> = ZONE_MODE,
    }
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

header! {
    /// PUT_KV_CONFIG. A missing namespace or key is answered in Java's words, as for every
    /// single-entry KV request.
    pub struct PutKvConfigHeader<'a>: request PUT_KV_CONFIG, missing as NamespaceOrKeyNull {
        namespace: &'a str = NAMESPACE,
        key: &'a str = KEY,
        /// Absent is a Java null: the key is removed.
        value: Option<&'a str> = VALUE,
    }
}

header! {
    /// GET_KV_CONFIG.
    pub struct GetKvConfigHeader<'a>: request GET_KV_CONFIG, missing as NamespaceOrKeyNull {
        namespace: &'a str = NAMESPACE,
        key: &'a str = KEY,
    }
}

header! {
    /// The answer to GET_KV_CONFIG.
    pub struct GetKvConfigResponseHeader<'a>: response {
        value: Option<&'a str> = VALUE,
    }
}

header! {
    /// DELETE_KV_CONFIG.
    pub struct DeleteKvConfigHeader<'a>: request DELETE_KV_CONFIG, missing as NamespaceOrKeyNull {
        namespace: &'a str = NAMESPACE,
        key: &'a str = KEY,
    }
}

header! {
    /// GET_KVLIST_BY_NAMESPACE.
    pub struct GetKvListByNamespaceHeader<'a>: request GET_KVLIST_BY_NAMESPACE {
        namespace: &'a str = NAMESPACE,
    }
}

header! {
    /// WIPE_WRITE_PERM_OF_BROKER.
    pub struct WipeWritePermHeader<'a>: request WIPE_WRITE_PERM_OF_BROKER {
        broker_name: &'a str = BROKER_NAME,
    }
}

header! {
    /// The answer to WIPE_WRITE_PERM_OF_BROKER: how many topics were touched.
    pub struct WipeWritePermResponseHeader: response {
        wipe_topic_count: i64 = WIPE_TOPIC_COUNT,
    }
}

header! {
    /// ADD_WRITE_PERM_OF_BROKER.
    pub struct AddWritePermHeader<'a>: request ADD_WRITE_PERM_OF_BROKER {
        broker_name: &'a str = BROKER_NAME,
    }
}

header! {
    /// The answer to ADD_WRITE_PERM_OF_BROKER: how many topics were touched.
    pub struct AddWritePermResponseHeader: response {
        add_topic_count: i64 = ADD_TOPIC_COUNT,
    }
}

header! {
    /// DELETE_TOPIC_IN_NAMESRV.
    pub struct DeleteTopicHeader<'a>: request DELETE_TOPIC_IN_NAMESRV {
        topic: &'a str = TOPIC,
        /// Absent or empty: the topic goes from every cluster.
        cluster_name: Option<&'a str> = CLUSTER_NAME,
    }
}

header! {
    /// ROUTE_JOURNAL (ours): what the route journal holds about one topic or one broker group.
    pub struct RouteJournalHeader<'a>: request ROUTE_JOURNAL {
        topic: Option<&'a str> = TOPIC,
        broker_name: Option<&'a str> = BROKER_NAME,
        /// Entries wanted; the server bounds it.
        limit: Option<i64> = LIMIT with field::trimmed_if_present,
    }
}

header! {
    /// REGISTER_TOPIC_IN_NAMESRV.
    pub struct RegisterTopicHeader<'a>: request REGISTER_TOPIC_IN_NAMESRV {
        topic: &'a str = TOPIC,
    }
}

header! {
    /// GET_TOPICS_BY_CLUSTER.
    pub struct GetTopicsByClusterHeader<'a>: request GET_TOPICS_BY_CLUSTER {
        cluster: &'a str = CLUSTER,
    }
}

header! {
    /// NOTIFY_MIN_BROKER_ID_CHANGE, which the NameServer sends to brokers. Every field is optional
    /// in Java; `brokerName` exists there but Java's NameServer never sets it.
    pub struct NotifyMinBrokerIdChangeHeader<'a>: request NOTIFY_MIN_BROKER_ID_CHANGE {
        min_broker_id: Option<i64> = MIN_BROKER_ID,
        broker_name: Option<&'a str> = BROKER_NAME,
        min_broker_addr: Option<&'a str> = MIN_BROKER_ADDR,
        offline_broker_addr: Option<&'a str> = OFFLINE_BROKER_ADDR,
        ha_broker_addr: Option<&'a str> = HA_BROKER_ADDR,
    }
}

header! {
    /// CONTROLLER_ADD_MEMBER and NAMESRV_ADD_MEMBER (ours): the node to add to a Raft group, by
    /// its member id (`n3`, as `controllerDLegerPeers` names it) and the address it serves on.
    /// Both groups read the same fields; [`RequestHeader::to_command`] writes the controller's
    /// code, and the NameServers' request is written onto [`crate::codes::request::NAMESRV_ADD_MEMBER`].
    pub struct AddMemberRequestHeader<'a>: request CONTROLLER_ADD_MEMBER {
        member_id: &'a str = MEMBER_ID,
        member_address: &'a str = MEMBER_ADDRESS,
    }
}

header! {
    /// CONTROLLER_REMOVE_MEMBER and NAMESRV_REMOVE_MEMBER (ours): the member to take out of a
    /// Raft group.
    pub struct RemoveMemberRequestHeader<'a>: request CONTROLLER_REMOVE_MEMBER {
        member_id: &'a str = MEMBER_ID,
    }
}

header! {
    /// CONTROLLER_TRANSFER_LEADER and NAMESRV_TRANSFER_LEADER (ours): the voter that is to lead
    /// a Raft group.
    pub struct TransferLeaderRequestHeader<'a>: request CONTROLLER_TRANSFER_LEADER {
        member_id: &'a str = MEMBER_ID,
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

    /// A command's extension fields as pairs (the controller's header tests use it too).
    pub(super) fn fields(cmd: &RemotingCommand) -> Vec<(&str, &str)> {
        cmd.ext_fields
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// A request carrying these extension fields.
    pub(super) fn with(pairs: &[(&str, &str)]) -> RemotingCommand {
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
        let none = RemotingCommand::request(crate::codes::request::REGISTER_BROKER);
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
    fn a_journal_limit_may_be_padded_but_must_be_a_number() {
        let read = |text: &str| {
            RouteJournalHeader::from_command(&with(&[("limit", text)])).map(|h| h.limit)
        };
        assert_eq!(read(" 20 "), Ok(Some(20)));
        assert_eq!(
            read("many"),
            Err(HeaderError::NotANumber {
                field: "limit",
                text: "many".into()
            })
        );
        assert_eq!(
            RouteJournalHeader::from_command(&with(&[("topic", "t")])).map(|h| h.limit),
            Ok(None)
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
