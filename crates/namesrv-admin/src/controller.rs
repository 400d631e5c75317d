//! The controller commands of mqadmin: sent to the RIP-44 controller nodes named by `-a`, not to
//! the NameServers. Configuration and metadata belong to each node and are asked of each one
//! named; whatever lives in the group's replicated state goes to the leader, which the named
//! nodes are asked to name first, since a follower refuses those requests.

use std::time::Duration;

use rocketmq_wire::body::{
    BrokerNameList, BrokerReplicasInfo, ClusterInfo, ElectMasterResponseBody, ReplicasInfo,
};
use rocketmq_wire::codes::request::{self, GET_BROKER_CLUSTER_INFO};
use rocketmq_wire::codes::response;
use rocketmq_wire::headers::controller::{
    CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader, ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
};
use rocketmq_wire::headers::{RequestHeader, ResponseHeader};
use rocketmq_wire::RemotingCommand;
use serde_json::{json, Map, Value};

use crate::cli::BrokerSets;
use crate::error::AdminError;
use crate::members::{MemberCodes, MemberGroup, LEADER_ATTEMPTS, LEADER_RETRY_PAUSE};
use crate::namesrvs::{call_once, split_addrs, Credentials, Namesrvs, ServerResponse};
use crate::reads::{body_json, config_report};
use crate::report::Report;
use crate::writes::{config_body, report_each, said};

/// The controller nodes named by `-a`, reached as the NameServers of `-n` are (same timeout,
/// same credentials).
pub struct Controllers(Namesrvs);

/// What one node says of its group (the answer to GET_METADATA_INFO).
struct Metadata {
    group: Option<String>,
    leader_id: Option<String>,
    leader_addr: Option<String>,
    is_leader: bool,
    /// `id:host:port` each.
    peers: Vec<String>,
}

impl Metadata {
    fn of(reply: &ServerResponse) -> Self {
        // Every field of this header is optional: reading it cannot fail.
        let header = GetMetaDataResponseHeader::from_command(&reply.response).unwrap_or_default();
        let field = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(String::from);
        Metadata {
            group: field(header.group),
            leader_id: field(header.controller_leader_id),
            leader_addr: field(header.controller_leader_address),
            is_leader: header.is_leader,
            peers: split_addrs(&field(header.peers).unwrap_or_default()),
        }
    }

    /// mqadmin's lines, `null` where Java prints an absent value.
    fn text(&self) -> String {
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "null".into());
        let mut text = format!(
            "\n#ControllerGroup\t{}\n#ControllerLeaderId\t{}\n#ControllerLeaderAddress\t{}",
            shown(&self.group),
            shown(&self.leader_id),
            shown(&self.leader_addr)
        );
        for peer in &self.peers {
            text.push_str(&format!("\n#Peer:\t{peer}"));
        }
        text.push('\n');
        text
    }

    fn json(&self) -> Value {
        let peers: Vec<Value> = self
            .peers
            .iter()
            .map(|p| match p.split_once(':') {
                Some((id, addr)) => json!({ "id": id, "address": addr }),
                None => json!({ "id": p, "address": null }),
            })
            .collect();
        json!({
            "group": self.group,
            "controllerLeaderId": self.leader_id,
            "controllerLeaderAddress": self.leader_addr,
            "isLeader": self.is_leader,
            "peers": peers,
        })
    }
}

impl Controllers {
    /// `list` is mqadmin's form, `host:port;host:port`.
    pub fn parse(
        list: &str,
        timeout: Duration,
        credentials: Option<Credentials>,
    ) -> Result<Self, AdminError> {
        // NoAddress, for an empty list, is the only error of `Namesrvs::parse`.
        Namesrvs::parse(Some(list), timeout, credentials)
            .map(Controllers)
            .map_err(|_| AdminError::NoControllerAddress)
    }

    async fn metadata(&self, addr: &str) -> Result<Metadata, AdminError> {
        let request = RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO);
        let reply = call_once(addr, self.0.timeout(), request).await?;
        Ok(Metadata::of(&reply.success()?))
    }

    /// The leader's address, from the first node of `-a` that knows one.
    async fn leader(&self) -> Result<String, AdminError> {
        let mut notes = Vec::new();
        for addr in self.0.addrs() {
            match self.metadata(addr).await {
                Ok(Metadata {
                    leader_addr: Some(leader),
                    ..
                }) => return Ok(leader),
                Ok(_) => notes.push(format!("{addr}: knows no leader")),
                Err(e) => notes.push(e.to_string()),
            }
        }
        Err(AdminError::NoLeader(notes))
    }
}

impl MemberGroup for Controllers {
    const NAME: &'static str = "the controller group";
    const LEADER_KEY: &'static str = "controllerLeader";
    const CODES: MemberCodes = MemberCodes {
        list: request::CONTROLLER_LIST_MEMBERS,
        add: request::CONTROLLER_ADD_MEMBER,
        remove: request::CONTROLLER_REMOVE_MEMBER,
        transfer: request::CONTROLLER_TRANSFER_LEADER,
    };

    fn servers(&self) -> &Namesrvs {
        &self.0
    }

    /// Sends `request` to the leader, whatever its answer; NOT_LEADER sends it to the leader
    /// named then, a few times over.
    async fn call_leader(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<ServerResponse, AdminError> {
        let mut attempt = 1;
        loop {
            let leader = self.leader().await?;
            let reply = call_once(&leader, timeout, request.clone()).await?;
            if reply.response.code != response::CONTROLLER_NOT_LEADER || attempt == LEADER_ATTEMPTS
            {
                return Ok(reply);
            }
            attempt += 1;
            tokio::time::sleep(LEADER_RETRY_PAUSE).await;
        }
    }

    /// The leader the nodes of `-a` other than `old` name, waited for a while.
    async fn new_leader(&self, old: &str) -> Option<String> {
        let deadline = std::time::Instant::now() + crate::members::NEW_LEADER_WAIT;
        while std::time::Instant::now() < deadline {
            for addr in self.0.addrs().iter().filter(|a| *a != old) {
                if let Ok(Metadata {
                    leader_addr: Some(leader),
                    ..
                }) = self.metadata(addr).await
                {
                    if leader != old {
                        return Some(leader);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    }
}

/// A header field or body value as mqadmin prints it: `null` when absent.
pub(crate) fn shown(value: Option<impl std::fmt::Display>) -> String {
    value.map_or_else(|| "null".into(), |v| v.to_string())
}

/// `getControllerMetaData`: each named node's view of its group.
pub async fn get_controller_metadata(ctl: &Controllers) -> Report {
    let mut text = String::new();
    let mut json = Map::new();
    let mut failures = Vec::new();
    let several = ctl.0.addrs().len() > 1;
    for addr in ctl.0.addrs() {
        match ctl.metadata(addr).await {
            Ok(metadata) => {
                if several {
                    text.push_str(&format!("============{addr}============\n"));
                }
                text.push_str(&metadata.text());
                json.insert(addr.clone(), metadata.json());
            }
            Err(e) => failures.push(e),
        }
    }
    Report::partial(text, Value::Object(json), failures)
}

/// The broker names of a cluster, as the NameServers list them.
async fn broker_names_of(ns: &Namesrvs, cluster: &str) -> Result<Vec<String>, AdminError> {
    let reply = ns
        .read(RemotingCommand::request(GET_BROKER_CLUSTER_INFO))
        .await?
        .success()?;
    let info = reply.decode("cluster info", ClusterInfo::decode)?;
    match info.cluster_addr_table.get(cluster) {
        Some(names) if !names.is_empty() => Ok(names.iter().cloned().collect()),
        _ => Err(AdminError::UnknownCluster(cluster.to_string())),
    }
}

/// `getSyncStateSet`: each broker set's master and which replicas are in its sync-state set.
/// `namesrvs` is only asked for with `-c`, the one form that needs them.
pub async fn get_sync_state_set(
    ctl: &Controllers,
    sets: &BrokerSets,
    namesrvs: impl FnOnce() -> Result<Namesrvs, AdminError>,
) -> Result<Report, AdminError> {
    let names = match (&sets.broker, &sets.cluster) {
        (Some(broker), _) => vec![broker.clone()],
        (None, Some(cluster)) => broker_names_of(&namesrvs()?, cluster).await?,
        (None, None) => unreachable!("the command line requires -b or -c"),
    };
    let names = BrokerNameList { names };
    let request =
        RemotingCommand::request(request::CONTROLLER_GET_SYNC_STATE_DATA).with_body(names.encode());
    let reply = ctl.call_leader(request, ctl.0.timeout()).await?.success()?;
    let info = reply.decode("BrokerReplicasInfo", BrokerReplicasInfo::decode)?;
    // The report shows the body as the controller wrote it (a Java controller's table in its
    // own order), not as read back.
    let data = body_json(&reply)?;
    let mut text = String::new();
    for name in &names.names {
        let Some(group) = info.replicas_info_table.get(name) else {
            // Brokers of a cluster need not all run in controller mode; mqadmin skips those.
            if sets.broker.is_some() {
                return Err(AdminError::UnknownBrokerSet {
                    controller: reply.addr,
                    broker: name.clone(),
                });
            }
            continue;
        };
        text.push_str(&replicas_text(name, group));
    }
    Ok(Report::ok(text, data))
}

/// One broker set as mqadmin prints it, each replica in the form of Java's
/// `ReplicaIdentity.toString()`, which scripts reading mqadmin's output expect.
fn replicas_text(name: &str, group: &ReplicasInfo) -> String {
    let mut text = format!(
        "\n#brokerName\t{name}\n#MasterBrokerId\t{}\n#MasterAddr\t{}\n#MasterEpoch\t{}\n\
         #SyncStateSetEpoch\t{}\n#SyncStateSetNums\t{}\n",
        shown(group.master_broker_id),
        shown(group.master_address.as_deref()),
        group.master_epoch,
        group.sync_state_set_epoch,
        group.in_sync_replicas.len()
    );
    let replicas = group
        .in_sync_replicas
        .iter()
        .map(|r| ("InSyncReplica", r))
        .chain(
            group
                .not_in_sync_replicas
                .iter()
                .map(|r| ("NotInSyncReplica", r)),
        );
    for (label, r) in replicas {
        text.push_str(&format!(
            "\n{label}:\tReplicaIdentity{{brokerName='{}', brokerId={}, brokerAddress='{}', alive={}}}\n",
            r.broker_name, r.broker_id, r.broker_address, r.alive
        ));
    }
    text
}

/// `electMaster`: makes the named broker the master of its set, as an admin may (designated
/// election). When it already is the master, the controller keeps it and says so with
/// MASTER_STILL_EXIST; that is reported, with the standing master, as a failure to elect.
pub async fn elect_master(
    ctl: &Controllers,
    cluster: &str,
    broker: &str,
    broker_id: i64,
) -> Result<Report, AdminError> {
    let request = ElectMasterRequestHeader {
        cluster_name: Some(cluster),
        broker_name: broker,
        broker_id: Some(broker_id),
        designate_elect: true,
        invoke_time: Some(rocketmq_wire::clock::now_ms()),
    }
    .to_command();
    let request = ctl.0.signed(request);
    let reply = ctl.call_leader(request, ctl.0.timeout()).await?;
    let stays = reply.response.code == response::CONTROLLER_MASTER_STILL_EXIST;
    let reply = if stays { reply } else { reply.success()? };
    let r = &reply.response;
    // Every field of this header is optional: reading it cannot fail.
    let header = ElectMasterResponseHeader::from_command(r).unwrap_or_default();
    let master_addr = shown(header.master_address);
    let mut text = format!(
        "\n#ClusterName\t{cluster}\n#BrokerName\t{broker}\n#BrokerMasterAddr\t{master_addr}\n\
         #MasterEpoch\t{}\n#SyncStateSetEpoch\t{}\n",
        shown(header.master_epoch),
        shown(header.sync_state_set_epoch)
    );
    // The member group is absent when the master stays. (mqadmin reads the body as a bare
    // BrokerMemberGroup, finds no addresses in it and so never prints the `#Broker` lines it
    // means to.)
    let body = if r.body.as_deref().is_some_and(|b| !b.is_empty()) {
        Some(reply.decode("ElectMasterResponseBody", ElectMasterResponseBody::decode)?)
    } else {
        None
    };
    let members = body
        .as_ref()
        .and_then(|b| b.broker_member_group.as_ref())
        .map(|g| &g.broker_addrs);
    for (id, addr) in members.into_iter().flatten() {
        text.push_str(&format!("\t#Broker\t{id}\t{addr}\n"));
    }
    let master_id = shown(header.master_broker_id);
    if stays {
        text.push_str(&format!(
            "The master stays: broker {master_id} ({master_addr}) already is the master of {broker}, no new master was elected.\n"
        ));
    }
    let mut json = json!({
        "controllerLeader": reply.addr,
        "clusterName": cluster,
        "brokerName": broker,
        "elected": !stays,
        "masterBrokerId": header.master_broker_id,
        "masterAddress": header.master_address,
        "masterEpoch": header.master_epoch,
        "syncStateSetEpoch": header.sync_state_set_epoch,
        "brokerAddrs": members.into_iter().flatten().map(|(id, a)| (id.to_string(), json!(a))).collect::<Map<_, _>>(),
        "syncStateSet": body.map(|b| b.sync_state_set),
    });
    let mut failures = Vec::new();
    if stays {
        json["code"] = json!(r.code);
        json["remark"] = json!(r.remark);
        failures.push(AdminError::Response {
            addr: reply.addr.clone(),
            code: r.code,
            remark: r.remark.clone(),
        });
    }
    // There is a failure exactly when the master stays: exit code 1.
    Ok(Report::partial(text, json, failures))
}

/// `cleanBrokerMetadata`: forgets brokers of a set (or the whole set) on the controller. The
/// controller refuses to forget a living broker unless told to with `-l`.
pub async fn clean_broker_metadata(
    ctl: &Controllers,
    broker: &str,
    cluster: Option<&str>,
    ids: Option<&str>,
    clean_living: bool,
) -> Result<Report, AdminError> {
    let request = CleanControllerBrokerDataRequestHeader {
        cluster_name: cluster,
        broker_name: broker,
        broker_controller_ids_to_clean: ids,
        is_clean_living_broker: clean_living,
        invoke_time: Some(rocketmq_wire::clock::now_ms()),
    }
    .to_command();
    let request = ctl.0.signed(request);
    let reply = ctl.call_leader(request, ctl.0.timeout()).await?.success()?;
    Ok(Report::ok(
        format!("clear broker {broker} metadata from controller success!\n"),
        json!({
            "controllerLeader": reply.addr,
            "ok": true,
            "brokerName": broker,
            "clusterName": cluster,
            "brokerControllerIdsToClean": ids,
            "cleanLivingBroker": clean_living,
        }),
    ))
}

/// `getControllerConfig`: each named node's configuration.
pub async fn get_controller_config(ctl: &Controllers) -> Report {
    let request = RemotingCommand::request(request::GET_CONTROLLER_CONFIG);
    let outcomes = ctl.0.ask_each(request).await;
    config_report(outcomes, |k, v| format!("{k:<50}=  {v}\n"))
}

/// `updateControllerConfig`: changes a key on each named node; every node has its own
/// configuration, so a node left out keeps the old value.
pub async fn update_controller_config(ctl: &Controllers, key: &str, value: &str) -> Report {
    let request = RemotingCommand::request(request::UPDATE_CONTROLLER_CONFIG)
        .with_body(config_body(key, value));
    let outcomes = ctl.0.ask_each(ctl.0.signed(request)).await;
    let message = format!("update controller config success! {key} : {value}");
    report_each(outcomes, "controller", said(message))
}

/// Parses `-b` of cleanBrokerMetadata: broker ids separated by `;`.
pub fn id_list(text: &str) -> Result<String, String> {
    let text = text.trim();
    let ids = split_addrs(text);
    if ids.is_empty() || ids.iter().any(|id| id.parse::<i64>().is_err()) {
        return Err(format!(
            "expected broker ids separated by ';', e.g. 1;2;3, not {text:?}"
        ));
    }
    Ok(ids.join(";"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_lists_are_numbers_separated_by_semicolons() {
        assert_eq!(id_list("1;2; 3;").as_deref(), Ok("1;2;3"));
        assert!(id_list("1;x").is_err());
        assert!(id_list(";").is_err());
    }

    #[test]
    fn replicas_read_as_mqadmin_prints_them() {
        let body = json!({"replicasInfoTable": {"g": {
            "masterBrokerId": 1, "masterAddress": "a:1", "masterEpoch": 2, "syncStateSetEpoch": 3,
            "inSyncReplicas": [{"brokerName": "g", "brokerId": 1, "brokerAddress": "a:1", "alive": true}],
            "notInSyncReplicas": [{"brokerName": "g", "brokerId": 2, "brokerAddress": "a:2", "alive": false}],
        }}});
        let info = BrokerReplicasInfo::decode(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            replicas_text("g", &info.replicas_info_table["g"]),
            "\n#brokerName\tg\n#MasterBrokerId\t1\n#MasterAddr\ta:1\n#MasterEpoch\t2\n\
             #SyncStateSetEpoch\t3\n#SyncStateSetNums\t1\n\
             \nInSyncReplica:\tReplicaIdentity{brokerName='g', brokerId=1, brokerAddress='a:1', alive=true}\n\
             \nNotInSyncReplica:\tReplicaIdentity{brokerName='g', brokerId=2, brokerAddress='a:2', alive=false}\n"
        );
        let masterless = replicas_text("g", &ReplicasInfo::default());
        assert!(masterless.contains("#MasterBrokerId\tnull\n#MasterAddr\tnull"));
    }
}
