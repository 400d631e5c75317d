//! Route snapshot for warm restart: the registry is written to disk (debounced, atomically)
//! and loaded at start, so that clients get the last known routes at once after a restart —
//! also after kill -9. Live entries keep their last heartbeat time, so a broker that died while
//! the server was down still expires on time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_wire::body::{strings_of, BrokerData, DataVersion, QueueData, TopicQueueMappingInfo};
use rocketmq_wire::json::{parse_value, JsonStyle, JsonWriter, ObjectExt};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::persist::{remove_stale_temps, write_atomically};
use crate::registry::{BrokerAddrKey, BrokerLive, Registry, TopicQueues, TopicSnapshot};
use crate::state::State;
use rocketmq_wire::clock::now_ms;

/// Changes are written at most this often.
const DEBOUNCE: Duration = Duration::from_secs(1);
/// How often the writer looks for changes.
const TICK: Duration = Duration::from_millis(250);
/// Changes are written once none has come for this long, or after `MAX_WAIT` of changes.
const QUIET: Duration = Duration::from_millis(500);
const MAX_WAIT: Duration = Duration::from_secs(10);
/// Heartbeats move deadlines without changing routes; they are saved this often.
const REFRESH: Duration = Duration::from_secs(30);
/// Encoding a large registry takes a core for tens of milliseconds, which route lookups and
/// registrations would otherwise have: it is saved at most once per this many times its last
/// save took (a busy cluster of 10k distinct routes about every 3 s instead of every second)...
const MAX_DUTY: u32 = 50;
/// ...unless that would leave a change unsaved for longer than this: at a million topics a
/// save takes a second or more, and fifty of them would leave a restart minutes behind.
const MAX_BEHIND: Duration = Duration::from_secs(10);
/// Kept short of [`MAX_BEHIND`] for a save slower than the last one.
const BEHIND_MARGIN: Duration = Duration::from_secs(1);
/// Restored brokers have no connection yet; this id never names a real one.
const NO_CONNECTION: u64 = 0;

fn write_key(w: &mut JsonWriter, key: &BrokerAddrKey) {
    w.key("cluster").string(&key.cluster);
    w.key("addr").string(&key.addr);
}

/// What a snapshot holds, taken out of the registry while it is held (registrations wait):
/// the topic table, by far the largest part, as a copy-on-write view that costs no copy.
struct Captured {
    /// When it was taken, for people: nothing is decided by it.
    taken_ms: i64,
    /// The KV group's admin changes the routes reflect (`peers::group`): a restarted member applies
    /// those after it.
    admin_position: Option<u64>,
    groups: Vec<BrokerData>,
    clusters: Vec<(String, Vec<String>)>,
    topics: TopicSnapshot,
    live: Vec<(BrokerAddrKey, BrokerLive)>,
    filter_servers: Vec<(BrokerAddrKey, Vec<String>)>,
    mappings: Vec<(String, Vec<TopicQueueMappingInfo>)>,
}

fn capture(r: &Registry) -> Captured {
    Captured {
        taken_ms: now_ms(),
        admin_position: r.admin_position(),
        groups: r.groups().cloned().collect(),
        clusters: r
            .clusters()
            .map(|(c, names)| (c.to_string(), names.iter().cloned().collect()))
            .collect(),
        topics: r.topic_snapshot(),
        live: r
            .live_entries()
            .map(|(k, l)| (k.clone(), l.clone()))
            .collect(),
        filter_servers: r
            .filter_servers()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect(),
        mappings: r
            .mappings()
            .map(|(t, infos)| (t.to_string(), infos.values().cloned().collect()))
            .collect(),
    }
}

#[cfg(test)]
fn encode(r: &Registry) -> Vec<u8> {
    write(&capture(r))
}

fn write(c: &Captured) -> Vec<u8> {
    // Topics grouped by identical queues: most topics of a cluster share their brokers and
    // queue counts, so the snapshot follows distinct routes rather than topics × brokers.
    let mut routes: HashMap<&TopicQueues, Vec<&str>> = HashMap::new();
    for (topic, queues) in c.topics.iter() {
        routes.entry(queues).or_default().push(topic);
    }
    let mut w = JsonWriter::with_capacity(JsonStyle::Standard, 4096);
    w.object(|w| {
        w.key("savedAt").int(c.taken_ms);
        if let Some(position) = c.admin_position {
            w.key("adminPosition").int(position as i64);
        }
        w.key("brokers").array(|w| {
            for bd in &c.groups {
                bd.write(w);
            }
        });
        w.key("clusters").object(|w| {
            for (cluster, names) in &c.clusters {
                w.key(cluster)
                    .string_array(names.iter().map(String::as_str));
            }
        });
        w.key("routes").array(|w| {
            for (queues, topics) in &routes {
                w.object(|w| {
                    w.key("queueDatas").array(|w| {
                        for (name, q) in queues.iter() {
                            q.to_queue_data(name).write(w);
                        }
                    });
                    w.key("topics").string_array(topics.iter().copied());
                });
            }
        });
        w.key("live").array(|w| {
            for (key, live) in &c.live {
                w.object(|w| {
                    write_key(w, key);
                    w.key("lastUpdate").int(live.last_update_ms);
                    w.key("timeout").int(live.timeout_ms);
                    w.key("dataVersion");
                    live.data_version.write(w);
                    w.key("haServerAddr").string(&live.ha_server_addr);
                    w.key("version").int(live.version as i64);
                });
            }
        });
        w.key("filterServers").array(|w| {
            for (key, servers) in &c.filter_servers {
                w.object(|w| {
                    write_key(w, key);
                    w.key("servers")
                        .string_array(servers.iter().map(String::as_str));
                });
            }
        });
        w.key("mappings").object(|w| {
            for (topic, infos) in &c.mappings {
                w.key(topic).array(|w| {
                    for info in infos {
                        info.write(w);
                    }
                });
            }
        });
    });
    w.finish()
}

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{0}")]
    Json(#[from] rocketmq_wire::error::BodyError),
    #[error("{0} is not an object")]
    NotAnObject(&'static str),
}

fn objects<'a>(
    obj: &'a Map<String, Value>,
    key: &'static str,
) -> Result<Vec<&'a Map<String, Value>>, SnapshotError> {
    obj.opt_array(key)?
        .into_iter()
        .flatten()
        .map(|v| v.as_object().ok_or(SnapshotError::NotAnObject(key)))
        .collect()
}

fn addr_key(obj: &Map<String, Value>) -> Result<BrokerAddrKey, SnapshotError> {
    Ok(BrokerAddrKey {
        cluster: obj.opt_string("cluster")?.unwrap_or_default(),
        addr: obj.opt_string("addr")?.unwrap_or_default(),
    })
}

#[cfg(test)]
fn decode(bytes: &[u8]) -> Result<Registry, SnapshotError> {
    decode_value(&parse_value(bytes)?)
}

fn decode_value(value: &Value) -> Result<Registry, SnapshotError> {
    let obj = value
        .as_object()
        .ok_or(SnapshotError::NotAnObject("snapshot"))?;
    let mut r = Registry::default();
    for bd in objects(obj, "brokers")? {
        r.restore_group(BrokerData::from_object(bd)?);
    }
    for (cluster, names) in obj.opt_object("clusters")?.into_iter().flatten() {
        r.restore_cluster(cluster.clone(), strings_of(names));
    }
    for route in objects(obj, "routes")? {
        let qds = route
            .get("queueDatas")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .map(QueueData::from_object)
            .collect::<Result<Vec<_>, _>>()?;
        for topic in route
            .get("topics")
            .map(strings_of::<Vec<String>>)
            .unwrap_or_default()
        {
            for qd in &qds {
                r.set_queues(&topic, qd);
            }
        }
    }
    for live in objects(obj, "live")? {
        let data_version = live
            .opt_object("dataVersion")?
            .map(DataVersion::from_object)
            .transpose()?
            .unwrap_or_default();
        r.restore_live(
            addr_key(live)?,
            BrokerLive {
                last_update_ms: live.i64_or("lastUpdate", 0)?,
                timeout_ms: live.i64_or("timeout", 0)?,
                data_version,
                conn: NO_CONNECTION,
                ha_server_addr: live.opt_string("haServerAddr")?.unwrap_or_default(),
                version: live.i32_or("version", 0)?,
                last_registration: None,
            },
        );
    }
    for entry in objects(obj, "filterServers")? {
        let servers = entry
            .get("servers")
            .map(strings_of::<Vec<String>>)
            .unwrap_or_default();
        r.restore_filter_servers(addr_key(entry)?, servers);
    }
    if let Some(position) = obj
        .get("adminPosition")
        .and_then(Value::as_i64)
        .and_then(|p| u64::try_from(p).ok())
    {
        r.set_admin_position(position);
    }
    for (topic, infos) in obj.opt_object("mappings")?.into_iter().flatten() {
        for info in infos
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
        {
            r.restore_mapping(topic, TopicQueueMappingInfo::from_object(info)?);
        }
    }
    // What loading recorded is nobody's news: nothing is cached yet.
    r.take_changes();
    Ok(r)
}

/// Loads the snapshot at `path`; a missing or unreadable one means an empty registry (the
/// snapshot is a cache: brokers re-register within one period anyway).
pub fn load(path: &Path) -> Registry {
    remove_stale_temps(path);
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Registry::default(),
        Err(e) => {
            warn!(path = %path.display(), "cannot read the route snapshot: {e}");
            return Registry::default();
        }
    };
    let decoded = parse_value(&bytes)
        .map_err(SnapshotError::from)
        .and_then(|v| decode_value(&v));
    match decoded {
        Ok(mut r) => {
            // A member without a live entry could never expire: it would stay routable forever.
            if r.drop_members_without_live() {
                warn!("dropped snapshot members that had no live entry");
            }
            r.undate_topics();
            // Served meanwhile, but a topic its broker's first complete round leaves out goes.
            r.hold_restored_topics();
            info!(
                brokers = r.live_entries().count(),
                topics = r.topic_count(),
                "restored routes from the snapshot"
            );
            r
        }
        Err(e) => {
            warn!(path = %path.display(), "ignoring a corrupt route snapshot: {e}");
            Registry::default()
        }
    }
}

/// Saves the snapshot; returns how long that took and whether it was large enough that its
/// memory is worth giving back, which is left to the caller: giving it back locks the
/// allocator's arenas, which no other thread should wait on a held-back one for, and at
/// shutdown it is not worth doing. `yielding`: once the view is taken (under the table's lock,
/// which must not wait on a thread the scheduler holds back), the encoding and the write yield
/// the cores to everything else ([`yield_cores`]).
fn save(state: &State, path: &Path, yielding: bool) -> (Duration, bool) {
    let started = std::time::Instant::now();
    let captured = state.routes.read(capture);
    if yielding {
        yield_cores();
    }
    let bytes = write(&captured);
    drop(captured);
    let large = bytes.len() > crate::memory::LARGE_WORK;
    if let Err(e) = write_atomically(path, &bytes) {
        warn!(path = %path.display(), "cannot write the route snapshot: {e}");
    } else {
        state.metrics.snapshot_saved(started.elapsed());
    }
    drop(bytes);
    (started.elapsed(), large)
}

/// Where the writer stands when it looks: what decides whether it saves now.
struct SaveTiming {
    since_save: Duration,
    since_change: Duration,
    /// How long ago the oldest change not in the file was seen, if there is one.
    oldest_unsaved: Option<Duration>,
    last_took: Duration,
}

impl SaveTiming {
    fn due(&self, changed: bool) -> bool {
        let since = self.since_save;
        // Saved once changes pause, not in the middle of a burst of registrations: while the
        // snapshot reads its view of the topic table, every topic a registration changes is
        // copied, and a burst changes them all.
        let settled = self.since_change >= QUIET || since >= MAX_WAIT;
        let wanted = (changed && since >= DEBOUNCE && settled) || since >= REFRESH;
        // A change is seen up to a tick late, and is in the file once the save ends.
        let overdue = self
            .oldest_unsaved
            .is_some_and(|seen| seen + TICK + self.last_took + BEHIND_MARGIN >= MAX_BEHIND);
        (wanted && since >= self.last_took * MAX_DUTY) || overdue
    }
}

/// Writes the snapshot after changes (once they pause) and periodically, and once more at
/// shutdown.
pub fn spawn_writer(
    state: Arc<State>,
    path: PathBuf,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut saved_generation = state.routes.generation();
        let mut seen_generation = saved_generation;
        let mut saved_at = tokio::time::Instant::now();
        let mut changed_at = saved_at;
        let mut last_took = Duration::ZERO;
        // When the oldest change not in the file was first seen.
        let mut unsaved_since: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = shutdown.cancelled() => break,
            }
            let generation = state.routes.generation();
            if generation != seen_generation {
                seen_generation = generation;
                changed_at = tokio::time::Instant::now();
                unsaved_since.get_or_insert(changed_at);
            }
            let timing = SaveTiming {
                since_save: saved_at.elapsed(),
                since_change: changed_at.elapsed(),
                oldest_unsaved: unsaved_since.map(|at| at.elapsed()),
                last_took,
            };
            if timing.due(generation != saved_generation) {
                saved_generation = generation;
                saved_at = tokio::time::Instant::now();
                unsaved_since = None;
                if let Some(took) = save_in_background(state.clone(), path.clone()).await {
                    last_took = took;
                }
            }
        }
        let _ = tokio::task::spawn_blocking(move || save(&state, &path, false)).await;
    })
}

/// One save on a thread of its own, so that the lower priority it takes ends with it; how long
/// it took.
async fn save_in_background(state: Arc<State>, path: PathBuf) -> Option<Duration> {
    let (took, saved) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("route-snapshot".into())
        .spawn(move || {
            let _ = took.send(save(&state, &path, true));
        })
        .map_err(|e| warn!("no thread to save the route snapshot: {e}"))
        .ok()?;
    let (took, large) = saved.await.ok()?;
    if large {
        let _ = tokio::task::spawn_blocking(crate::memory::release_free).await;
    }
    Some(took)
}

/// Lowers the calling thread's scheduling priority (nice 10: about a tenth of the share of a
/// thread at the default). Encoding a large registry takes seconds of a core; during a
/// registration storm that time would otherwise come out of the Raft groups' heartbeats and
/// the KV writes waiting on them (a KV write reached 0.8 s with three NameServers on two
/// cores), while the snapshot only needs the cores the rest leaves idle. Linux keeps nice per
/// thread; elsewhere, or where the system refuses, the save runs at the default priority.
fn yield_cores() {
    #[cfg(target_os = "linux")]
    {
        const NICE: libc::c_int = 10;
        // SAFETY: gettid has no preconditions; getpriority and setpriority on this thread's
        // own id read and change only its own priority, and a failure is harmless (reported
        // below). A thread already lower (a server started with nice) stays as it is.
        let refused = unsafe {
            let tid = libc::gettid() as libc::id_t;
            libc::getpriority(libc::PRIO_PROCESS, tid) < NICE
                && libc::setpriority(libc::PRIO_PROCESS, tid, NICE) != 0
        };
        if refused {
            tracing::debug!(
                "the route snapshot runs at the default priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(since_save: u64, oldest_unsaved: Option<u64>, last_took: u64) -> SaveTiming {
        SaveTiming {
            since_save: Duration::from_millis(since_save),
            since_change: Duration::from_secs(1),
            oldest_unsaved: oldest_unsaved.map(Duration::from_millis),
            last_took: Duration::from_millis(last_took),
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_save_yields_the_cores_on_its_own_thread_only() {
        fn own_nice() -> libc::c_int {
            // SAFETY: reads this thread's own priority.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        }
        let before = own_nice();
        let yielded = std::thread::spawn(|| {
            yield_cores();
            own_nice()
        })
        .join()
        .unwrap();
        assert_eq!(yielded, 10.max(before));
        assert_eq!(own_nice(), before);
    }

    #[test]
    fn a_slow_save_spaces_the_next_ones_out_but_never_leaves_a_change_unsaved_past_ten_seconds() {
        // A 20 ms save: the next change is saved once it settles.
        assert!(timing(1_500, Some(1_000), 20).due(true));
        // A 600 ms save (a million topics) would space saves 30 s apart...
        assert!(!timing(2_000, Some(1_000), 600).due(true));
        assert!(!timing(8_000, Some(8_000), 600).due(true));
        // ...but a change seen 8.2 s ago is saved now, to be in the file within 10 s.
        assert!(timing(8_200, Some(8_200), 600).due(true));
        // Nothing changed: only the periodic save, spaced out as well.
        assert!(!timing(29_000, None, 600).due(false));
        assert!(timing(30_000, None, 600).due(false));
    }

    fn qd(broker: &str, queues: i32) -> QueueData {
        QueueData {
            broker_name: broker.into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: 6,
            topic_sys_flag: 0,
        }
    }

    #[test]
    fn topics_round_trip_grouped_by_route() {
        let mut r = Registry::default();
        for topic in ["a", "b", "c"] {
            r.set_queues(topic, &qd("b1", 8));
            r.set_queues(topic, &qd("b2", 8));
        }
        r.set_queues("c", &qd("b2", 4));
        let bytes = encode(&r);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(text.matches("\"brokerName\":\"b1\"").count(), 2, "{text}");
        let back = decode(&bytes).unwrap();
        let topics = |r: &Registry| {
            let mut all: Vec<(String, TopicQueues)> = r
                .topic_queues()
                .map(|(t, q)| (t.to_string(), q.clone()))
                .collect();
            all.sort_by(|a, b| a.0.cmp(&b.0));
            all
        };
        assert_eq!(topics(&back), topics(&r));
    }
}
