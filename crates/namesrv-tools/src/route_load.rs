//! Closed-loop GET_ROUTEINFO_BY_TOPIC load: each connection keeps a fixed number of requests in
//! flight, sending the next one as soon as an answer arrives, topics chosen uniformly (drawn
//! ahead of the run, see [`Draws`]).
//!
//! A connection is one task that reads whatever answers have arrived and writes all their
//! follow-ups in one write: the generator shares the machine with the server, so it must spend
//! as little as it can per request (no channel or waiter per request, as a general client has).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use rocketmq_wire::codes::response;
use rocketmq_wire::frame::{encode_frame, RemotingCodec};
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::Decoder;

use crate::stats::{Failures, Latency, LatencySummary};

/// A request unanswered for this long counts as failed and ends its connection's run.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

pub struct RouteLoad {
    pub addr: String,
    pub conns: usize,
    pub depth: usize,
    pub topics: Arc<Vec<String>>,
}

/// One measured run of the whole load.
#[derive(Clone, Debug, Serialize)]
pub struct RouteRun {
    pub seconds: f64,
    pub requests: u64,
    pub qps: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub mean_answer_bytes: f64,
    pub latency: LatencySummary,
    /// Of the failures, answers that the topic has no route (TOPIC_NOT_EXIST).
    pub not_found: u64,
    pub failures: Failures,
}

#[derive(Default)]
struct ConnTally {
    latency: Latency,
    requests: u64,
    bytes_sent: u64,
    bytes_received: u64,
    not_found: u64,
    failures: Failures,
}

impl RouteLoad {
    /// Runs the load for `duration`, then waits for the answers still in flight.
    pub async fn run(&self, duration: Duration) -> RouteRun {
        // Drawn before the clock starts: the draws are the generator's, not the server's, time.
        let draws: Vec<Draws> = (0..self.conns)
            .map(|i| Draws::new(&self.topics, fastrand::u64(..) ^ i as u64))
            .collect();
        let started = Instant::now();
        let deadline = started + duration;
        let conns: Vec<_> = draws
            .into_iter()
            .map(|mut draws| {
                let (addr, depth) = (self.addr.clone(), self.depth);
                tokio::spawn(async move {
                    let mut tally = ConnTally::default();
                    if let Err(e) = drive(&addr, &mut draws, depth, deadline, &mut tally).await {
                        tally.failures.add(1, format!("connection: {e}"));
                    }
                    tally
                })
            })
            .collect();
        let mut total = ConnTally::default();
        for conn in conns {
            let tally = conn.await.unwrap_or_default();
            total.latency.add(&tally.latency);
            total.requests += tally.requests;
            total.bytes_sent += tally.bytes_sent;
            total.bytes_received += tally.bytes_received;
            total.not_found += tally.not_found;
            total.failures.merge(&tally.failures);
        }
        let seconds = started.elapsed().as_secs_f64();
        RouteRun {
            seconds,
            requests: total.requests,
            qps: total.requests as f64 / seconds,
            bytes_sent: total.bytes_sent,
            bytes_received: total.bytes_received,
            mean_answer_bytes: total.bytes_received as f64 / total.requests.max(1) as f64,
            latency: total.latency.summary(),
            not_found: total.not_found,
            failures: total.failures,
        }
    }
}

/// Topics a connection draws ahead of a run, then asks in turn (again from the first if the run
/// outlasts them).
const DRAWS: usize = 1 << 16;

/// A connection's topics, drawn uniformly from all of them ahead of its run, their names side by
/// side. Read in order they cost the generator the same at any table size; picking among a
/// million separately allocated names at each request costs it cache misses of its own, on the
/// cores it shares with the server.
struct Draws {
    names: String,
    ends: Vec<usize>,
    next: usize,
}

impl Draws {
    fn new(topics: &[String], seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut names = String::new();
        let mut ends = Vec::with_capacity(DRAWS);
        for _ in 0..DRAWS {
            if let Some(topic) = topics.get(rng.usize(..topics.len().max(1))) {
                names.push_str(topic);
            }
            ends.push(names.len());
        }
        Draws {
            names,
            ends,
            next: 0,
        }
    }

    fn next(&mut self) -> &str {
        let i = self.next % self.ends.len();
        self.next += 1;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.names[start..self.ends[i]]
    }
}

fn route_request(topic: &str, opaque: i32, out: &mut BytesMut) {
    let mut cmd = GetRouteInfoHeader::new(topic).to_command();
    cmd.opaque = opaque;
    encode_frame(&cmd, out);
}

/// Keeps `depth` requests in flight until `deadline`. Slot `s` always carries an opaque equal to
/// `s` modulo `depth`, so an answer finds its send time without a map.
async fn drive(
    addr: &str,
    draws: &mut Draws,
    depth: usize,
    deadline: Instant,
    tally: &mut ConnTally,
) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut codec = RemotingCodec::new(usize::MAX);
    let mut inbound = BytesMut::with_capacity(256 * 1024);
    let mut outbound = BytesMut::with_capacity(4096);
    let mut expected: Vec<i32> = (0..depth as i32).collect();
    let mut sent_at = vec![Instant::now(); depth];
    for &opaque in &expected {
        route_request(draws.next(), opaque, &mut outbound);
    }
    let mut in_flight = depth;
    while in_flight > 0 {
        if !outbound.is_empty() {
            stream.write_all(&outbound).await?;
            tally.bytes_sent += outbound.len() as u64;
            outbound.clear();
        }
        let read = tokio::time::timeout(ANSWER_TIMEOUT, stream.read_buf(&mut inbound)).await;
        let n = match read {
            Err(_) => {
                tally
                    .failures
                    .add(in_flight as u64, "no answer within 10 s");
                return Ok(());
            }
            Ok(read) => read?,
        };
        if n == 0 {
            tally
                .failures
                .add(in_flight as u64, "server closed the connection");
            return Ok(());
        }
        tally.bytes_received += n as u64;
        let now = Instant::now();
        while let Some(answer) = codec
            .decode(&mut inbound)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?
        {
            let slot = answer.opaque.rem_euclid(depth as i32) as usize;
            if !answer.is_response() || answer.opaque != expected[slot] {
                tally
                    .failures
                    .add(1, format!("unexpected frame, opaque {}", answer.opaque));
                continue;
            }
            tally.requests += 1;
            tally.latency.record(now - sent_at[slot]);
            if answer.code == response::TOPIC_NOT_EXIST {
                tally.not_found += 1;
            }
            if answer.code != response::SUCCESS {
                tally.failures.add(
                    1,
                    format!(
                        "answer code {}: {}",
                        answer.code,
                        answer.remark.unwrap_or_default()
                    ),
                );
            }
            if now < deadline {
                expected[slot] = expected[slot].wrapping_add(depth as i32);
                sent_at[slot] = now;
                route_request(draws.next(), expected[slot], &mut outbound);
            } else {
                in_flight -= 1;
            }
        }
    }
    Ok(())
}
