//! The controller's bodies (RIP-44), written as fastjson writes them (properties alphabetical,
//! nulls left out) and read leniently (quoted numbers, unquoted keys), except where noted.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::route::broker_addrs;
use super::{as_object, parse_object, parse_peer_object, BrokerMemberGroup};
use crate::error::BodyError;
use crate::headers::controller::NotifyBrokerRoleChangedRequestHeader;
use crate::headers::RequestHeader;
use crate::json::{parse_value_bounded, value_as_i64};
use crate::json::{JsonStyle, JsonWriter, ObjectExt};
use crate::RemotingCommand;

/// A group's sync-state set: the replicas that may become master without losing messages, under
/// the epoch that fences changes based on an older set. The body of CONTROLLER_ALTER_SYNC_STATE_SET
/// (the set a master proposes), of the answers to CONTROLLER_REGISTER_BROKER and
/// CONTROLLER_GET_REPLICA_INFO, and of NOTIFY_BROKER_ROLE_CHANGED.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SyncStateSet {
    pub sync_state_set: BTreeSet<i64>,
    pub sync_state_set_epoch: i32,
}

impl SyncStateSet {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        w.object(|w| {
            w.key("syncStateSet");
            id_array(w, &self.sync_state_set);
            w.key("syncStateSetEpoch")
                .int(self.sync_state_set_epoch.into());
        });
        w.finish()
    }

    /// A missing epoch reads as 0, as Java's primitive field does, but a missing set does not
    /// read at all: Java fails on it too, and a controller must not take "no set" for an empty
    /// one. An epoch beyond Java's `int` is refused rather than truncated.
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let obj = parse_peer_object(body, "SyncStateSet")?;
        let sync_state_set = match obj.present("syncStateSet") {
            Some(Value::Array(ids)) => id_set("syncStateSet", ids)?,
            Some(_) => return Err(BodyError::field("syncStateSet", "not an array")),
            None => return Err(BodyError::field("syncStateSet", "missing")),
        };
        Ok(SyncStateSet {
            sync_state_set,
            sync_state_set_epoch: obj.i32_or("syncStateSetEpoch", 0)?,
        })
    }
}

/// The body of the answer to CONTROLLER_ELECT_MASTER: the group's members (absent when the old
/// master stays) and the new sync-state set.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ElectMasterResponseBody {
    pub broker_member_group: Option<BrokerMemberGroup>,
    pub sync_state_set: BTreeSet<i64>,
}

impl ElectMasterResponseBody {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        w.object(|w| {
            if let Some(group) = &self.broker_member_group {
                w.key("brokerMemberGroup").object(|w| {
                    // Quoted ids, unlike fastjson's own output: the 5.5.0 admin client
                    // (fastjson2) refuses bare numeric keys here, so `mqadmin electMaster` would
                    // report an election that happened as failed; the broker reads quoted ids
                    // back as its Long keys all the same.
                    w.key("brokerAddrs").object(|w| {
                        for (id, addr) in &group.broker_addrs {
                            w.key(&id.to_string()).string(addr);
                        }
                    });
                    w.key("brokerName").string(&group.broker_name);
                    w.key("cluster").string(&group.cluster);
                });
            }
            w.key("syncStateSet");
            id_array(w, &self.sync_state_set);
        });
        w.finish()
    }

    /// Member ids are read quoted or bare, as either side writes them.
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let obj = parse_object(body, "ElectMasterResponseBody")?;
        let broker_member_group = match obj.opt_object("brokerMemberGroup")? {
            None => None,
            Some(group) => Some(BrokerMemberGroup {
                cluster: group.opt_string("cluster")?.unwrap_or_default(),
                broker_name: group.opt_string("brokerName")?.unwrap_or_default(),
                broker_addrs: broker_addrs(group)?,
            }),
        };
        let sync_state_set = match obj.opt_array("syncStateSet")? {
            Some(ids) => id_set("syncStateSet", ids)?,
            None => BTreeSet::new(),
        };
        Ok(ElectMasterResponseBody {
            broker_member_group,
            sync_state_set,
        })
    }
}

/// One replica of a group, as [`BrokerReplicasInfo`] lists it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReplicaIdentity {
    pub broker_name: String,
    pub broker_id: i64,
    pub broker_address: String,
    pub alive: bool,
}

impl ReplicaIdentity {
    fn write(&self, w: &mut JsonWriter) {
        w.object(|w| {
            w.key("alive").bool(self.alive);
            w.key("brokerAddress").string(&self.broker_address);
            w.key("brokerId").long(self.broker_id);
            w.key("brokerName").string(&self.broker_name);
        });
    }

    fn from_object(obj: &Map<String, Value>) -> Result<Self, BodyError> {
        Ok(ReplicaIdentity {
            broker_name: obj.opt_string("brokerName")?.unwrap_or_default(),
            broker_id: obj.i64_or("brokerId", 0)?,
            broker_address: obj.opt_string("brokerAddress")?.unwrap_or_default(),
            alive: obj.bool_or("alive", false)?,
        })
    }
}

/// One group, as [`BrokerReplicasInfo`] shows it: its master and its replicas, split by
/// membership of the sync-state set.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReplicasInfo {
    pub master_broker_id: Option<i64>,
    pub master_address: Option<String>,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub in_sync_replicas: Vec<ReplicaIdentity>,
    pub not_in_sync_replicas: Vec<ReplicaIdentity>,
}

impl ReplicasInfo {
    fn write(&self, w: &mut JsonWriter) {
        w.object(|w| {
            w.key("inSyncReplicas");
            replica_list(w, &self.in_sync_replicas);
            w.opt_str_field("masterAddress", self.master_address.as_deref());
            if let Some(id) = self.master_broker_id {
                w.key("masterBrokerId").long(id);
            }
            w.key("masterEpoch").int(self.master_epoch.into());
            w.key("notInSyncReplicas");
            replica_list(w, &self.not_in_sync_replicas);
            w.key("syncStateSetEpoch")
                .int(self.sync_state_set_epoch.into());
        });
    }

    fn from_object(obj: &Map<String, Value>) -> Result<Self, BodyError> {
        let replicas = |key: &str| -> Result<Vec<ReplicaIdentity>, BodyError> {
            obj.opt_array(key)?
                .into_iter()
                .flatten()
                .map(|r| ReplicaIdentity::from_object(as_object(r, "ReplicaIdentity")?))
                .collect()
        };
        Ok(ReplicasInfo {
            master_broker_id: obj
                .present("masterBrokerId")
                .map(|v| value_as_i64("masterBrokerId", v))
                .transpose()?,
            master_address: obj.opt_string("masterAddress")?,
            master_epoch: obj.i32_or("masterEpoch", 0)?,
            sync_state_set_epoch: obj.i32_or("syncStateSetEpoch", 0)?,
            in_sync_replicas: replicas("inSyncReplicas")?,
            not_in_sync_replicas: replicas("notInSyncReplicas")?,
        })
    }
}

fn replica_list(w: &mut JsonWriter, replicas: &[ReplicaIdentity]) {
    w.array(|w| {
        for r in replicas {
            r.write(w);
        }
    });
}

/// The answer to CONTROLLER_GET_SYNC_STATE_DATA: each known group among the names asked for.
/// Java keys the table by a HashMap, whose order no reader relies on; this one is by name.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BrokerReplicasInfo {
    pub replicas_info_table: BTreeMap<String, ReplicasInfo>,
}

impl BrokerReplicasInfo {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        w.object(|w| {
            w.key("replicasInfoTable").object(|w| {
                for (name, info) in &self.replicas_info_table {
                    w.key(name);
                    info.write(w);
                }
            });
        });
        w.finish()
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let obj = parse_object(body, "BrokerReplicasInfo")?;
        let mut replicas_info_table = BTreeMap::new();
        for (name, info) in obj.opt_object("replicasInfoTable")?.into_iter().flatten() {
            if !info.is_null() {
                let info = ReplicasInfo::from_object(as_object(info, "ReplicasInfo")?)?;
                replicas_info_table.insert(name.clone(), info);
            }
        }
        Ok(BrokerReplicasInfo {
            replicas_info_table,
        })
    }
}

/// The body of CONTROLLER_GET_SYNC_STATE_DATA: the broker names asked about, a bare JSON list.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BrokerNameList {
    pub names: Vec<String>,
}

impl BrokerNameList {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&self.names).expect("a list of strings always serializes")
    }

    /// Names written as numbers are taken as their text; anything else that is not a string
    /// makes the list unreadable.
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let Value::Array(items) = parse_value_bounded(body, "broker name list")? else {
            return Err(BodyError::Format(
                "broker name list is not a JSON array".into(),
            ));
        };
        let names = items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                _ => Err(BodyError::field("brokerNames", "not a string")),
            })
            .collect::<Result<_, _>>()?;
        Ok(BrokerNameList { names })
    }
}

/// A master change as a controller announces it to each broker of the group
/// (NOTIFY_BROKER_ROLE_CHANGED): the new master in the header, the sync-state set as the body,
/// its epoch in both.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RoleChangeNotifyEntry {
    pub master_address: Option<String>,
    pub master_broker_id: Option<i64>,
    pub master_epoch: i32,
    pub sync_state_set: SyncStateSet,
}

impl RoleChangeNotifyEntry {
    /// The notice, to be sent oneway.
    pub fn to_command(&self) -> RemotingCommand {
        NotifyBrokerRoleChangedRequestHeader {
            master_address: self.master_address.as_deref(),
            master_epoch: Some(self.master_epoch),
            sync_state_set_epoch: Some(self.sync_state_set.sync_state_set_epoch),
            master_broker_id: self.master_broker_id,
        }
        .to_command()
        .with_body(self.sync_state_set.encode())
    }
}

fn id_array(w: &mut JsonWriter, ids: &BTreeSet<i64>) {
    w.array(|w| {
        for id in ids {
            w.long(*id);
        }
    });
}

/// Broker ids, numbers or numeric strings; one that is neither spoils the set.
fn id_set(what: &str, ids: &[Value]) -> Result<BTreeSet<i64>, BodyError> {
    ids.iter().map(|id| value_as_i64(what, id)).collect()
}

/// The body of the answer to CONTROLLER_LIST_MEMBERS and NAMESRV_LIST_MEMBERS (ours), and of the
/// answers to the other member changes (the members once the change is done): a replicated
/// group's members (the controller's, or the NameServers' KV group) as its leader sees them.
/// Plain JSON, since no Java tool reads it.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupMembers {
    /// The member that answered as leader.
    pub leader_id: Option<String>,
    /// The leader's last log index.
    pub last_log_index: Option<u64>,
    pub members: Vec<GroupMember>,
}

#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupMember {
    pub id: String,
    pub address: String,
    /// `leader`, `follower` (a voter) or `learner`.
    pub role: String,
    /// The last log index the leader knows the member holds; `None` while it knows nothing yet.
    pub matched_index: Option<u64>,
    /// Entries the member lacks of the leader's log; `None` while unknown.
    pub lag: Option<u64>,
}

impl GroupMembers {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("plain data always serializes")
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        serde_json::from_slice(body).map_err(|e| BodyError::Format(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::TREE_MAX;

    fn ids(list: &[i64]) -> BTreeSet<i64> {
        list.iter().copied().collect()
    }

    fn set(list: &[i64], epoch: i32) -> SyncStateSet {
        SyncStateSet {
            sync_state_set: ids(list),
            sync_state_set_epoch: epoch,
        }
    }

    #[test]
    fn the_member_list_reads_back_as_written_with_unknown_lags_as_null() {
        let members = GroupMembers {
            leader_id: Some("n0".into()),
            last_log_index: Some(7),
            members: vec![
                GroupMember {
                    id: "n0".into(),
                    address: "a:1".into(),
                    role: "leader".into(),
                    matched_index: Some(7),
                    lag: Some(0),
                },
                GroupMember {
                    id: "n3".into(),
                    address: "a:4".into(),
                    role: "learner".into(),
                    matched_index: None,
                    lag: None,
                },
            ],
        };
        let body = members.encode();
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(text.contains(r#""matchedIndex":null"#), "{text}");
        assert!(text.contains(r#""leaderId":"n0""#), "{text}");
        assert_eq!(GroupMembers::decode(&body).unwrap(), members);
        assert!(GroupMembers::decode(b"[1]").is_err());
    }

    #[test]
    fn golden_sync_state_set() {
        let body = set(&[1, 5, 9], 7).encode();
        assert_eq!(body, br#"{"syncStateSet":[1,5,9],"syncStateSetEpoch":7}"#);
        assert_eq!(SyncStateSet::decode(&body).unwrap(), set(&[1, 5, 9], 7));
        assert_eq!(
            SyncStateSet::default().encode(),
            br#"{"syncStateSet":[],"syncStateSetEpoch":0}"#
        );
    }

    #[test]
    fn sync_state_sets_are_read_leniently() {
        // (body, the ids and epoch read, None: unreadable)
        type Row = (&'static str, Option<(&'static [i64], i32)>);
        let cases: [Row; 10] = [
            (
                r#"{"syncStateSet":[1,2],"syncStateSetEpoch":3}"#,
                Some((&[1, 2], 3)),
            ),
            (
                r#"{"syncStateSetEpoch":"3","syncStateSet":["1",2]}"#,
                Some((&[1, 2], 3)),
            ),
            (
                r#"{syncStateSet:[2,1,2],syncStateSetEpoch:3,}"#,
                Some((&[1, 2], 3)),
            ),
            (r#"{"syncStateSet":[]}"#, Some((&[], 0))),
            (r#"{"syncStateSetEpoch":3}"#, None),
            (r#"{"syncStateSet":null,"syncStateSetEpoch":3}"#, None),
            (r#"{"syncStateSet":["x"],"syncStateSetEpoch":3}"#, None),
            (
                r#"{"syncStateSet":[1],"syncStateSetEpoch":4294967296}"#,
                None,
            ),
            (r#"[1,2]"#, None),
            ("not json", None),
        ];
        for (text, expected) in cases {
            assert_eq!(
                SyncStateSet::decode(text.as_bytes()).ok(),
                expected.map(|(list, epoch)| set(list, epoch)),
                "{text}"
            );
        }
    }

    #[test]
    fn a_sync_state_set_beyond_the_tree_bound_is_refused() {
        let mut body = br#"{"syncStateSet":["#.to_vec();
        body.extend(std::iter::repeat_n(b' ', TREE_MAX));
        body.extend(br#"1],"syncStateSetEpoch":1}"#);
        assert!(SyncStateSet::decode(&body).is_err());
    }

    #[test]
    fn golden_elect_master_body() {
        let elected = ElectMasterResponseBody {
            broker_member_group: Some(BrokerMemberGroup {
                cluster: "DefaultCluster".into(),
                broker_name: "broker-a".into(),
                broker_addrs: BTreeMap::from([(1, "a:1".to_string()), (2, "a:2".to_string())]),
            }),
            sync_state_set: ids(&[2]),
        };
        let body = elected.encode();
        assert_eq!(
            body,
            br#"{"brokerMemberGroup":{"brokerAddrs":{"1":"a:1","2":"a:2"},"brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[2]}"#
        );
        assert_eq!(ElectMasterResponseBody::decode(&body).unwrap(), elected);

        let stays = ElectMasterResponseBody {
            broker_member_group: None,
            sync_state_set: ids(&[1, 2]),
        };
        assert_eq!(stays.encode(), br#"{"syncStateSet":[1,2]}"#);
        assert_eq!(
            ElectMasterResponseBody::decode(&stays.encode()).unwrap(),
            stays
        );

        // Java's controller writes the ids bare.
        let java = br#"{"brokerMemberGroup":{"brokerAddrs":{1:"a:1"},"brokerName":"b","cluster":"c"},"syncStateSet":[1]}"#;
        let read = ElectMasterResponseBody::decode(java).unwrap();
        let group = read.broker_member_group.unwrap();
        assert_eq!(group.broker_addrs, BTreeMap::from([(1, "a:1".to_string())]));
        assert_eq!(
            (group.broker_name.as_str(), group.cluster.as_str()),
            ("b", "c")
        );
    }

    fn replica(name: &str, id: i64, alive: bool) -> ReplicaIdentity {
        ReplicaIdentity {
            broker_name: name.into(),
            broker_id: id,
            broker_address: format!("a:{id}"),
            alive,
        }
    }

    #[test]
    fn golden_broker_replicas_info() {
        let info = BrokerReplicasInfo {
            replicas_info_table: BTreeMap::from([
                (
                    "broker-a".to_string(),
                    ReplicasInfo {
                        master_broker_id: Some(1),
                        master_address: Some("a:1".into()),
                        master_epoch: 2,
                        sync_state_set_epoch: 3,
                        in_sync_replicas: vec![replica("broker-a", 1, true)],
                        not_in_sync_replicas: vec![replica("broker-a", 2, false)],
                    },
                ),
                ("broker-b".to_string(), ReplicasInfo::default()),
            ]),
        };
        let body = info.encode();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            concat!(
                r#"{"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":true,"brokerAddress":"a:1","brokerId":1,"brokerName":"broker-a"}],"#,
                r#""masterAddress":"a:1","masterBrokerId":1,"masterEpoch":2,"#,
                r#""notInSyncReplicas":[{"alive":false,"brokerAddress":"a:2","brokerId":2,"brokerName":"broker-a"}],"syncStateSetEpoch":3},"#,
                r#""broker-b":{"inSyncReplicas":[],"masterEpoch":0,"notInSyncReplicas":[],"syncStateSetEpoch":0}}}"#
            )
        );
        assert_eq!(BrokerReplicasInfo::decode(&body).unwrap(), info);
        assert_eq!(
            BrokerReplicasInfo::default().encode(),
            br#"{"replicasInfoTable":{}}"#
        );
        let quoted = br#"{"replicasInfoTable":{"g":{"masterBrokerId":"1","masterEpoch":"2","inSyncReplicas":[{"brokerId":"1","alive":"true"}]}}}"#;
        let read = BrokerReplicasInfo::decode(quoted).unwrap();
        let g = &read.replicas_info_table["g"];
        assert_eq!((g.master_broker_id, g.master_epoch), (Some(1), 2));
        assert_eq!(
            (g.in_sync_replicas[0].broker_id, g.in_sync_replicas[0].alive),
            (1, true)
        );
    }

    #[test]
    fn broker_name_lists_are_read_leniently() {
        let cases: [(&str, Option<&[&str]>); 6] = [
            (
                r#"["broker-a","broker-b"]"#,
                Some(&["broker-a", "broker-b"]),
            ),
            (r#"['broker-a',]"#, Some(&["broker-a"])),
            ("[]", Some(&[])),
            ("[12]", Some(&["12"])),
            (r#"[null]"#, None),
            (r#"{"a":1}"#, None),
        ];
        for (text, expected) in cases {
            assert_eq!(
                BrokerNameList::decode(text.as_bytes())
                    .ok()
                    .map(|l| l.names),
                expected.map(|names| names.iter().map(|n| n.to_string()).collect()),
                "{text}"
            );
        }
        let list = BrokerNameList {
            names: vec!["broker-a".into(), "b\"c".into()],
        };
        assert_eq!(list.encode(), br#"["broker-a","b\"c"]"#);
        assert_eq!(BrokerNameList::decode(&list.encode()).unwrap(), list);
    }

    #[test]
    fn a_role_change_notice_carries_the_master_and_the_set() {
        let notice = RoleChangeNotifyEntry {
            master_address: Some("a:2".into()),
            master_broker_id: Some(2),
            master_epoch: 3,
            sync_state_set: set(&[2], 4),
        }
        .to_command();
        assert_eq!(
            notice.code,
            crate::codes::request::NOTIFY_BROKER_ROLE_CHANGED
        );
        let fields: Vec<(&str, &str)> = notice
            .ext_fields
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("masterAddress", "a:2"),
                ("masterBrokerId", "2"),
                ("masterEpoch", "3"),
                ("syncStateSetEpoch", "4"),
            ]
        );
        assert_eq!(
            notice.body.as_deref(),
            Some(&br#"{"syncStateSet":[2],"syncStateSetEpoch":4}"#[..])
        );
        let masterless = RoleChangeNotifyEntry::default().to_command();
        assert_eq!(masterless.ext("masterAddress"), None);
        assert_eq!(masterless.ext("masterBrokerId"), None);
        assert_eq!(masterless.ext("masterEpoch"), Some("0"));
    }
}
