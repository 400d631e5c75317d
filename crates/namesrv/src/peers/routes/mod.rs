//! Routes that converge between NameServers that agree (`namesrvPeers`). Registrations stay
//! last-writer-wins per broker, as they are on one NameServer: no consensus, which at one
//! registration per broker every 30 s would cost too much. Instead each NameServer asks each
//! peer every 100 ms whether its routes changed since its last digest, for a digest if they
//! did, and for one anyway every 10 s (every second when brokers held here have timeouts under
//! 80 s). A digest lists the brokers it hears (per broker address: its group, id, data version
//! and when it was last heard) and those that said they were leaving. Each NameServer then:
//! - takes over, from that peer, the registration of a broker it lacks or holds at an older data
//!   version (replayed as a REGISTER_BROKER of no connection, so that a broker that registers
//!   with one NameServer only is routable on all of them);
//! - moves a broker's deadline to when the peer last heard it, if later: a broker heard by any
//!   NameServer of the group stays alive on all of them, and expires everywhere within its
//!   timeout once none hears it.
//!
//! A broker that left here (unregistered, connection closed, expired) is not taken back from a
//! peer whose word of it is older than its departure. A broker whose own connection to this
//! NameServer closed leaves here at once, as before. A broker that unregistered (said it was
//! leaving) is in the digest as departed, and leaves the peers that hold it only on a peer's
//! word heard no later; a closed connection or an expiry says nothing about the broker's links
//! to other NameServers, and is not passed on.
//!
//! - [`digest`]: what a digest holds, comparing one with this NameServer's routes, and a peer's
//!   instants read on this clock;
//! - [`pull`]: ROUTE_PULL's records, a compact topic list per broker;
//! - [`take_over`]: a peer's registration of a broker replayed here;
//! - [`series`]: the exchange's series on `/metrics`.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::peer::keys::{BYTES, GENERATION, SINCE, UNCHANGED};
use rocketmq_wire::codes::peer::namesrv as codes;
use rocketmq_wire::codes::response;
use rocketmq_wire::RemotingCommand;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::Local;
use crate::registry::Registry;

mod digest;
mod pull;
mod series;
mod take_over;

use digest::{compare, Digest, PeerClock};
pub use digest::{digest_since, Heard};
pub use pull::{decode_pull, encode_pull, pull, FIRST_PULL_BYTES, PULL_BYTES};
pub use series::register_metrics;
use take_over::take_over;

/// How often each peer is asked for its whole digest, what carries brokers' liveness: an eighth
/// of the shortest timeout of the brokers held here (120 s unless a broker says otherwise),
/// within these bounds. A broker's deadline on a peer then lags the latest hearing by little
/// next to its timeout, and at the default the digests cost a tenth of what asking every
/// second would.
const WHOLE_EVERY_MIN: Duration = Duration::from_secs(1);
const WHOLE_EVERY_MAX: Duration = Duration::from_secs(10);
/// How often each peer is asked in between whether its routes changed: a change made on one
/// NameServer is on the others within about this (and a pull).
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// The longest pause between rounds with a peer that keeps failing (down, refusing this
/// member, or not proving itself): the pause doubles from [`LOOK_EVERY`] up to this, so such a
/// peer costs a connection and a log line a second, not ten. An answer resets it.
const RETRY_AT_MOST: Duration = Duration::from_secs(1);
/// A digest or a pull not answered within this is tried again at the next round.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Brokers asked for in one pull.
const PULL_MAX: usize = 64;
/// How long a NameServer that started waits for its peers' routes before it says it is ready
/// with what its snapshot held, unless a pull is under way; and at most, though one is (a
/// peer that holds millions of queues and answers, slowly).
const FILL_LIMIT: Duration = Duration::from_secs(10);
const FILL_MAX: Duration = Duration::from_secs(120);
/// How long a peer whose routes reflect admin changes this NameServer has not applied yet is
/// left uncompared, waiting for the group's log to bring them (milliseconds, usually); past
/// this (this member cut off from the group's majority, or no longer a member) its routes are
/// taken as they are.
const ADMIN_WAIT: Duration = Duration::from_secs(2);
/// Brokers taken over from peers have no connection here; this id never names a real one.
pub const PEER_CONNECTION: u64 = 0;

/// How this NameServer stands with one peer, for the status page and the metrics.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PeerStanding {
    pub id: String,
    pub address: String,
    /// Brokers the last comparison found this NameServer lacking or holding older.
    pub differences: usize,
    /// Milliseconds since its digest last came.
    pub last_exchange_ms: Option<u64>,
    /// Since when the two have disagreed without a break (ms ago).
    pub disagreeing_ms: Option<u64>,
}

#[derive(Default)]
struct Standing {
    differences: usize,
    last_exchange: Option<Instant>,
    disagreeing_since: Option<Instant>,
}

/// (member id, remoting address) of every other NameServer now: the KV group's membership,
/// which members added or removed while the NameServers run change.
pub type Members = Box<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

pub struct PeerRoutes {
    members: Members,
    /// The members followed now.
    peers: Mutex<Vec<(String, String)>>,
    connect: rocketmq_raft::Connect,
    source: Option<IpAddr>,
    standing: Mutex<BTreeMap<String, Standing>>,
    /// Brokers (cluster, address) being pulled from some peer now: the rounds with the other
    /// peers leave them to that pull rather than fetch the same megabytes again.
    pulling: Mutex<HashSet<(String, String)>>,
    /// Once every peer was asked once (or the wait ran out): the tables were filled.
    filled: AtomicBool,
    started: Instant,
    pub taken_over: AtomicU64,
    pub heard_later: AtomicU64,
    pub left: AtomicU64,
    pub digest_bytes: AtomicU64,
}

impl PeerRoutes {
    pub fn new(
        members: Members,
        connect: rocketmq_raft::Connect,
        source: Option<IpAddr>,
    ) -> Arc<Self> {
        Arc::new(PeerRoutes {
            peers: Mutex::new(members()),
            members,
            connect,
            source,
            standing: Mutex::new(BTreeMap::new()),
            pulling: Mutex::new(HashSet::new()),
            filled: AtomicBool::new(false),
            started: Instant::now(),
            taken_over: AtomicU64::new(0),
            heard_later: AtomicU64::new(0),
            left: AtomicU64::new(0),
            digest_bytes: AtomicU64::new(0),
        })
    }

    /// Whether this NameServer has taken its peers' routes since it started (or stopped
    /// waiting for them).
    pub fn filled(&self) -> bool {
        self.filled.load(Ordering::Acquire)
    }

    pub fn standing(&self) -> Vec<PeerStanding> {
        let standing = self.standing.lock();
        self.peers
            .lock()
            .iter()
            .map(|(id, address)| {
                let s = standing.get(id);
                PeerStanding {
                    id: id.clone(),
                    address: address.clone(),
                    differences: s.map_or(0, |s| s.differences),
                    last_exchange_ms: s
                        .and_then(|s| s.last_exchange)
                        .map(|at| at.elapsed().as_millis() as u64),
                    disagreeing_ms: s
                        .and_then(|s| s.disagreeing_since)
                        .map(|at| at.elapsed().as_millis() as u64),
                }
            })
            .collect()
    }

    /// Follows every peer's digest, each peer on its own so that one that is down or slow holds
    /// up no other, and takes what this NameServer lacks; a member added to the group is
    /// followed from the next look, one removed no longer.
    pub async fn run(self: Arc<Self>, state: Arc<dyn Local>, stop: CancellationToken) {
        let mut following: BTreeMap<String, (String, CancellationToken)> = BTreeMap::new();
        loop {
            let members = (self.members)();
            following.retain(|id, (addr, own)| {
                let kept = members.iter().any(|(i, a)| i == id && a == addr);
                if !kept {
                    own.cancel();
                }
                kept
            });
            for (id, addr) in &members {
                if following.contains_key(id) {
                    continue;
                }
                let own = stop.child_token();
                following.insert(id.clone(), (addr.clone(), own.clone()));
                let (this, state, id, addr) =
                    (self.clone(), state.clone(), id.clone(), addr.clone());
                tokio::spawn(async move { this.follow_peer(&state, &id, &addr, own).await });
            }
            self.standing
                .lock()
                .retain(|id, _| members.iter().any(|(i, _)| i == id));
            *self.peers.lock() = members;
            let pause = if self.filled() {
                Duration::from_secs(1)
            } else {
                self.fill_look();
                Duration::from_millis(50)
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Filled once every peer has answered once, or the wait ran out with no pull under way.
    fn fill_look(&self) {
        let answered = {
            let standing = self.standing.lock();
            self.peers
                .lock()
                .iter()
                .all(|(id, _)| standing.get(id).is_some_and(|s| s.last_exchange.is_some()))
        };
        let waited = self.started.elapsed();
        let pulling = !self.pulling.lock().is_empty();
        if answered || (waited >= FILL_LIMIT && !pulling) || waited >= FILL_MAX {
            if !answered {
                tracing::warn!(
                    "not every peer answered within {} s of starting: serving the routes this \
                     NameServer holds",
                    waited.as_secs()
                );
            }
            self.filled.store(true, Ordering::Release);
        }
    }

    async fn follow_peer(
        &self,
        state: &Arc<dyn Local>,
        id: &str,
        addr: &str,
        stop: CancellationToken,
    ) {
        let mut link: Option<Client> = None;
        // The peer's route generation at its last whole digest, and when that came.
        let mut last_whole: Option<(u64, Instant)> = None;
        let mut pause = LOOK_EVERY;
        // Since when the peer's routes reflect admin changes this NameServer has not applied.
        let mut admin_ahead: Option<Instant> = None;
        loop {
            let defer = admin_ahead.is_none_or(|at| at.elapsed() < ADMIN_WAIT);
            let since = last_whole
                .filter(|(_, at)| {
                    let age = at.elapsed();
                    age < WHOLE_EVERY_MIN
                        || (age < WHOLE_EVERY_MAX && age < state.routes().read(whole_every))
                })
                .map(|(generation, _)| generation);
            match self.exchange(state, &mut link, addr, since, defer).await {
                Ok(Exchanged::Unchanged) => {
                    pause = LOOK_EVERY;
                    self.note(id, None);
                }
                Ok(Exchanged::AdminBehind) => {
                    // Its whole digest again at the next round, once the log brought the
                    // admin changes here.
                    pause = LOOK_EVERY;
                    last_whole = None;
                    admin_ahead.get_or_insert_with(Instant::now);
                }
                Ok(Exchanged::Compared {
                    differences,
                    generation,
                    left_to_others,
                }) => {
                    pause = LOOK_EVERY;
                    // What another round was pulling is compared again at the next round.
                    last_whole = (!left_to_others).then(|| (generation, Instant::now()));
                    admin_ahead = None;
                    self.note(id, Some(differences));
                }
                Err(e) => {
                    tracing::debug!(peer = %id, error = %e, "no route digest from a peer");
                    link = None;
                    last_whole = None;
                    pause = (pause * 2).min(RETRY_AT_MOST);
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Notes an answer of the peer: with the differences found when it was a whole digest.
    fn note(&self, id: &str, differences: Option<usize>) {
        let mut standing = self.standing.lock();
        let s = standing.entry(id.to_string()).or_default();
        s.last_exchange = Some(Instant::now());
        if let Some(d) = differences {
            s.differences = d;
            if d == 0 {
                s.disagreeing_since = None;
            } else if s.disagreeing_since.is_none() {
                s.disagreeing_since = Some(Instant::now());
            }
        }
    }

    /// One round with one peer: its digest (unless its routes are still at generation
    /// `since`), then what this NameServer takes over from it.
    async fn exchange(
        &self,
        state: &Arc<dyn Local>,
        link: &mut Option<Client>,
        addr: &str,
        since: Option<u64>,
        defer_to_the_log: bool,
    ) -> Result<Exchanged, String> {
        let client = match link {
            Some(c) => c.clone(),
            None => {
                let c = (self.connect)(addr.to_string(), self.source, CALL_TIMEOUT).await?;
                *link = Some(c.clone());
                c
            }
        };
        let mut ask = RemotingCommand::request(codes::ROUTE_DIGEST);
        if let Some(since) = since {
            ask = ask.with_ext(SINCE, since);
        }
        let answer = self.call(&client, ask).await?;
        if answer.ext(UNCHANGED) == Some("true") {
            return Ok(Exchanged::Unchanged);
        }
        let generation = answer
            .ext(GENERATION)
            .and_then(|g| g.parse().ok())
            .unwrap_or_default();
        let clock = PeerClock::of(&answer);
        let body = answer.body.unwrap_or_default();
        let mut theirs: Digest = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        if defer_to_the_log && theirs.ahead_of(state.routes().read(|r| r.admin_position())) {
            return Ok(Exchanged::AdminBehind);
        }
        clock.rebase_digest(&mut theirs);
        let comparison = state.routes().read(|r| compare(r, &theirs));
        let differences = comparison.differences();
        if !comparison.left.is_empty() {
            // Decided again under the write lock: the broker may have registered meanwhile.
            let n = state
                .routes()
                .change_by(Some(format!("peer NameServer {addr}")), |r| {
                    let leaving: Vec<_> = comparison
                        .left
                        .iter()
                        .flat_map(|d| r.left_at_peer(&d.cluster, &d.addr, d.at_ms, PEER_CONNECTION))
                        .collect();
                    r.unregister(&leaving, false);
                    leaving.len()
                });
            self.left.fetch_add(n as u64, Ordering::Relaxed);
        }
        if !comparison.heard_later.is_empty() {
            let n = state.routes().change(|r| {
                comparison
                    .heard_later
                    .iter()
                    .filter(|h| r.heard_by_peer(&h.cluster, &h.addr, h.last_ms))
                    .count()
            });
            self.heard_later.fetch_add(n as u64, Ordering::Relaxed);
        }
        let claim = Claim::of(&self.pulling, &comparison.take);
        let left_to_others = claim.taken.len() < comparison.take.len();
        let mut left: &[Heard] = &claim.taken;
        // Each batch is replayed while the next is asked for, one batch replaying at a time.
        let mut replaying = None;
        let mut large = false;
        let mut budget = FIRST_PULL_BYTES;
        while !left.is_empty() {
            let asked = &left[..left.len().min(PULL_MAX)];
            let body = serde_json::to_vec(asked).map_err(|e| e.to_string())?;
            let answer = self
                .call(
                    &client,
                    RemotingCommand::request(codes::ROUTE_PULL)
                        .with_ext(BYTES, budget)
                        .with_body(body),
                )
                .await?;
            budget = PULL_BYTES;
            let clock = PeerClock::of(&answer);
            let body = answer.body.unwrap_or_default();
            large |= body.len() > crate::memory::LARGE_WORK / 4;
            let mut records = decode_pull(body)?;
            for rec in &mut records {
                clock.rebase(&mut rec.heard);
            }
            // The answer covers the asked entries up to the last one it holds; those it skipped
            // before that are no longer heard there.
            let covered = records
                .last()
                .and_then(|last| {
                    asked
                        .iter()
                        .position(|h| h.addr == last.heard.addr && h.cluster == last.heard.cluster)
                })
                .map_or(asked.len(), |i| i + 1);
            left = &left[covered..];
            self.replayed(replaying.take()).await?;
            let state = state.clone();
            let peer = addr.to_string();
            replaying = Some(tokio::task::spawn_blocking(move || {
                records
                    .iter()
                    .filter(|rec| take_over(state.as_ref(), rec, &peer))
                    .count()
            }));
        }
        self.replayed(replaying).await?;
        if large {
            // Megabytes of registrations replayed leave garbage behind; given back once per
            // round, not per batch (a trim of a large heap takes a while).
            tokio::task::spawn_blocking(crate::memory::release_free);
        }
        Ok(Exchanged::Compared {
            differences,
            generation,
            left_to_others,
        })
    }
}

/// The brokers one round pulls, claimed from the others until it ends.
struct Claim<'a> {
    pulling: &'a Mutex<HashSet<(String, String)>>,
    taken: Vec<Heard>,
}

impl<'a> Claim<'a> {
    /// Claims those of `wanted` no other round is pulling. One round takes all it can, not a
    /// share: on a few cores, pulls from two peers at once only contend.
    fn of(pulling: &'a Mutex<HashSet<(String, String)>>, wanted: &[Heard]) -> Self {
        let mut held = pulling.lock();
        let taken = wanted
            .iter()
            .filter(|h| held.insert((h.cluster.clone(), h.addr.clone())))
            .cloned()
            .collect();
        Claim { pulling, taken }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut held = self.pulling.lock();
        for h in &self.taken {
            held.remove(&(h.cluster.clone(), h.addr.clone()));
        }
    }
}

/// How often to ask a peer for its whole digest, given the brokers held here.
fn whole_every(r: &Registry) -> Duration {
    let shortest = r
        .live_entries()
        .map(|(_, live)| live.timeout_ms)
        .filter(|t| *t > 0)
        .min()
        .unwrap_or(i64::MAX);
    Duration::from_millis(u64::try_from(shortest / 8).unwrap_or(0))
        .clamp(WHOLE_EVERY_MIN, WHOLE_EVERY_MAX)
}

/// How one round with a peer went.
enum Exchanged {
    /// Its routes had not changed since its last whole digest.
    Unchanged,
    /// Its routes reflect admin changes of the group's log this NameServer has not applied yet
    /// ([`Digest::ahead_of`]): not compared this round.
    AdminBehind,
    /// Its whole digest, compared: the brokers the two disagreed on, its route generation, and
    /// whether some of what it had were left to rounds with other peers pulling them already.
    Compared {
        differences: usize,
        generation: u64,
        left_to_others: bool,
    },
}

impl PeerRoutes {
    /// Waits for a batch of pulled registrations to be replayed, and counts them.
    async fn replayed(
        &self,
        replaying: Option<tokio::task::JoinHandle<usize>>,
    ) -> Result<(), String> {
        if let Some(replaying) = replaying {
            let taken = replaying.await.map_err(|e| e.to_string())?;
            self.taken_over.fetch_add(taken as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// One request to a peer, its answer's whole frame counted as received.
    async fn call(
        &self,
        client: &Client,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, String> {
        let answer = client
            .invoke(request, CALL_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        self.digest_bytes
            .fetch_add(frame_bytes(&answer), Ordering::Relaxed);
        answer_of(answer)
    }
}

/// The bytes `cmd` took on the wire: its header encoded again (small), and its body.
fn frame_bytes(cmd: &RemotingCommand) -> u64 {
    let mut head = bytes::BytesMut::new();
    rocketmq_wire::frame::encode_frame_head(cmd, &mut head);
    (head.len() + cmd.body.as_ref().map_or(0, |b| b.len())) as u64
}

fn answer_of(answer: RemotingCommand) -> Result<RemotingCommand, String> {
    if answer.code != response::SUCCESS {
        return Err(format!(
            "answered {}: {}",
            answer.code,
            answer.remark.unwrap_or_default()
        ));
    }
    Ok(answer)
}
