//! One connection's loop: reads requests and answers them on the same task — cheap requests
//! inline, with every frame already received answered in one write; blocking ones on the
//! blocking pool and waiting ones as tasks, their answers joining the next write. A client that
//! stops reading stalls only its own connection, and is closed after the idle limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::frames::{Frame, FrameReader, SMALL_FRAME};
use super::{offload, DecodeBudget, Dispatch, Origin, Service};
use crate::error::FrameError;
use crate::frame::{
    decode_payload, encode_frame, encode_frame_head, payload_header_len, release_if_large,
};
use crate::listener::ConnectionBounds;
use crate::RemotingCommand;

/// Requests served off the reader (on the blocking pool, or waiting) in flight per connection.
const OFF_READER_IN_FLIGHT: usize = 16;

/// Large frames up to this size may be served on the reader by requests that move their own
/// expensive steps; beyond it, checking the body alone takes milliseconds.
const INLINE_FRAME: usize = 4 * 1024 * 1024;

/// Bytes of answers gathered before they are written even if more requests are waiting.
const WRITE_BATCH: usize = 64 * 1024;

/// One connection being served, before its stream is split.
pub struct Serving<'a, S> {
    pub service: &'a Arc<S>,
    pub origin: Origin,
    pub close: CancellationToken,
    pub bounds: ConnectionBounds,
    pub budget: &'a DecodeBudget,
    pub first_frame_by: Instant,
}

impl<S: Service> Serving<'_, S> {
    pub async fn frames<R, W>(self, read: R, mut write: W)
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let (origin, bounds) = (self.origin, self.bounds);
        let mut conn = Connection {
            service: self.service,
            origin,
            out: BytesMut::with_capacity(4096),
            in_place: Vec::new(),
            off_reader: Arc::new(Semaphore::new(OFF_READER_IN_FLIGHT)),
            done: mpsc::channel(OFF_READER_IN_FLIGHT),
        };
        let mut frames = FrameReader::new(read, bounds.max_frame, self.budget);
        let mut deadline = self.first_frame_by;
        'serve: loop {
            tokio::select! {
                biased;
                _ = self.close.cancelled() => break,
                frame = frames.next() => {
                    let mut frame = frame;
                    loop {
                        match frame {
                            None => break 'serve,
                            // A peer that hangs up (even without TLS close_notify) is ordinary.
                            Some(Err(FrameError::Io(e))) => {
                                debug!(conn = origin.conn, "connection ended: {e}");
                                return;
                            }
                            Some(Err(e)) => {
                                warn!(conn = origin.conn, "closing connection on a bad frame: {e}");
                                return;
                            }
                            Some(Ok(Frame::Small(request))) => conn.accept(request).await,
                            Some(Ok(Frame::Large(payload, permit))) => {
                                if !conn.accept_large(payload, permit).await {
                                    return;
                                }
                            }
                        }
                        if conn.out.len() >= WRITE_BATCH || !conn.in_place.is_empty() {
                            break;
                        }
                        // Answer everything that has already arrived before writing.
                        match frames.buffered() {
                            Ok(Some(next)) => frame = Some(Ok(next)),
                            Ok(None) => break,
                            Err(e) => frame = Some(Err(e)),
                        }
                    }
                    deadline = Instant::now() + bounds.idle;
                    frames.shrink_when_idle();
                }
                Some((response, _permit)) = conn.done.1.recv() => conn.push(&response),
                _ = tokio::time::sleep_until(deadline.into()) => {
                    debug!(conn = origin.conn, "closing idle connection");
                    break;
                }
            }
            while let Ok((response, _permit)) = conn.done.1.try_recv() {
                conn.push(&response);
            }
            if !conn.out.is_empty() || !conn.in_place.is_empty() {
                let written = async {
                    for chunk in conn.in_place.drain(..) {
                        write.write_all(&chunk).await?;
                    }
                    write.write_all(&conn.out).await
                };
                match tokio::time::timeout(bounds.idle, written).await {
                    Ok(Ok(())) => {
                        conn.out.clear();
                        // A large answer (a topic list, a peer's pull) leaves its buffer behind.
                        release_if_large(&mut conn.out);
                        deadline = deadline.max(Instant::now() + bounds.idle);
                    }
                    _ => return,
                }
            }
        }
        // Requests still served off the reader are answered before the connection closes.
        // `in_place` is empty here: a push that fills it ends the frame loop before the next
        // frame is read, and the write above empties it, so only `out` is left to write.
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
}

/// A large frame's request, decoded: answered where it was decoded, or to be served as a task.
enum Decoded {
    Served(Option<RemotingCommand>),
    Waits(RemotingCommand),
}

/// An answer served off the reader and the permit it was served under: its place among the
/// connection's requests in flight.
type Answer = (RemotingCommand, OwnedSemaphorePermit);

struct Connection<'a, S> {
    service: &'a Arc<S>,
    origin: Origin,
    out: BytesMut,
    /// What goes before `out`, in order: the answers gathered before a large body, and the body.
    in_place: Vec<bytes::Bytes>,
    off_reader: Arc<Semaphore>,
    /// Answers of requests served off the reader, each with the permit it was served under:
    /// it is released only once the answer is in `out` (or `in_place`), which is written before
    /// the next frame is read, so a client that sends without reading makes the server hold at
    /// most `OFF_READER_IN_FLIGHT` answers.
    done: (mpsc::Sender<Answer>, mpsc::Receiver<Answer>),
}

impl<S: Service> Connection<'_, S> {
    fn push(&mut self, response: &RemotingCommand) {
        match response.body.as_ref() {
            // A body of a batch or more is written from where it is (a topic list kept built, a
            // peer's pull) instead of being copied into the buffer, which would grow to its
            // size for every such answer and be given back after it.
            Some(body) if body.len() >= WRITE_BATCH => {
                encode_frame_head(response, &mut self.out);
                self.in_place.push(self.out.split().freeze());
                self.in_place.push(body.clone());
            }
            _ => encode_frame(response, &mut self.out),
        }
    }

    async fn accept(&mut self, request: RemotingCommand) {
        if request.is_response() {
            // Nothing a server sends on inbound connections expects an answer.
            return;
        }
        match self.service.dispatch(&request) {
            Dispatch::Inline | Dispatch::MovesItsOwnWork => {
                if let Some(response) = self.service.handle(self.origin, &request) {
                    self.push(&response);
                }
            }
            dispatch @ (Dispatch::Waits | Dispatch::Blocking) => {
                let Some(permit) = self.permit().await else {
                    return;
                };
                let (service, origin, tx) =
                    (self.service.clone(), self.origin, self.done.0.clone());
                tokio::spawn(async move {
                    let response = if dispatch == Dispatch::Waits {
                        service.serve(origin, &request).await
                    } else {
                        tokio::task::spawn_blocking(move || service.handle(origin, &request))
                            .await
                            .ok()
                            .flatten()
                    };
                    if let Some(response) = response {
                        // Never waits: the channel has room for every permit.
                        let _ = tx.send((response, permit)).await;
                    }
                });
            }
        }
    }

    /// Decoding and serving megabytes would stall this async worker's other connections: that
    /// happens off the reactor, in one hop, while this connection's reader waits (a broker sends
    /// one registration at a time). A request that moves its own expensive steps (a
    /// registration, mostly a cheap repeat or difference) is served here when its frame is of
    /// ordinary size; one that waits is served as a task (as from a small frame), its decode
    /// budget given back once decoded. `false` when the connection is to close.
    async fn accept_large(&mut self, payload: bytes::Bytes, permit: OwnedSemaphorePermit) -> bool {
        let (service, origin) = (self.service.clone(), self.origin);
        let decide = move |request: RemotingCommand| match service.dispatch(&request) {
            Dispatch::Waits => Decoded::Waits(request),
            _ => {
                let response = if request.is_response() {
                    None
                } else {
                    service.handle(origin, &request)
                };
                drop(permit);
                Decoded::Served(response)
            }
        };
        let served = if payload.len() <= INLINE_FRAME && payload_header_len(&payload) <= SMALL_FRAME
        {
            match decode_payload(payload) {
                Ok(request)
                    if matches!(
                        self.service.dispatch(&request),
                        Dispatch::MovesItsOwnWork | Dispatch::Waits
                    ) =>
                {
                    Ok(Ok(decide(request)))
                }
                Ok(request) => offload::off_the_reactor(move || Ok(decide(request))).await,
                Err(e) => Ok(Err(e)),
            }
        } else {
            offload::off_the_reactor(move || decode_payload(payload).map(decide)).await
        };
        match served {
            Ok(Ok(Decoded::Served(response))) => {
                if let Some(response) = response {
                    self.push(&response);
                }
                true
            }
            Ok(Ok(Decoded::Waits(request))) => {
                self.accept(request).await;
                true
            }
            Ok(Err(e)) => {
                warn!(
                    conn = self.origin.conn,
                    "closing connection on a bad frame: {e}"
                );
                false
            }
            Err(_) => false,
        }
    }

    /// A place among the connection's requests in flight off the reader; `None` once the server
    /// closes.
    async fn permit(&mut self) -> Option<OwnedSemaphorePermit> {
        // Every permit may be held by an answer waiting in the channel: take answers while
        // waiting, or the reader would wait on itself.
        loop {
            tokio::select! {
                biased;
                Some((response, _permit)) = self.done.1.recv() => self.push(&response),
                permit = self.off_reader.clone().acquire_owned() => return permit.ok(),
            }
        }
    }
}
