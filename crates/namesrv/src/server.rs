//! The accept loop and one task per connection: read frames, dispatch, write responses, and
//! report the connection's end so that brokers registered on it leave.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use rocketmq_wire::error::FrameError;
use rocketmq_wire::frame::{
    announced_payload_len, decode_payload, encode_frame, payload_header_len,
};
use rocketmq_wire::listener::{self, ConnectionBounds, Port};
use rocketmq_wire::RemotingCommand;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::handler::{self, Origin};
use crate::offload;
use crate::proxy;
use crate::registry::ConnId;
use crate::state::State;
use crate::tls::{self, TlsMode};

/// Blocking requests (disk writes, large registrations) in flight per connection.
const BLOCKING_IN_FLIGHT: usize = 16;

pub async fn accept_loop(
    state: Arc<State>,
    listener: TcpListener,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let next_id = AtomicU64::new(1);
    let port = Port {
        name: "remoting",
        total_key: "serverMaxConnections",
        per_address_key: "serverMaxConnectionsPerAddress",
    };
    let admission = state.admission.clone();
    let metrics_state = state.clone();
    let stopping = shutdown.clone();
    listener::accept_loop(
        listener,
        admission,
        port,
        shutdown.clone(),
        |_| metrics_state.metrics.connection_refused(),
        |stream, peer, admitted| {
            let conn = next_id.fetch_add(1, Ordering::Relaxed);
            let close = shutdown.child_token();
            state.connections.insert(conn, close.clone());
            let state = state.clone();
            let stopping = stopping.clone();
            tracker.spawn(async move {
                let _admitted = admitted;
                debug!(%peer, conn, "connection opened");
                state.metrics.connection_opened();
                serve(&state, stream, conn, peer.ip(), close).await;
                state.metrics.connection_closed();
                // Connections closed by our own shutdown say nothing about the brokers: they
                // stay in the final route snapshot.
                if stopping.is_cancelled() {
                    state.connections.remove(&conn);
                } else {
                    state.connection_closed(conn);
                }
                debug!(%peer, conn, "connection closed");
            });
        },
    )
    .await;
}

async fn serve(
    state: &Arc<State>,
    mut stream: TcpStream,
    conn: ConnId,
    peer: IpAddr,
    close: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let limits = {
        let s = state.config.settings();
        ConnectionBounds {
            idle: Duration::from_secs(s.server.server_channel_max_idle_time_seconds.max(1) as u64),
            first_frame: Duration::from_secs(
                s.server.server_first_frame_timeout_seconds.max(1) as u64
            ),
            max_frame: s.server.max_frame_length.clamp(1024, i32::MAX as i64) as usize,
        }
    };
    let first_frame_by = Instant::now() + limits.first_frame.min(limits.idle);
    if let Err(e) = proxy::skip_header(
        &mut stream,
        first_frame_by.saturating_duration_since(Instant::now()),
    )
    .await
    {
        debug!(%peer, "closing connection with a bad PROXY header: {e}");
        return;
    }
    let mut first = [0u8; 1];
    let starts_tls =
        match tokio::time::timeout_at(first_frame_by.into(), stream.peek(&mut first)).await {
            Ok(Ok(1)) => first[0] == tls::HANDSHAKE_BYTE,
            Ok(Ok(_)) => false,
            _ => return,
        };
    let origin = Origin { conn, peer };
    match (starts_tls, state.tls.mode()) {
        (false, TlsMode::Enforcing) => {
            debug!(%peer, "closing plaintext connection: TLS is enforced")
        }
        (true, TlsMode::Disabled) => debug!(%peer, "closing TLS connection: TLS is disabled"),
        (false, _) => {
            let (read, write) = stream.into_split();
            serve_frames(state, read, write, origin, close, limits, first_frame_by).await;
        }
        (true, _) => {
            let Some(acceptor) = state.tls.acceptor() else {
                return;
            };
            match tokio::time::timeout_at(first_frame_by.into(), acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let (read, write) = tokio::io::split(tls);
                    serve_frames(state, read, write, origin, close, limits, first_frame_by).await;
                }
                Ok(Err(e)) => debug!(%peer, "TLS handshake failed: {e}"),
                Err(_) => debug!(%peer, "TLS handshake timed out"),
            }
        }
    }
}

/// Frames up to this size are read without asking the memory budget, and decoded and served
/// on the reader (unless their code blocks).
/// Larger ones block by their size alone, whatever their code: decoding megabytes on an async
/// worker would stall every connection sharing it.
const SMALL_FRAME: usize = 64 * 1024;

/// A large frame's claim on the decode budget, in KiB: its own bytes and what decoding them may
/// build (typed structures a few times the text; small lenient bodies a tree of many times it).
fn frame_weight(frame_len: usize, budget_kib: u32) -> u32 {
    let kib = (frame_len / 1024).max(1);
    let weight = kib.saturating_mul(DECODE_FACTOR).max(MIN_LARGE_WEIGHT_KIB);
    u32::try_from(weight).unwrap_or(u32::MAX).min(budget_kib)
}

const DECODE_FACTOR: usize = 5;
const MIN_LARGE_WEIGHT_KIB: usize = 10 * 1024;

/// Reads frames from a connection. Small frames come from a small buffer; a large one is read
/// only once the server-wide decode budget has room for it, so that many connections sending
/// large frames at once wait their turn (in their sockets) instead of all being held in memory.
struct FrameReader<R> {
    read: R,
    buf: BytesMut,
    max_frame: usize,
    budget: Arc<Semaphore>,
    budget_kib: u32,
    /// Held from the moment a large frame's length is known until its request is answered.
    permit: Option<OwnedSemaphorePermit>,
}

/// A frame as read: small ones decoded, large ones still raw with their claim on the budget.
enum Frame {
    Small(RemotingCommand),
    Large(Bytes, OwnedSemaphorePermit),
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// The next frame already complete in the buffer, without reading.
    fn buffered(&mut self) -> Result<Option<Frame>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = announced_payload_len(&self.buf, self.max_frame)?;
        if len > SMALL_FRAME && self.permit.is_none() {
            return Ok(None);
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        self.buf.advance(4);
        let payload = self.buf.split_to(len).freeze();
        match self.permit.take() {
            Some(permit) => Ok(Some(Frame::Large(payload, permit))),
            None => decode_payload(payload).map(|cmd| Some(Frame::Small(cmd))),
        }
    }

    /// The next frame, reading as needed; `None` at the end of the stream. Cancel-safe: what
    /// was read and the budget claimed stay with the reader.
    async fn next(&mut self) -> Option<Result<Frame, FrameError>> {
        loop {
            match self.buffered() {
                Ok(Some(frame)) => return Some(Ok(frame)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            let wanted = if self.buf.len() >= 4 {
                let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                    as usize;
                if len > SMALL_FRAME && self.permit.is_none() {
                    let weight = frame_weight(len, self.budget_kib);
                    match self.budget.clone().acquire_many_owned(weight).await {
                        Ok(permit) => self.permit = Some(permit),
                        Err(_) => return None,
                    }
                    continue;
                }
                4 + len - self.buf.len()
            } else {
                4 - self.buf.len()
            };
            // No reserve for more than the frame needs: a peer that announces a large frame and
            // sends nothing must not make us allocate it.
            self.buf.reserve(wanted.clamp(1, READ_CHUNK));
            match self.read.read_buf(&mut self.buf).await {
                Ok(0) if self.buf.is_empty() => return None,
                Ok(0) => {
                    return Some(Err(FrameError::Io(std::io::Error::from(
                        std::io::ErrorKind::UnexpectedEof,
                    ))))
                }
                Ok(_) => {}
                Err(e) => return Some(Err(FrameError::Io(e))),
            }
        }
    }

    /// A large frame (a registration) leaves its buffer behind; brokers send one every 30 s,
    /// and keeping it in between pins megabytes per broker connection.
    fn shrink_when_idle(&mut self) {
        if self.buf.is_empty() && self.buf.capacity() > READ_BUFFER_KEPT {
            self.buf = BytesMut::new();
        }
    }
}

/// Large frames up to this size may be served on the reader by requests that move their own
/// expensive steps (see `offload`); beyond it, checking the body alone takes milliseconds.
const INLINE_FRAME: usize = 4 * 1024 * 1024;

/// How much is read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Reads requests and answers them on the same task: cheap requests inline, with every frame
/// already received answered in one write; blocking ones on the blocking pool, their answers
/// joining the next write. A client that stops reading stalls only its own connection, and is
/// closed after the idle limit.
async fn serve_frames<R, W>(
    state: &Arc<State>,
    read: R,
    mut write: W,
    origin: Origin,
    close: CancellationToken,
    limits: ConnectionBounds,
    first_frame_by: Instant,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut conn = Connection {
        state,
        origin,
        out: BytesMut::with_capacity(4096),
        blocking: Arc::new(Semaphore::new(BLOCKING_IN_FLIGHT)),
        done: mpsc::channel(BLOCKING_IN_FLIGHT),
    };
    let mut frames = FrameReader {
        read,
        buf: BytesMut::with_capacity(4096),
        max_frame: limits.max_frame,
        budget: state.decode_budget.clone(),
        budget_kib: state.decode_budget_kib,
        permit: None,
    };
    let mut deadline = first_frame_by;
    'serve: loop {
        tokio::select! {
            biased;
            _ = close.cancelled() => break,
            frame = frames.next() => {
                let mut frame = frame;
                loop {
                    match frame {
                        None => break 'serve,
                        // A peer that hangs up (even without TLS close_notify) is ordinary.
                        Some(Err(FrameError::Io(e))) => {
                            debug!(conn = conn.origin.conn, "connection ended: {e}");
                            return;
                        }
                        Some(Err(e)) => {
                            warn!(conn = conn.origin.conn, "closing connection on a bad frame: {e}");
                            return;
                        }
                        Some(Ok(Frame::Small(request))) => conn.accept(request).await,
                        Some(Ok(Frame::Large(payload, permit))) => {
                            // Decoding and serving megabytes would stall this async worker's
                            // other connections: that happens off the reactor, in one hop,
                            // while this connection's reader waits (a broker sends one
                            // registration at a time). A request that moves its own
                            // expensive steps (a registration, mostly a cheap repeat or
                            // difference) is served here when its frame is of ordinary size.
                            let (state, origin) = (state.clone(), conn.origin);
                            let serve = move |request: RemotingCommand| {
                                let response = if request.is_response() {
                                    None
                                } else {
                                    handler::handle(&state, origin, &request)
                                };
                                drop(permit);
                                response
                            };
                            // A request that waits on consensus is served as a task (as from
                            // a small frame), its decode budget given back once decoded.
                            let decide = move |request: RemotingCommand| {
                                if handler::waits_on_consensus(&request) {
                                    Decoded::Agreed(request)
                                } else {
                                    Decoded::Served(serve(request))
                                }
                            };
                            let served = if payload.len() <= INLINE_FRAME
                                && payload_header_len(&payload) <= SMALL_FRAME
                            {
                                match decode_payload(payload) {
                                    Ok(request)
                                        if handler::moves_its_own_work(&request)
                                            || handler::waits_on_consensus(&request) =>
                                    {
                                        Ok(Ok(decide(request)))
                                    }
                                    Ok(request) => {
                                        offload::off_the_reactor(move || Ok(decide(request))).await
                                    }
                                    Err(e) => Ok(Err(e)),
                                }
                            } else {
                                offload::off_the_reactor(move || decode_payload(payload).map(decide))
                                    .await
                            };
                            match served {
                                Ok(Ok(Decoded::Served(response))) => {
                                    if let Some(response) = response {
                                        conn.push(&response);
                                    }
                                }
                                Ok(Ok(Decoded::Agreed(request))) => conn.accept(request).await,
                                Ok(Err(e)) => {
                                    warn!(conn = conn.origin.conn, "closing connection on a bad frame: {e}");
                                    return;
                                }
                                Err(_) => return,
                            }
                        }
                    }
                    if conn.out.len() >= WRITE_BATCH {
                        break;
                    }
                    // Answer everything that has already arrived before writing.
                    match frames.buffered() {
                        Ok(Some(next)) => frame = Some(Ok(next)),
                        Ok(None) => break,
                        Err(e) => frame = Some(Err(e)),
                    }
                }
                deadline = Instant::now() + limits.idle;
                frames.shrink_when_idle();
            }
            Some((response, _permit)) = conn.done.1.recv() => conn.push(&response),
            _ = tokio::time::sleep_until(deadline.into()) => {
                debug!(conn = conn.origin.conn, "closing idle connection");
                break;
            }
        }
        while let Ok((response, _permit)) = conn.done.1.try_recv() {
            conn.push(&response);
        }
        if !conn.out.is_empty() {
            match tokio::time::timeout(limits.idle, write.write_all(&conn.out)).await {
                Ok(Ok(())) => {
                    conn.out.clear();
                    // A large answer (a topic list, a peer's pull) leaves its buffer behind.
                    if conn.out.capacity() > READ_BUFFER_KEPT {
                        conn.out = BytesMut::with_capacity(4096);
                    }
                    deadline = deadline.max(Instant::now() + limits.idle);
                }
                _ => return,
            }
        }
    }
    // Requests still running on the blocking pool are answered before the connection closes.
    let Connection {
        mut out,
        done: (tx, mut rx),
        ..
    } = conn;
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some((response, _permit)) = rx.recv().await {
            encode_frame(&response, &mut out);
        }
        write.write_all(&out).await
    })
    .await;
}

/// A large frame's request, decoded: answered where it was decoded, or to be served as a task.
enum Decoded {
    Served(Option<RemotingCommand>),
    Agreed(RemotingCommand),
}

/// Bytes of answers gathered before they are written even if more requests are waiting.
const WRITE_BATCH: usize = 64 * 1024;
/// An idle connection's read buffer larger than this is given back.
const READ_BUFFER_KEPT: usize = 64 * 1024;

/// An answer from the blocking pool and the permit it was served under: its place among the
/// connection's requests in flight.
type Answer = (RemotingCommand, OwnedSemaphorePermit);

struct Connection<'a> {
    state: &'a Arc<State>,
    origin: Origin,
    out: BytesMut,
    blocking: Arc<Semaphore>,
    /// Answers of requests served off the reader, each with the permit it was served under:
    /// it is released only once the answer is in `out`, so a client that sends without
    /// reading makes the server hold at most `BLOCKING_IN_FLIGHT` answers.
    done: (mpsc::Sender<Answer>, mpsc::Receiver<Answer>),
}

impl Connection<'_> {
    fn push(&mut self, response: &RemotingCommand) {
        encode_frame(response, &mut self.out);
    }

    async fn accept(&mut self, request: RemotingCommand) {
        if request.is_response() {
            // Nothing the server sends on inbound connections expects an answer.
            return;
        }
        if handler::waits_on_consensus(&request) {
            let Some(permit) = self.permit().await else {
                return;
            };
            let (state, origin, tx) = (self.state.clone(), self.origin, self.done.0.clone());
            tokio::spawn(async move {
                if let Some(response) = handler::serve(&state, origin, &request).await {
                    let _ = tx.send((response, permit)).await;
                }
            });
            return;
        }
        if !handler::may_block(&request) {
            if let Some(response) = handler::handle(self.state, self.origin, &request) {
                self.push(&response);
            }
            return;
        }
        let Some(permit) = self.permit().await else {
            return;
        };
        let (state, origin, tx) = (self.state.clone(), self.origin, self.done.0.clone());
        tokio::spawn(async move {
            let handled =
                tokio::task::spawn_blocking(move || handler::handle(&state, origin, &request))
                    .await;
            if let Ok(Some(response)) = handled {
                // Never waits: the channel has room for every permit.
                let _ = tx.send((response, permit)).await;
            }
        });
    }

    /// A place among the connection's requests in flight; `None` once the server closes.
    async fn permit(&mut self) -> Option<OwnedSemaphorePermit> {
        // Every permit may be held by an answer waiting in the channel: take answers while
        // waiting, or the reader would wait on itself.
        loop {
            tokio::select! {
                biased;
                Some((response, _permit)) = self.done.1.recv() => self.push(&response),
                permit = self.blocking.clone().acquire_owned() => return permit.ok(),
            }
        }
    }
}
