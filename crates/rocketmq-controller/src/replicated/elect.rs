//! The master election policy (Java's DefaultElectPolicy), decided from the liveness facts the
//! proposing node recorded in the command rather than from a live heartbeat table, so every
//! replica of the log picks the same master.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::LiveBroker;

/// Picks a master among the in-sync replicas, then (for an unclean election) among all
/// replicas. `None` when no candidate is alive, or the preferred broker is not.
pub(super) fn elect(
    sync_state_set: &BTreeSet<i64>,
    all_replicas: Option<&BTreeSet<i64>>,
    live: &BTreeMap<i64, LiveBroker>,
    old_master: Option<i64>,
    preferred: Option<i64>,
) -> Option<i64> {
    try_elect(sync_state_set, live, old_master, preferred)
        .or_else(|| all_replicas.and_then(|all| try_elect(all, live, old_master, preferred)))
}

fn try_elect(
    candidates: &BTreeSet<i64>,
    live: &BTreeMap<i64, LiveBroker>,
    old_master: Option<i64>,
    preferred: Option<i64>,
) -> Option<i64> {
    let alive: Vec<(i64, &LiveBroker)> = candidates
        .iter()
        .filter_map(|id| live.get(id).map(|info| (*id, info)))
        .collect();
    if alive.is_empty() {
        return None;
    }
    let is_alive = |id: i64| alive.iter().any(|(candidate, _)| *candidate == id);
    if let Some(old) = old_master {
        // A designation naming someone else must be able to move the master off a live one.
        if is_alive(old) && (preferred.is_none() || preferred == Some(old)) {
            return Some(old);
        }
    }
    if let Some(p) = preferred {
        return is_alive(p).then_some(p);
    }
    // Java compares offsets by casting their difference to int, which flips the order when two
    // offsets are more than 2 GiB apart, and its TreeSet silently drops candidates that tie; a
    // plain lexicographic key has neither problem, and ties go to the lowest id.
    alive
        .iter()
        .min_by_key(|(id, info)| {
            (
                Reverse(info.epoch),
                Reverse(info.max_offset),
                info.election_priority,
                *id,
            )
        })
        .map(|(id, _)| *id)
}
