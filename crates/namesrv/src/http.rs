//! The read-only HTTP port: Prometheus metrics, health and readiness probes, the address list
//! that clients' address-server lookup reads, and a live status page (`status`).

mod status;

use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::State as AxumState;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::state::State;

#[derive(Clone)]
struct Http {
    state: Arc<State>,
    page: Arc<status::PageCache>,
}

/// How long and how many HTTP connections may stay open.
#[derive(Clone, Copy)]
struct Limits {
    header_read: Duration,
    idle: Duration,
    max_connections: usize,
}

impl Limits {
    fn of(state: &State) -> Self {
        let s = &state.config.settings().server;
        let secs = |v: i32| Duration::from_secs(v.max(1) as u64);
        Limits {
            header_read: secs(s.http_header_read_timeout_seconds),
            idle: secs(s.http_idle_timeout_seconds),
            max_connections: s.http_max_connections.max(1) as usize,
        }
    }

    /// The configured cap, lowered to a quarter of the open-files limit as it is now: the
    /// remoting port must always have descriptors left, whatever the HTTP port is sent.
    fn connection_cap(&self) -> usize {
        match rocketmq_wire::listener::admission::open_files_limit() {
            Some(limit) => self.max_connections.min((limit as usize / 4).max(1)),
            None => self.max_connections,
        }
    }
}

pub async fn serve(state: Arc<State>, listener: TcpListener, shutdown: CancellationToken) {
    let limits = Limits::of(&state);
    let app = Router::new()
        .route("/", get(status::page))
        .route("/status.json", get(status::json))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/rocketmq/nsaddr", get(nsaddr))
        .with_state(Http {
            state,
            page: Default::default(),
        });
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

fn text(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

async fn metrics(AxumState(http): AxumState<Http>) -> Response {
    let state = &http.state;
    let (alive, topics) = state.routes.read(|r| {
        let mut alive: BTreeMap<String, usize> = BTreeMap::new();
        for (key, _) in r.live_entries() {
            *alive.entry(key.cluster.clone()).or_default() += 1;
        }
        (alive.into_iter().collect(), r.topic_count())
    });
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(alive, topics, state.is_ready()),
    )
        .into_response()
}

async fn ready(AxumState(http): AxumState<Http>) -> Response {
    if http.state.is_ready() {
        text("ready\n".into())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

/// What a Java client's address-server lookup expects: `host:port;host:port`. Unless
/// configured, the address the caller reached us by, with the remoting port.
/// The local address an HTTP connection arrived on, for answers that name this server.
#[derive(Clone, Copy)]
struct ArrivedOn(std::net::IpAddr);

/// The address list clients fetch to find NameServers: the configured `advertisedAddresses`;
/// else the remoting port at the address it is bound to or, bound to every interface, at the
/// address this request arrived on. Never a name the client sent (a Host header): a cache in
/// front of this endpoint could then be made to send every client to another server.
async fn nsaddr(
    AxumState(http): AxumState<Http>,
    arrived_on: Option<axum::Extension<ArrivedOn>>,
) -> Response {
    let state = &http.state;
    let configured = state.config.settings().server.advertised_addresses.clone();
    if !configured.trim().is_empty() {
        return text(configured.trim().to_string());
    }
    let bound = state.remoting_addr;
    let ip = match arrived_on {
        Some(axum::Extension(ArrivedOn(ip))) if bound.ip().is_unspecified() => ip,
        _ => bound.ip(),
    };
    text(std::net::SocketAddr::new(ip, bound.port()).to_string())
}

/// The host part of a Host header value (`host`, `host:port`, `[v6]` or `[v6]:port`) when it
/// is a DNS name, an IPv4 literal or a bracketed IPv6 literal.
fn host_of(value: &str) -> Option<&str> {
    let (host, port) = if value.starts_with('[') {
        let end = value.find(']')? + 1;
        (&value[..end], &value[end..])
    } else {
        match value.rsplit_once(':') {
            Some((host, _)) => (host, &value[host.len()..]),
            None => (value, ""),
        }
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| {
            !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
        });
    let host_ok = match host.strip_prefix('[') {
        Some(inner) => inner
            .strip_suffix(']')
            .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok()),
        None => is_dns_name(host),
    };
    (port_ok && host_ok).then_some(host)
}

/// Letters, digits and hyphens in dot-separated labels of 1 to 63, 253 in all (IPv4 literals
/// included).
fn is_dns_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}
