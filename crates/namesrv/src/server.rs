//! The accept loop and one task per connection: read frames, dispatch, write responses, and
//! report the connection's end so that brokers registered on it leave.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use remoting::frame::RemotingCodec;
use remoting::RemotingCommand;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::handler::{self, Origin};
use crate::proxy;
use crate::route::ConnId;
use crate::state::State;
use crate::tls::{self, TlsMode};

const LISTEN_BACKLOG: u32 = 1024;
/// Responses queued per connection before its reader stops reading (a client that never
/// reads cannot make the server buffer without bound).
const OUTBOUND_QUEUE: usize = 256;
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
        tracker.spawn(async move {
            debug!(%peer, conn, "connection opened");
            state.metrics.connection_opened();
            serve(&state, stream, conn, close).await;
            state.metrics.connection_closed();
            state.connection_closed(conn);
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

async fn serve_frames<R, W>(
    state: &Arc<State>,
    read: R,
    write: W,
    conn: ConnId,
    close: CancellationToken,
    limits: Limits,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let Limits {
        idle: idle_limit,
        max_frame,
    } = limits;
    let last_activity = Arc::new(AtomicI64::new(elapsed_ms(state)));
    let (tx, mut rx) = mpsc::channel::<RemotingCommand>(OUTBOUND_QUEUE);

    let writer_activity = last_activity.clone();
    let writer_state = state.clone();
    let mut writer = tokio::spawn(async move {
        let mut sink = FramedWrite::new(write, RemotingCodec::new(usize::MAX));
        while let Some(cmd) = rx.recv().await {
            let mut ok = sink.feed(cmd).await.is_ok();
            while let (true, Ok(cmd)) = (ok, rx.try_recv()) {
                ok = sink.feed(cmd).await.is_ok();
            }
            if !ok || sink.flush().await.is_err() {
                return;
            }
            writer_activity.store(elapsed_ms(&writer_state), Ordering::Relaxed);
        }
    });

    let blocking = Arc::new(Semaphore::new(BLOCKING_IN_FLIGHT));
    let mut frames = FramedRead::new(read, RemotingCodec::new(max_frame));
    let origin = Origin { conn };
    loop {
        let idle_for = elapsed_ms(state) - last_activity.load(Ordering::Relaxed);
        let idle_left = idle_limit.saturating_sub(Duration::from_millis(idle_for.max(0) as u64));
        let frame = tokio::select! {
            f = frames.next() => f,
            _ = close.cancelled() => break,
            _ = tokio::time::sleep(idle_left) => {
                let idle_for = elapsed_ms(state) - last_activity.load(Ordering::Relaxed);
                if Duration::from_millis(idle_for.max(0) as u64) >= idle_limit {
                    debug!(conn, "closing idle connection");
                    break;
                }
                continue;
            }
        };
        let request = match frame {
            None => break,
            Some(Err(e)) => {
                warn!(conn, "closing connection on a bad frame: {e}");
                break;
            }
            Some(Ok(request)) => request,
        };
        last_activity.store(elapsed_ms(state), Ordering::Relaxed);
        if request.is_response() {
            // Nothing the server sends on inbound connections expects an answer.
            continue;
        }
        if handler::may_block(request.code) {
            let Ok(permit) = blocking.clone().acquire_owned().await else {
                break;
            };
            let state = state.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let handled =
                    tokio::task::spawn_blocking(move || handler::handle(&state, origin, &request))
                        .await;
                drop(permit);
                if let Ok(Some(response)) = handled {
                    let _ = tx.send(response).await;
                }
            });
        } else if let Some(response) = handler::handle(state, origin, &request) {
            if tx.send(response).await.is_err() {
                break;
            }
        }
    }
    drop(tx);
    // Let responses already produced (including those of in-flight blocking requests) go out.
    if tokio::time::timeout(Duration::from_secs(5), &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
}

fn elapsed_ms(state: &State) -> i64 {
    state.started.elapsed().as_millis() as i64
}
