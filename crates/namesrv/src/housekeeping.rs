//! Background work: the expiry scan of silent brokers and the batch unregistration worker.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::events::{Event, EventKind};
use crate::notify;
use crate::registry::{Expired, Expiry, Unregistration};
use crate::state::State;
use rocketmq_http::page::seconds;
use rocketmq_wire::clock::now_ms;

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
    tokio::spawn(keep_topic_lists_ready(state.clone(), shutdown.clone()));
    tokio::spawn(crate::memory::release_after_registrations(shutdown.clone()));
    tokio::spawn(unregister_worker(state, queue, shutdown));
}

/// How often the topic lists' keeper looks whether they are older than the table.
const LISTS_TICK: Duration = Duration::from_millis(200);
/// Changes still coming this long after the lists fell behind are not waited out any longer.
const LISTS_MAX_WAIT: Duration = Duration::from_secs(2);

/// Rebuilds the topic lists and counts once changes pause (a tick without one), or every
/// [`LISTS_MAX_WAIT`] while they go on, so that a console's next ask, or the status page's next
/// render, finds them ready instead of waiting for the build (most of a second at a million
/// topics).
async fn keep_topic_lists_ready(state: Arc<State>, shutdown: CancellationToken) {
    let mut seen = state.routes.lists_generation();
    let mut behind_since: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(LISTS_TICK) => {}
            _ = shutdown.cancelled() => return,
        }
        let generation = state.routes.lists_generation();
        let quiet = generation == seen;
        seen = generation;
        if !state.routes.topic_lists_stale() {
            behind_since = None;
            continue;
        }
        let since = *behind_since.get_or_insert_with(tokio::time::Instant::now);
        if quiet || since.elapsed() >= LISTS_MAX_WAIT {
            let state = state.clone();
            let _ = tokio::task::spawn_blocking(move || state.routes.refresh_topic_lists()).await;
            behind_since = None;
        }
    }
}

/// Expires every broker whose deadline passed: its connection is closed and it is removed.
/// Which brokers expired, and their removals, are decided under one lock, so that a
/// registration landing at the deadline is either seen (and the broker kept) or numbered after
/// the removals (and they leave it alone).
pub fn scan(state: &State) {
    // Going away, the table is kept as the brokers last left it for the snapshot written at
    // exit: brokers stop registering with a NameServer that answers GO_AWAY.
    if state.is_shutting_down() {
        return;
    }
    state.routes.change(|r| r.end_quiet_rounds(now_ms()));
    let Expiry { expired, leaving } = state.routes.change(|r| r.expire(now_ms()));
    if expired.is_empty() {
        return;
    }
    state.metrics.expired(expired.len());
    for Expired {
        key,
        conn,
        silent_ms,
        timeout_ms,
    } in &expired
    {
        info!(cluster = %key.cluster, addr = %key.addr, "broker expired");
        state.close_connection(*conn);
        let detail = format!(
            "in {}: no heartbeat for {} (timeout {})",
            key.cluster,
            seconds(*silent_ms),
            seconds(*timeout_ms)
        );
        state.events.record(Event::new(
            EventKind::BrokerExpired,
            key.addr.clone(),
            detail,
        ));
    }
    state.queue_unregistrations(leaving);
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
        let done = state
            .routes
            .change(|r| r.unregister(&batch, notify_enabled));
        state.metrics.unregistered(batch.len() - done.stale);
        state.metrics.stale_unregistrations_ignored(done.stale);
        for request in &batch {
            info!(cluster = %request.cluster, addr = %request.broker_addr, name = %request.broker_name, "broker unregistered");
        }
        if done.stale > 0 {
            info!(
                stale = done.stale,
                "unregistrations left unapplied: their brokers registered again after them"
            );
        }
        for notice in done.notices {
            notify::min_broker_id_changed(notice);
        }
    }
}
