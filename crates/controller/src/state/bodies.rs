//! The JSON bodies of controller requests and answers, in the exact form fastjson writes them
//! (properties alphabetical, nulls left out, numeric map keys unquoted), and lenient readers for
//! the bodies Java peers send.

use std::collections::{BTreeMap, BTreeSet};

use rocketmq_wire::json::{parse_value_bounded, JsonStyle, JsonWriter};
use serde_json::Value;

/// One group's members, as BrokerMemberGroup lists them.
pub(super) struct MemberGroup<'a> {
    pub cluster: &'a str,
    pub broker_name: &'a str,
    pub addrs: &'a BTreeMap<i64, String>,
}

/// One replica as `BrokerReplicasInfo.ReplicaIdentity`.
pub(super) struct ReplicaIdentity<'a> {
    pub broker_id: i64,
    pub address: &'a str,
    pub alive: bool,
}

/// One group as `BrokerReplicasInfo.ReplicasInfo`.
pub(super) struct ReplicasInfo<'a> {
    pub broker_name: &'a str,
    pub master_broker_id: Option<i64>,
    pub master_address: Option<&'a str>,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub in_sync: Vec<ReplicaIdentity<'a>>,
    pub not_in_sync: Vec<ReplicaIdentity<'a>>,
}

fn id_array(w: &mut JsonWriter, ids: &BTreeSet<i64>) {
    w.array(|w| {
        for id in ids {
            w.long(*id);
        }
    });
}

/// `SyncStateSet`: `{"syncStateSet":[1,2],"syncStateSetEpoch":3}`; also the body of the 1008
/// role-change notice a leader sends.
pub fn sync_state_set(ids: &BTreeSet<i64>, epoch: i32) -> Vec<u8> {
    let mut w = JsonWriter::new(JsonStyle::Fastjson);
    w.object(|w| {
        w.key("syncStateSet");
        id_array(w, ids);
        w.key("syncStateSetEpoch").int(epoch.into());
    });
    w.finish()
}

fn member_group(w: &mut JsonWriter, group: &MemberGroup<'_>) {
    w.object(|w| {
        // Quoted ids, unlike fastjson's own output: the 5.5.0 admin client (fastjson2) refuses
        // bare numeric keys here, so `mqadmin electMaster` would report an election that
        // happened as failed; the broker reads quoted ids back as its Long keys all the same.
        w.key("brokerAddrs").object(|w| {
            for (id, addr) in group.addrs {
                w.key(&id.to_string()).string(addr);
            }
        });
        w.key("brokerName").string(group.broker_name);
        w.key("cluster").string(group.cluster);
    });
}

/// `ElectMasterResponseBody`; the member group is absent when the old master stays.
pub(super) fn elect_master(
    group: Option<&MemberGroup<'_>>,
    sync_state_set: &BTreeSet<i64>,
) -> Vec<u8> {
    let mut w = JsonWriter::new(JsonStyle::Fastjson);
    w.object(|w| {
        if let Some(group) = group {
            w.key("brokerMemberGroup");
            member_group(w, group);
        }
        w.key("syncStateSet");
        id_array(w, sync_state_set);
    });
    w.finish()
}

fn replica_list(w: &mut JsonWriter, broker_name: &str, replicas: &[ReplicaIdentity<'_>]) {
    w.array(|w| {
        for r in replicas {
            w.object(|w| {
                w.key("alive").bool(r.alive);
                w.key("brokerAddress").string(r.address);
                w.key("brokerId").long(r.broker_id);
                w.key("brokerName").string(broker_name);
            });
        }
    });
}

/// `BrokerReplicasInfo`. Java keys the table by a HashMap, whose order no reader relies on; ours
/// follows the order given.
pub(super) fn broker_replicas_info(groups: &[ReplicasInfo<'_>]) -> Vec<u8> {
    let mut w = JsonWriter::new(JsonStyle::Fastjson);
    w.object(|w| {
        w.key("replicasInfoTable").object(|w| {
            for g in groups {
                w.key(g.broker_name).object(|w| {
                    w.key("inSyncReplicas");
                    replica_list(w, g.broker_name, &g.in_sync);
                    w.opt_str_field("masterAddress", g.master_address);
                    if let Some(id) = g.master_broker_id {
                        w.key("masterBrokerId").long(id);
                    }
                    w.key("masterEpoch").int(g.master_epoch.into());
                    w.key("notInSyncReplicas");
                    replica_list(w, g.broker_name, &g.not_in_sync);
                    w.key("syncStateSetEpoch")
                        .int(g.sync_state_set_epoch.into());
                });
            }
        });
    });
    w.finish()
}

/// A Java `long` as fastjson reads one: a number, or a string holding one.
fn as_long(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Reads a `SyncStateSet` request body (1001): the ids and the sync-state-set epoch the master
/// based its change on. `None` when it is not one; a missing epoch reads as 0, as Java's
/// primitive field does, but a missing set does not read at all (Java fails on it too).
pub fn parse_sync_state_set(body: &[u8]) -> Option<(BTreeSet<i64>, i32)> {
    let value = parse_value_bounded(body, "SyncStateSet").ok()?;
    let object = value.as_object()?;
    let ids = match object.get("syncStateSet")? {
        Value::Array(items) => items
            .iter()
            .map(as_long)
            .collect::<Option<BTreeSet<i64>>>()?,
        _ => return None,
    };
    let epoch = match object.get("syncStateSetEpoch") {
        None | Some(Value::Null) => 0,
        Some(v) => i32::try_from(as_long(v)?).ok()?,
    };
    Some((ids, epoch))
}

/// Reads the broker-name list of a 1006 request. Names written as numbers are taken as their
/// text; anything else that is not a string makes the list unreadable.
pub fn parse_broker_names(body: &[u8]) -> Option<Vec<String>> {
    let value = parse_value_bounded(body, "broker name list").ok()?;
    value
        .as_array()?
        .iter()
        .map(|item| match item {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect()
}
