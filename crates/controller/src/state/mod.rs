//! Placeholder of the state machine's interface, replaced by the real module.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveBroker {
    pub broker_id: i64,
    pub epoch: i32,
    pub max_offset: i64,
    pub election_priority: i32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    ApplyBrokerId {
        cluster_name: String,
        broker_name: String,
        applied_broker_id: i64,
        register_check_code: String,
    },
    RegisterBroker {
        cluster_name: String,
        broker_name: String,
        broker_id: i64,
        broker_address: String,
        alive: BTreeSet<i64>,
    },
    AlterSyncStateSet {
        broker_name: String,
        master_broker_id: i64,
        master_epoch: i32,
        new_sync_state_set: BTreeSet<i64>,
        sync_state_set_epoch: i32,
        alive: BTreeSet<i64>,
    },
    ElectMaster {
        broker_name: String,
        broker_id: Option<i64>,
        designate_elect: bool,
        unclean: bool,
        live: BTreeMap<i64, LiveBroker>,
    },
    CleanBrokerData {
        cluster_name: Option<String>,
        broker_name: String,
        ids_to_clean: Option<String>,
        clean_living_broker: bool,
        alive: BTreeSet<i64>,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub code: i32,
    pub remark: Option<String>,
    pub fields: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub role_change: Option<RoleChange>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleChange {
    pub cluster_name: String,
    pub broker_name: String,
    pub master_broker_id: Option<i64>,
    pub master_address: Option<String>,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub sync_state_set: BTreeSet<i64>,
    pub members: BTreeMap<i64, String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct GroupView {
    pub cluster_name: String,
    pub broker_name: String,
    pub master_broker_id: Option<i64>,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub sync_state_set: Vec<i64>,
    pub brokers: Vec<(i64, String)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerState {}

impl ControllerState {
    pub fn apply(&mut self, _cmd: &Command) -> Reply {
        Reply::default()
    }
    pub fn next_broker_id(&self, _c: &str, _b: &str) -> Reply {
        Reply::default()
    }
    pub fn replica_info(&self, _b: &str) -> Reply {
        Reply::default()
    }
    pub fn sync_state_data(
        &self,
        _n: &[String],
        _alive: &dyn Fn(&str, &str, i64) -> bool,
    ) -> Reply {
        Reply::default()
    }
    pub fn groups_needing_reelection(
        &self,
        _alive: &dyn Fn(&str, &str, i64) -> bool,
    ) -> Vec<String> {
        Vec::new()
    }
    pub fn cluster_of(&self, _b: &str) -> Option<&str> {
        None
    }
    pub fn master_of(&self, _b: &str) -> Option<(i64, i32)> {
        None
    }
    pub fn broker_id_of(&self, _b: &str, _a: &str) -> Option<i64> {
        None
    }
    pub fn groups(&self) -> Vec<GroupView> {
        Vec::new()
    }
}

pub fn parse_sync_state_set(_body: &[u8]) -> Option<(BTreeSet<i64>, i32)> {
    None
}
pub fn parse_broker_names(_body: &[u8]) -> Option<Vec<String>> {
    None
}
pub fn sync_state_set_body(_set: &BTreeSet<i64>, _epoch: i32) -> Vec<u8> {
    Vec::new()
}
