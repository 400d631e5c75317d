//! Heartbeats a follower passes on to the leader (FORWARDED_HEARTBEAT, 1193), all through one
//! task that holds one connection. A task per heartbeat would open a connection per heartbeat
//! while the leader is unreachable: a few hundred brokers beating every second would each start
//! a connect, and the attempts would pile up for as long as the cut lasts.

use std::time::{Duration, Instant};

use rocketmq_raft::Connect;
use rocketmq_wire::client::Client;
use rocketmq_wire::RemotingCommand;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Heartbeats waiting for the link. A broker beats again within seconds, so when the link is
/// slower than that the oldest beats are worth nothing: the rest are dropped, not queued.
const QUEUE: usize = 1024;
/// How long a connect to the leader may take.
const CONNECT_DEADLINE: Duration = Duration::from_secs(1);
/// How long a frame may wait for room on the link: a leader that stopped reading must not
/// hold the beats meant for the next one.
const SEND_DEADLINE: Duration = Duration::from_secs(1);
/// After a failed connect, beats for that leader are dropped for this long instead of each
/// trying again; a new leader is tried at once.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// A link that has not answered for this long is asked to: the next beat goes as a request and
/// its answer is awaited (within [`SEND_DEADLINE`]), and a link that does not answer is opened
/// again, its name resolved again. A leader whose host vanished (its pod rescheduled to another
/// address, under the same id and term) never closes the link, and beats sent without an answer
/// would be taken by the local socket and lost for as long as TCP keeps trying, while the new
/// leader hears none of the brokers that reach only the followers.
const CHECK_EVERY: Duration = Duration::from_secs(2);

struct Beat {
    leader: u64,
    addr: String,
    frame: RemotingCommand,
}

/// The sending side of the forwarding task; the task ends with the node's shutdown.
pub(crate) struct Forwarder {
    queue: mpsc::Sender<Beat>,
}

impl Forwarder {
    /// Links to the leader are opened by `connect`: the group's own links (TLS when the port
    /// takes only TLS, sealed with the group's secret when it has one).
    pub(crate) fn start(
        source: Option<std::net::IpAddr>,
        connect: Connect,
        shutdown: CancellationToken,
    ) -> Self {
        let (queue, beats) = mpsc::channel(QUEUE);
        tokio::spawn(forward(beats, source, connect, shutdown));
        Forwarder { queue }
    }

    /// Queues `frame` for `leader` at `addr`; returns whether it was queued (false when the
    /// queue is full or the task has ended).
    pub(crate) fn send(&self, leader: u64, addr: String, frame: RemotingCommand) -> bool {
        self.queue
            .try_send(Beat {
                leader,
                addr,
                frame,
            })
            .is_ok()
    }
}

/// The open link to the leader, and when it last proved to be alive.
struct Link {
    leader: u64,
    client: Client,
    answered: Instant,
}

async fn forward(
    mut beats: mpsc::Receiver<Beat>,
    source: Option<std::net::IpAddr>,
    connect: Connect,
    shutdown: CancellationToken,
) {
    let mut link: Option<Link> = None;
    let mut unreachable: Option<(u64, Instant)> = None;
    loop {
        let beat = tokio::select! {
            _ = shutdown.cancelled() => return,
            beat = beats.recv() => match beat {
                Some(beat) => beat,
                None => return,
            },
        };
        if unreachable.is_some_and(|(to, until)| to == beat.leader && Instant::now() < until) {
            continue;
        }
        if link.as_ref().is_none_or(|l| l.leader != beat.leader) {
            link = None;
            match connect(beat.addr.clone(), source, CONNECT_DEADLINE).await {
                Ok(client) => {
                    unreachable = None;
                    link = Some(Link {
                        leader: beat.leader,
                        client,
                        answered: Instant::now(),
                    });
                }
                Err(e) => {
                    tracing::debug!(leader = beat.leader, addr = %beat.addr, error = %e,
                        "cannot reach the leader to forward heartbeats");
                    unreachable = Some((beat.leader, Instant::now() + RETRY_AFTER));
                    continue;
                }
            }
        }
        let Some(open) = link.as_mut() else { continue };
        let alive = if open.answered.elapsed() >= CHECK_EVERY {
            let answered = open.client.invoke(beat.frame, SEND_DEADLINE).await.is_ok();
            if answered {
                open.answered = Instant::now();
            }
            answered
        } else {
            let sent = tokio::time::timeout(SEND_DEADLINE, open.client.send_oneway(beat.frame));
            matches!(sent.await, Ok(Ok(())))
        };
        if !alive {
            tracing::debug!(leader = beat.leader, addr = %beat.addr,
                "the link to the leader for forwarded heartbeats is gone; opening another");
            link = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use futures::{SinkExt, StreamExt};
    use rocketmq_wire::frame::RemotingCodec;
    use tokio::net::TcpListener;
    use tokio_util::codec::{FramedRead, FramedWrite};

    use super::*;
    use crate::raft::codes;

    /// A leader stand-in that counts the connections it accepts and the frames it reads.
    async fn counting_leader() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let connections = Arc::new(AtomicUsize::new(0));
        let frames = Arc::new(AtomicUsize::new(0));
        let (c, f) = (connections.clone(), frames.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let f = f.clone();
                tokio::spawn(async move {
                    let mut read = FramedRead::new(stream, RemotingCodec::new(1 << 20));
                    while let Some(Ok(_)) = read.next().await {
                        f.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        (addr, connections, frames)
    }

    fn beat() -> RemotingCommand {
        RemotingCommand::request(codes::FORWARDED_HEARTBEAT)
    }

    async fn until(what: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if what() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn two_hundred_heartbeats_for_one_leader_travel_on_one_connection() {
        let (addr, connections, frames) = counting_leader().await;
        let forwarder =
            Forwarder::start(None, rocketmq_raft::plaintext(), CancellationToken::new());
        for _ in 0..200 {
            assert!(forwarder.send(1, addr.clone(), beat()));
        }
        assert!(until(|| frames.load(Ordering::SeqCst) == 200).await);
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_unreachable_leader_neither_stalls_the_queue_nor_ends_the_task() {
        // A port nobody listens on: the connect is refused.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gone = closed.local_addr().unwrap().to_string();
        drop(closed);
        let forwarder =
            Forwarder::start(None, rocketmq_raft::plaintext(), CancellationToken::new());
        for _ in 0..2000 {
            forwarder.send(1, gone.clone(), beat());
        }
        // The beats for the dead leader are dropped after one failed connect, not tried one by
        // one, so the queue empties and a new leader gets its beats promptly.
        let (addr, connections, frames) = counting_leader().await;
        assert!(
            until(|| {
                forwarder.send(2, addr.clone(), beat());
                frames.load(Ordering::SeqCst) > 0
            })
            .await
        );
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }

    /// A leader stand-in that answers every request it reads, counting its connections.
    async fn answering_leader() -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let connections = Arc::new(AtomicUsize::new(0));
        let c = connections.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let (read, write) = stream.into_split();
                    let mut read = FramedRead::new(read, RemotingCodec::new(1 << 20));
                    let mut write = FramedWrite::new(write, RemotingCodec::new(1 << 20));
                    while let Some(Ok(req)) = read.next().await {
                        if !req.is_oneway() {
                            let answer = RemotingCommand::response_to(&req, 0);
                            if write.send(answer).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (addr, connections)
    }

    /// Sends a beat every 50 ms for `how_long`.
    async fn beat_for(forwarder: &Forwarder, addr: &str, how_long: Duration) {
        let end = Instant::now() + how_long;
        while Instant::now() < end {
            forwarder.send(1, addr.to_string(), beat());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn a_link_the_leader_no_longer_answers_on_is_opened_again() {
        // The stand-in reads the beats and never answers, as a link to a host that vanished
        // takes what is written and says nothing.
        let (addr, connections, frames) = counting_leader().await;
        let forwarder =
            Forwarder::start(None, rocketmq_raft::plaintext(), CancellationToken::new());
        beat_for(&forwarder, &addr, CHECK_EVERY + SEND_DEADLINE * 2).await;
        assert!(frames.load(Ordering::SeqCst) > 0);
        assert!(
            connections.load(Ordering::SeqCst) >= 2,
            "the silent link was kept"
        );
    }

    #[tokio::test]
    async fn a_link_the_leader_answers_on_is_kept() {
        let (addr, connections) = answering_leader().await;
        let forwarder =
            Forwarder::start(None, rocketmq_raft::plaintext(), CancellationToken::new());
        beat_for(&forwarder, &addr, CHECK_EVERY * 2 + SEND_DEADLINE).await;
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn the_task_ends_with_the_node() {
        let shutdown = CancellationToken::new();
        let forwarder = Forwarder::start(None, rocketmq_raft::plaintext(), shutdown.clone());
        shutdown.cancel();
        assert!(until(|| !forwarder.send(1, "127.0.0.1:1".into(), beat())).await);
    }
}
