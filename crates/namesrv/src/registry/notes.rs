//! What the registry tells the route journal (`journal`): each mutation notes its cause as an
//! entry, every topic whose route it changes is noted as a move (at the one place all topic
//! changes pass, `Registry::rehash`), and when the mutation ends the moves join the entry that
//! names their group.

use std::collections::HashMap;
use std::sync::Arc;

use super::queues::Queues;
use super::tables::Registry;
use crate::journal::{Cause, Entry, Packed};

/// The notes of the mutations since the last [`Registry::take_notes`].
#[derive(Default)]
pub struct Notes {
    entries: Vec<Entry>,
    moves: Packed,
    /// Who asked for the mutations under way (an admin's address), stamped on their entries.
    by: Option<String>,
    /// The mutation under way takes a peer NameServer's word of a broker.
    from_peer: bool,
}

fn note_of(q: Queues) -> [i32; 3] {
    [q.read, q.write, q.perm]
}

impl Registry {
    /// Starts (or stops) noting changes for the route journal.
    pub fn keep_notes(&mut self, on: bool) {
        self.notes = on.then(Notes::default);
    }

    /// Runs `f` with its entries stamped as asked by `by`.
    pub fn asked_by<R>(&mut self, by: Option<String>, f: impl FnOnce(&mut Self) -> R) -> R {
        let before = match &mut self.notes {
            Some(notes) => std::mem::replace(&mut notes.by, by),
            None => None,
        };
        let out = f(self);
        if let Some(notes) = &mut self.notes {
            notes.by = before;
        }
        out
    }

    /// Runs `f`, which takes the word of the peer NameServer at `peer`.
    pub fn from_peer<R>(&mut self, peer: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        if let Some(notes) = &mut self.notes {
            notes.from_peer = true;
        }
        let out = self.asked_by(Some(format!("peer NameServer {peer}")), f);
        if let Some(notes) = &mut self.notes {
            notes.from_peer = false;
        }
        out
    }

    /// Notes a change with its cause.
    pub(super) fn note(&mut self, entry: impl FnOnce() -> Entry) {
        if let Some(notes) = &mut self.notes {
            let mut entry = entry();
            if notes.from_peer && matches!(entry.cause(), Cause::Registered | Cause::Updated) {
                entry.cause = Some(Cause::TakenOver);
            }
            if entry.by.is_none() {
                entry.by = notes.by.clone();
            }
            notes.entries.push(entry);
        }
    }

    /// Notes that `topic`'s route on `group` went from `was` to `now`.
    pub(super) fn note_move(
        &mut self,
        topic: &str,
        group: &Arc<str>,
        was: Option<Queues>,
        now: Option<Queues>,
    ) {
        if let Some(notes) = &mut self.notes {
            notes
                .moves
                .push(topic, group, was.map(note_of), now.map(note_of));
        }
    }

    /// The entries noted since the last call, each with the moves of its group: a move joins
    /// the last entry naming its group, else the last entry naming none (an admin's change of
    /// several groups), else an entry of its own.
    pub fn take_notes(&mut self) -> Vec<Entry> {
        let Some(notes) = &mut self.notes else {
            return Vec::new();
        };
        let mut entries = std::mem::take(&mut notes.entries);
        let moves = std::mem::take(&mut notes.moves);
        if moves.is_empty() {
            return entries;
        }
        let mut by_group: HashMap<String, usize> = HashMap::new();
        let mut unnamed = None;
        for (i, e) in entries.iter().enumerate() {
            match &e.broker {
                Some(b) => {
                    by_group.insert(b.clone(), i);
                }
                None => unnamed = Some(i),
            }
        }
        // Looked up once per run of one group's moves (a registration's are one run).
        for (group, range) in moves.runs() {
            let at = match by_group.get(&*group).copied().or(unnamed) {
                Some(at) => at,
                None => {
                    let cause = if notes.from_peer {
                        Cause::TakenOver
                    } else {
                        Cause::Changed
                    };
                    let mut own = Entry::new(cause).group(&group);
                    own.by = notes.by.clone();
                    entries.push(own);
                    by_group.insert(group.to_string(), entries.len() - 1);
                    entries.len() - 1
                }
            };
            entries[at].packed.extend_from(&moves, range);
        }
        entries
    }
}
