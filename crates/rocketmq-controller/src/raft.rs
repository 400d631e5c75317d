//! Replication of the controller's state with openraft: the type configuration and the wire codes
//! of the controller's group. The log and snapshot store and the transport between nodes are
//! `rocketmq_raft`'s, which the controller's state plugs into as a [`rocketmq_raft::Machine`].

use crate::replicated::{Command, CommandReply, ControllerState};

rocketmq_raft::declare_config!(
    /// Log entries are controller commands; applying one answers the request it carries.
    pub TypeConfig: D = Command, R = CommandReply
);

pub type Applied = rocketmq_raft::Applied<ControllerState>;

impl rocketmq_raft::Machine for ControllerState {
    type C = TypeConfig;
    const NAME: &'static str = "the controller state";

    fn apply(&mut self, cmd: &Command) -> CommandReply {
        ControllerState::apply(self, cmd)
    }
}

/// The codes the group's Raft traffic travels under.
pub const RAFT_CODES: rocketmq_raft::Codes = rocketmq_raft::Codes {
    append_entries: codes::RAFT_APPEND_ENTRIES,
    vote: codes::RAFT_VOTE,
    install_snapshot: codes::RAFT_INSTALL_SNAPSHOT,
    probe: codes::GROUP_PROBE,
    take_leadership: codes::TAKE_LEADERSHIP,
};

/// Request codes of the Raft traffic between our own nodes, on the peer port.
pub use rocketmq_wire::codes::peer::controller as codes;

#[cfg(test)]
mod tests {
    use openraft::testing::{StoreBuilder, Suite};
    use openraft::StorageError;

    use super::*;

    type LogStore = rocketmq_raft::LogStore<TypeConfig>;
    type StateMachine = rocketmq_raft::StateMachine<ControllerState>;

    fn io_error(e: impl std::fmt::Display) -> StorageError<u64> {
        openraft::StorageIOError::write(openraft::AnyError::error(e.to_string())).into()
    }

    /// A fresh store in a directory of its own, kept as long as the suite uses it.
    struct Fresh;

    impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Fresh {
        async fn build(
            &self,
        ) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<u64>> {
            let dir = tempfile::tempdir().map_err(io_error)?;
            let db = rocketmq_raft::store::open(dir.path()).map_err(io_error)?;
            let sm = StateMachine::open(db.clone()).map_err(io_error)?;
            Ok((dir, LogStore::new(db), sm))
        }
    }

    #[test]
    fn the_store_passes_openraft_s_own_storage_suite() {
        Suite::test_all(Fresh).unwrap();
    }

    /// Snapshots stored before the store became generic are read back under these names.
    #[test]
    fn a_snapshot_keeps_its_field_names() {
        let json = serde_json::to_value(Applied::default()).unwrap();
        let names: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(names, ["last_applied", "membership", "state"]);
    }
}
