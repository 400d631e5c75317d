//! NOTIFY_BROKER_ROLE_CHANGED (1008): a oneway message to each live member of a group whose
//! master changed, so that brokers switch roles at once rather than at their next 5 s poll.

use std::time::Duration;

use rocketmq_wire::body::{RoleChangeNotifyEntry, SyncStateSet};
use rocketmq_wire::client::Client;
use rocketmq_wire::RemotingCommand;

use crate::replicated::RoleChange;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Tells the broker at `addr`. Each notice on a connection of its own: a broker that restarted
/// since the last notice would leave a kept connection half-dead, and the write into it would
/// vanish without an error. Notices are rare (one per member per election), a connection per
/// notice costs nothing.
pub fn notify(addr: String, change: RoleChange) {
    tokio::spawn(async move {
        let request = role_changed_request(&change);
        let Ok(client) = Client::connect_within(&addr, CONNECT_TIMEOUT).await else {
            tracing::warn!(broker = %addr, "cannot reach a broker to tell it its role changed");
            return;
        };
        if client.send_oneway(request).await.is_err() {
            tracing::warn!(broker = %addr, "lost the connection to a broker while telling it its role changed");
        }
    });
}

/// The request Java's controller sends: header fields of the new master, body the sync-state set.
pub fn role_changed_request(change: &RoleChange) -> RemotingCommand {
    RoleChangeNotifyEntry {
        master_address: change.master_address.clone(),
        master_broker_id: change.master_broker_id,
        master_epoch: change.master_epoch,
        sync_state_set: SyncStateSet {
            sync_state_set: change.sync_state_set.clone(),
            sync_state_set_epoch: change.sync_state_set_epoch,
        },
    }
    .to_command()
}
