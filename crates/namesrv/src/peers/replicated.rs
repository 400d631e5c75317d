//! What the NameServers that agree replicate through their group: the KV config (PUT and
//! DELETE_KV_CONFIG, and each member's own KV file offered once) and the admin topic changes
//! (write permission, topic deletion and registration) every member applies to its routes, in
//! the order of the group's log. Applying an entry is deterministic, so every member that applied
//! the same log holds the same table and the same numbered admin changes.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::kv::Table;
use rocketmq_raft::NodeId;

/// An entry of the group's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// PUT_KV_CONFIG; no value removes the key, as a Java null value vanishes.
    Put {
        namespace: String,
        key: String,
        value: Option<String>,
    },
    /// DELETE_KV_CONFIG: the key goes, its namespace stays.
    Delete { namespace: String, key: String },
    /// A member's own KV file, offered once: what the group lacks is taken.
    Seed { member: NodeId, table: Table },
    /// A topic change made by an admin request on one NameServer, for every member's routes.
    Admin(AdminChange),
}

/// A topic change an admin request makes (wipe or add write permission, delete or register a
/// topic), numbered by its place in the group's log (`KvAndAdmin::admin`) so that each member
/// applies it once: members order admin changes by that, never by a clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminChange {
    /// Unique per change: the member that took the request reads its own result by it.
    pub id: u64,
    /// When it was proposed, on the proposer's clock: for people reading the log only (members
    /// whose clocks differ would disagree on anything decided by it).
    pub at_ms: i64,
    pub op: AdminOp,
    /// Who asked (`admin from ADDRESS`), for every member's route journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminOp {
    WritePerm {
        broker_name: String,
        wipe: bool,
    },
    DeleteTopic {
        topic: String,
        cluster: Option<String>,
    },
    /// Each queue: (broker name, read queues, write queues, perm, topic sys flag).
    RegisterTopic {
        topic: String,
        queues: Vec<(String, i32, i32, i32, i32)>,
    },
}

impl AdminOp {
    /// Applies the change to a lone NameServer's routes; how many topics it touched.
    pub fn apply(&self, routes: &crate::registry::RouteTable, by: Option<String>) -> i64 {
        routes.change_by(by, |r| self.apply_to(r))
    }

    /// Applies the change to this member's routes; how many topics it touched.
    pub(super) fn apply_to(&self, r: &mut crate::registry::Registry) -> i64 {
        match self {
            AdminOp::WritePerm { broker_name, wipe } => {
                r.change_write_perm(broker_name, *wipe) as i64
            }
            AdminOp::DeleteTopic { topic, cluster } => {
                i64::from(r.delete_topic(topic, cluster.as_deref()))
            }
            AdminOp::RegisterTopic { topic, queues } => {
                let queue_datas: Vec<rocketmq_wire::body::QueueData> = queues
                    .iter()
                    .map(
                        |(broker, read, write, perm, sys_flag)| rocketmq_wire::body::QueueData {
                            broker_name: broker.clone(),
                            read_queue_nums: *read,
                            write_queue_nums: *write,
                            perm: *perm,
                            topic_sys_flag: *sys_flag,
                        },
                    )
                    .collect();
                i64::from(r.register_topic(topic, &queue_datas))
            }
        }
    }
}

/// Admin changes the state keeps for members to apply: far more than arrive between two looks.
pub(super) const ADMIN_KEPT: usize = 1024;

/// The replicated state: the KV config and the latest admin topic changes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct KvAndAdmin {
    pub table: Table,
    /// The members whose own file the group has taken (`Seed`).
    pub seeded: BTreeSet<NodeId>,
    /// The latest admin changes, numbered in the order applied.
    #[serde(default)]
    pub admin: VecDeque<(u64, AdminChange)>,
    #[serde(default)]
    pub admin_seq: u64,
}

impl KvAndAdmin {
    pub(super) fn apply(&mut self, cmd: &Command) {
        match cmd {
            Command::Put {
                namespace,
                key,
                value,
            } => {
                let ns = self.table.entry(namespace.clone()).or_default();
                match value {
                    Some(v) => ns.insert(key.clone(), v.clone()),
                    None => ns.remove(key),
                };
            }
            Command::Delete { namespace, key } => {
                if let Some(ns) = self.table.get_mut(namespace) {
                    ns.remove(key);
                }
            }
            Command::Admin(change) => {
                self.admin_seq += 1;
                self.admin.push_back((self.admin_seq, change.clone()));
                while self.admin.len() > ADMIN_KEPT {
                    self.admin.pop_front();
                }
            }
            Command::Seed { member, table } => {
                if self.seeded.insert(*member) {
                    for (namespace, entries) in table {
                        let ns = self.table.entry(namespace.clone()).or_default();
                        for (k, v) in entries {
                            ns.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                    }
                }
            }
        }
    }
}

rocketmq_raft::declare_config!(
    /// Log entries are KV commands; applying one answers nothing.
    pub TypeConfig: D = Command, R = ()
);

impl rocketmq_raft::Machine for KvAndAdmin {
    type C = TypeConfig;
    const NAME: &'static str = "the KV config and admin topic changes";

    fn apply(&mut self, cmd: &Command) {
        KvAndAdmin::apply(self, cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(&str, &str, &str)]) -> Table {
        let mut t = Table::new();
        for (ns, k, v) in entries {
            t.entry(ns.to_string())
                .or_default()
                .insert(k.to_string(), v.to_string());
        }
        t
    }

    #[test]
    fn a_seed_adds_only_what_the_group_lacks_and_only_once_per_member() {
        let mut state = KvAndAdmin::default();
        state.apply(&Command::Put {
            namespace: "ns".into(),
            key: "a".into(),
            value: Some("group".into()),
        });
        state.apply(&Command::Seed {
            member: 1,
            table: table(&[("ns", "a", "file"), ("ns", "b", "file")]),
        });
        assert_eq!(
            state.table,
            table(&[("ns", "a", "group"), ("ns", "b", "file")])
        );
        state.apply(&Command::Delete {
            namespace: "ns".into(),
            key: "b".into(),
        });
        // Offered again (a restart before it saw its seed applied): nothing comes back.
        state.apply(&Command::Seed {
            member: 1,
            table: table(&[("ns", "b", "file")]),
        });
        assert_eq!(state.table, table(&[("ns", "a", "group")]));
        assert_eq!(state.seeded, BTreeSet::from([1]));
    }

    #[test]
    fn a_put_without_a_value_removes_the_key_and_a_delete_keeps_the_namespace() {
        let mut state = KvAndAdmin::default();
        let put = |v: Option<&str>| Command::Put {
            namespace: "ns".into(),
            key: "k".into(),
            value: v.map(String::from),
        };
        state.apply(&put(Some("v")));
        state.apply(&put(None));
        assert_eq!(state.table["ns"].len(), 0);
        state.apply(&put(Some("v")));
        state.apply(&Command::Delete {
            namespace: "ns".into(),
            key: "k".into(),
        });
        assert!(state.table.contains_key("ns"));
    }
}
