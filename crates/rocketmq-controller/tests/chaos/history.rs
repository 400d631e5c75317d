//! What a schedule saw, and the program that judges it. Everything the brokers and the sampler
//! are told is recorded with the real time it was asked and answered; the checks below read only
//! this record, so that a violation is found by the program, never by a reader of the logs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The request whose answer told a group's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// 1004, a linearizable read on the leader.
    Read,
    /// 1002, an election that answered a master.
    Elect,
    /// 1001, an accepted change of the sync-state set.
    Alter,
    /// 1008, a role-change notice the controller pushed to a broker.
    Notice,
}

/// A group's state as one answer gave it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub group: String,
    pub op: Op,
    /// The node that answered, as far as the broker knows.
    pub node: Option<usize>,
    pub start: Instant,
    pub end: Instant,
    pub master: Option<i64>,
    pub master_epoch: i64,
    pub set: BTreeSet<i64>,
    pub set_epoch: i64,
}

/// One look at who claims to lead: every node asked at once.
#[derive(Clone, Debug)]
pub struct Claims {
    pub at: Instant,
    pub leaders: Vec<usize>,
    /// The nodes that named a leader, themselves or another: where brokers would be sent.
    pub naming: Vec<usize>,
}

/// A node that, by what the schedule did to it, has no quorum from `from` until `to`.
#[derive(Clone, Debug)]
pub struct Alone {
    pub node: usize,
    pub from: Instant,
    pub to: Instant,
}

#[derive(Default)]
pub struct History {
    seen: Mutex<Vec<Seen>>,
    grants: Mutex<Vec<(String, i64, String)>>,
    claims: Mutex<Vec<Claims>>,
    alters: Mutex<Vec<(String, Instant)>>,
    alone: Mutex<Vec<Alone>>,
    /// What the schedule itself found (a heal that took too long, a broker left stuck).
    found: Mutex<Vec<String>>,
}

/// How long a node without a quorum may go on claiming to lead: the election timeout (at most
/// 2 s) plus the lease (1 s), with room for a loaded machine.
pub const STEP_DOWN_LIMIT: Duration = Duration::from_millis(3_500);

impl History {
    pub fn saw(&self, seen: Seen) {
        self.seen.lock().unwrap().push(seen);
    }

    pub fn granted(&self, group: &str, id: i64, check_code: &str) {
        self.grants
            .lock()
            .unwrap()
            .push((group.to_string(), id, check_code.to_string()));
    }

    pub fn claimed(&self, claims: Claims) {
        self.claims.lock().unwrap().push(claims);
    }

    pub fn altered(&self, group: &str, at: Instant) {
        self.alters.lock().unwrap().push((group.to_string(), at));
    }

    pub fn alone(&self, alone: Alone) {
        self.alone.lock().unwrap().push(alone);
    }

    pub fn violation(&self, what: String) {
        self.found.lock().unwrap().push(what);
    }

    /// When `group`'s set was changed between `from` and `to`, in order.
    pub fn alters(&self, group: &str, from: Instant, to: Instant) -> Vec<Instant> {
        let mut at: Vec<Instant> = self
            .alters
            .lock()
            .unwrap()
            .iter()
            .filter(|(g, at)| g == group && *at >= from && *at <= to)
            .map(|(_, at)| *at)
            .collect();
        at.sort();
        at
    }

    /// When a node other than `old` was first seen claiming to lead, between `from` and `to`.
    pub fn new_leader(&self, old: usize, from: Instant, to: Instant) -> Option<Instant> {
        self.claims
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.at >= from && c.at <= to && c.leaders.iter().any(|l| *l != old))
            .map(|c| c.at)
            .min()
    }

    /// How many answers (notices among them), ids granted and looks at the leaders were
    /// recorded.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let seen = self.seen.lock().unwrap();
        (
            seen.len(),
            seen.iter().filter(|s| s.op == Op::Notice).count(),
            self.grants.lock().unwrap().len(),
            self.claims.lock().unwrap().len(),
        )
    }

    /// Every violation of the invariants in the record, described; none is the goal.
    pub fn check(&self, origin: Instant) -> Vec<String> {
        let seen = self.seen.lock().unwrap().clone();
        let grants = self.grants.lock().unwrap().clone();
        let claims = self.claims.lock().unwrap().clone();
        let alone = self.alone.lock().unwrap().clone();
        let mut found = self.found.lock().unwrap().clone();
        let at = |t: Instant| format!("{:.1}s", t.duration_since(origin).as_secs_f64());

        // One master per (group, master epoch); one set per (group, set epoch).
        let mut masters: BTreeMap<(&str, i64), BTreeSet<Option<i64>>> = BTreeMap::new();
        let mut sets: BTreeMap<(&str, i64), BTreeSet<&BTreeSet<i64>>> = BTreeMap::new();
        for s in &seen {
            masters
                .entry((&s.group, s.master_epoch))
                .or_default()
                .insert(s.master);
            sets.entry((&s.group, s.set_epoch))
                .or_default()
                .insert(&s.set);
        }
        for ((group, epoch), who) in &masters {
            if who.len() > 1 {
                found.push(format!("{group}: master epoch {epoch} had masters {who:?}"));
            }
        }
        for ((group, epoch), which) in &sets {
            if which.len() > 1 {
                found.push(format!(
                    "{group}: sync-state set epoch {epoch} had sets {which:?}"
                ));
            }
        }

        // An id granted to one broker (check code) is never granted to another.
        let mut owners: BTreeMap<(&str, i64), BTreeSet<&str>> = BTreeMap::new();
        for (group, id, code) in &grants {
            owners.entry((group, *id)).or_default().insert(code);
        }
        for ((group, id), codes) in &owners {
            if codes.len() > 1 {
                found.push(format!("{group}: id {id} granted to {codes:?}"));
            }
        }

        for s in &seen {
            // The master is in its set, and the set holds only ids some broker was granted.
            if let Some(m) = s.master {
                if !s.set.contains(&m) {
                    found.push(format!(
                        "{}: master {m} not in its set {:?} ({:?} at {})",
                        s.group,
                        s.set,
                        s.op,
                        at(s.end)
                    ));
                }
            }
            for id in &s.set {
                if !owners.contains_key(&(s.group.as_str(), *id)) {
                    found.push(format!(
                        "{}: set {:?} names id {id} that no broker was granted",
                        s.group, s.set
                    ));
                }
            }
            // A clean election picks a member of the set it replaces: the set one epoch
            // before a new master's own set, when that set belonged to an older master epoch.
            if let Some(m) = s.master {
                if s.set.len() == 1 && s.set.contains(&m) {
                    for prev in seen.iter().filter(|p| {
                        p.group == s.group
                            && !p.set.is_empty()
                            && p.set_epoch + 1 == s.set_epoch
                            && p.master_epoch < s.master_epoch
                    }) {
                        if !prev.set.contains(&m) {
                            found.push(format!(
                                "{}: master {m} of epoch {} was elected outside the set {:?}",
                                s.group, s.master_epoch, prev.set
                            ));
                        }
                    }
                }
            }
        }

        // Epochs never go backwards across answers that follow one another in real time.
        let mut by_group: BTreeMap<&str, Vec<&Seen>> = BTreeMap::new();
        for s in seen.iter().filter(|s| s.op != Op::Notice) {
            by_group.entry(&s.group).or_default().push(s);
        }
        for (group, list) in by_group {
            let mut ended: Vec<&Seen> = list.clone();
            ended.sort_by_key(|s| s.end);
            // The highest master epoch and the highest set epoch among the answers that ended
            // before each point, with the answers that showed them.
            let mut highest: Vec<(&Seen, &Seen)> = Vec::with_capacity(ended.len());
            for s in &ended {
                let (m, e) = highest.last().copied().unwrap_or((s, s));
                highest.push((
                    if s.master_epoch > m.master_epoch {
                        s
                    } else {
                        m
                    },
                    if s.set_epoch > e.set_epoch { s } else { e },
                ));
            }
            for s in &list {
                let before = ended.partition_point(|e| e.end < s.start);
                if before == 0 {
                    continue;
                }
                let (m, e) = highest[before - 1];
                let back = if s.master_epoch < m.master_epoch {
                    Some(("master", m, m.master_epoch, s.master_epoch))
                } else if s.set_epoch < e.set_epoch {
                    Some(("set", e, e.set_epoch, s.set_epoch))
                } else {
                    None
                };
                if let Some((which, t, was, now)) = back {
                    found.push(format!(
                        "{group}: {which} epoch went back from {was} ({:?} ended {} from n{:?}) \
                         to {now} ({:?} started {} from n{:?})",
                        t.op,
                        at(t.end),
                        t.node,
                        s.op,
                        at(s.start),
                        s.node
                    ));
                }
            }
        }

        // Never two nodes claiming at once; never a node without a quorum for long.
        for c in &claims {
            if c.leaders.len() > 1 {
                found.push(format!(
                    "{} nodes {:?} all claim to lead",
                    at(c.at),
                    c.leaders
                ));
            }
            for a in &alone {
                if c.at < a.from + STEP_DOWN_LIMIT || c.at >= a.to {
                    continue;
                }
                let what = if c.leaders.contains(&a.node) {
                    "claims to lead"
                } else if c.naming.contains(&a.node) {
                    "names a leader"
                } else {
                    continue;
                };
                found.push(format!(
                    "{} n{} {what} {:.1}s after it lost its quorum",
                    at(c.at),
                    a.node,
                    c.at.duration_since(a.from).as_secs_f64()
                ));
            }
        }
        // The same fault seen by many answers is one finding.
        let mut once = std::collections::HashSet::new();
        found.retain(|f| once.insert(f.clone()));
        found
    }
}
