//! Request, response and language codes of the RocketMQ remoting protocol.

/// Request codes served by (or sent from) a NameServer or a controller.
pub mod request {
    pub const PUT_KV_CONFIG: i32 = 100;
    pub const GET_KV_CONFIG: i32 = 101;
    pub const DELETE_KV_CONFIG: i32 = 102;
    pub const REGISTER_BROKER: i32 = 103;
    pub const UNREGISTER_BROKER: i32 = 104;
    pub const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
    pub const GET_BROKER_CLUSTER_INFO: i32 = 106;
    pub const WIPE_WRITE_PERM_OF_BROKER: i32 = 205;
    pub const GET_ALL_TOPIC_LIST_FROM_NAMESERVER: i32 = 206;
    pub const DELETE_TOPIC_IN_NAMESRV: i32 = 216;
    pub const REGISTER_TOPIC_IN_NAMESRV: i32 = 217;
    pub const GET_KVLIST_BY_NAMESPACE: i32 = 219;
    pub const GET_TOPICS_BY_CLUSTER: i32 = 224;
    pub const GET_SYSTEM_TOPIC_LIST_FROM_NS: i32 = 304;
    pub const GET_UNIT_TOPIC_LIST: i32 = 311;
    pub const GET_HAS_UNIT_SUB_TOPIC_LIST: i32 = 312;
    pub const GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: i32 = 313;
    pub const UPDATE_NAMESRV_CONFIG: i32 = 318;
    pub const GET_NAMESRV_CONFIG: i32 = 319;
    pub const QUERY_DATA_VERSION: i32 = 322;
    pub const ADD_WRITE_PERM_OF_BROKER: i32 = 327;
    pub const GET_BROKER_MEMBER_GROUP: i32 = 901;
    pub const BROKER_HEARTBEAT: i32 = 904;
    pub const NOTIFY_MIN_BROKER_ID_CHANGE: i32 = 905;

    // Served by a controller (RIP-44) on its own port; 904 above is also sent to it.
    pub const CONTROLLER_ALTER_SYNC_STATE_SET: i32 = 1001;
    pub const CONTROLLER_ELECT_MASTER: i32 = 1002;
    pub const CONTROLLER_REGISTER_BROKER: i32 = 1003;
    pub const CONTROLLER_GET_REPLICA_INFO: i32 = 1004;
    pub const CONTROLLER_GET_METADATA_INFO: i32 = 1005;
    pub const CONTROLLER_GET_SYNC_STATE_DATA: i32 = 1006;
    /// Sent by a controller to brokers, oneway.
    pub const NOTIFY_BROKER_ROLE_CHANGED: i32 = 1008;
    pub const UPDATE_CONTROLLER_CONFIG: i32 = 1009;
    pub const GET_CONTROLLER_CONFIG: i32 = 1010;
    pub const CLEAN_BROKER_DATA: i32 = 1011;
    pub const CONTROLLER_GET_NEXT_BROKER_ID: i32 = 1012;
    pub const CONTROLLER_APPLY_BROKER_ID: i32 = 1013;

    // Ours, served by a controller to admin tools: changes of the controller group's own
    // members. Java assigns nothing here (its controller codes end at 1018, its JRaft
    // internals included), and our controller uses 1190–1195 between its nodes.
    /// Adds a node (`memberId`, `memberAddress`): a learner first, a voter once caught up.
    pub const CONTROLLER_ADD_MEMBER: i32 = 1200;
    /// Removes a node (`memberId`), the leader included.
    pub const CONTROLLER_REMOVE_MEMBER: i32 = 1201;
    /// Hands the leadership to a caught-up voter (`memberId`).
    pub const CONTROLLER_TRANSFER_LEADER: i32 = 1202;
    /// The members, their roles and how far each lags the leader's log.
    pub const CONTROLLER_LIST_MEMBERS: i32 = 1203;

    // Ours, served by a NameServer that agrees with others (`namesrvPeers`) to admin tools:
    // changes of the KV group's members, as the controller's above (same headers and body).
    pub const NAMESRV_ADD_MEMBER: i32 = 1204;
    pub const NAMESRV_REMOVE_MEMBER: i32 = 1205;
    pub const NAMESRV_TRANSFER_LEADER: i32 = 1206;
    pub const NAMESRV_LIST_MEMBERS: i32 = 1207;

    // Ours, served by a NameServer to admin tools (`nsadmin explainRoute`).
    /// The route journal's entries about a topic (`topic`) or a broker group (`brokerName`),
    /// newest `limit`, with the route as it is now: a JSON body.
    pub const ROUTE_JOURNAL: i32 = 1230;
}

/// Ours, spoken only between our own nodes, each group's taken from its members only (never sent
/// to or by a Java peer); outside every range Java assigns (its controller's JRaft internals end
/// at 1018). docs/controller.md §5 and docs/protocol.md §12.
pub mod peer {
    /// The handshake that starts a link between members sealed with their shared secret
    /// (`rocketmq_raft::peer_auth`), in either group.
    pub const PEER_HELLO: i32 = 1217;

    /// The ext fields our nodes' private requests and answers carry, in either group.
    pub mod keys {
        /// PEER_HELLO: the connecting member's nonce; the answer's nonce and proof.
        pub const CLIENT_NONCE: &str = "peerNonce";
        pub const SERVER_NONCE: &str = "peerServerNonce";
        pub const PROOF: &str = "peerProof";
        /// On every sealed request and answer: its sequence number and MAC.
        pub const SEQ: &str = "peerSeq";
        pub const MAC: &str = "peerMac";
        /// FORWARDED_WRITE's answer: the index the write took in the group's log.
        pub const APPLIED: &str = "applied";
        /// The answering NameServer's clock (ms since the epoch) when it answered ROUTE_DIGEST
        /// or ROUTE_PULL.
        pub const NOW: &str = "now";
        /// ROUTE_DIGEST: the asker's `since` (the generation of the asked NameServer's routes at
        /// its last whole digest); the answer's `unchanged` (routes still at that generation: no
        /// body) or `generation` (of the digest in the body).
        pub const SINCE: &str = "since";
        pub const UNCHANGED: &str = "unchanged";
        pub const GENERATION: &str = "generation";
        /// ROUTE_PULL: the bytes of topic lists the asker takes in this answer.
        pub const BYTES: &str = "bytes";
        /// A NameServer's CONTROLLER_NOT_LEADER to a member change (1204–1207): the remoting
        /// address of the leader it vouches for, where the admin tool goes next.
        pub const LEADER_ADDRESS: &str = "leaderAddress";
    }

    /// The controller group's nodes, on the controller port.
    pub mod controller {
        pub const RAFT_APPEND_ENTRIES: i32 = 1190;
        pub const RAFT_VOTE: i32 = 1191;
        pub const RAFT_INSTALL_SNAPSHOT: i32 = 1192;
        /// A broker's heartbeat, passed on by the follower that received it to the leader
        /// (oneway, with the heartbeat's own header).
        pub const FORWARDED_HEARTBEAT: i32 = 1193;
        /// Whether the asked node belongs to a group that has worked: the answer's body is
        /// `{"applied":N,"term":T}` (the index its state machine has applied, null for an empty
        /// store, and the term of its vote). Asked by a node that starts with an empty store
        /// before it forms a group or votes.
        pub const GROUP_PROBE: i32 = 1194;
        /// Sent by a leader handing its office on to the member that is to take it, once that
        /// member holds the leader's whole log: it stands at once.
        pub const TAKE_LEADERSHIP: i32 = 1195;
    }

    /// NameServers that agree (`namesrvPeers`), on the remoting port: the KV group's Raft
    /// traffic and writes, and the route exchange.
    pub mod namesrv {
        pub use super::PEER_HELLO;

        pub const APPEND_ENTRIES: i32 = 1210;
        pub const VOTE: i32 = 1211;
        pub const INSTALL_SNAPSHOT: i32 = 1212;
        /// Whether the asked member belongs to a group that has worked (as the controller's
        /// GROUP_PROBE).
        pub const PROBE: i32 = 1214;
        /// Sent by the leader handing its office on to the member that is to take it (as the
        /// controller's TAKE_LEADERSHIP).
        pub const TAKE_LEADERSHIP: i32 = 1218;
        /// A KV command (JSON body) a member passes on to the leader; answered, once committed,
        /// with the index the write took in the log in the `applied` field.
        pub const FORWARDED_WRITE: i32 = 1216;
        /// The asked NameServer's route digest: a JSON list of what it heard from each broker.
        pub const ROUTE_DIGEST: i32 = 1220;
        /// The registrations of the brokers the body lists, as the asked NameServer holds them.
        pub const ROUTE_PULL: i32 = 1221;

        /// Whether a request code is spoken between NameServers that agree: taken from members
        /// only.
        pub fn is_peer_code(code: i32) -> bool {
            matches!(
                code,
                PEER_HELLO
                    | APPEND_ENTRIES
                    | VOTE
                    | INSTALL_SNAPSHOT
                    | PROBE
                    | TAKE_LEADERSHIP
                    | FORWARDED_WRITE
                    | ROUTE_DIGEST
                    | ROUTE_PULL
            )
        }
    }
}

/// Response codes a NameServer or a controller answers with.
pub mod response {
    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const SYSTEM_BUSY: i32 = 2;
    pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
    pub const NO_PERMISSION: i32 = 16;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const QUERY_NOT_FOUND: i32 = 22;
    pub const GO_AWAY: i32 = 1500;

    // A controller's refusals (RIP-44).
    pub const CONTROLLER_FENCED_MASTER_EPOCH: i32 = 2000;
    pub const CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: i32 = 2001;
    pub const CONTROLLER_INVALID_MASTER: i32 = 2002;
    pub const CONTROLLER_INVALID_REPLICAS: i32 = 2003;
    pub const CONTROLLER_MASTER_NOT_AVAILABLE: i32 = 2004;
    pub const CONTROLLER_INVALID_REQUEST: i32 = 2005;
    pub const CONTROLLER_BROKER_NOT_ALIVE: i32 = 2006;
    pub const CONTROLLER_NOT_LEADER: i32 = 2007;
    pub const CONTROLLER_BROKER_METADATA_NOT_EXIST: i32 = 2008;
    pub const CONTROLLER_INVALID_CLEAN_BROKER_METADATA: i32 = 2009;
    pub const CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: i32 = 2010;
    pub const CONTROLLER_MASTER_STILL_EXIST: i32 = 2011;
    pub const CONTROLLER_ELECT_MASTER_FAILED: i32 = 2012;
    pub const CONTROLLER_ALTER_SYNC_STATE_SET_FAILED: i32 = 2013;
    pub const CONTROLLER_BROKER_ID_INVALID: i32 = 2014;
    pub const CONTROLLER_JRAFT_INTERNAL_ERROR: i32 = 2015;
    pub const CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS: i32 = 2016;
}

/// `MQVersion.Version` ordinals that change behaviour.
pub mod version {
    /// REGISTER_BROKER bodies are a RegisterBrokerBody from this version on.
    pub const V3_0_11: i32 = 37;
    /// Route bodies use standard JSON from this version on.
    pub const V4_9_4: i32 = 401;
    /// Compressed register bodies carry the static-topic mapping section from this version on.
    pub const V5_0_0: i32 = 413;
    /// GO_AWAY is only sent to requesters newer than this.
    pub const V5_3_1: i32 = 475;
    /// The version this implementation speaks as, and puts in its responses.
    pub const CURRENT: i32 = 479;

    /// The name Java gives a version ordinal (`MQVersion.Version`, e.g. `V5_5_1` or
    /// `V5_4_0_SNAPSHOT`), for people reading it; Java names every ordinal past its list
    /// `HIGHER_VERSION`. `None` for a negative ordinal.
    pub fn java_name(ordinal: i32) -> Option<String> {
        let mut i = usize::try_from(ordinal).ok()?;
        if let Some(pre) = V3_0_0.get(i) {
            return Some(format!("V3_0_0_{pre}"));
        }
        i -= V3_0_0.len();
        // After 3.0.0 the list is regular: a snapshot, then the release, of every version of
        // these runs of patch numbers, in order.
        let runs = [(3, 0, 1..=15), (3, 1, 0..=9), (3, 2, 0..=9)]
            .into_iter()
            .chain((3..=9).map(|minor| (3, minor, 1..=9)))
            .chain((4..=5).flat_map(|major| (0..=9).map(move |minor| (major, minor, 0..=9))));
        for (major, minor, patches) in runs {
            let len = 2 * patches.clone().count();
            if i < len {
                let patch = patches.start() + i as u32 / 2;
                let snapshot = if i % 2 == 0 { "_SNAPSHOT" } else { "" };
                return Some(format!("V{major}_{minor}_{patch}{snapshot}"));
            }
            i -= len;
        }
        Some("HIGHER_VERSION".to_string())
    }

    /// 3.0.0's pre-releases, the only irregular part of Java's list.
    const V3_0_0: [&str; 16] = [
        "SNAPSHOT",
        "ALPHA1",
        "BETA1",
        "BETA2",
        "BETA3",
        "BETA4",
        "BETA5",
        "BETA6_SNAPSHOT",
        "BETA6",
        "BETA7_SNAPSHOT",
        "BETA7",
        "BETA8_SNAPSHOT",
        "BETA8",
        "BETA9_SNAPSHOT",
        "BETA9",
        "FINAL",
    ];
}

/// The sender's language, carried by name in JSON headers and by code in binary headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LanguageCode(pub u8);

const LANGUAGE_NAMES: [&str; 14] = [
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
    "OMS", "RUST", "NODE_JS",
];

impl LanguageCode {
    pub const JAVA: LanguageCode = LanguageCode(0);

    pub fn from_code(code: u8) -> Option<Self> {
        ((code as usize) < LANGUAGE_NAMES.len()).then_some(LanguageCode(code))
    }

    pub fn from_name(name: &str) -> Option<Self> {
        LANGUAGE_NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| LanguageCode(i as u8))
    }

    pub fn name(self) -> &'static str {
        LANGUAGE_NAMES[self.0 as usize]
    }
}
