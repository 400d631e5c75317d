//! What happened lately on this node that an operator looks for after a failover: master
//! elections with their cause and outcome, and this node gaining or losing leadership. Kept
//! per node (a follower's list starts when it becomes leader) and bounded.

use std::collections::VecDeque;

use parking_lot::Mutex;
use serde::Serialize;

/// Entries kept; older ones are dropped.
const KEPT: usize = 100;

#[derive(Clone, Debug, Serialize)]
pub struct Happening {
    pub at_ms: i64,
    /// `election` or `leadership`.
    pub kind: &'static str,
    /// The broker group, or this node.
    pub of: String,
    /// The outcome, with the reason the election was held.
    pub detail: String,
}

#[derive(Default)]
pub struct Recent(Mutex<VecDeque<Happening>>);

impl Recent {
    pub fn note(&self, kind: &'static str, of: impl Into<String>, detail: impl Into<String>) {
        let mut kept = self.0.lock();
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(Happening {
            at_ms: rocketmq_wire::clock::now_ms(),
            kind,
            of: of.into(),
            detail: detail.into(),
        });
    }

    /// Newest first, at most `max`.
    pub fn newest(&self, max: usize) -> Vec<Happening> {
        self.0.lock().iter().rev().take(max).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_keeps_the_newest_hundred_newest_first() {
        let recent = Recent::default();
        for i in 0..150 {
            recent.note("election", format!("g{i}"), "new master");
        }
        let all = recent.newest(usize::MAX);
        assert_eq!(all.len(), KEPT);
        assert_eq!(all[0].of, "g149");
        assert_eq!(all[KEPT - 1].of, "g50");
        assert_eq!(recent.newest(3).len(), 3);
    }
}
