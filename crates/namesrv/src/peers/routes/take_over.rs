//! Taking a broker's registration over from a peer: replayed here as a registration of no
//! connection, dated as the peer last heard the broker.

use rocketmq_wire::body::{DataVersion, RegisterBrokerBody, TopicConfigWrapper};

use super::pull::{self, Record};
use super::PEER_CONNECTION;
use crate::peers::Local;
use crate::registry::{RegisterOutcome, Registrant, Registration};

/// Replays a peer's registration of a broker here, as a registration of no connection: the
/// broker joins its group as the peer holds it, the group's topics become the peer's exactly
/// (a registration at the data version held here would keep topics the peer no longer routes,
/// and their old permissions), and the broker is dated as the peer last heard it. False if it
/// was refused.
pub(super) fn take_over(state: &dyn Local, rec: &Record, peer: &str) -> bool {
    let h = &rec.heard;
    let topics = match pull::read_topics(&rec.topics) {
        Ok(topics) => topics,
        Err(why) => {
            tracing::warn!(peer, broker = %h.name, addr = %h.addr, %why, "a peer's registration of a broker was unreadable");
            return false;
        }
    };
    let (state_version, timestamp, counter) = h.version;
    let reg = Registration {
        from: Registrant {
            cluster: h.cluster.clone(),
            broker_addr: h.addr.clone(),
            broker_name: h.name.clone(),
            broker_id: h.id,
            conn: PEER_CONNECTION,
            now_ms: rocketmq_wire::clock::now_ms(),
        },
        ha_server_addr: rec.ha_server_addr.clone(),
        zone_name: rec.zone.clone(),
        timeout_ms: Some(rec.timeout_ms),
        enable_acting_master: Some(rec.acting_master),
        body: RegisterBrokerBody {
            wrapper: TopicConfigWrapper {
                data_version: DataVersion {
                    counter,
                    state_version,
                    timestamp,
                },
                ..TopicConfigWrapper::default()
            },
            filter_server_list: None,
        },
        version: rec.protocol,
        // Never taken for a single-topic registration of a member not known yet, which is
        // refused: the peer accepted the member's whole registration.
        listed: usize::MAX,
        changes_since: None,
        headers: 0,
        table: None,
    };
    let notify_min_id = state.notify_min_broker_id_changed();
    let (outcome, notice) =
        state
            .routes()
            .adopt(peer, reg, &topics, notify_min_id, (h.last_ms, h.topics_ms));
    if let Some(notice) = notice {
        crate::notify::min_broker_id_changed(notice);
    }
    match outcome {
        RegisterOutcome::Registered { .. } => {
            tracing::debug!(peer, broker = %h.name, addr = %h.addr, "took a broker's registration over from a peer");
            true
        }
        // A member with a newer state version holds the id here: the peer is behind.
        RegisterOutcome::Stale => false,
        RegisterOutcome::Refused => {
            tracing::warn!(peer, broker = %h.name, addr = %h.addr, "a peer's registration of a broker was refused");
            false
        }
    }
}
