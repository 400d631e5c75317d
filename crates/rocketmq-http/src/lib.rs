//! The read-only HTTP port the NameServer and the controller share: an accept loop bounded in
//! connections and in how long a peer may leave one hanging, and the answers every such port
//! gives (text, OpenMetrics).
//!
//! - [`group_series`]: a replicated group's Prometheus series, the same for both groups;
//! - [`page`]: the parts of the live status page (style, script, tables).

pub mod group_series;
pub mod page;

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long and how many HTTP connections may stay open.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// For a request's header to arrive.
    pub header_read: Duration,
    /// Without a byte either way and without a request being served.
    pub idle: Duration,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read: Duration::from_secs(5),
            idle: Duration::from_secs(30),
            max_connections: 256,
        }
    }
}

impl Limits {
    /// The configured cap, lowered to a quarter of the open-files limit as it is now: the
    /// remoting port must always have descriptors left, whatever the HTTP port is sent.
    fn connection_cap(&self) -> usize {
        match rocketmq_wire::listener::admission::open_files_limit() {
            Some(limit) => self.max_connections.min((limit as usize / 4).max(1)),
            None => self.max_connections,
        }
    }
}

/// The local address an HTTP connection arrived on, in each request's extensions, for answers
/// that name this server.
#[derive(Clone, Copy, Debug)]
pub struct ArrivedOn(pub std::net::IpAddr);

/// Serves `app` on `listener` until `shutdown`, then lets the open connections finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let open = Arc::new(AtomicUsize::new(0));
    let tracker = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors, most likely: retrying at once would spin.
                    tracing::debug!("HTTP accept failed: {e}");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_millis(50)) => continue,
                    }
                }
            },
        };
        if open.load(Ordering::Acquire) >= limits.connection_cap() {
            drop(stream);
            continue;
        }
        open.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(open.clone());
        tracker.spawn(connection(
            stream,
            app.clone(),
            limits,
            shutdown.clone(),
            slot,
        ));
    }
    drop(listener);
    tracker.close();
    tracker.wait().await;
}

/// One open connection counted against the cap, for as long as it is held.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn connection(
    stream: TcpStream,
    app: Router,
    limits: Limits,
    shutdown: CancellationToken,
    _slot: Slot,
) {
    let _ = stream.set_nodelay(true);
    let arrived_on = stream.local_addr().ok().map(|a| ArrivedOn(a.ip()));
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        io: stream,
        activity: activity.clone(),
    });
    let app = TowerToHyperService::new(app);
    let watch = activity.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        if let Some(arrived_on) = arrived_on {
            request.extensions_mut().insert(arrived_on);
        }
        let busy = Busy::new(watch.clone());
        let answer = hyper::service::Service::call(&app, request);
        async move {
            let answer = answer.await;
            drop(busy);
            answer
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        let idle_until = activity.last() + limits.idle;
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = shutdown.cancelled(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            // hyper's own timeout covers only the request header; this covers everything else
            // a peer can leave hanging (idle keep-alive, a body that never comes, a response
            // nobody reads). Dropping the connection closes the socket.
            _ = tokio::time::sleep_until(idle_until) => {
                if !activity.busy() && activity.last() + limits.idle <= Instant::now() {
                    return;
                }
            }
        }
    }
}

/// When bytes last moved on a connection, either way, and whether a request is being served:
/// a slow answer is not idleness.
struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// A request being served; the idle clock restarts when it ends.
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy(activity)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A stream that records its traffic in an [`Activity`].
struct Watched {
    io: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A plain-text answer.
pub fn text(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

/// `answer`'s JSON, not to be cached, made on the blocking pool (a status walks tables, a
/// journal's answer reads files).
pub async fn json<T: serde::Serialize>(answer: impl FnOnce() -> T + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(move || serde_json::to_vec(&answer())).await {
        Ok(Ok(body)) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        _ => axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// A scrape's answer.
pub fn openmetrics(body: String) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// A label value from outside (a broker's cluster or group name). The encoder writes values as
/// given, so a quote or line feed in a name would end the value or the line and forge series.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Escaped(pub String);

impl EncodeLabelValue for Escaped {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        use std::fmt::Write as _;
        let mut rest = self.0.as_str();
        while let Some(at) = rest.find(['\\', '"', '\n']) {
            encoder.write_str(&rest[..at])?;
            encoder.write_str(match rest.as_bytes()[at] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[at + 1..];
        }
        encoder.write_str(rest)
    }
}
