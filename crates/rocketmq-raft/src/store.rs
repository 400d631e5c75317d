//! The node's durable Raft state in one redb database (`raft.redb` in the store path): the log,
//! the vote, the committed index and the latest snapshot. Every write is a redb transaction,
//! fsynced at commit, so a crash leaves either the old or the new state. The state machine itself
//! lives in memory: it is rebuilt at start from the snapshot plus the committed log.

use std::fmt::Debug;
use std::io::Cursor;
use std::marker::PhantomData;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    AnyError, Entry, EntryPayload, LogId, OptionalSend, RaftLogReader, RaftSnapshotBuilder,
    RaftTypeConfig, SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use parking_lot::RwLock;
use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::{Config, Machine, NodeId};

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "last_purged";
const SNAPSHOT: &str = "snapshot";

type StoreResult<T> = Result<T, StorageError<NodeId>>;

fn io_error(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write(AnyError::error(e.to_string())).into()
}

fn read_error(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::read(AnyError::error(e.to_string())).into()
}

/// What redb may cache of the file. Its default (a gigabyte) fills with every entry ever
/// written; a group's working set is its latest entries and snapshot, far smaller.
const CACHE_BYTES: usize = 4 * 1024 * 1024;

/// Opens (creating if needed) the database of a node.
pub fn open(dir: &Path) -> anyhow::Result<Arc<Database>> {
    std::fs::create_dir_all(dir)?;
    let db = Database::builder()
        .set_cache_size(CACHE_BYTES)
        .create(dir.join("raft.redb"))?;
    let tx = db.begin_write()?;
    tx.open_table(LOG)?;
    tx.open_table(META)?;
    tx.commit()?;
    Ok(Arc::new(db))
}

/// Runs a database operation off the async workers (a commit waits for fsync), on threads of its
/// own: on the host's blocking pool it would queue behind whatever else the host runs there (a
/// NameServer decodes large registrations on it), and a log append or a vote that waits there is
/// a heartbeat answered late, a leader's lease lost.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> StoreResult<T> + Send + 'static,
) -> StoreResult<T> {
    match store_threads() {
        Some(threads) => threads.spawn_blocking(f).await,
        None => tokio::task::spawn_blocking(f).await,
    }
    .map_err(io_error)?
}

/// The runtime whose blocking threads run every group's database operations; `None` (and the
/// host's pool is used) when the system would not give it a thread.
fn store_threads() -> Option<&'static tokio::runtime::Handle> {
    static THREADS: std::sync::OnceLock<Option<tokio::runtime::Runtime>> =
        std::sync::OnceLock::new();
    THREADS
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                // Two groups (the KV group and the controller) each write one transaction at a
                // time; reads of the log for replication run beside them.
                .max_blocking_threads(8)
                .thread_name("raft-store")
                .build()
                .map_err(|e| tracing::warn!("no threads of its own for the Raft store: {e}"))
                .ok()
        })
        .as_ref()
        .map(tokio::runtime::Runtime::handle)
}

fn get_meta<T: for<'de> Deserialize<'de>>(db: &Database, key: &str) -> StoreResult<Option<T>> {
    let tx = db.begin_read().map_err(read_error)?;
    let table = tx.open_table(META).map_err(read_error)?;
    match table.get(key).map_err(read_error)? {
        Some(v) => serde_json::from_slice(v.value())
            .map(Some)
            .map_err(read_error),
        None => Ok(None),
    }
}

fn put_meta<T: Serialize>(db: &Database, key: &str, value: &T) -> StoreResult<()> {
    let bytes = serde_json::to_vec(value).map_err(io_error)?;
    let tx = db.begin_write().map_err(io_error)?;
    tx.open_table(META)
        .map_err(io_error)?
        .insert(key, bytes.as_slice())
        .map_err(io_error)?;
    tx.commit().map_err(io_error)
}

/// Stores `snapshot` unless the stored one is as new or newer, deciding in the transaction that
/// writes it: a snapshot built from older state must never replace one installed meanwhile
/// (the log before the installed one is purged, so the node could not start again). Returns the
/// snapshot that is stored afterwards.
fn put_snapshot_if_newer(db: &Database, snapshot: StoredSnapshot) -> StoreResult<StoredSnapshot> {
    let tx = db.begin_write().map_err(io_error)?;
    let stored = {
        let mut table = tx.open_table(META).map_err(io_error)?;
        let current: Option<StoredSnapshot> = match table.get(SNAPSHOT).map_err(read_error)? {
            Some(v) => Some(serde_json::from_slice(v.value()).map_err(read_error)?),
            None => None,
        };
        match current {
            Some(current) if current.meta.last_log_id >= snapshot.meta.last_log_id => current,
            _ => {
                let bytes = serde_json::to_vec(&snapshot).map_err(io_error)?;
                table.insert(SNAPSHOT, bytes.as_slice()).map_err(io_error)?;
                snapshot
            }
        }
    };
    tx.commit().map_err(io_error)?;
    Ok(stored)
}

pub struct LogStore<C> {
    db: Arc<Database>,
    config: PhantomData<fn() -> C>,
}

// Derived, this would ask the same of the type configuration, which only names types.
impl<C> Clone for LogStore<C> {
    fn clone(&self) -> Self {
        LogStore::new(self.db.clone())
    }
}

impl<C> LogStore<C> {
    pub fn new(db: Arc<Database>) -> Self {
        LogStore {
            db,
            config: PhantomData,
        }
    }
}

impl<C: Config> RaftLogReader<C> for LogStore<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StoreResult<Vec<Entry<C>>> {
        let db = self.db.clone();
        let start = range.start_bound().cloned();
        let end = range.end_bound().cloned();
        blocking(move || {
            let tx = db.begin_read().map_err(read_error)?;
            let table = tx.open_table(LOG).map_err(read_error)?;
            let mut out = Vec::new();
            for item in table.range::<u64>((start, end)).map_err(read_error)? {
                let (_, v) = item.map_err(read_error)?;
                out.push(serde_json::from_slice(v.value()).map_err(read_error)?);
            }
            Ok(out)
        })
        .await
    }
}

impl<C: Config> RaftLogStorage<C> for LogStore<C> {
    type LogReader = LogStore<C>;

    async fn get_log_state(&mut self) -> StoreResult<LogState<C>> {
        let db = self.db.clone();
        blocking(move || {
            let last_purged: Option<LogId<NodeId>> = get_meta(&db, PURGED)?;
            let tx = db.begin_read().map_err(read_error)?;
            let table = tx.open_table(LOG).map_err(read_error)?;
            let last = match table.last().map_err(read_error)? {
                Some((_, v)) => {
                    let entry: Entry<C> = serde_json::from_slice(v.value()).map_err(read_error)?;
                    Some(entry.log_id)
                }
                None => last_purged,
            };
            Ok(LogState {
                last_purged_log_id: last_purged,
                last_log_id: last,
            })
        })
        .await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StoreResult<()> {
        let (db, vote) = (self.db.clone(), *vote);
        blocking(move || put_meta(&db, VOTE, &vote)).await
    }

    async fn read_vote(&mut self) -> StoreResult<Option<Vote<NodeId>>> {
        let db = self.db.clone();
        blocking(move || get_meta(&db, VOTE)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StoreResult<()> {
        let db = self.db.clone();
        blocking(move || put_meta(&db, COMMITTED, &committed)).await
    }

    async fn read_committed(&mut self) -> StoreResult<Option<LogId<NodeId>>> {
        let db = self.db.clone();
        blocking(move || Ok(get_meta::<Option<LogId<NodeId>>>(&db, COMMITTED)?.flatten())).await
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C>) -> StoreResult<()>
    where
        I: IntoIterator<Item = Entry<C>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut encoded = Vec::new();
        for entry in entries {
            encoded.push((
                entry.log_id.index,
                serde_json::to_vec(&entry).map_err(io_error)?,
            ));
        }
        let db = self.db.clone();
        let result = blocking(move || {
            let tx = db.begin_write().map_err(io_error)?;
            {
                let mut table = tx.open_table(LOG).map_err(io_error)?;
                for (index, bytes) in &encoded {
                    table.insert(*index, bytes.as_slice()).map_err(io_error)?;
                }
            }
            tx.commit().map_err(io_error)
        })
        .await;
        callback.log_io_completed(
            result
                .as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string())),
        );
        result
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StoreResult<()> {
        let db = self.db.clone();
        blocking(move || {
            let tx = db.begin_write().map_err(io_error)?;
            tx.open_table(LOG)
                .map_err(io_error)?
                .retain_in(log_id.index.., |_, _| false)
                .map_err(io_error)?;
            tx.commit().map_err(io_error)
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StoreResult<()> {
        let db = self.db.clone();
        blocking(move || {
            let bytes = serde_json::to_vec(&log_id).map_err(io_error)?;
            let tx = db.begin_write().map_err(io_error)?;
            tx.open_table(META)
                .map_err(io_error)?
                .insert(PURGED, bytes.as_slice())
                .map_err(io_error)?;
            tx.open_table(LOG)
                .map_err(io_error)?
                .retain_in(..=log_id.index, |_, _| false)
                .map_err(io_error)?;
            tx.commit().map_err(io_error)
        })
        .await
    }
}

/// What the state machine holds, and what a snapshot carries (as JSON, under these field names:
/// stored snapshots are read back with them).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Applied<M> {
    pub last_applied: Option<LogId<NodeId>>,
    pub membership: StoredMembership<NodeId, openraft::BasicNode>,
    pub state: M,
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, openraft::BasicNode>,
    data: Vec<u8>,
}

/// The state machine: shared with the request handlers, which read it directly (reads go
/// through the leader's linearizable check first).
pub struct StateMachine<M> {
    db: Arc<Database>,
    applied: Arc<RwLock<Applied<M>>>,
}

// Derived, this would ask the state itself to be Clone; clones share it.
impl<M> Clone for StateMachine<M> {
    fn clone(&self) -> Self {
        StateMachine {
            db: self.db.clone(),
            applied: self.applied.clone(),
        }
    }
}

impl<M: Machine> StateMachine<M> {
    /// Loads the latest snapshot, if any, as the starting state.
    pub fn open(db: Arc<Database>) -> anyhow::Result<Self> {
        let applied = match get_meta::<StoredSnapshot>(&db, SNAPSHOT)? {
            Some(snap) => serde_json::from_slice(&snap.data)?,
            None => Applied::default(),
        };
        Ok(StateMachine {
            db,
            applied: Arc::new(RwLock::new(applied)),
        })
    }

    pub fn shared(&self) -> Arc<RwLock<Applied<M>>> {
        self.applied.clone()
    }
}

impl<M: Machine> RaftSnapshotBuilder<M::C> for StateMachine<M> {
    async fn build_snapshot(&mut self) -> StoreResult<Snapshot<M::C>> {
        let (data, last, membership) = {
            let applied = self.applied.read();
            (
                serde_json::to_vec(&*applied).map_err(io_error)?,
                applied.last_applied,
                applied.membership.clone(),
            )
        };
        let snapshot_id = match last {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.leader_id.node_id, l.index),
            None => "empty".to_string(),
        };
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: membership,
            snapshot_id,
        };
        let built = StoredSnapshot { meta, data };
        let db = self.db.clone();
        // An install may have stored a newer one since the state was read: that one stands.
        let stored = blocking(move || put_snapshot_if_newer(&db, built)).await?;
        Ok(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(stored.data)),
        })
    }
}

impl<M: Machine> RaftStateMachine<M::C> for StateMachine<M> {
    type SnapshotBuilder = StateMachine<M>;

    async fn applied_state(
        &mut self,
    ) -> StoreResult<(
        Option<LogId<NodeId>>,
        StoredMembership<NodeId, openraft::BasicNode>,
    )> {
        let applied = self.applied.read();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StoreResult<Vec<<M::C as RaftTypeConfig>::R>>
    where
        I: IntoIterator<Item = Entry<M::C>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut applied = self.applied.write();
        let mut replies = Vec::new();
        for entry in entries {
            applied.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => replies.push(Default::default()),
                EntryPayload::Normal(cmd) => replies.push(applied.state.apply(&cmd)),
                EntryPayload::Membership(m) => {
                    applied.membership = StoredMembership::new(Some(entry.log_id), m);
                    replies.push(Default::default());
                }
            }
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StoreResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StoreResult<()> {
        let data = snapshot.into_inner();
        let mut installed: Applied<M> = serde_json::from_slice(&data).map_err(read_error)?;
        installed.last_applied = meta.last_log_id;
        installed.membership = meta.last_membership.clone();
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        let db = self.db.clone();
        // Durable first: a crash between the two leaves the node restarting from this snapshot.
        blocking(move || put_snapshot_if_newer(&db, stored)).await?;
        *self.applied.write() = installed;
        tracing::info!(
            upto = ?meta.last_log_id,
            "installed a snapshot of {} sent by the leader",
            M::NAME
        );
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StoreResult<Option<Snapshot<M::C>>> {
        let db = self.db.clone();
        let stored: Option<StoredSnapshot> = blocking(move || get_meta(&db, SNAPSHOT)).await?;
        Ok(stored.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use openraft::testing::{StoreBuilder, Suite};
    use openraft::{LeaderId, SnapshotMeta};

    use super::*;

    crate::declare_config!(
        /// A running sum: every entry adds its number and answers the new total.
        Toy: D = u64, R = u64
    );

    #[derive(Default, Serialize, Deserialize)]
    struct Sum(u64);

    impl Machine for Sum {
        type C = Toy;
        const NAME: &'static str = "the sum";

        fn apply(&mut self, add: &u64) -> u64 {
            self.0 += add;
            self.0
        }
    }

    /// A fresh store in a directory of its own, kept as long as the suite uses it.
    struct Fresh;

    impl StoreBuilder<Toy, LogStore<Toy>, StateMachine<Sum>, tempfile::TempDir> for Fresh {
        async fn build(
            &self,
        ) -> StoreResult<(tempfile::TempDir, LogStore<Toy>, StateMachine<Sum>)> {
            let dir = tempfile::tempdir().map_err(io_error)?;
            let db = open(dir.path()).map_err(io_error)?;
            let sm = StateMachine::open(db.clone()).map_err(io_error)?;
            Ok((dir, LogStore::new(db), sm))
        }
    }

    #[test]
    fn the_store_passes_openraft_s_own_storage_suite() {
        Suite::test_all(Fresh).unwrap();
    }

    fn entry(index: u64, payload: EntryPayload<Toy>) -> Entry<Toy> {
        Entry {
            log_id: LogId::new(LeaderId::new(1, 0), index),
            payload,
        }
    }

    /// The machine answers its own commands, the default the rest, and a node that starts again
    /// from the snapshot holds what it had applied.
    #[tokio::test]
    async fn the_machine_s_state_survives_a_restart_through_its_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path()).unwrap();
        let mut sm = StateMachine::<Sum>::open(db.clone()).unwrap();
        let entries = vec![
            entry(1, EntryPayload::Blank),
            entry(2, EntryPayload::Normal(5)),
            entry(3, EntryPayload::Normal(7)),
        ];
        assert_eq!(sm.apply(entries).await.unwrap(), [0, 5, 12]);
        sm.build_snapshot().await.unwrap();
        drop(sm);
        let restarted = StateMachine::<Sum>::open(db).unwrap();
        let applied = restarted.shared();
        let applied = applied.read();
        assert_eq!(applied.state.0, 12);
        assert_eq!(applied.last_applied.map(|l| l.index), Some(3));
    }

    /// The host's blocking pool, every thread of it busy for seconds (as a NameServer's is while
    /// a fleet's registrations are decoded), does not hold up a vote or a log append.
    #[test]
    fn the_log_is_written_while_the_host_s_blocking_pool_is_busy() {
        let host = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_all()
            .build()
            .unwrap();
        host.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut log = LogStore::<Toy>::new(open(dir.path()).unwrap());
            let (busy_tx, busy_rx) = std::sync::mpsc::channel::<()>();
            let (started_tx, started_rx) = tokio::sync::oneshot::channel();
            let busy = tokio::task::spawn_blocking(move || {
                let _ = started_tx.send(());
                let _ = busy_rx.recv_timeout(std::time::Duration::from_secs(30));
            });
            started_rx.await.unwrap();
            let began = std::time::Instant::now();
            let vote = Vote::new(3, 1);
            let saved = tokio::time::timeout(std::time::Duration::from_secs(10), async {
                log.save_vote(&vote).await.unwrap();
                log.read_vote().await.unwrap()
            })
            .await;
            let took = began.elapsed();
            busy_tx.send(()).unwrap();
            busy.await.unwrap();
            assert_eq!(saved.expect("the vote was never saved"), Some(vote));
            assert!(took < std::time::Duration::from_secs(5), "{took:?}");
        });
    }

    fn snapshot_at(index: u64) -> StoredSnapshot {
        StoredSnapshot {
            meta: SnapshotMeta {
                last_log_id: Some(LogId::new(LeaderId::new(1, 0), index)),
                last_membership: Default::default(),
                snapshot_id: format!("at-{index}"),
            },
            data: index.to_string().into_bytes(),
        }
    }

    #[test]
    fn a_snapshot_built_from_older_state_never_replaces_a_newer_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path()).unwrap();
        // An install stores index 50; the build that read the state at index 20 commits after.
        let kept = put_snapshot_if_newer(&db, snapshot_at(50)).unwrap();
        assert_eq!(kept.meta.snapshot_id, "at-50");
        let kept = put_snapshot_if_newer(&db, snapshot_at(20)).unwrap();
        assert_eq!(
            kept.meta.snapshot_id, "at-50",
            "the newer one is kept and returned"
        );
        let stored: StoredSnapshot = get_meta(&db, SNAPSHOT).unwrap().unwrap();
        assert_eq!(stored.data, b"50");
        let kept = put_snapshot_if_newer(&db, snapshot_at(70)).unwrap();
        assert_eq!(kept.meta.snapshot_id, "at-70", "a newer one replaces it");
    }
}
