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

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_wire::body::{DataVersion, RegisterBrokerBody, TopicConfigWrapper};
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::peer::namesrv as codes;
use rocketmq_wire::codes::response;
use rocketmq_wire::RemotingCommand;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::registry::{RegisterOutcome, Registrant, Registration, Registry};
use crate::state::State;

mod pull;

pub use pull::{decode_pull, encode_pull, pull, Record, BYTES, FIRST_PULL_BYTES, PULL_BYTES};

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
/// Brokers taken over from peers have no connection here; this id never names a real one.
pub const PEER_CONNECTION: u64 = 0;

/// One broker address as a NameServer hears it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heard {
    pub cluster: String,
    pub addr: String,
    pub name: String,
    pub id: i64,
    /// The data version of its last registration: (state version, timestamp, counter).
    pub version: (i64, i64, i64),
    /// When this NameServer last heard from it (registration, heartbeat, or a peer's word).
    pub last_ms: i64,
    /// A hash of its group's topics as routed here, and when they last changed here (or where
    /// the word of them came from): a broker's own registration at an unchanged data version
    /// can still change them (it brings back topics deleted meanwhile, as in Java).
    #[serde(default)]
    pub topics: u64,
    #[serde(default)]
    pub topics_ms: i64,
}

/// A broker that said it was leaving (UNREGISTER_BROKER), and when it left.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Departed {
    pub cluster: String,
    pub addr: String,
    pub at_ms: i64,
}

/// What a NameServer tells its peers of its routes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    pub heard: Vec<Heard>,
    pub departed: Vec<Departed>,
}

/// What this NameServer hears (every live broker address in a group), and the brokers that
/// said they were leaving.
pub fn digest(r: &Registry) -> Digest {
    let departed = r
        .announced_departures()
        .map(|(k, at_ms)| Departed {
            cluster: k.cluster.clone(),
            addr: k.addr.clone(),
            at_ms,
        })
        .collect();
    Digest {
        heard: heard_here(r),
        departed,
    }
}

/// The digest entry of the broker at `addr`, member `id` of the group (`cluster`, `name`).
fn heard_of(
    r: &Registry,
    (cluster, name): (&str, &str),
    id: i64,
    addr: &str,
    live: &crate::registry::BrokerLive,
) -> Heard {
    Heard {
        cluster: cluster.to_string(),
        addr: addr.to_string(),
        name: name.to_string(),
        id,
        version: version_of(&live.data_version),
        last_ms: live.last_update_ms,
        topics: r.topics_hash(name),
        topics_ms: r.topics_changed_at(name),
    }
}

/// A data version as digests order it.
fn version_of(dv: &rocketmq_wire::body::DataVersion) -> (i64, i64, i64) {
    (dv.state_version, dv.timestamp, dv.counter)
}

fn heard_here(r: &Registry) -> Vec<Heard> {
    let mut out = Vec::new();
    for bd in r.groups() {
        for (id, addr) in &bd.broker_addrs {
            let Some(live) = r.live(&bd.cluster, addr) else {
                continue;
            };
            let group = (bd.cluster.as_str(), bd.broker_name.as_str());
            out.push(heard_of(r, group, *id, addr, live));
        }
    }
    out
}

/// What a peer's digest asks of this NameServer: brokers to take over, brokers the peer
/// heard more lately than this one did, and brokers held here on a peer's word that told the
/// peer they were leaving.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    pub take: Vec<Heard>,
    pub heard_later: Vec<Heard>,
    pub left: Vec<Departed>,
}

impl Comparison {
    /// How many brokers the two NameServers disagree on.
    pub fn differences(&self) -> usize {
        self.take.len() + self.left.len()
    }
}

pub fn compare(r: &Registry, theirs: &Digest) -> Comparison {
    let mut c = Comparison::default();
    for d in &theirs.departed {
        if !r
            .left_at_peer(&d.cluster, &d.addr, d.at_ms, PEER_CONNECTION)
            .is_empty()
        {
            c.left.push(d.clone());
        }
    }
    for h in &theirs.heard {
        let listed = r.group(&h.name).is_some_and(|bd| {
            bd.cluster == h.cluster && bd.broker_addrs.get(&h.id) == Some(&h.addr)
        });
        match r.live(&h.cluster, &h.addr).filter(|_| listed) {
            None => {
                // Gone from here since the peer last heard of it: it stays gone.
                let left_after = r
                    .departed_at(&h.cluster, &h.addr)
                    .is_some_and(|at| at >= h.last_ms);
                if !left_after {
                    c.take.push(h.clone());
                }
            }
            Some(live) => {
                let version = version_of(&live.data_version);
                let mine = r.topics_hash(&h.name);
                if version < h.version
                    || (version == h.version
                        && mine != h.topics
                        && r.topics_changed_at(&h.name) < h.topics_ms)
                {
                    c.take.push(h.clone());
                } else if live.last_update_ms < h.last_ms {
                    c.heard_later.push(h.clone());
                }
            }
        }
    }
    c
}

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
    pub async fn run(self: Arc<Self>, state: Arc<State>, stop: CancellationToken) {
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

    async fn follow_peer(&self, state: &Arc<State>, id: &str, addr: &str, stop: CancellationToken) {
        let mut link: Option<Client> = None;
        // The peer's route generation at its last whole digest, and when that came.
        let mut last_whole: Option<(u64, Instant)> = None;
        let mut pause = LOOK_EVERY;
        loop {
            let since = last_whole
                .filter(|(_, at)| {
                    let age = at.elapsed();
                    age < WHOLE_EVERY_MIN
                        || (age < WHOLE_EVERY_MAX && age < state.routes.read(whole_every))
                })
                .map(|(generation, _)| generation);
            match self.exchange(state, &mut link, addr, since).await {
                Ok(Exchanged::Unchanged) => {
                    pause = LOOK_EVERY;
                    self.note(id, None);
                }
                Ok(Exchanged::Compared {
                    differences,
                    generation,
                    left_to_others,
                }) => {
                    pause = LOOK_EVERY;
                    // What another round was pulling is compared again at the next round.
                    last_whole = (!left_to_others).then(|| (generation, Instant::now()));
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
        state: &Arc<State>,
        link: &mut Option<Client>,
        addr: &str,
        since: Option<u64>,
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
        clock.rebase_digest(&mut theirs);
        let comparison = state.routes.read(|r| compare(r, &theirs));
        let differences = comparison.differences();
        if !comparison.left.is_empty() {
            // Decided again under the write lock: the broker may have registered meanwhile.
            let n = state
                .routes
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
            let n = state.routes.change(|r| {
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
                    .filter(|rec| take_over(&state, rec, &peer))
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
    /// Its whole digest, compared: the brokers the two disagreed on, its route generation, and
    /// whether some of what it had were left to rounds with other peers pulling them already.
    Compared {
        differences: usize,
        generation: u64,
        left_to_others: bool,
    },
}

/// A peer's instants read on this NameServer's clock. Members' clocks may differ by minutes:
/// every answer carrying instants also carries the answerer's clock when it answered (`now`),
/// so that each instant is taken as its age there, subtracted from this NameServer's now, and
/// never later than now. No decision compares one host's instant with another's.
#[derive(Clone, Copy, Debug)]
struct PeerClock {
    /// This clock less the peer's, at the answer (transit included); `None` from a peer that
    /// does not say its clock: its instants are only capped at now.
    shift: Option<i64>,
    now: i64,
}

impl PeerClock {
    fn of(answer: &RemotingCommand) -> Self {
        Self::at(answer.ext_i64(NOW), rocketmq_wire::clock::now_ms())
    }

    fn at(peer_now: Option<i64>, now: i64) -> Self {
        PeerClock {
            shift: peer_now.map(|p| now.saturating_sub(p)),
            now,
        }
    }

    /// `t` on this clock; 0 (undated) stays 0.
    fn local(&self, t: i64) -> i64 {
        if t == 0 {
            return 0;
        }
        t.saturating_add(self.shift.unwrap_or(0)).min(self.now)
    }

    fn rebase(&self, h: &mut Heard) {
        h.last_ms = self.local(h.last_ms);
        h.topics_ms = self.local(h.topics_ms);
    }

    fn rebase_digest(&self, d: &mut Digest) {
        for h in &mut d.heard {
            self.rebase(h);
        }
        for gone in &mut d.departed {
            gone.at_ms = self.local(gone.at_ms);
        }
    }
}

/// The answering NameServer's clock (ms since the epoch) when it answered ROUTE_DIGEST or
/// ROUTE_PULL ([`PeerClock`]).
pub const NOW: &str = "now";

/// ROUTE_DIGEST's ext fields: the asker's `since` (the generation of the asked NameServer's
/// routes at its last whole digest); the answer's `unchanged` (routes still at that generation:
/// no body) or `generation` (of the digest in the body).
pub const SINCE: &str = "since";
pub const UNCHANGED: &str = "unchanged";
pub const GENERATION: &str = "generation";

/// The answer to ROUTE_DIGEST: `None` when the routes are still at generation `since`, else the
/// digest and the generation it is at (or later).
pub fn digest_since(state: &State, since: Option<u64>) -> Option<(Digest, u64)> {
    // Read before the digest: a change landing between makes the digest newer than the
    // generation it names, and the asker only asks for it once more.
    let generation = state.routes.generation();
    if since == Some(generation) {
        return None;
    }
    Some((state.routes.read(digest), generation))
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
    let body = cmd.body.as_ref().map_or(0, |b| b.len());
    let mut head = cmd.clone();
    head.body = None;
    let mut buf = bytes::BytesMut::new();
    rocketmq_wire::frame::encode_frame(&head, &mut buf);
    (buf.len() + body) as u64
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

/// Replays a peer's registration of a broker here, as a registration of no connection: the
/// broker joins its group as the peer holds it, the group's topics become the peer's exactly
/// (a registration at the data version held here would keep topics the peer no longer routes,
/// and their old permissions), and the broker is dated as the peer last heard it. False if it
/// was refused.
fn take_over(state: &State, rec: &Record, peer: &str) -> bool {
    let h = &rec.heard;
    let topics = match pull::read_topics(&rec.topics) {
        Ok(topics) => topics,
        Err(why) => {
            tracing::warn!(peer, broker = %h.name, addr = %h.addr, %why, "a peer's registration of a broker was unreadable");
            return false;
        }
    };
    let (state_version, timestamp, counter) = h.version;
    let reg = Registration {
        from: Registrant {
            cluster: h.cluster.clone(),
            broker_addr: h.addr.clone(),
            broker_name: h.name.clone(),
            broker_id: h.id,
            conn: PEER_CONNECTION,
            now_ms: rocketmq_wire::clock::now_ms(),
        },
        ha_server_addr: rec.ha_server_addr.clone(),
        zone_name: rec.zone.clone(),
        timeout_ms: Some(rec.timeout_ms),
        enable_acting_master: Some(rec.acting_master),
        body: RegisterBrokerBody {
            wrapper: TopicConfigWrapper {
                data_version: DataVersion {
                    counter,
                    state_version,
                    timestamp,
                },
                ..TopicConfigWrapper::default()
            },
            filter_server_list: None,
        },
        version: rec.protocol,
        // Never taken for a single-topic registration of a member not known yet, which is
        // refused: the peer accepted the member's whole registration.
        listed: usize::MAX,
        changes_since: None,
        headers: 0,
        table: None,
    };
    let notify_min_id = state.config.settings().server.notify_min_broker_id_changed;
    let (outcome, notice) =
        state
            .routes
            .adopt(peer, reg, &topics, notify_min_id, (h.last_ms, h.topics_ms));
    if let Some(notice) = notice {
        crate::notify::min_broker_id_changed(notice);
    }
    match outcome {
        RegisterOutcome::Registered { .. } => {
            tracing::debug!(peer, broker = %h.name, addr = %h.addr, "took a broker's registration over from a peer");
            true
        }
        // A member with a newer state version holds the id here: the peer is behind.
        RegisterOutcome::Stale => false,
        RegisterOutcome::Refused => {
            tracing::warn!(peer, broker = %h.name, addr = %h.addr, "a peer's registration of a broker was refused");
            false
        }
    }
}

/// The exchange's series on `/metrics`.
struct PeerRoutesCollector(Arc<PeerRoutes>);

impl std::fmt::Debug for PeerRoutesCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerRoutesCollector")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct PeerLabels {
    peer: rocketmq_http::Escaped,
    address: rocketmq_http::Escaped,
}

impl prometheus_client::collector::Collector for PeerRoutesCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        let p = &self.0;
        let standing = p.standing();
        for (name, help, value) in [
            (
                "peers_route_differences",
                "Brokers the last exchange with each peer found this NameServer lacking or \
                 holding at an older data version",
                (|s: &PeerStanding| Some(s.differences as f64)) as fn(&PeerStanding) -> Option<f64>,
            ),
            (
                "peers_route_disagreeing_seconds",
                "Seconds this NameServer has disagreed with each peer without a break (0: agrees)",
                |s| Some(s.disagreeing_ms.map_or(0.0, |ms| ms as f64 / 1000.0)),
            ),
            (
                "peers_route_exchange_age_seconds",
                "Seconds since each peer's route digest last came",
                |s| s.last_exchange_ms.map(|ms| ms as f64 / 1000.0),
            ),
        ] {
            let g = ConstGauge::new(0f64);
            let mut family = encoder.encode_descriptor(name, help, None, g.metric_type())?;
            for s in &standing {
                if let Some(v) = value(s) {
                    let labels = PeerLabels {
                        peer: rocketmq_http::Escaped(s.id.clone()),
                        address: rocketmq_http::Escaped(s.address.clone()),
                    };
                    ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        for (name, help, n) in [
            (
                "peers_route_taken_over",
                "Broker registrations taken over from peers",
                p.taken_over.load(Ordering::Relaxed),
            ),
            (
                "peers_route_heard_later",
                "Broker deadlines moved on because a peer heard the broker later",
                p.heard_later.load(Ordering::Relaxed),
            ),
            (
                "peers_route_left",
                "Brokers held on a peer's word removed because they told a peer they were leaving",
                p.left.load(Ordering::Relaxed),
            ),
            (
                "peers_route_received_bytes",
                "Bytes of the route exchange's answers received from peers, whole frames",
                p.digest_bytes.load(Ordering::Relaxed),
            ),
        ] {
            let c = ConstCounter::new(n);
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        rocketmq_http::group_series::gauge(
            &mut encoder,
            "peers_routes_filled",
            "1 once this NameServer has taken its peers' routes since it started",
            i64::from(p.filled()),
        )
    }
}

/// Adds the exchange's series to every scrape of `registry`.
pub fn register_metrics(
    registry: &mut prometheus_client::registry::Registry,
    routes: Arc<PeerRoutes>,
) {
    registry.register_collector(Box::new(PeerRoutesCollector(routes)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_s_instants_are_read_as_ages_on_this_clock_and_never_later_than_now() {
        // The peer's clock is 90 s ahead: it heard the broker 2 s before it answered, and
        // dated the group's topics 5 s in its own future (a clock that jumped back since).
        let now = 1_000_000;
        let peer_now = now + 90_000;
        let clock = PeerClock::at(Some(peer_now), now);
        let mut h = heard("a", "1.1.1.1:10911", (0, 1, 1), peer_now - 2_000);
        h.topics_ms = peer_now + 5_000;
        let mut digest = Digest {
            heard: vec![h],
            departed: vec![Departed {
                cluster: "c".into(),
                addr: "1.1.1.2:10911".into(),
                at_ms: peer_now - 30_000,
            }],
        };
        clock.rebase_digest(&mut digest);
        assert_eq!(digest.heard[0].last_ms, now - 2_000);
        assert_eq!(digest.heard[0].topics_ms, now, "capped at now");
        assert_eq!(digest.departed[0].at_ms, now - 30_000);
        // 90 s behind, and a peer that does not say its clock: capped only.
        let behind = PeerClock::at(Some(now - 90_000), now);
        assert_eq!(behind.local(now - 90_000 - 1_000), now - 1_000);
        let unsaid = PeerClock::at(None, now);
        assert_eq!(unsaid.local(now + 60_000), now);
        assert_eq!(unsaid.local(now - 7), now - 7);
        assert_eq!(clock.local(0), 0, "undated stays undated");
    }

    pub(super) fn heard(name: &str, addr: &str, version: (i64, i64, i64), last_ms: i64) -> Heard {
        Heard {
            cluster: "c".into(),
            addr: addr.into(),
            name: name.into(),
            id: 0,
            version,
            last_ms,
            topics: 0,
            topics_ms: 0,
        }
    }

    #[test]
    fn an_unknown_broker_is_taken_over_and_a_departed_one_only_on_newer_word() {
        let r = Registry::default();
        let theirs = Digest {
            heard: vec![heard("a", "1.1.1.1:10911", (0, 1, 1), 5)],
            departed: Vec::new(),
        };
        let c = compare(&r, &theirs);
        assert_eq!(c.take.len(), 1);
        assert!(c.heard_later.is_empty());
    }
}
