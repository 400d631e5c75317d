//! The controller's requests, one `match` over the request code. Headers are read through the
//! wire crate's typed controller headers, as Java reads them (absent or unparsable optional
//! numbers count as absent); answers carry Java's header fields, bodies and response codes.

use std::sync::Arc;

use rocketmq_raft::trust::RefusalLog;
use rocketmq_raft::{ChangeError, MemberChange};
use rocketmq_wire::body::{BrokerNameList, SyncStateSet};
use rocketmq_wire::codes::request;
use rocketmq_wire::headers::controller::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
    CleanControllerBrokerDataRequestHeader, ControllerHeartbeatHeader, ElectMasterRequestHeader,
    GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
};
use rocketmq_wire::headers::{HeaderError, RequestHeader, ResponseHeader};
use rocketmq_wire::{ExtFields, RemotingCommand};

use crate::heartbeat::{BrokerKey, Heartbeat, Via, DEFAULT_TIMEOUT, MAX_HEARTBEAT_TIMEOUT};
use crate::node::{response, ConsensusError, Controller};
use crate::raft::{codes, Applied};
use crate::replicated::{header_fields, Command, CommandReply};
use rocketmq_raft::group::Served;

/// Header fields a request may carry in all: names, addresses and check codes are short.
const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Serves one request that came from `from` on `connection`; `None` for a oneway request.
pub async fn handle(
    controller: &Arc<Controller>,
    req: &RemotingCommand,
    connection: u64,
    from: std::net::IpAddr,
) -> Option<RemotingCommand> {
    let peers_only = matches!(
        req.code,
        codes::RAFT_APPEND_ENTRIES
            | codes::RAFT_VOTE
            | codes::RAFT_INSTALL_SNAPSHOT
            | codes::FORWARDED_HEARTBEAT
            | codes::GROUP_PROBE
            | codes::TAKE_LEADERSHIP
    );
    // Changing the group's members moves who decides every broker's role: only from a
    // member's host or this host (an operator on a controller machine).
    let members_admin =
        (request::CONTROLLER_ADD_MEMBER..=request::CONTROLLER_TRANSFER_LEADER).contains(&req.code);
    let header_bytes: usize = req
        .ext_fields
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    // Resolved again for a stranger (a member may have moved): only for the codes that ask.
    let from_member = (peers_only || members_admin) && controller.group().admits(from).await;
    // With the group's secret, members prove who they are on every peer request
    // (`rocketmq_raft::peer_auth`); the address is then the second fence.
    if let Some(sessions) = &controller.peer_sessions {
        if req.code == rocketmq_wire::codes::peer::PEER_HELLO {
            return Some(sessions.hello(connection, req));
        }
        if peers_only && from_member {
            if let Err(why) = sessions.check(connection, req) {
                static TOLD: RefusalLog = RefusalLog::new();
                if let Some(refused) = TOLD.tell() {
                    tracing::warn!(%from, code = req.code, why, refused, "unproven controller peer requests refused (refused: how many since the last such line)");
                }
                return (!req.is_oneway())
                    .then(|| ResponseDraft::code(response::NO_PERMISSION, why).into_response(req));
            }
        }
    }
    // What a request's headers carry becomes a log entry that every node replicates: one
    // bigger than any broker sends would stall replication once it outgrew a frame.
    let answer = if header_bytes > MAX_HEADER_BYTES {
        invalid("the request's header fields are too long")
    } else if peers_only && !from_member {
        // A forged vote with a high term would depose the leader, a forged heartbeat keep a dead
        // broker alive: only the group's members speak these.
        static TOLD: RefusalLog = RefusalLog::new();
        if let Some(refused) = TOLD.tell() {
            tracing::warn!(%from, code = req.code, refused, "controller peer requests from a non-member refused (refused: how many since the last such line)");
        }
        ResponseDraft::code(
            response::NO_PERMISSION,
            "raft requests are accepted from the controller group's members only",
        )
    } else if members_admin && !from.is_loopback() && !from_member {
        static TOLD: RefusalLog = RefusalLog::new();
        if let Some(refused) = TOLD.tell() {
            tracing::warn!(%from, code = req.code, refused, "member changes from a non-member host refused (refused: how many since the last such line)");
        }
        ResponseDraft::code(
            response::NO_PERMISSION,
            "member changes are accepted from the controller group's member hosts or \
             loopback only",
        )
    } else {
        serve_code(controller, req, connection)
            .await
            .unwrap_or_else(|refused| refused)
    };
    if req.is_oneway() {
        return None;
    }
    let mut answer = answer.into_response(req);
    if let (Some(sessions), true) = (&controller.peer_sessions, peers_only) {
        sessions.seal_answer(connection, &mut answer);
    }
    Some(answer)
}

/// The answer by the request's code, once the request may be served at all; a request without
/// the header fields it needs is refused with their names (the arms' `?`).
async fn serve_code(
    controller: &Arc<Controller>,
    req: &RemotingCommand,
    connection: u64,
) -> Result<ResponseDraft, ResponseDraft> {
    Ok(match req.code {
        request::BROKER_HEARTBEAT => {
            let answer = heartbeat(controller, req, connection, Via::Direct);
            if answer.code == response::SUCCESS {
                controller.forward_heartbeat(req);
            }
            answer
        }
        codes::FORWARDED_HEARTBEAT => heartbeat(controller, req, connection, Via::Follower),
        request::CONTROLLER_GET_METADATA_INFO => metadata(controller),
        request::UPDATE_CONTROLLER_CONFIG => update_config(controller, req),
        request::GET_CONTROLLER_CONFIG => {
            ResponseDraft::ok().body(controller.config().listing().into_bytes())
        }
        request::CONTROLLER_ALTER_SYNC_STATE_SET => alter_sync_state_set(controller, req).await,
        request::CONTROLLER_ELECT_MASTER => elect_master(controller, req).await,
        request::CONTROLLER_REGISTER_BROKER => {
            let h: RegisterBrokerToControllerRequestHeader = header(
                req,
                "clusterName, brokerName, brokerId and brokerAddress are required",
            )?;
            let cmd = Command::RegisterBroker {
                cluster_name: h.cluster_name.to_string(),
                broker_name: h.broker_name.to_string(),
                broker_id: h.broker_id,
                broker_address: h.broker_address.to_string(),
                alive: controller.alive_ids(h.broker_name),
            };
            reply_of(controller.group().write(cmd).await)
        }
        request::CONTROLLER_GET_REPLICA_INFO => {
            let h: GetReplicaInfoRequestHeader = header(req, "brokerName is required")?;
            reply_of(
                controller
                    .group()
                    .read(|a| a.state.replica_info(h.broker_name))
                    .await,
            )
        }
        request::CONTROLLER_GET_SYNC_STATE_DATA => {
            match req.body.as_deref().map(BrokerNameList::decode) {
                Some(Ok(BrokerNameList { names })) if !names.is_empty() => {
                    let active = controller.active_brokers();
                    let alive = |c: &str, n: &str, id: i64| active.contains(c, n, id);
                    reply_of(
                        controller
                            .group()
                            .read(|a| a.state.sync_state_data(&names, &alive))
                            .await,
                    )
                }
                // Java answers a request without broker names with a bare, unset response.
                _ => ResponseDraft::code(response::SYSTEM_ERROR, "not set any response code"),
            }
        }
        request::CLEAN_BROKER_DATA => {
            let h: CleanControllerBrokerDataRequestHeader = header(req, "brokerName is required")?;
            let cmd = Command::CleanBrokerData {
                cluster_name: h.cluster_name.map(String::from),
                broker_name: h.broker_name.to_string(),
                ids_to_clean: h.broker_controller_ids_to_clean.map(String::from),
                clean_living_broker: h.is_clean_living_broker,
                alive: controller.alive_ids(h.broker_name),
            };
            reply_of(controller.group().write(cmd).await)
        }
        request::CONTROLLER_GET_NEXT_BROKER_ID => {
            let h: GetNextBrokerIdRequestHeader =
                header(req, "clusterName and brokerName are required")?;
            let next = |a: &Applied| a.state.next_broker_id(h.cluster_name, h.broker_name);
            reply_of(controller.group().read(next).await)
        }
        request::CONTROLLER_APPLY_BROKER_ID => {
            let h: ApplyBrokerIdRequestHeader = header(
                req,
                "clusterName, brokerName, appliedBrokerId and registerCheckCode are required",
            )?;
            let cmd = Command::ApplyBrokerId {
                cluster_name: h.cluster_name.to_string(),
                broker_name: h.broker_name.to_string(),
                applied_broker_id: h.applied_broker_id,
                register_check_code: h.register_check_code.to_string(),
            };
            reply_of(controller.group().write(cmd).await)
        }
        request::CONTROLLER_LIST_MEMBERS => members_reply(controller.group().list_members()),
        request::CONTROLLER_ADD_MEMBER
        | request::CONTROLLER_REMOVE_MEMBER
        | request::CONTROLLER_TRANSFER_LEADER => {
            match MemberChange::from_request(req, request::CONTROLLER_ADD_MEMBER) {
                Ok(change) => members_reply(controller.group().change_members(change).await),
                Err(why) => invalid(why),
            }
        }
        // The group's own Raft codes (`Group::serve` answers those), else none of ours.
        other => match controller.group().serve(other, req.body.as_deref()).await {
            Some(Served::Answer(body)) => ResponseDraft::ok().body(body),
            Some(Served::Refused(why)) => ResponseDraft::code(response::SYSTEM_ERROR, &why),
            Some(Served::Malformed) => invalid("malformed raft message"),
            None => ResponseDraft::code(
                response::REQUEST_CODE_NOT_SUPPORTED,
                &format!(" request type {other} not supported"),
            ),
        },
    })
}

/// A response under construction.
pub struct ResponseDraft {
    code: i32,
    remark: Option<String>,
    fields: ExtFields,
    body: Option<Vec<u8>>,
}

impl ResponseDraft {
    fn ok() -> Self {
        ResponseDraft::code(response::SUCCESS, "")
    }

    fn code(code: i32, remark: &str) -> Self {
        ResponseDraft {
            code,
            remark: (!remark.is_empty()).then(|| remark.to_string()),
            fields: ExtFields::new(),
            body: None,
        }
    }

    fn body(mut self, body: Vec<u8>) -> Self {
        self.body = Some(body);
        self
    }

    fn header<'a>(mut self, header: &impl ResponseHeader<'a>) -> Self {
        self.fields = header_fields(header);
        self
    }

    /// Every answer has a header object, even an empty one (`"extFields":{}`), as Java's do.
    fn into_response(self, req: &RemotingCommand) -> RemotingCommand {
        let mut resp = RemotingCommand::response_to(req, self.code);
        resp.ext_fields = Some(self.fields);
        if let Some(remark) = self.remark {
            resp = resp.with_remark(remark);
        }
        if let Some(body) = self.body {
            resp = resp.with_body(body);
        }
        resp
    }
}

/// The request's header, or the refusal naming the fields it needs.
fn header<'a, H: RequestHeader<'a>>(
    req: &'a RemotingCommand,
    needs: &str,
) -> Result<H, ResponseDraft> {
    H::from_command(req).map_err(|_| invalid(needs))
}

fn invalid(remark: &str) -> ResponseDraft {
    ResponseDraft::code(response::CONTROLLER_INVALID_REQUEST, remark)
}

fn reply_of(result: Result<CommandReply, ConsensusError>) -> ResponseDraft {
    match result {
        Ok(reply) => ResponseDraft {
            code: reply.code,
            remark: reply.remark,
            fields: reply.fields,
            body: reply.body,
        },
        Err(ConsensusError::NotLeader) => ResponseDraft::code(
            response::CONTROLLER_NOT_LEADER,
            "The controller is not in leader state",
        ),
        Err(ConsensusError::Failed(e)) => ResponseDraft::code(response::SYSTEM_ERROR, &e),
    }
}

fn members_reply(result: Result<rocketmq_wire::body::GroupMembers, ChangeError>) -> ResponseDraft {
    match result {
        Ok(members) => ResponseDraft::ok().body(members.encode()),
        Err(ChangeError::NotLeader) => ResponseDraft::code(
            response::CONTROLLER_NOT_LEADER,
            "The controller is not in leader state",
        ),
        Err(e) => ResponseDraft::code(e.code(), &e.to_string()),
    }
}

fn heartbeat(
    controller: &Arc<Controller>,
    req: &RemotingCommand,
    connection: u64,
    via: Via,
) -> ResponseDraft {
    let h = match ControllerHeartbeatHeader::from_command(req) {
        Ok(h) => h,
        // Java reads the epoch as an Integer and refuses what does not fit; it is not truncated.
        Err(HeaderError::NotANumber { .. }) => return invalid("epoch must be an int"),
        Err(_) => return invalid("Heart beat with empty brokerId"),
    };
    // The broker chooses its own timeout; capped, so that no entry can be made never to
    // expire.
    let timeout = h
        .heartbeat_timeout_mills
        .filter(|t| *t > 0)
        .map_or(DEFAULT_TIMEOUT, |t| {
            std::time::Duration::from_millis(t as u64).min(MAX_HEARTBEAT_TIMEOUT)
        });
    let key = BrokerKey {
        cluster_name: h.cluster_name.to_string(),
        broker_name: h.broker_name.to_string(),
        broker_id: h.broker_id,
    };
    let beat = Heartbeat {
        broker_addr: h.broker_addr.to_string(),
        timeout,
        epoch: h.epoch.unwrap_or(-1),
        max_offset: h.max_offset.unwrap_or(-1),
        confirm_offset: h.confirm_offset.unwrap_or(-1),
        // A broker that says nothing has the lowest priority, as Java's broker default does.
        election_priority: h.election_priority.map_or(i32::MAX, |p| {
            p.clamp(i32::MIN as i64, i32::MAX as i64) as i32
        }),
        connection,
    };
    controller.on_heartbeat(key, beat, via);
    ResponseDraft::code(response::SUCCESS, "Heart beat success")
}

fn metadata(controller: &Arc<Controller>) -> ResponseDraft {
    let config = controller.config();
    let peers = controller.members_text();
    let leader = controller.leader();
    ResponseDraft::ok().header(&GetMetaDataResponseHeader {
        group: Some(&config.group),
        controller_leader_id: leader.as_ref().map(|(id, _)| id.as_str()),
        controller_leader_address: leader.as_ref().map(|(_, addr)| addr.as_str()),
        is_leader: controller.group().is_leader(),
        peers: Some(&peers),
    })
}

fn update_config(controller: &Arc<Controller>, req: &RemotingCommand) -> ResponseDraft {
    let Some(body) = req.body.as_deref() else {
        return ResponseDraft::ok();
    };
    let props = match rocketmq_wire::properties::parse(body) {
        Ok(p) => p,
        Err(_) => return ResponseDraft::code(response::SYSTEM_ERROR, "string2Properties error"),
    };
    match controller.update_config(&props) {
        Ok(()) => ResponseDraft::ok(),
        Err(_) => ResponseDraft::code(
            response::NO_PERMISSION,
            "Can not update config in black list.",
        ),
    }
}

async fn alter_sync_state_set(
    controller: &Arc<Controller>,
    req: &RemotingCommand,
) -> ResponseDraft {
    let Ok(h) = AlterSyncStateSetRequestHeader::from_command(req) else {
        return invalid("brokerName, masterBrokerId and masterEpoch (an int) are required");
    };
    let Some(Ok(set)) = req.body.as_deref().map(SyncStateSet::decode) else {
        return invalid("the body must be a SyncStateSet");
    };
    let cmd = Command::AlterSyncStateSet {
        broker_name: h.broker_name.to_string(),
        master_broker_id: h.master_broker_id,
        master_epoch: h.master_epoch,
        new_sync_state_set: set.sync_state_set,
        sync_state_set_epoch: set.sync_state_set_epoch,
        alive: controller.alive_ids(h.broker_name),
    };
    reply_of(controller.group().write(cmd).await)
}

async fn elect_master(controller: &Arc<Controller>, req: &RemotingCommand) -> ResponseDraft {
    let Ok(h) = ElectMasterRequestHeader::from_command(req) else {
        return invalid("brokerName is required");
    };
    let cmd = Command::ElectMaster {
        broker_name: h.broker_name.to_string(),
        broker_id: h.broker_id,
        designate_elect: h.designate_elect,
        unclean: controller.elect_unclean(),
        live: controller.live_of(h.broker_name),
    };
    let cause = match (h.designate_elect, h.broker_id) {
        (true, Some(id)) => format!("an admin designated id {id}"),
        (_, Some(id)) => format!("broker id {id} asked"),
        _ => "asked without a broker id".to_string(),
    };
    let result = controller.group().write(cmd).await;
    if let Ok(reply) = &result {
        controller.after_election(h.broker_name, &cause, reply);
    }
    reply_of(result)
}
