//! The route journal: every change to a broker's or a topic's route with its cause and source,
//! kept on disk across restarts and crashes, bounded by size and age, and searchable by topic
//! and by broker. It is what `nsadmin explainRoute` reads to say why a topic has no route.
//!
//! The registry notes its changes under its write lock and hands them over before the lock is
//! released; entries are numbered and queued here and written by one thread that takes the queue
//! every [`WRITE_EVERY`], so that the registration path pays for a push only, and only when
//! something changed (an unchanged re-registration notes nothing).
//!
//! - `entry`: an entry and its causes;
//! - `segments`: the files, the writer, the bounds and the per-segment index.

pub mod entry;
mod segments;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub use entry::{Cause, Entry, Move, Packed};
use segments::{broker_key, topic_key, Shelf, Writer};

/// Bounds of the journal on disk.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_bytes: u64,
    pub max_age_ms: i64,
}

/// Moves waiting for the writer to take them at most (besides the batch it is writing): beyond
/// this (a disk far slower than registrations), entries are dropped and counted rather than held
/// in memory.
const QUEUED_MOVES_MAX: usize = 2_000_000;

/// Refusals kept in memory for topic questions: a refused registration names no topic.
const REFUSALS_KEPT: usize = 16;

/// Refusals journaled per second at most (see [`Journal::refused`]).
const REFUSALS_PER_SECOND: u32 = 20;

/// How long a question waits for the writer to catch up before reading the files.
const SYNC_WAIT: Duration = Duration::from_secs(2);

/// How often the writer takes what was recorded. Waking it at every change instead let it take
/// the core from the registration that recorded it, with the registry's write lock held: on
/// busy cores, for milliseconds, one route-changing registration in fifty.
const WRITE_EVERY: Duration = Duration::from_millis(100);

/// Entries recorded and not yet taken by the writer.
#[derive(Default)]
struct Pending {
    entries: Vec<Entry>,
    moves: usize,
}

/// What a question sends the writer to have everything recorded before it written: the writer
/// answers once it is.
type SyncAck = mpsc::SyncSender<()>;

/// What a question asks about.
#[derive(Clone, Copy, Debug)]
pub enum Subject<'a> {
    Topic(&'a str),
    Broker(&'a str),
}

/// What a question found: entries oldest first, each trimmed to the subject.
#[derive(Debug, Default)]
pub struct Found {
    pub entries: Vec<Entry>,
    /// Older entries about the subject that were left out.
    pub more: bool,
}

/// The journal's size and health, for answers and the status page.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub enabled: bool,
    /// When its oldest kept entry was written.
    pub since: Option<i64>,
    pub lines: u64,
    pub bytes: u64,
    pub segments: usize,
    /// Entries not written: the writer fell too far behind, or the disk failed.
    pub dropped: u64,
    /// Lines found unreadable on disk (a tail torn by a crash).
    pub skipped: u64,
    /// Refused registrations not journaled, past the rate kept.
    pub refusals_suppressed: u64,
}

struct Inner {
    /// The next sequence number and the way to the writer for questions. `None` once closed.
    send: Mutex<Option<(u64, mpsc::Sender<SyncAck>)>>,
    /// Taken under `send`, so that numbers follow the queue's order.
    pending: Arc<Mutex<Pending>>,
    shelf: Arc<Mutex<Shelf>>,
    dropped: Arc<AtomicU64>,
    refusals: Mutex<VecDeque<Entry>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    cap: u64,
}

/// Counts by cause, for metrics.
#[derive(Default)]
struct Tally([AtomicU64; Cause::ALL.len()]);

impl Tally {
    fn add(&self, cause: Cause, n: u64) {
        if n > 0 {
            self.0[cause as usize].fetch_add(n, Ordering::Relaxed);
        }
    }

    fn read(&self) -> Vec<(Cause, u64)> {
        Cause::ALL
            .iter()
            .map(|&(c, _)| (c, self.0[c as usize].load(Ordering::Relaxed)))
            .collect()
    }
}

#[derive(Default)]
pub struct Journal {
    inner: Option<Inner>,
    /// Topics that left a group's route, by cause.
    removals: Tally,
    /// Broker addresses that left their group, by cause.
    departures: Tally,
    /// The second refusals are being counted in, and how many so far.
    refusal_gate: Mutex<(i64, u32)>,
    /// Refusals not journaled for the rate.
    suppressed: AtomicU64,
}

impl Journal {
    /// A journal that keeps nothing (`routeJournalEnable=false`).
    pub fn disabled() -> Self {
        Journal::default()
    }

    /// Opens the journal in `dir`, starting a writer thread.
    pub fn open(dir: PathBuf, limits: Limits) -> std::io::Result<Self> {
        let cap = limits.max_bytes.max(1 << 20);
        let mut shelf = segments::open_shelf(&dir, cap)?;
        if shelf.skipped > 0 {
            tracing::warn!(
                lines = shelf.skipped,
                "route journal: unreadable lines skipped (a tail torn by a crash)"
            );
        }
        // Numbers go on from the last one found, so that they stay in order across restarts.
        let next_seq = shelf.last_seq + 1;
        let segment_bytes = (cap / 8).max(256 << 10);
        let writer = Writer::new(dir, segment_bytes);
        segments::trim(
            &mut shelf,
            cap,
            limits.max_age_ms,
            rocketmq_wire::clock::now_ms(),
        );
        let shelf = Arc::new(Mutex::new(shelf));
        let pending = Arc::new(Mutex::new(Pending::default()));
        let dropped = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::channel();
        let thread = {
            let (shelf, pending, dropped) = (shelf.clone(), pending.clone(), dropped.clone());
            std::thread::Builder::new()
                .name("route-journal".into())
                .spawn(move || write_loop(rx, writer, shelf, pending, dropped, cap, limits))?
        };
        Ok(Journal {
            inner: Some(Inner {
                send: Mutex::new(Some((next_seq, tx))),
                pending,
                shelf,
                dropped,
                refusals: Mutex::new(VecDeque::new()),
                thread: Mutex::new(Some(thread)),
                cap,
            }),
            removals: Tally::default(),
            departures: Tally::default(),
            refusal_gate: Mutex::default(),
            suppressed: AtomicU64::default(),
        })
    }

    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Numbers `entries` and queues them for the disk.
    pub fn record(&self, mut entries: Vec<Entry>) {
        for e in &entries {
            let cause = e.cause();
            let removed = e.removals();
            self.removals.add(cause, removed as u64);
            if e.addr.is_some()
                && matches!(
                    cause,
                    Cause::Unregistered
                        | Cause::ConnectionClosed
                        | Cause::Expired
                        | Cause::LeftAtPeer
                        | Cause::Unbacked
                )
            {
                self.departures.add(cause, 1);
            }
        }
        let Some(inner) = &self.inner else {
            return;
        };
        let moves: usize = entries.iter().map(|e| e.moves() + 1).sum();
        let mut send = inner.send.lock();
        let Some((next_seq, _)) = send.as_mut() else {
            return;
        };
        let mut pending = inner.pending.lock();
        if pending.moves + moves > QUEUED_MOVES_MAX {
            inner
                .dropped
                .fetch_add(entries.len() as u64, Ordering::Relaxed);
            return;
        }
        for e in &mut entries {
            e.seq = *next_seq;
            *next_seq += 1;
            if e.cause() == Cause::Refused {
                let mut refusals = inner.refusals.lock();
                if refusals.len() == REFUSALS_KEPT {
                    refusals.pop_front();
                }
                refusals.push_back(e.clone());
            }
        }
        pending.moves += moves;
        pending.entries.append(&mut entries);
    }

    /// Records a refused registration, at most [`REFUSALS_PER_SECOND`] a second: a client
    /// sending malformed registrations in a loop must not push the journal's history out.
    pub fn refused(&self, entry: Entry) {
        let now_s = entry.at.div_euclid(1000);
        {
            let mut gate = self.refusal_gate.lock();
            if gate.0 != now_s {
                *gate = (now_s, 0);
            }
            gate.1 += 1;
            if gate.1 > REFUSALS_PER_SECOND {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        self.record(vec![entry]);
    }

    /// Writes what is queued and stops the writer (at exit).
    pub fn close(&self) {
        let Some(inner) = &self.inner else {
            return;
        };
        inner.send.lock().take();
        if let Some(thread) = inner.thread.lock().take() {
            let _ = thread.join();
        }
    }

    /// Waits (a little) until everything recorded so far is in the files.
    fn sync(&self, inner: &Inner) {
        let (ack, done) = mpsc::sync_channel(1);
        let sent = inner
            .send
            .lock()
            .as_ref()
            .is_some_and(|(_, tx)| tx.send(ack).is_ok());
        if sent {
            let _ = done.recv_timeout(SYNC_WAIT);
        }
    }

    /// The newest `limit` entries about `subject`, oldest first, each trimmed to it: a topic's
    /// entries carry that topic's moves only, a broker's a few of its moves.
    pub fn find(&self, subject: Subject<'_>, limit: usize) -> Found {
        let Some(inner) = &self.inner else {
            return Found::default();
        };
        self.sync(inner);
        let (key, needle) = match subject {
            Subject::Topic(t) => (topic_key(t), t),
            Subject::Broker(b) => (broker_key(b), b),
        };
        // The name as the lines hold it, to pass over lines that cannot mention it unread.
        let quoted = serde_json::to_string(needle).unwrap_or_default();
        let finder = memchr::memmem::Finder::new(quoted.as_bytes());
        let paths: Vec<PathBuf> = inner
            .shelf
            .lock()
            .segments
            .iter()
            .rev()
            .filter(|s| s.keys.contains(&key))
            .map(|s| s.path.clone())
            .collect();
        let mut found: Vec<Entry> = Vec::new();
        let mut more = false;
        'segments: for path in paths {
            let Ok(bytes) = segments::read_capped(&path, inner.cap) else {
                continue;
            };
            let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
            for line in lines.into_iter().rev() {
                if finder.find(line).is_none() {
                    continue;
                }
                let Some(entry) = segments::read_line(line) else {
                    continue;
                };
                let Some(entry) = trim_to(entry, subject) else {
                    continue;
                };
                // A change written over several lines is one entry.
                if let Some(same) = found.iter_mut().find(|e| e.seq == entry.seq) {
                    let more_here = entry.more_topics.saturating_sub(same.topics.len());
                    same.topics.extend(entry.topics);
                    same.more_topics = same.more_topics.min(more_here);
                    continue;
                }
                if found.len() == limit {
                    more = true;
                    break 'segments;
                }
                found.push(entry);
            }
        }
        found.reverse();
        Found {
            entries: found,
            more,
        }
    }

    /// The latest refused registrations, oldest first.
    pub fn refusals(&self) -> Vec<Entry> {
        self.inner
            .as_ref()
            .map(|i| i.refusals.lock().iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn stats(&self) -> Stats {
        let Some(inner) = &self.inner else {
            return Stats::default();
        };
        let shelf = inner.shelf.lock();
        Stats {
            enabled: true,
            since: shelf.since(),
            lines: shelf.lines(),
            bytes: shelf.bytes(),
            segments: shelf.segments.len(),
            dropped: inner.dropped.load(Ordering::Relaxed),
            skipped: shelf.skipped,
            refusals_suppressed: self.suppressed.load(Ordering::Relaxed),
        }
    }

    /// Topics that left a group's route, by cause, since start.
    pub fn removals(&self) -> Vec<(Cause, u64)> {
        self.removals.read()
    }

    /// Broker addresses that left their group, by cause, since start.
    pub fn departures(&self) -> Vec<(Cause, u64)> {
        self.departures.read()
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.close();
    }
}

/// Keeps of `entry` what concerns `subject`; `None` when nothing does.
fn trim_to(mut entry: Entry, subject: Subject<'_>) -> Option<Entry> {
    /// Moves an answer about a broker carries per entry: the count says the rest.
    const BROKER_MOVES: usize = 10;
    let total = entry.topics.len() + entry.more_topics;
    match subject {
        Subject::Topic(t) => {
            entry.topics.retain(|m| m.topic == t);
            if entry.topics.is_empty() {
                return None;
            }
        }
        Subject::Broker(b) => {
            let named = entry.broker.as_deref() == Some(b);
            entry.topics.retain(|m| m.broker == b);
            if !named && entry.topics.is_empty() {
                return None;
            }
            entry.topics.truncate(BROKER_MOVES);
        }
    }
    entry.more_topics = total - entry.topics.len();
    Some(entry)
}

fn write_loop(
    rx: mpsc::Receiver<SyncAck>,
    mut writer: Writer,
    shelf: Arc<Mutex<Shelf>>,
    pending: Arc<Mutex<Pending>>,
    dropped: Arc<AtomicU64>,
    cap: u64,
    limits: Limits,
) {
    let mut last_sync = Instant::now();
    let mut failing = false;
    loop {
        let (acks, closing): (Vec<SyncAck>, bool) = match rx.recv_timeout(WRITE_EVERY) {
            Ok(ack) => (std::iter::once(ack).chain(rx.try_iter()).collect(), false),
            Err(mpsc::RecvTimeoutError::Timeout) => (Vec::new(), false),
            Err(mpsc::RecvTimeoutError::Disconnected) => (Vec::new(), true),
        };
        // Everything waiting is written in one go, then handed to the system once.
        let batch = std::mem::take(&mut *pending.lock());
        if !batch.entries.is_empty() {
            let mut shelf = shelf.lock();
            for mut e in batch.entries {
                e.unpack();
                if let Err(e) = writer.write(&mut shelf, e) {
                    dropped.fetch_add(1, Ordering::Relaxed);
                    if !failing {
                        tracing::error!("route journal: cannot write: {e}");
                        failing = true;
                    }
                }
            }
        }
        match writer.flush() {
            Ok(()) => failing = false,
            Err(e) => {
                if !failing {
                    tracing::error!("route journal: cannot write: {e}");
                }
                failing = true;
            }
        }
        for ack in acks {
            let _ = ack.try_send(());
        }
        if closing {
            break;
        }
        if last_sync.elapsed() >= Duration::from_secs(1) {
            writer.sync();
            let mut shelf = shelf.lock();
            segments::trim(
                &mut shelf,
                cap,
                limits.max_age_ms,
                rocketmq_wire::clock::now_ms(),
            );
            last_sync = Instant::now();
        }
    }
    writer.sync();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_bytes: 64 << 20,
            max_age_ms: 7 * 24 * 3600 * 1000,
        }
    }

    fn mv(topic: &str, broker: &str, now: Option<[i32; 3]>) -> Move {
        Move {
            topic: topic.into(),
            broker: broker.into(),
            was: Some([4, 4, 6]),
            now,
        }
    }

    #[test]
    fn entries_are_found_by_topic_and_by_broker_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let j = Journal::open(dir.path().into(), limits()).unwrap();
            let mut e = Entry::new(Cause::Expired).broker("c", "broker-a", "1.2.3.4:10911", 0);
            e.topics = vec![mv("T1", "broker-a", None), mv("T2", "broker-a", None)];
            j.record(vec![
                Entry::new(Cause::Registered).broker("c", "broker-b", "1.2.3.5:10911", 0),
                e,
            ]);
            let found = j.find(Subject::Topic("T2"), 10);
            assert_eq!(found.entries.len(), 1);
            assert_eq!(found.entries[0].topics, vec![mv("T2", "broker-a", None)]);
            assert_eq!(found.entries[0].more_topics, 1);
            j.close();
        }
        let j = Journal::open(dir.path().into(), limits()).unwrap();
        let found = j.find(Subject::Broker("broker-a"), 10);
        assert_eq!(found.entries.len(), 1);
        assert_eq!(found.entries[0].cause(), Cause::Expired);
        assert_eq!(found.entries[0].seq, 2);
        j.record(vec![Entry::new(Cause::Started)]);
        j.close();
        let j = Journal::open(dir.path().into(), limits()).unwrap();
        assert_eq!(j.stats().lines, 3);
        assert!(j.find(Subject::Topic("T3"), 10).entries.is_empty());
        assert_eq!(
            j.removals().iter().map(|(_, n)| n).sum::<u64>(),
            0,
            "counted since this start only"
        );
    }

    #[test]
    fn a_question_gets_the_newest_entries_and_knows_there_are_more() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().into(), limits()).unwrap();
        for i in 0..30 {
            let mut e = Entry::new(Cause::Updated).group("b");
            e.topics = vec![mv("T", "b", Some([i, i, 6]))];
            j.record(vec![e]);
        }
        let found = j.find(Subject::Topic("T"), 5);
        assert!(found.more);
        let reads: Vec<i32> = found
            .entries
            .iter()
            .map(|e| e.topics[0].now.unwrap()[0])
            .collect();
        assert_eq!(reads, [25, 26, 27, 28, 29]);
        assert_eq!(j.removals()[Cause::Updated as usize], (Cause::Updated, 0));
    }

    #[test]
    fn removals_and_departures_are_counted_by_cause() {
        let j = Journal::disabled();
        let mut e = Entry::new(Cause::ConnectionClosed).broker("c", "b", "a:1", 0);
        e.topics = vec![mv("T1", "b", None), mv("T2", "b", None)];
        j.record(vec![e]);
        let count = |v: Vec<(Cause, u64)>| {
            v.into_iter()
                .find(|(c, _)| *c == Cause::ConnectionClosed)
                .unwrap()
                .1
        };
        assert_eq!(count(j.removals()), 2);
        assert_eq!(count(j.departures()), 1);
        assert!(j.find(Subject::Topic("T1"), 5).entries.is_empty());
    }
}
