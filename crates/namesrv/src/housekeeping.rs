//! Background work: the expiry scan of silent brokers and the batch unregistration worker.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::events::{seconds, Event, EventKind};
use crate::notify;
use crate::registry::{BrokerAddrKey, Unregistration};
use crate::state::{now_ms, State};

const FIRST_SCAN_DELAY: Duration = Duration::from_secs(5);

pub fn spawn(
    state: Arc<State>,
    queue: mpsc::Receiver<Unregistration>,
    shutdown: CancellationToken,
) {
    let interval_ms = state
        .config
        .settings()
        .server
        .scan_not_active_broker_interval
        .max(1) as u64;
    let scanner_state = state.clone();
    let scanner_shutdown = shutdown.clone();
    tokio::spawn(async move {
        let scans = async {
            // Brokers restored from a snapshot that expired while the server was down go now.
            scan(&scanner_state);
            tokio::time::sleep(FIRST_SCAN_DELAY).await;
            loop {
                scan(&scanner_state);
                tokio::time::sleep(Duration::from_millis(interval_ms)).await;
            }
        };
        tokio::select! {
            _ = scans => {}
            _ = scanner_shutdown.cancelled() => {}
        }
    });
    tokio::spawn(unregister_worker(state, queue, shutdown));
}

/// Expires every broker whose deadline passed: its connection is closed and it is removed.
pub fn scan(state: &State) {
    let now = now_ms();
    let expired = state.routes.read(|r| {
        r.expired(now)
            .into_iter()
            .map(|(key, conn)| {
                let silence = r
                    .live(&key.cluster, &key.addr)
                    .map(|l| (now - l.last_update_ms, l.timeout_ms));
                (key, conn, silence)
            })
            .collect::<Vec<_>>()
    });
    if expired.is_empty() {
        return;
    }
    state.metrics.expired(expired.len());
    for (key, conn, silence) in &expired {
        info!(cluster = %key.cluster, addr = %key.addr, "broker expired");
        state.close_connection(*conn);
        let detail = match silence {
            Some((silent, timeout)) => format!(
                "in {}: no heartbeat for {} (timeout {})",
                key.cluster,
                seconds(*silent),
                seconds(*timeout)
            ),
            None => format!("in {}", key.cluster),
        };
        state.events.record(Event::new(
            EventKind::BrokerExpired,
            key.addr.clone(),
            detail,
        ));
    }
    let keys: Vec<BrokerAddrKey> = expired.into_iter().map(|(k, ..)| k).collect();
    state.unregister_live(&keys);
}

/// Takes one request, drains whatever else is queued, and applies them as one batch.
async fn unregister_worker(
    state: Arc<State>,
    mut queue: mpsc::Receiver<Unregistration>,
    shutdown: CancellationToken,
) {
    loop {
        let first = tokio::select! {
            r = queue.recv() => r,
            _ = shutdown.cancelled() => None,
        };
        let Some(first) = first else { return };
        let mut batch = vec![first];
        while let Ok(more) = queue.try_recv() {
            batch.push(more);
        }
        let notify_enabled = state.config.settings().server.notify_min_broker_id_changed;
        let notices = state
            .routes
            .change(|r| r.unregister(&batch, notify_enabled));
        state.metrics.unregistered(batch.len());
        for request in &batch {
            info!(cluster = %request.cluster, addr = %request.broker_addr, name = %request.broker_name, "broker unregistered");
        }
        for notice in notices {
            notify::min_broker_id_changed(notice);
        }
    }
}
