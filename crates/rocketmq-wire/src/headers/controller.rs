//! The controller's headers (RIP-44): brokers and admin tools send the requests, a controller
//! answers them; NOTIFY_BROKER_ROLE_CHANGED goes the other way, from a controller to brokers.
//!
//! What a controller requires is what its handler cannot work without, as for the NameServer's
//! headers; its handler answers a missing or malformed required field with a remark of its own
//! (CONTROLLER_INVALID_REQUEST), so the [`HeaderError`] mostly says which check failed. Java's
//! answers keep boxed fields (`Long`, `Integer`, `String`) null when unset and leave them out;
//! they are `Option`s here. `invokeTime`, which Java's requests carry, is passed along but no
//! controller acts on it.

use super::field::{self, header};

header! {
    /// BROKER_HEARTBEAT as a controller reads it. A controller needs other fields than the
    /// NameServer, which reads the same request as [`super::BrokerHeartbeatHeader`]: the broker
    /// id, and an epoch that fits Java's `Integer` (an epoch fences stale masters, so a truncated
    /// one must not be taken), while a missing name, address or cluster reads as empty, as Java's
    /// controller takes the heartbeat without them. Written as a Java broker in controller mode
    /// writes it, every field present. The broker id is checked before the epoch.
    pub struct ControllerHeartbeatHeader<'a>: request BROKER_HEARTBEAT {
        cluster_name: &'a str = CLUSTER_NAME with field::or_empty,
        broker_addr: &'a str = BROKER_ADDR with field::or_empty,
        broker_name: &'a str = BROKER_NAME with field::or_empty,
        /// Required; one that does not parse counts as missing.
        broker_id: i64 = BROKER_ID with field::unparsable_is_missing,
        epoch: Option<i32> = EPOCH with field::parsed_if_present,
        max_offset: Option<i64> = MAX_OFFSET,
        confirm_offset: Option<i64> = CONFIRM_OFFSET,
        heartbeat_timeout_mills: Option<i64> = HEARTBEAT_TIMEOUT_MILLS,
        /// Java's `Integer`, read as a long so that the controller decides how to bound it.
        election_priority: Option<i64> = ELECTION_PRIORITY,
    }
}

header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET, from a master; the body is the proposed
    /// [`crate::body::SyncStateSet`], under the set epoch the master based it on.
    pub struct AlterSyncStateSetRequestHeader<'a>: request CONTROLLER_ALTER_SYNC_STATE_SET {
        broker_name: &'a str = BROKER_NAME,
        master_broker_id: i64 = MASTER_BROKER_ID,
        /// Fences a master that has been replaced.
        master_epoch: i32 = MASTER_EPOCH,
        invoke_time: Option<i64> = INVOKE_TIME,
    }
}

header! {
    /// The answer to CONTROLLER_ALTER_SYNC_STATE_SET. Java keeps the epoch in a primitive `int`,
    /// so it is on the wire (as 0) even when the change is refused.
    pub struct AlterSyncStateSetResponseHeader: response {
        new_sync_state_set_epoch: i32 = NEW_SYNC_STATE_SET_EPOCH,
    }
}

header! {
    /// CONTROLLER_ELECT_MASTER: from a broker that finds no master (for itself), from an admin
    /// (`designate_elect`, for the broker it names), or from the controller itself (no broker).
    pub struct ElectMasterRequestHeader<'a>: request CONTROLLER_ELECT_MASTER {
        cluster_name: Option<&'a str> = CLUSTER_NAME,
        broker_name: &'a str = BROKER_NAME,
        /// Absent, unparsable or -1: no broker.
        broker_id: Option<i64> = BROKER_ID,
        designate_elect: bool = DESIGNATE_ELECT,
        invoke_time: Option<i64> = INVOKE_TIME,
    }
}

header! {
    /// The answer to CONTROLLER_ELECT_MASTER: the master after the election (also when the old
    /// one stays); the body is a [`crate::body::ElectMasterResponseBody`].
    pub struct ElectMasterResponseHeader<'a>: response {
        master_broker_id: Option<i64> = MASTER_BROKER_ID,
        master_address: Option<&'a str> = MASTER_ADDRESS,
        master_epoch: Option<i32> = MASTER_EPOCH,
        sync_state_set_epoch: Option<i32> = SYNC_STATE_SET_EPOCH,
    }
}

header! {
    /// CONTROLLER_REGISTER_BROKER: a broker that holds an id tells the controller where it is.
    pub struct RegisterBrokerToControllerRequestHeader<'a>: request CONTROLLER_REGISTER_BROKER {
        cluster_name: &'a str = CLUSTER_NAME,
        broker_name: &'a str = BROKER_NAME,
        broker_id: i64 = BROKER_ID,
        broker_address: &'a str = BROKER_ADDRESS,
        invoke_time: Option<i64> = INVOKE_TIME,
    }
}

header! {
    /// The answer to CONTROLLER_REGISTER_BROKER: the group's master, if it has a live one; the
    /// body is the group's [`crate::body::SyncStateSet`].
    pub struct RegisterBrokerToControllerResponseHeader<'a>: response {
        cluster_name: Option<&'a str> = CLUSTER_NAME,
        broker_name: Option<&'a str> = BROKER_NAME,
        master_broker_id: Option<i64> = MASTER_BROKER_ID,
        master_address: Option<&'a str> = MASTER_ADDRESS,
        master_epoch: Option<i32> = MASTER_EPOCH,
        sync_state_set_epoch: Option<i32> = SYNC_STATE_SET_EPOCH,
    }
}

header! {
    /// CONTROLLER_GET_REPLICA_INFO.
    pub struct GetReplicaInfoRequestHeader<'a>: request CONTROLLER_GET_REPLICA_INFO {
        broker_name: &'a str = BROKER_NAME,
    }
}

header! {
    /// The answer to CONTROLLER_GET_REPLICA_INFO: the group's master, if any; the body is the
    /// group's [`crate::body::SyncStateSet`].
    pub struct GetReplicaInfoResponseHeader<'a>: response {
        master_broker_id: Option<i64> = MASTER_BROKER_ID,
        master_address: Option<&'a str> = MASTER_ADDRESS,
        master_epoch: Option<i32> = MASTER_EPOCH,
    }
}

header! {
    /// The answer to CONTROLLER_GET_METADATA_INFO (which has no request header): what one node
    /// knows of its group.
    pub struct GetMetaDataResponseHeader<'a>: response {
        group: Option<&'a str> = GROUP,
        controller_leader_id: Option<&'a str> = CONTROLLER_LEADER_ID,
        controller_leader_address: Option<&'a str> = CONTROLLER_LEADER_ADDRESS,
        is_leader: bool = IS_LEADER,
        /// `id:host:port;` for each node.
        peers: Option<&'a str> = PEERS,
    }
}

header! {
    /// NOTIFY_BROKER_ROLE_CHANGED, which a controller sends to brokers, oneway; the body is the
    /// group's [`crate::body::SyncStateSet`]. A broker applies it only when the epoch is newer.
    pub struct NotifyBrokerRoleChangedRequestHeader<'a>: request NOTIFY_BROKER_ROLE_CHANGED {
        master_address: Option<&'a str> = MASTER_ADDRESS,
        master_epoch: Option<i32> = MASTER_EPOCH,
        sync_state_set_epoch: Option<i32> = SYNC_STATE_SET_EPOCH,
        master_broker_id: Option<i64> = MASTER_BROKER_ID,
    }
}

header! {
    /// CLEAN_BROKER_DATA, from an admin: forget some brokers of a group, or the whole group.
    pub struct CleanControllerBrokerDataRequestHeader<'a>: request CLEAN_BROKER_DATA {
        cluster_name: Option<&'a str> = CLUSTER_NAME,
        broker_name: &'a str = BROKER_NAME,
        /// Ids separated by `;`, kept as text: the controller decides how to read a malformed
        /// list.
        broker_controller_ids_to_clean: Option<&'a str> = BROKER_CONTROLLER_IDS_TO_CLEAN,
        is_clean_living_broker: bool = IS_CLEAN_LIVING_BROKER,
        invoke_time: Option<i64> = INVOKE_TIME,
    }
}

header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID: the id a new broker of the group should apply for.
    pub struct GetNextBrokerIdRequestHeader<'a>: request CONTROLLER_GET_NEXT_BROKER_ID {
        cluster_name: &'a str = CLUSTER_NAME,
        broker_name: &'a str = BROKER_NAME,
    }
}

header! {
    /// The answer to CONTROLLER_GET_NEXT_BROKER_ID.
    pub struct GetNextBrokerIdResponseHeader<'a>: response {
        cluster_name: Option<&'a str> = CLUSTER_NAME,
        broker_name: Option<&'a str> = BROKER_NAME,
        next_broker_id: Option<i64> = NEXT_BROKER_ID,
    }
}

header! {
    /// CONTROLLER_APPLY_BROKER_ID: a new broker claims an id. The check code (`addr;millis`)
    /// tells the broker that holds the id from another that asks for it.
    pub struct ApplyBrokerIdRequestHeader<'a>: request CONTROLLER_APPLY_BROKER_ID {
        cluster_name: &'a str = CLUSTER_NAME,
        broker_name: &'a str = BROKER_NAME,
        applied_broker_id: i64 = APPLIED_BROKER_ID,
        register_check_code: &'a str = REGISTER_CHECK_CODE,
    }
}

header! {
    /// The answer to CONTROLLER_APPLY_BROKER_ID.
    pub struct ApplyBrokerIdResponseHeader<'a>: response {
        cluster_name: Option<&'a str> = CLUSTER_NAME,
        broker_name: Option<&'a str> = BROKER_NAME,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::tests::{fields, with};
    use crate::headers::{
        AddMemberRequestHeader, HeaderError, RemoveMemberRequestHeader, RequestHeader,
        ResponseHeader, TransferLeaderRequestHeader,
    };
    use crate::RemotingCommand;

    /// Writes the request header, checks the keys and texts Java peers read, and reads it back.
    fn request_as<'a, H>(header: &H, cmd: &'a RemotingCommand, expected: &[(&str, &str)])
    where
        H: RequestHeader<'a> + PartialEq + std::fmt::Debug,
    {
        assert_eq!(cmd.code, H::CODE);
        assert_eq!(fields(cmd), expected);
        assert_eq!(H::from_command(cmd).as_ref(), Ok(header));
    }

    fn response_as<'a, H>(header: &H, cmd: &'a RemotingCommand, expected: &[(&str, &str)])
    where
        H: ResponseHeader<'a> + PartialEq + std::fmt::Debug,
    {
        assert_eq!(fields(cmd), expected);
        assert_eq!(H::from_command(cmd).as_ref(), Ok(header));
    }

    fn beat() -> ControllerHeartbeatHeader<'static> {
        ControllerHeartbeatHeader {
            cluster_name: "c",
            broker_addr: "a:1",
            broker_name: "b",
            broker_id: 2,
            epoch: Some(3),
            max_offset: Some(4),
            confirm_offset: Some(5),
            heartbeat_timeout_mills: Some(6),
            election_priority: Some(7),
        }
    }

    #[test]
    fn requests_carry_the_java_field_names() {
        let h = beat();
        request_as(
            &h,
            &h.to_command(),
            &[
                ("brokerAddr", "a:1"),
                ("brokerId", "2"),
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("confirmOffset", "5"),
                ("electionPriority", "7"),
                ("epoch", "3"),
                ("heartbeatTimeoutMills", "6"),
                ("maxOffset", "4"),
            ],
        );
        let h = AlterSyncStateSetRequestHeader {
            broker_name: "b",
            master_broker_id: 1,
            master_epoch: 2,
            invoke_time: Some(0),
        };
        request_as(
            &h,
            &h.to_command(),
            &[
                ("brokerName", "b"),
                ("invokeTime", "0"),
                ("masterBrokerId", "1"),
                ("masterEpoch", "2"),
            ],
        );
        let h = ElectMasterRequestHeader {
            cluster_name: Some("c"),
            broker_name: "b",
            broker_id: Some(1),
            designate_elect: true,
            invoke_time: Some(9),
        };
        request_as(
            &h,
            &h.to_command(),
            &[
                ("brokerId", "1"),
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("designateElect", "true"),
                ("invokeTime", "9"),
            ],
        );
        let h = RegisterBrokerToControllerRequestHeader {
            cluster_name: "c",
            broker_name: "b",
            broker_id: 1,
            broker_address: "a:1",
            invoke_time: None,
        };
        request_as(
            &h,
            &h.to_command(),
            &[
                ("brokerAddress", "a:1"),
                ("brokerId", "1"),
                ("brokerName", "b"),
                ("clusterName", "c"),
            ],
        );
        let h = AddMemberRequestHeader {
            member_id: "n3",
            member_address: "a:1",
        };
        request_as(
            &h,
            &h.to_command(),
            &[("memberAddress", "a:1"), ("memberId", "n3")],
        );
        let h = RemoveMemberRequestHeader { member_id: "n1" };
        request_as(&h, &h.to_command(), &[("memberId", "n1")]);
        let h = TransferLeaderRequestHeader { member_id: "n2" };
        request_as(&h, &h.to_command(), &[("memberId", "n2")]);
        let h = GetReplicaInfoRequestHeader { broker_name: "b" };
        request_as(&h, &h.to_command(), &[("brokerName", "b")]);
        let h = NotifyBrokerRoleChangedRequestHeader {
            master_address: Some("a:1"),
            master_epoch: Some(2),
            sync_state_set_epoch: Some(3),
            master_broker_id: Some(1),
        };
        request_as(
            &h,
            &h.to_command(),
            &[
                ("masterAddress", "a:1"),
                ("masterBrokerId", "1"),
                ("masterEpoch", "2"),
                ("syncStateSetEpoch", "3"),
            ],
        );
        let h = CleanControllerBrokerDataRequestHeader {
            cluster_name: Some("c"),
            broker_name: "b",
            broker_controller_ids_to_clean: Some("1;2"),
            is_clean_living_broker: false,
            invoke_time: Some(9),
        };
        request_as(
            &h,
            &h.to_command(),
            &[
                ("brokerControllerIdsToClean", "1;2"),
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("invokeTime", "9"),
                ("isCleanLivingBroker", "false"),
            ],
        );
        let h = GetNextBrokerIdRequestHeader {
            cluster_name: "c",
            broker_name: "b",
        };
        request_as(
            &h,
            &h.to_command(),
            &[("brokerName", "b"), ("clusterName", "c")],
        );
        let h = ApplyBrokerIdRequestHeader {
            cluster_name: "c",
            broker_name: "b",
            applied_broker_id: 2,
            register_check_code: "a:1;5",
        };
        request_as(
            &h,
            &h.to_command(),
            &[
                ("appliedBrokerId", "2"),
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("registerCheckCode", "a:1;5"),
            ],
        );
    }

    #[test]
    fn responses_carry_the_java_field_names_and_leave_out_nulls() {
        let base = || RemotingCommand::response_to(&RemotingCommand::request(0), 0);
        let h = AlterSyncStateSetResponseHeader {
            new_sync_state_set_epoch: 0,
        };
        response_as(&h, &h.write(base()), &[("newSyncStateSetEpoch", "0")]);
        let h = ElectMasterResponseHeader {
            master_broker_id: Some(1),
            master_address: Some("a:1"),
            master_epoch: Some(2),
            sync_state_set_epoch: Some(3),
        };
        response_as(
            &h,
            &h.write(base()),
            &[
                ("masterAddress", "a:1"),
                ("masterBrokerId", "1"),
                ("masterEpoch", "2"),
                ("syncStateSetEpoch", "3"),
            ],
        );
        let h = RegisterBrokerToControllerResponseHeader {
            cluster_name: Some("c"),
            broker_name: Some("b"),
            ..Default::default()
        };
        response_as(
            &h,
            &h.write(base()),
            &[("brokerName", "b"), ("clusterName", "c")],
        );
        let h = RegisterBrokerToControllerResponseHeader {
            master_broker_id: Some(1),
            master_address: Some("a:1"),
            master_epoch: Some(2),
            sync_state_set_epoch: Some(3),
            ..h
        };
        response_as(
            &h,
            &h.write(base()),
            &[
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("masterAddress", "a:1"),
                ("masterBrokerId", "1"),
                ("masterEpoch", "2"),
                ("syncStateSetEpoch", "3"),
            ],
        );
        let h = GetReplicaInfoResponseHeader {
            master_epoch: Some(0),
            ..Default::default()
        };
        response_as(&h, &h.write(base()), &[("masterEpoch", "0")]);
        let h = GetMetaDataResponseHeader {
            group: Some("g"),
            controller_leader_id: Some("n0"),
            controller_leader_address: Some("a:1"),
            is_leader: true,
            peers: Some("n0:a:1;"),
        };
        response_as(
            &h,
            &h.write(base()),
            &[
                ("controllerLeaderAddress", "a:1"),
                ("controllerLeaderId", "n0"),
                ("group", "g"),
                ("isLeader", "true"),
                ("peers", "n0:a:1;"),
            ],
        );
        let h = GetNextBrokerIdResponseHeader {
            cluster_name: Some("c"),
            broker_name: Some("b"),
            next_broker_id: Some(1),
        };
        response_as(
            &h,
            &h.write(base()),
            &[
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("nextBrokerId", "1"),
            ],
        );
        let h = ApplyBrokerIdResponseHeader {
            cluster_name: Some("c"),
            broker_name: Some("b"),
        };
        response_as(
            &h,
            &h.write(base()),
            &[("brokerName", "b"), ("clusterName", "c")],
        );
        assert_eq!(
            ElectMasterResponseHeader::default()
                .write(base())
                .ext_fields,
            None
        );
    }

    #[test]
    fn a_controller_reads_a_heartbeat_by_the_broker_id_and_an_int_epoch() {
        let only_id = with(&[("brokerId", "1")]);
        assert_eq!(
            ControllerHeartbeatHeader::from_command(&only_id),
            Ok(ControllerHeartbeatHeader {
                broker_id: 1,
                ..Default::default()
            })
        );
        for id in [None, Some("x")] {
            let mut pairs = vec![("epoch", "x"), ("clusterName", "c")];
            pairs.extend(id.map(|id| ("brokerId", id)));
            assert_eq!(
                ControllerHeartbeatHeader::from_command(&with(&pairs)),
                Err(HeaderError::Missing("brokerId")),
                "the id is checked first"
            );
        }
        for epoch in ["x", "2147483648", "1.0"] {
            let cmd = with(&[("brokerId", "1"), ("epoch", epoch)]);
            assert_eq!(
                ControllerHeartbeatHeader::from_command(&cmd),
                Err(HeaderError::NotANumber {
                    field: "epoch",
                    text: epoch.to_string()
                })
            );
        }
        let lenient = with(&[
            ("brokerId", "1"),
            ("epoch", "-1"),
            ("maxOffset", "many"),
            ("electionPriority", "99999999999"),
        ]);
        let h = ControllerHeartbeatHeader::from_command(&lenient).unwrap();
        assert_eq!(h.epoch, Some(-1));
        assert_eq!(h.max_offset, None);
        assert_eq!(h.election_priority, Some(99_999_999_999));
    }

    #[test]
    fn required_fields_are_checked_in_order() {
        let none = with(&[]);
        assert_eq!(
            AlterSyncStateSetRequestHeader::from_command(&none),
            Err(HeaderError::Missing("brokerName"))
        );
        let big_epoch = with(&[
            ("brokerName", "b"),
            ("masterBrokerId", "1"),
            ("masterEpoch", "4294967296"),
        ]);
        assert!(matches!(
            AlterSyncStateSetRequestHeader::from_command(&big_epoch),
            Err(HeaderError::NotANumber {
                field: "masterEpoch",
                ..
            })
        ));
        assert_eq!(
            ElectMasterRequestHeader::from_command(&with(&[("clusterName", "c")])),
            Err(HeaderError::Missing("brokerName"))
        );
        let unparsable_id = with(&[
            ("brokerName", "b"),
            ("brokerId", "x"),
            ("designateElect", "TRUE"),
        ]);
        let h = ElectMasterRequestHeader::from_command(&unparsable_id).unwrap();
        assert_eq!((h.broker_id, h.designate_elect), (None, true));
        assert_eq!(
            RegisterBrokerToControllerRequestHeader::from_command(&with(&[
                ("clusterName", "c"),
                ("brokerName", "b"),
                ("brokerId", "1"),
            ])),
            Err(HeaderError::Missing("brokerAddress"))
        );
        assert_eq!(
            GetReplicaInfoRequestHeader::from_command(&none),
            Err(HeaderError::Missing("brokerName"))
        );
        assert_eq!(
            CleanControllerBrokerDataRequestHeader::from_command(&with(&[("clusterName", "c")])),
            Err(HeaderError::Missing("brokerName"))
        );
        assert_eq!(
            GetNextBrokerIdRequestHeader::from_command(&with(&[("brokerName", "b")])),
            Err(HeaderError::Missing("clusterName"))
        );
        assert_eq!(
            ApplyBrokerIdRequestHeader::from_command(&with(&[
                ("clusterName", "c"),
                ("brokerName", "b"),
                ("appliedBrokerId", "1"),
            ])),
            Err(HeaderError::Missing("registerCheckCode"))
        );
        assert_eq!(
            AlterSyncStateSetResponseHeader::from_command(&none),
            Err(HeaderError::Missing("newSyncStateSetEpoch"))
        );
    }
}
