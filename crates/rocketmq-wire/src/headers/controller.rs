//! The controller's headers (RIP-44): brokers and admin tools send the requests, a controller
//! answers them; NOTIFY_BROKER_ROLE_CHANGED goes the other way, from a controller to brokers.
//!
//! What a controller requires is what its handler cannot work without, as for the NameServer's
//! headers; its handler answers a missing or malformed required field with a remark of its own
//! (CONTROLLER_INVALID_REQUEST), so the [`HeaderError`] mostly says which check failed. Java's
//! answers keep boxed fields (`Long`, `Integer`, `String`) null when unset and leave them out;
//! they are `Option`s here. `invokeTime`, which Java's requests carry, is passed along but no
//! controller acts on it.

use super::{keys, put, Fields, HeaderError, RequestHeader, ResponseHeader};
use crate::codes::request;
use crate::RemotingCommand;

/// BROKER_HEARTBEAT as a controller reads it. A controller needs other fields than the
/// NameServer, which reads the same request as [`super::BrokerHeartbeatHeader`]: the broker id,
/// and an epoch that fits Java's `Integer` (an epoch fences stale masters, so a truncated one
/// must not be taken), while a missing name, address or cluster reads as empty, as Java's
/// controller takes the heartbeat without them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerHeartbeatHeader<'a> {
    pub cluster_name: &'a str,
    pub broker_addr: &'a str,
    pub broker_name: &'a str,
    /// Required; one that does not parse counts as missing.
    pub broker_id: i64,
    pub epoch: Option<i32>,
    pub max_offset: Option<i64>,
    pub confirm_offset: Option<i64>,
    pub heartbeat_timeout_mills: Option<i64>,
    /// Java's `Integer`, read as a long so that the controller decides how to bound it.
    pub election_priority: Option<i64>,
}

impl<'a> RequestHeader<'a> for ControllerHeartbeatHeader<'a> {
    const CODE: i32 = request::BROKER_HEARTBEAT;

    /// The broker id is checked before the epoch.
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        let broker_id = f
            .opt_i64(keys::BROKER_ID)
            .ok_or(HeaderError::Missing(keys::BROKER_ID))?;
        let epoch = match f.opt(keys::EPOCH) {
            None => None,
            Some(_) => Some(f.required_i32(keys::EPOCH)?),
        };
        Ok(ControllerHeartbeatHeader {
            cluster_name: f.opt(keys::CLUSTER_NAME).unwrap_or_default(),
            broker_addr: f.opt(keys::BROKER_ADDR).unwrap_or_default(),
            broker_name: f.opt(keys::BROKER_NAME).unwrap_or_default(),
            broker_id,
            epoch,
            max_offset: f.opt_i64(keys::MAX_OFFSET),
            confirm_offset: f.opt_i64(keys::CONFIRM_OFFSET),
            heartbeat_timeout_mills: f.opt_i64(keys::HEARTBEAT_TIMEOUT_MILLS),
            election_priority: f.opt_i64(keys::ELECTION_PRIORITY),
        })
    }

    /// Written as a Java broker in controller mode writes it, every field present.
    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        super::BrokerHeartbeatHeader {
            cluster_name: self.cluster_name,
            broker_addr: self.broker_addr,
            broker_name: Some(self.broker_name),
            broker_id: Some(self.broker_id),
            epoch: self.epoch.map(i64::from),
            max_offset: self.max_offset,
            confirm_offset: self.confirm_offset,
            heartbeat_timeout_mills: self.heartbeat_timeout_mills,
            election_priority: self.election_priority,
        }
        .write(cmd)
    }
}

/// CONTROLLER_ALTER_SYNC_STATE_SET, from a master; the body is the proposed
/// [`crate::body::SyncStateSet`], under the set epoch the master based it on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlterSyncStateSetRequestHeader<'a> {
    pub broker_name: &'a str,
    pub master_broker_id: i64,
    /// Fences a master that has been replaced.
    pub master_epoch: i32,
    pub invoke_time: Option<i64>,
}

impl<'a> RequestHeader<'a> for AlterSyncStateSetRequestHeader<'a> {
    const CODE: i32 = request::CONTROLLER_ALTER_SYNC_STATE_SET;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(AlterSyncStateSetRequestHeader {
            broker_name: f.required(keys::BROKER_NAME)?,
            master_broker_id: f.required_i64(keys::MASTER_BROKER_ID)?,
            master_epoch: f.required_i32(keys::MASTER_EPOCH)?,
            invoke_time: f.opt_i64(keys::INVOKE_TIME),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd
            .with_ext(keys::BROKER_NAME, self.broker_name)
            .with_ext(keys::MASTER_BROKER_ID, self.master_broker_id)
            .with_ext(keys::MASTER_EPOCH, self.master_epoch);
        put(cmd, keys::INVOKE_TIME, self.invoke_time)
    }
}

/// The answer to CONTROLLER_ALTER_SYNC_STATE_SET. Java keeps the epoch in a primitive `int`, so
/// it is on the wire (as 0) even when the change is refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlterSyncStateSetResponseHeader {
    pub new_sync_state_set_epoch: i32,
}

impl<'a> ResponseHeader<'a> for AlterSyncStateSetResponseHeader {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(AlterSyncStateSetResponseHeader {
            new_sync_state_set_epoch: Fields(cmd).required_i32(keys::NEW_SYNC_STATE_SET_EPOCH)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(
            keys::NEW_SYNC_STATE_SET_EPOCH,
            self.new_sync_state_set_epoch,
        )
    }
}

/// CONTROLLER_ELECT_MASTER: from a broker that finds no master (for itself), from an admin
/// (`designate_elect`, for the broker it names), or from the controller itself (no broker).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElectMasterRequestHeader<'a> {
    pub cluster_name: Option<&'a str>,
    pub broker_name: &'a str,
    /// Absent, unparsable or -1: no broker.
    pub broker_id: Option<i64>,
    pub designate_elect: bool,
    pub invoke_time: Option<i64>,
}

impl<'a> RequestHeader<'a> for ElectMasterRequestHeader<'a> {
    const CODE: i32 = request::CONTROLLER_ELECT_MASTER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(ElectMasterRequestHeader {
            broker_name: f.required(keys::BROKER_NAME)?,
            cluster_name: f.opt(keys::CLUSTER_NAME),
            broker_id: f.opt_i64(keys::BROKER_ID),
            designate_elect: f.opt_bool(keys::DESIGNATE_ELECT).unwrap_or(false),
            invoke_time: f.opt_i64(keys::INVOKE_TIME),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd
            .with_ext(keys::BROKER_NAME, self.broker_name)
            .with_ext(keys::DESIGNATE_ELECT, self.designate_elect);
        let cmd = put(cmd, keys::CLUSTER_NAME, self.cluster_name);
        let cmd = put(cmd, keys::BROKER_ID, self.broker_id);
        put(cmd, keys::INVOKE_TIME, self.invoke_time)
    }
}

/// The answer to CONTROLLER_ELECT_MASTER: the master after the election (also when the old one
/// stays); the body is a [`crate::body::ElectMasterResponseBody`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElectMasterResponseHeader<'a> {
    pub master_broker_id: Option<i64>,
    pub master_address: Option<&'a str>,
    pub master_epoch: Option<i32>,
    pub sync_state_set_epoch: Option<i32>,
}

impl<'a> ResponseHeader<'a> for ElectMasterResponseHeader<'a> {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(ElectMasterResponseHeader {
            master_broker_id: f.opt_i64(keys::MASTER_BROKER_ID),
            master_address: f.opt(keys::MASTER_ADDRESS),
            master_epoch: f.opt_i32(keys::MASTER_EPOCH),
            sync_state_set_epoch: f.opt_i32(keys::SYNC_STATE_SET_EPOCH),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::MASTER_BROKER_ID, self.master_broker_id);
        let cmd = put(cmd, keys::MASTER_ADDRESS, self.master_address);
        let cmd = put(cmd, keys::MASTER_EPOCH, self.master_epoch);
        put(cmd, keys::SYNC_STATE_SET_EPOCH, self.sync_state_set_epoch)
    }
}

/// CONTROLLER_REGISTER_BROKER: a broker that holds an id tells the controller where it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterBrokerToControllerRequestHeader<'a> {
    pub cluster_name: &'a str,
    pub broker_name: &'a str,
    pub broker_id: i64,
    pub broker_address: &'a str,
    pub invoke_time: Option<i64>,
}

impl<'a> RequestHeader<'a> for RegisterBrokerToControllerRequestHeader<'a> {
    const CODE: i32 = request::CONTROLLER_REGISTER_BROKER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(RegisterBrokerToControllerRequestHeader {
            cluster_name: f.required(keys::CLUSTER_NAME)?,
            broker_name: f.required(keys::BROKER_NAME)?,
            broker_id: f.required_i64(keys::BROKER_ID)?,
            broker_address: f.required(keys::BROKER_ADDRESS)?,
            invoke_time: f.opt_i64(keys::INVOKE_TIME),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd
            .with_ext(keys::CLUSTER_NAME, self.cluster_name)
            .with_ext(keys::BROKER_NAME, self.broker_name)
            .with_ext(keys::BROKER_ID, self.broker_id)
            .with_ext(keys::BROKER_ADDRESS, self.broker_address);
        put(cmd, keys::INVOKE_TIME, self.invoke_time)
    }
}

/// The answer to CONTROLLER_REGISTER_BROKER: the group's master, if it has a live one; the body
/// is the group's [`crate::body::SyncStateSet`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterBrokerToControllerResponseHeader<'a> {
    pub cluster_name: Option<&'a str>,
    pub broker_name: Option<&'a str>,
    pub master_broker_id: Option<i64>,
    pub master_address: Option<&'a str>,
    pub master_epoch: Option<i32>,
    pub sync_state_set_epoch: Option<i32>,
}

impl<'a> ResponseHeader<'a> for RegisterBrokerToControllerResponseHeader<'a> {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(RegisterBrokerToControllerResponseHeader {
            cluster_name: f.opt(keys::CLUSTER_NAME),
            broker_name: f.opt(keys::BROKER_NAME),
            master_broker_id: f.opt_i64(keys::MASTER_BROKER_ID),
            master_address: f.opt(keys::MASTER_ADDRESS),
            master_epoch: f.opt_i32(keys::MASTER_EPOCH),
            sync_state_set_epoch: f.opt_i32(keys::SYNC_STATE_SET_EPOCH),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::CLUSTER_NAME, self.cluster_name);
        let cmd = put(cmd, keys::BROKER_NAME, self.broker_name);
        let cmd = put(cmd, keys::MASTER_BROKER_ID, self.master_broker_id);
        let cmd = put(cmd, keys::MASTER_ADDRESS, self.master_address);
        let cmd = put(cmd, keys::MASTER_EPOCH, self.master_epoch);
        put(cmd, keys::SYNC_STATE_SET_EPOCH, self.sync_state_set_epoch)
    }
}

/// CONTROLLER_GET_REPLICA_INFO.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetReplicaInfoRequestHeader<'a> {
    pub broker_name: &'a str,
}

impl<'a> RequestHeader<'a> for GetReplicaInfoRequestHeader<'a> {
    const CODE: i32 = request::CONTROLLER_GET_REPLICA_INFO;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(GetReplicaInfoRequestHeader {
            broker_name: Fields(cmd).required(keys::BROKER_NAME)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::BROKER_NAME, self.broker_name)
    }
}

/// The answer to CONTROLLER_GET_REPLICA_INFO: the group's master, if any; the body is the
/// group's [`crate::body::SyncStateSet`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetReplicaInfoResponseHeader<'a> {
    pub master_broker_id: Option<i64>,
    pub master_address: Option<&'a str>,
    pub master_epoch: Option<i32>,
}

impl<'a> ResponseHeader<'a> for GetReplicaInfoResponseHeader<'a> {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(GetReplicaInfoResponseHeader {
            master_broker_id: f.opt_i64(keys::MASTER_BROKER_ID),
            master_address: f.opt(keys::MASTER_ADDRESS),
            master_epoch: f.opt_i32(keys::MASTER_EPOCH),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::MASTER_BROKER_ID, self.master_broker_id);
        let cmd = put(cmd, keys::MASTER_ADDRESS, self.master_address);
        put(cmd, keys::MASTER_EPOCH, self.master_epoch)
    }
}

/// The answer to CONTROLLER_GET_METADATA_INFO (which has no request header): what one node
/// knows of its group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetMetaDataResponseHeader<'a> {
    pub group: Option<&'a str>,
    pub controller_leader_id: Option<&'a str>,
    pub controller_leader_address: Option<&'a str>,
    pub is_leader: bool,
    /// `id:host:port;` for each node.
    pub peers: Option<&'a str>,
}

impl<'a> ResponseHeader<'a> for GetMetaDataResponseHeader<'a> {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(GetMetaDataResponseHeader {
            group: f.opt(keys::GROUP),
            controller_leader_id: f.opt(keys::CONTROLLER_LEADER_ID),
            controller_leader_address: f.opt(keys::CONTROLLER_LEADER_ADDRESS),
            is_leader: f.opt_bool(keys::IS_LEADER).unwrap_or(false),
            peers: f.opt(keys::PEERS),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd.with_ext(keys::IS_LEADER, self.is_leader);
        let cmd = put(cmd, keys::GROUP, self.group);
        let cmd = put(cmd, keys::CONTROLLER_LEADER_ID, self.controller_leader_id);
        let cmd = put(
            cmd,
            keys::CONTROLLER_LEADER_ADDRESS,
            self.controller_leader_address,
        );
        put(cmd, keys::PEERS, self.peers)
    }
}

/// NOTIFY_BROKER_ROLE_CHANGED, which a controller sends to brokers, oneway; the body is the
/// group's [`crate::body::SyncStateSet`]. A broker applies it only when the epoch is newer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotifyBrokerRoleChangedRequestHeader<'a> {
    pub master_address: Option<&'a str>,
    pub master_epoch: Option<i32>,
    pub sync_state_set_epoch: Option<i32>,
    pub master_broker_id: Option<i64>,
}

impl<'a> RequestHeader<'a> for NotifyBrokerRoleChangedRequestHeader<'a> {
    const CODE: i32 = request::NOTIFY_BROKER_ROLE_CHANGED;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(NotifyBrokerRoleChangedRequestHeader {
            master_address: f.opt(keys::MASTER_ADDRESS),
            master_epoch: f.opt_i32(keys::MASTER_EPOCH),
            sync_state_set_epoch: f.opt_i32(keys::SYNC_STATE_SET_EPOCH),
            master_broker_id: f.opt_i64(keys::MASTER_BROKER_ID),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::MASTER_ADDRESS, self.master_address);
        let cmd = put(cmd, keys::MASTER_EPOCH, self.master_epoch);
        let cmd = put(cmd, keys::SYNC_STATE_SET_EPOCH, self.sync_state_set_epoch);
        put(cmd, keys::MASTER_BROKER_ID, self.master_broker_id)
    }
}

/// CLEAN_BROKER_DATA, from an admin: forget some brokers of a group, or the whole group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanControllerBrokerDataRequestHeader<'a> {
    pub cluster_name: Option<&'a str>,
    pub broker_name: &'a str,
    /// Ids separated by `;`, kept as text: the controller decides how to read a malformed list.
    pub broker_controller_ids_to_clean: Option<&'a str>,
    pub is_clean_living_broker: bool,
    pub invoke_time: Option<i64>,
}

impl<'a> RequestHeader<'a> for CleanControllerBrokerDataRequestHeader<'a> {
    const CODE: i32 = request::CLEAN_BROKER_DATA;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(CleanControllerBrokerDataRequestHeader {
            broker_name: f.required(keys::BROKER_NAME)?,
            cluster_name: f.opt(keys::CLUSTER_NAME),
            broker_controller_ids_to_clean: f.opt(keys::BROKER_CONTROLLER_IDS_TO_CLEAN),
            is_clean_living_broker: f.opt_bool(keys::IS_CLEAN_LIVING_BROKER).unwrap_or(false),
            invoke_time: f.opt_i64(keys::INVOKE_TIME),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = cmd
            .with_ext(keys::BROKER_NAME, self.broker_name)
            .with_ext(keys::IS_CLEAN_LIVING_BROKER, self.is_clean_living_broker);
        let cmd = put(cmd, keys::CLUSTER_NAME, self.cluster_name);
        let cmd = put(
            cmd,
            keys::BROKER_CONTROLLER_IDS_TO_CLEAN,
            self.broker_controller_ids_to_clean,
        );
        put(cmd, keys::INVOKE_TIME, self.invoke_time)
    }
}

/// CONTROLLER_GET_NEXT_BROKER_ID: the id a new broker of the group should apply for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetNextBrokerIdRequestHeader<'a> {
    pub cluster_name: &'a str,
    pub broker_name: &'a str,
}

impl<'a> RequestHeader<'a> for GetNextBrokerIdRequestHeader<'a> {
    const CODE: i32 = request::CONTROLLER_GET_NEXT_BROKER_ID;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(GetNextBrokerIdRequestHeader {
            cluster_name: f.required(keys::CLUSTER_NAME)?,
            broker_name: f.required(keys::BROKER_NAME)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::CLUSTER_NAME, self.cluster_name)
            .with_ext(keys::BROKER_NAME, self.broker_name)
    }
}

/// The answer to CONTROLLER_GET_NEXT_BROKER_ID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetNextBrokerIdResponseHeader<'a> {
    pub cluster_name: Option<&'a str>,
    pub broker_name: Option<&'a str>,
    pub next_broker_id: Option<i64>,
}

impl<'a> ResponseHeader<'a> for GetNextBrokerIdResponseHeader<'a> {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(GetNextBrokerIdResponseHeader {
            cluster_name: f.opt(keys::CLUSTER_NAME),
            broker_name: f.opt(keys::BROKER_NAME),
            next_broker_id: f.opt_i64(keys::NEXT_BROKER_ID),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::CLUSTER_NAME, self.cluster_name);
        let cmd = put(cmd, keys::BROKER_NAME, self.broker_name);
        put(cmd, keys::NEXT_BROKER_ID, self.next_broker_id)
    }
}

/// CONTROLLER_APPLY_BROKER_ID: a new broker claims an id. The check code (`addr;millis`) tells
/// the broker that holds the id from another that asks for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyBrokerIdRequestHeader<'a> {
    pub cluster_name: &'a str,
    pub broker_name: &'a str,
    pub applied_broker_id: i64,
    pub register_check_code: &'a str,
}

impl<'a> RequestHeader<'a> for ApplyBrokerIdRequestHeader<'a> {
    const CODE: i32 = request::CONTROLLER_APPLY_BROKER_ID;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(ApplyBrokerIdRequestHeader {
            cluster_name: f.required(keys::CLUSTER_NAME)?,
            broker_name: f.required(keys::BROKER_NAME)?,
            applied_broker_id: f.required_i64(keys::APPLIED_BROKER_ID)?,
            register_check_code: f.required(keys::REGISTER_CHECK_CODE)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::CLUSTER_NAME, self.cluster_name)
            .with_ext(keys::BROKER_NAME, self.broker_name)
            .with_ext(keys::APPLIED_BROKER_ID, self.applied_broker_id)
            .with_ext(keys::REGISTER_CHECK_CODE, self.register_check_code)
    }
}

/// The answer to CONTROLLER_APPLY_BROKER_ID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyBrokerIdResponseHeader<'a> {
    pub cluster_name: Option<&'a str>,
    pub broker_name: Option<&'a str>,
}

impl<'a> ResponseHeader<'a> for ApplyBrokerIdResponseHeader<'a> {
    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(ApplyBrokerIdResponseHeader {
            cluster_name: f.opt(keys::CLUSTER_NAME),
            broker_name: f.opt(keys::BROKER_NAME),
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        let cmd = put(cmd, keys::CLUSTER_NAME, self.cluster_name);
        put(cmd, keys::BROKER_NAME, self.broker_name)
    }
}

/// CONTROLLER_ADD_MEMBER (ours): the node to add to the controller group, by its member id
/// (`n3`, as `controllerDLegerPeers` names it) and the address it serves on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddControllerMemberRequestHeader<'a> {
    pub member_id: &'a str,
    pub member_address: &'a str,
}

impl<'a> RequestHeader<'a> for AddControllerMemberRequestHeader<'a> {
    const CODE: i32 = request::CONTROLLER_ADD_MEMBER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        let f = Fields(cmd);
        Ok(AddControllerMemberRequestHeader {
            member_id: f.required(keys::MEMBER_ID)?,
            member_address: f.required(keys::MEMBER_ADDRESS)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::MEMBER_ID, self.member_id)
            .with_ext(keys::MEMBER_ADDRESS, self.member_address)
    }
}

/// CONTROLLER_REMOVE_MEMBER (ours): the member to take out of the controller group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoveControllerMemberRequestHeader<'a> {
    pub member_id: &'a str,
}

impl<'a> RequestHeader<'a> for RemoveControllerMemberRequestHeader<'a> {
    const CODE: i32 = request::CONTROLLER_REMOVE_MEMBER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(RemoveControllerMemberRequestHeader {
            member_id: Fields(cmd).required(keys::MEMBER_ID)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::MEMBER_ID, self.member_id)
    }
}

/// CONTROLLER_TRANSFER_LEADER (ours): the voter that is to lead.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransferControllerLeaderRequestHeader<'a> {
    pub member_id: &'a str,
}

impl<'a> RequestHeader<'a> for TransferControllerLeaderRequestHeader<'a> {
    const CODE: i32 = request::CONTROLLER_TRANSFER_LEADER;

    fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Ok(TransferControllerLeaderRequestHeader {
            member_id: Fields(cmd).required(keys::MEMBER_ID)?,
        })
    }

    fn write(&self, cmd: RemotingCommand) -> RemotingCommand {
        cmd.with_ext(keys::MEMBER_ID, self.member_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;

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
        let h = AddControllerMemberRequestHeader {
            member_id: "n3",
            member_address: "a:1",
        };
        request_as(
            &h,
            &h.to_command(),
            &[("memberAddress", "a:1"), ("memberId", "n3")],
        );
        let h = RemoveControllerMemberRequestHeader { member_id: "n1" };
        request_as(&h, &h.to_command(), &[("memberId", "n1")]);
        let h = TransferControllerLeaderRequestHeader { member_id: "n2" };
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
