//! The accept loop and one task per connection: read frames, dispatch, write responses, and
//! report the connection's end so that brokers registered on it leave.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures::{FutureExt, StreamExt};
use remoting::error::FrameError;
use remoting::frame::{encode_frame, RemotingCodec};
use remoting::RemotingCommand;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::handler::{self, Origin};
use crate::proxy;
use crate::route::ConnId;
use crate::state::State;
use crate::tls::{self, TlsMode};

const LISTEN_BACKLOG: u32 = 1024;
/// Blocking requests (disk writes, large registrations) in flight per connection.
const BLOCKING_IN_FLIGHT: usize = 16;

pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

pub async fn accept_loop(
    state: Arc<State>,
    listener: TcpListener,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let next_id = AtomicU64::new(1);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.cancelled() => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors or similar: back off instead of spinning.
                warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let conn = next_id.fetch_add(1, Ordering::Relaxed);
        let close = shutdown.child_token();
        state.connections.insert(conn, close.clone());
        let state = state.clone();
        let stopping = shutdown.clone();
        tracker.spawn(async move {
            debug!(%peer, conn, "connection opened");
            state.metrics.connection_opened();
            serve(&state, stream, conn, close).await;
            state.metrics.connection_closed();
            // Connections closed by our own shutdown say nothing about the brokers: they stay
            // in the final route snapshot.
            if stopping.is_cancelled() {
                state.connections.remove(&conn);
            } else {
                state.connection_closed(conn);
            }
            debug!(%peer, conn, "connection closed");
        });
    }
}

async fn serve(state: &Arc<State>, mut stream: TcpStream, conn: ConnId, close: CancellationToken) {
    let _ = stream.set_nodelay(true);
    let limits = {
        let s = state.settings.read();
        Limits {
            idle: Duration::from_secs(s.server.server_channel_max_idle_time_seconds.max(1) as u64),
            max_frame: s.server.max_frame_length.clamp(1024, i32::MAX as i64) as usize,
        }
    };
    let peer = stream.peer_addr().ok();
    if let Err(e) = proxy::skip_header(&mut stream, limits.idle).await {
        debug!(?peer, "closing connection with a bad PROXY header: {e}");
        return;
    }
    let mut first = [0u8; 1];
    let starts_tls = match tokio::time::timeout(limits.idle, stream.peek(&mut first)).await {
        Ok(Ok(1)) => first[0] == tls::HANDSHAKE_BYTE,
        Ok(Ok(_)) => false,
        _ => return,
    };
    match (starts_tls, state.tls.mode()) {
        (false, TlsMode::Enforcing) => {
            debug!(?peer, "closing plaintext connection: TLS is enforced")
        }
        (true, TlsMode::Disabled) => debug!(?peer, "closing TLS connection: TLS is disabled"),
        (false, _) => {
            let (read, write) = stream.into_split();
            serve_frames(state, read, write, conn, close, limits).await;
        }
        (true, _) => {
            let Some(acceptor) = state.tls.acceptor() else {
                return;
            };
            match tokio::time::timeout(limits.idle, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let (read, write) = tokio::io::split(tls);
                    serve_frames(state, read, write, conn, close, limits).await;
                }
                Ok(Err(e)) => debug!(?peer, "TLS handshake failed: {e}"),
                Err(_) => debug!(?peer, "TLS handshake timed out"),
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Limits {
    idle: Duration,
    max_frame: usize,
}

/// Reads requests and answers them on the same task: cheap requests inline, with every frame
/// already received answered in one write; blocking ones on the blocking pool, their answers
/// joining the next write. A client that stops reading stalls only its own connection, and is
/// closed after the idle limit.
async fn serve_frames<R, W>(
    state: &Arc<State>,
    read: R,
    mut write: W,
    conn: ConnId,
    close: CancellationToken,
    limits: Limits,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut conn = Connection {
        state,
        origin: Origin { conn },
        out: BytesMut::with_capacity(4096),
        blocking: Arc::new(Semaphore::new(BLOCKING_IN_FLIGHT)),
        done: mpsc::channel(BLOCKING_IN_FLIGHT),
    };
    let mut frames = FramedRead::new(read, RemotingCodec::new(limits.max_frame));
    let mut last_activity = Instant::now();
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
                        Some(Ok(request)) => conn.accept(request).await,
                    }
                    if conn.out.len() >= WRITE_BATCH {
                        break;
                    }
                    // Answer everything that has already arrived before writing.
                    match frames.next().now_or_never() {
                        Some(next) => frame = next,
                        None => break,
                    }
                }
                last_activity = Instant::now();
                // A large frame (a registration) leaves its buffer behind; brokers send one
                // every 30 s, and keeping it in between pins megabytes per broker connection.
                let buffer = frames.read_buffer_mut();
                if buffer.is_empty() && buffer.capacity() > READ_BUFFER_KEPT {
                    *buffer = BytesMut::new();
                }
            }
            Some((response, _permit)) = conn.done.1.recv() => conn.push(&response),
            _ = tokio::time::sleep_until((last_activity + limits.idle).into()) => {
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
                    last_activity = Instant::now();
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

/// Bytes of answers gathered before they are written even if more requests are waiting.
const WRITE_BATCH: usize = 64 * 1024;
/// An idle connection's read buffer larger than this is given back.
const READ_BUFFER_KEPT: usize = 64 * 1024;

/// An answer from the blocking pool and the permit it was served under.
type Answer = (RemotingCommand, OwnedSemaphorePermit);

struct Connection<'a> {
    state: &'a Arc<State>,
    origin: Origin,
    out: BytesMut,
    blocking: Arc<Semaphore>,
    /// Answers of requests served off the reader, each with the permit it was served under:
    /// the permit is released only once the answer is in `out`, so a client that sends
    /// without reading makes the server hold at most `BLOCKING_IN_FLIGHT` answers.
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
        if !handler::may_block(request.code) {
            if let Some(response) = handler::handle(self.state, self.origin, &request) {
                self.push(&response);
            }
            return;
        }
        // Every permit may be held by an answer waiting in the channel: take answers while
        // waiting, or the reader would wait on itself.
        let permit = loop {
            tokio::select! {
                biased;
                Some((response, _permit)) = self.done.1.recv() => self.push(&response),
                permit = self.blocking.clone().acquire_owned() => match permit {
                    Ok(permit) => break permit,
                    Err(_) => return,
                },
            }
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
}
