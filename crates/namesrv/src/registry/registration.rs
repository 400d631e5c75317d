//! Registration: a broker joins its cluster and group, its queues are applied, its liveness is
//! refreshed, and what its next registration is compared with is remembered.
//!
//! A registration is applied in steps: [`Registry::plan`] works out which queues change while
//! route lookups go on (brokers re-register their whole table every 30 s and nearly all of it is
//! unchanged), and [`Registry::register`] applies the plan under the write lock. A broker's next
//! registration is compared with its last one ([`LastRegistration`]): an identical one is only a
//! liveness refresh ([`Registry::repeat`]), and a changed JSON table may be read as its
//! difference from the last ([`Registry::table_base`]), both only while the broker's group is as
//! that registration left it (its epoch). A member taking a lower id than its group's lowest is
//! told to the group (NOTIFY_MIN_BROKER_ID_CHANGE) when so configured.

use std::collections::HashSet;
use std::sync::Arc;

use rocketmq_wire::body::{BrokerData, RegisterBrokerBody, TableIndex, TopicConfig};

use super::queues::Queues;
use super::rounds::Counted;
use super::tables::{key, BrokerLive, ConnId, Registry, MASTER_ID, PERM_WRITE};
use crate::events::{version_name, Event, EventKind};
use crate::journal::{Cause, Entry};

pub const DEFAULT_BROKER_TIMEOUT_MS: i64 = 120_000;

/// Identifies a registration's content (headers and body).
pub type Fingerprint = u128;

/// A broker's last applied registration, as far as its next one is compared with it. It is
/// kept in the live entry of its cluster and address, which another group registering on the
/// same address shares: it speaks only for the group, id and connection that made it.
#[derive(Clone, Debug)]
pub struct LastRegistration {
    pub broker_name: String,
    pub broker_id: i64,
    pub conn: ConnId,
    /// Of the whole registration.
    pub fingerprint: Fingerprint,
    /// Of its headers but the body's checksum.
    pub headers: Fingerprint,
    /// The group's epoch right after it.
    pub epoch: u64,
    /// Its topic table's index, when it was read as JSON.
    pub table: Option<Arc<TableIndex>>,
}

/// What the next registration of a broker may be read against: its previous topic table,
/// valid while the group is at `epoch`.
#[derive(Clone, Debug)]
pub struct TableBase {
    pub table: Arc<TableIndex>,
    pub epoch: u64,
}

/// Who sends a registration, on which connection and when.
#[derive(Clone)]
pub struct Registrant {
    pub cluster: String,
    pub broker_addr: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub conn: ConnId,
    pub now_ms: i64,
}

pub struct Registration {
    pub from: Registrant,
    pub ha_server_addr: String,
    pub zone_name: Option<String>,
    pub timeout_ms: Option<i64>,
    /// `None` marks a 4.x broker, which does not send the field.
    pub enable_acting_master: Option<bool>,
    pub body: RegisterBrokerBody,
    pub version: i32,
    /// Topic configs the body lists: all of `body`'s, or more when it holds only changes.
    pub listed: usize,
    /// Set when `body` holds only the entries that differ from this table, which the broker
    /// registered last: the entries left out are applied already while the group is at its
    /// epoch.
    pub changes_since: Option<TableBase>,
    /// The body's headers (but the checksum), and its table's index, to remember.
    pub headers: Fingerprint,
    pub table: Option<Arc<TableIndex>>,
}

/// Config switches that change how a registration is applied.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegisterPolicy {
    pub notify_min_id: bool,
    /// `deleteTopicWithBrokerRegistration`: a full registration is the whole truth.
    pub delete_unlisted_topics: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum RegisterOutcome {
    Registered {
        master_addr: Option<String>,
        ha_server_addr: Option<String>,
    },
    /// A member with a newer state version holds this id; answered as success, ignored.
    Stale,
    /// A single-topic registration from an id the group does not know yet.
    Refused,
}

/// What NOTIFY_MIN_BROKER_ID_CHANGE tells brokers, and whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MinIdNotice {
    pub min_broker_id: i64,
    pub min_broker_addr: String,
    pub offline_broker_addr: Option<String>,
    pub ha_broker_addr: Option<String>,
    pub recipients: Vec<String>,
}

/// The queue changes a registration makes, worked out under a read lock so that the write lock
/// is held only to apply them: brokers re-register their whole table every 30 s and nearly all
/// of it is unchanged.
#[derive(Debug, Default)]
pub struct TopicPlan {
    /// Whether the broker speaks for its group's topics (a master, or the lowest slave of a
    /// 5.x group without one).
    applies: bool,
    /// Whether its mapping infos are to be applied (first registration, or a new version).
    mappings: bool,
    /// Indexes into the registration's topic configs whose queues must be set, with them.
    set: Vec<(usize, Queues)>,
    /// Whether, once applied, the group holds every listed topic as listed (or the broker does
    /// not speak for its group's topics at all). Only then may the broker's next registration
    /// be read as a difference from this one: an entry left out of that difference must be in
    /// the table already.
    pub faithful: bool,
    /// Topics the group must leave (`deleteTopicWithBrokerRegistration`).
    leave: Vec<String>,
}

fn queues(tc: &TopicConfig, perm: i32) -> Queues {
    Queues {
        read: tc.read_queue_nums,
        write: tc.write_queue_nums,
        perm,
        sys_flag: tc.topic_sys_flag,
    }
}

/// How a registration's address joined its group.
enum Joined {
    Member {
        min_id_changed: bool,
        /// The address did not hold this id in the group before.
        new_member: bool,
    },
    /// A member with a newer state version holds the id.
    Stale,
}

impl Registry {
    // ---- registration, in steps ----

    /// Works out which queues a registration changes, without changing anything.
    pub fn plan(&self, reg: &Registration, policy: RegisterPolicy) -> TopicPlan {
        let Registrant {
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ..
        } = &reg.from;
        let group = self.brokers.get(broker_name);
        let held = group.and_then(|bd| bd.broker_addrs.get(broker_id));
        let register_first = held.is_none_or(|a| a.is_empty());
        // The group's lowest id once this address holds `broker_id` (and no other id).
        let min_id = group
            .into_iter()
            .flat_map(|bd| bd.broker_addrs.iter())
            .filter(|(id, a)| *a != broker_addr || *id == broker_id)
            .map(|(id, _)| *id)
            .chain([*broker_id])
            .min();
        let old_version = reg.enable_acting_master.is_none();
        let is_master = *broker_id == MASTER_ID;
        let is_prime_slave = !old_version && !is_master && min_id == Some(*broker_id);
        if !(is_master || is_prime_slave) {
            // Such a broker never changes topics; becoming master or prime slave changes its
            // group, and with it the group's epoch that a difference read depends on.
            return TopicPlan {
                faithful: true,
                ..Default::default()
            };
        }
        let wrapper = &reg.body.wrapper;
        let version_changed = self
            .live
            .get(&key(cluster, broker_addr))
            .map(|l| l.data_version)
            != Some(wrapper.data_version);
        let acting_master = reg.enable_acting_master.unwrap_or(false);
        let mut plan = TopicPlan {
            applies: true,
            mappings: version_changed || register_first,
            faithful: true,
            ..Default::default()
        };
        if wrapper.mapping_info.is_empty()
            && policy.delete_unlisted_topics
            && !self.defers_pruning(reg)
        {
            let incoming: HashSet<&str> = wrapper
                .topic_configs
                .iter()
                .filter_map(|tc| tc.topic_name.as_deref())
                .collect();
            plan.leave = self
                .topics
                .iter()
                .filter(|(t, q)| !incoming.contains(t) && q.contains(broker_name))
                .map(|(t, _)| t.to_string())
                .collect();
        }
        // An unchanged broker only adds topics it is missing from.
        let unchanged = !(register_first || version_changed);
        for (i, tc) in wrapper.topic_configs.iter().enumerate() {
            let Some(topic) = tc.topic_name.as_deref() else {
                continue;
            };
            let current = self.topics.get(topic).and_then(|q| q.get(broker_name));
            let mut perm = tc.perm;
            if is_prime_slave && acting_master {
                perm &= !PERM_WRITE;
            }
            let wanted = queues(tc, perm);
            if current == Some(&wanted) {
                continue;
            }
            if unchanged && current.is_some() {
                // Java keeps what the table holds when the data version did not move (an admin
                // may have changed it since), so the table now differs from what was listed.
                plan.faithful = false;
                continue;
            }
            plan.set.push((i, wanted));
        }
        plan
    }

    /// Registers a broker with the queue changes `plan` worked out on the same state. Returns
    /// the outcome and the notice to send.
    pub fn register(
        &mut self,
        reg: Registration,
        plan: TopicPlan,
        policy: RegisterPolicy,
    ) -> (RegisterOutcome, Option<MinIdNotice>) {
        if self.refuses(&reg) {
            self.note(|| {
                let topic = reg
                    .body
                    .wrapper
                    .topic_configs
                    .first()
                    .and_then(|tc| tc.topic_name.clone())
                    .unwrap_or_default();
                registrant_entry(Cause::Refused, &reg).detail(format!(
                    "a registration of one topic ({topic}) from id {} that its group does not \
                     hold yet (the broker registers it whole first)",
                    reg.from.broker_id
                ))
            });
            return (RegisterOutcome::Refused, None);
        }
        let (min_id_changed, new_member) = match self.join_group(&reg) {
            Joined::Stale => {
                self.note(|| {
                    registrant_entry(Cause::Refused, &reg).detail(format!(
                        "another address holds id {} with a newer state version; answered as \
                         success and ignored",
                        reg.from.broker_id
                    ))
                });
                self.drop_live_if_unheld(&key(&reg.from.cluster, &reg.from.broker_addr), false);
                return (RegisterOutcome::Stale, None);
            }
            Joined::Member {
                min_id_changed,
                new_member,
            } => (min_id_changed, new_member),
        };
        if new_member {
            self.note(|| registrant_entry(Cause::Registered, &reg));
        }
        self.number_registration(&reg.from.broker_name, &reg.from.broker_addr);
        let changed_before = self.changes.topic_changes;
        let applies = plan.applies;
        let pruned = self.apply_topics(&reg, plan);
        if self.changes.topic_changes != changed_before {
            // Once per registration, not per topic: at 100k topics that would show. Stamped
            // too: another registrant speaking for the group (the same member registered in
            // another cluster) kept a table this one just changed.
            self.bump_group(&reg.from.broker_name);
            if !new_member {
                self.note(|| registrant_entry(Cause::Updated, &reg));
            }
        }
        self.refresh_live(&reg);
        self.set_filter_servers(&reg);
        let Registrant {
            cluster,
            broker_name,
            broker_id,
            broker_addr,
            ..
        } = &reg.from;
        if self.created.count + self.removed.count > 0 {
            self.tell_topics(
                &format!("registered by {broker_name} ({broker_addr})"),
                &format!("no longer listed by {broker_name} ({broker_addr})"),
            );
        }
        if applies {
            self.count_round(Counted {
                reg: &reg,
                prunes: policy.delete_unlisted_topics && reg.body.wrapper.mapping_info.is_empty(),
                pruned,
            });
        }
        let outcome = self.registered(cluster, broker_name, *broker_id);
        let notice = (min_id_changed && policy.notify_min_id)
            .then(|| self.min_id_notice(broker_name, &reg.ha_server_addr));
        (outcome, notice.flatten())
    }

    /// Java creates the group and the cluster entry before refusing; a refused registration
    /// here changes nothing, so that refusals cannot pile up empty groups.
    fn refuses(&self, reg: &Registration) -> bool {
        let id_known = self
            .brokers
            .get(&reg.from.broker_name)
            .is_some_and(|bd| bd.broker_addrs.contains_key(&reg.from.broker_id));
        !id_known && reg.listed == 1
    }

    /// Joins the cluster and the group under the registration's id, unless a member with a
    /// newer state version holds that id.
    fn join_group(&mut self, reg: &Registration) -> Joined {
        let Registrant {
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ..
        } = &reg.from;
        if self
            .clusters
            .entry(cluster.clone())
            .or_default()
            .insert(broker_name.clone())
        {
            self.changes.cluster_info = true;
        }
        let bd = self
            .brokers
            .entry(broker_name.clone())
            .or_insert_with(|| BrokerData::new(cluster, broker_name));
        let before = bd.clone();
        bd.enable_acting_master = reg.enable_acting_master.unwrap_or(false);
        bd.zone_name = reg.zone_name.clone();
        let prev_min = bd.broker_addrs.keys().next().copied().unwrap_or(0);
        let new_member = bd.broker_addrs.get(broker_id) != Some(broker_addr);
        // One address holds one id in a group (a slave switched to master on the same host).
        bd.broker_addrs
            .retain(|id, addr| addr != broker_addr || id == broker_id);
        let stale = bd
            .broker_addrs
            .get(broker_id)
            .filter(|holder| *holder != broker_addr)
            .and_then(|holder| self.live.get(&key(cluster, holder)))
            .is_some_and(|l| {
                let (held, offered) = (
                    l.data_version.state_version,
                    reg.body.wrapper.data_version.state_version,
                );
                // In controller mode the state version is the master epoch, and an epoch has one
                // master: a second address claiming id 0 at the holder's epoch is a broker that
                // read its id before a demotion bumped its version (seen with a thawed 5.5
                // master). Java lets it in; the route would then lose its real master until
                // that master's next registration, so the first claimant keeps the id.
                held > offered || (*broker_id == MASTER_ID && offered > 0 && held == offered)
            });
        let replaced = if stale {
            None
        } else {
            bd.broker_addrs
                .insert(*broker_id, broker_addr.clone())
                .filter(|old| old != broker_addr)
        };
        if *bd != before {
            self.changes.shared = true;
            self.changes.cluster_info = true;
            self.bump_group(broker_name);
        }
        if let Some(old) = replaced {
            self.forget_member(broker_name, &old);
        }
        if stale {
            Joined::Stale
        } else {
            if new_member {
                self.events.push(Event::new(
                    EventKind::BrokerJoined,
                    broker_addr.clone(),
                    format!(
                        "{broker_name} id {broker_id} in {cluster}, {}",
                        version_name(reg.version)
                    ),
                ));
            }
            Joined::Member {
                min_id_changed: *broker_id < prev_min,
                new_member,
            }
        }
    }

    /// Applies the plan's queue changes; returns what it pruned, with the queues it had.
    fn apply_topics(&mut self, reg: &Registration, plan: TopicPlan) -> Vec<(String, Queues)> {
        if !plan.applies {
            return Vec::new();
        }
        let broker_name = &reg.from.broker_name;
        let name = self.shared_name(broker_name);
        let mut pruned = Vec::with_capacity(plan.leave.len());
        for topic in plan.leave {
            if let Some(had) = self
                .topics
                .get(&topic)
                .and_then(|q| q.get(broker_name))
                .copied()
            {
                self.leave_topic(&topic, broker_name);
                pruned.push((topic, had));
            }
        }
        let configs = &reg.body.wrapper.topic_configs;
        for (i, queues) in plan.set {
            if let Some(topic) = configs.get(i).and_then(|tc| tc.topic_name.as_deref()) {
                self.set_topic_queues(topic, &name, queues);
            }
        }
        if plan.mappings {
            for (topic, info) in &reg.body.wrapper.mapping_info {
                let Some(bname) = info.bname.clone() else {
                    continue;
                };
                let slot = self.mappings.entry(topic.clone()).or_default();
                if slot.get(&bname) != Some(info) {
                    slot.insert(bname, info.clone());
                    self.changes.topic(topic);
                }
            }
        }
        pruned
    }

    fn refresh_live(&mut self, reg: &Registration) {
        let last_registration = self
            .live
            .get_mut(&key(&reg.from.cluster, &reg.from.broker_addr))
            .and_then(|l| l.last_registration.take());
        self.live.insert(
            key(&reg.from.cluster, &reg.from.broker_addr),
            BrokerLive {
                last_update_ms: reg.from.now_ms,
                timeout_ms: reg.timeout_ms.unwrap_or(DEFAULT_BROKER_TIMEOUT_MS),
                data_version: reg.body.wrapper.data_version,
                conn: reg.from.conn,
                ha_server_addr: reg.ha_server_addr.clone(),
                version: reg.version,
                last_registration,
            },
        );
    }

    fn set_filter_servers(&mut self, reg: &Registration) {
        let Some(list) = &reg.body.filter_server_list else {
            return;
        };
        let addr_key = key(&reg.from.cluster, &reg.from.broker_addr);
        let prev = if list.is_empty() {
            self.filter_servers.remove(&addr_key)
        } else {
            self.filter_servers.insert(addr_key, list.clone())
        };
        if prev.as_ref() != Some(list) && !(prev.is_none() && list.is_empty()) {
            self.changes.shared = true;
        }
    }

    fn min_id_notice(&self, broker_name: &str, ha_server_addr: &str) -> Option<MinIdNotice> {
        let bd = self.brokers.get(broker_name)?;
        let (min_id, min_addr) = bd
            .broker_addrs
            .iter()
            .next()
            .map(|(id, a)| (*id, a.clone()))
            .unwrap_or_default();
        let recipients = if bd.broker_addrs.len() == 1 {
            bd.broker_addrs.values().cloned().collect()
        } else {
            bd.broker_addrs
                .iter()
                .filter(|(id, _)| **id != min_id)
                .map(|(_, a)| a.clone())
                .collect()
        };
        Some(MinIdNotice {
            min_broker_id: min_id,
            min_broker_addr: min_addr,
            offline_broker_addr: None,
            ha_broker_addr: Some(ha_server_addr.to_string()),
            recipients,
        })
    }

    /// A registered broker's answer: a slave learns its live master and its HA address.
    fn registered(&self, cluster: &str, broker_name: &str, broker_id: i64) -> RegisterOutcome {
        let master = (broker_id != MASTER_ID)
            .then(|| self.brokers.get(broker_name)?.broker_addrs.get(&MASTER_ID))
            .flatten()
            .and_then(|master| Some((master, self.live.get(&key(cluster, master))?)));
        RegisterOutcome::Registered {
            master_addr: master.map(|(addr, _)| addr.clone()),
            ha_server_addr: master.map(|(_, live)| live.ha_server_addr.clone()),
        }
    }

    /// Applies a registration identical to the broker's last full one while its group is as
    /// that registration left it: the full path would change nothing, so only its liveness and
    /// connection are refreshed. Changes elsewhere in the cluster do not matter. `None` sends it
    /// down the full path.
    pub fn repeat(
        &mut self,
        reg: &Registrant,
        fingerprint: Fingerprint,
    ) -> Option<RegisterOutcome> {
        let last = self.last_registration(reg)?;
        if last.fingerprint != fingerprint {
            return None;
        }
        let live = self.live.get_mut(&key(&reg.cluster, &reg.broker_addr))?;
        live.last_update_ms = reg.now_ms;
        live.conn = reg.conn;
        self.number_registration(&reg.broker_name, &reg.broker_addr);
        Some(self.registered(&reg.cluster, &reg.broker_name, reg.broker_id))
    }

    /// The table a registration with these headers may be read against: the broker's last
    /// one, while the broker holds its id and its group is as that registration left it.
    pub fn table_base(&self, reg: &Registrant, headers: Fingerprint) -> Option<TableBase> {
        if self.needs_whole_tables(&reg.broker_name) {
            return None;
        }
        let last = self.last_registration(reg)?;
        if last.headers != headers {
            return None;
        }
        Some(TableBase {
            table: last.table.clone()?,
            epoch: last.epoch,
        })
    }

    /// Whether `base` is still what [`Registry::table_base`] gives.
    pub fn base_is_current(&self, reg: &Registrant, base: &TableBase) -> bool {
        self.last_registration(reg).is_some_and(|last| {
            last.epoch == base.epoch
                && last
                    .table
                    .as_ref()
                    .is_some_and(|t| Arc::ptr_eq(t, &base.table))
        })
    }

    /// The broker's last registration while it is still in force: the broker holds its id in
    /// its group and cluster, and nothing has changed the group since.
    fn last_registration(&self, reg: &Registrant) -> Option<&LastRegistration> {
        let group = self.brokers.get(&reg.broker_name)?;
        if group.broker_addrs.get(&reg.broker_id) != Some(&reg.broker_addr)
            || !self
                .clusters
                .get(&reg.cluster)
                .is_some_and(|names| names.contains(&reg.broker_name))
        {
            return None;
        }
        let epoch = self.group_epoch(&reg.broker_name);
        let live = self.live.get(&key(&reg.cluster, &reg.broker_addr))?;
        live.last_registration.as_ref().filter(|last| {
            last.epoch == epoch
                && last.broker_name == reg.broker_name
                && last.broker_id == reg.broker_id
                && last.conn == reg.conn
        })
    }

    /// Remembers a full registration with the group epoch it left.
    pub fn remember(
        &mut self,
        reg: &Registrant,
        fingerprint: Fingerprint,
        headers: Fingerprint,
        table: Option<Arc<TableIndex>>,
    ) {
        let epoch = self.group_epoch(&reg.broker_name);
        if let Some(live) = self.live.get_mut(&key(&reg.cluster, &reg.broker_addr)) {
            live.last_registration = Some(LastRegistration {
                broker_name: reg.broker_name.clone(),
                broker_id: reg.broker_id,
                conn: reg.conn,
                fingerprint,
                headers,
                epoch,
                table,
            });
        }
    }
}

/// A journal entry naming who registered, with the registration's data version, release and
/// connection.
fn registrant_entry(cause: Cause, reg: &Registration) -> Entry {
    let r = &reg.from;
    let v = &reg.body.wrapper.data_version;
    Entry::new(cause)
        .broker(&r.cluster, &r.broker_name, &r.broker_addr, r.broker_id)
        .detail(format!(
            "data version {}/{} (state {}), {}, connection {}",
            v.counter,
            v.timestamp,
            v.state_version,
            version_name(reg.version),
            r.conn
        ))
}
