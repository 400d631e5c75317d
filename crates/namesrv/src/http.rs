//! The read-only HTTP port: Prometheus metrics, health and readiness probes, the address list
//! that clients' address-server lookup reads, and a live status page.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{Query, State as AxumState};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rocketmq_wire::codes::version;
use rocketmq_wire::json::JsonStyle;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::state::{now_ms, State};

#[derive(Clone)]
struct Http {
    state: Arc<State>,
    page: Arc<PageCache>,
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
        match open_files_limit() {
            Some(limit) => self.max_connections.min((limit / 4).max(1)),
            None => self.max_connections,
        }
    }
}

#[cfg(target_env = "gnu")]
fn open_files_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur as usize)
}

#[cfg(not(target_env = "gnu"))]
fn open_files_limit() -> Option<usize> {
    None
}

pub async fn serve(state: Arc<State>, listener: TcpListener, shutdown: CancellationToken) {
    let limits = Limits::of(&state);
    let app = Router::new()
        .route("/", get(status_page))
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
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        io: stream,
        activity: activity.clone(),
    });
    let app = TowerToHyperService::new(app);
    let watch = activity.clone();
    let service = hyper::service::service_fn(move |request| {
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
async fn nsaddr(AxumState(http): AxumState<Http>, headers: HeaderMap) -> Response {
    let state = &http.state;
    let (configured, port) = {
        let s = state.config.settings();
        (
            s.server.advertised_addresses.clone(),
            state.remoting_addr.port(),
        )
    };
    if !configured.trim().is_empty() {
        return text(configured.trim().to_string());
    }
    // The client connects wherever this names: a Host header is only echoed when it is
    // plainly a host, never markup, paths or anything longer than a DNS name.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(host_of)
        .map(str::to_string)
        .unwrap_or_else(|| match state.remoting_addr.ip() {
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        });
    text(format!("{host}:{port}"))
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

#[derive(Deserialize)]
struct PageQuery {
    topic: Option<String>,
    page: Option<usize>,
}

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:left}\
th{background:#f3f3f3}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.5em}.muted{color:#777}\
code{background:#f6f6f6;padding:0 .2em}";

/// Rows per table on the status page: its cost follows what it shows, not the registry's size.
const PAGE_ROWS: usize = 200;

/// What the status page shows of the registry, built in one walk over the topics and kept
/// until the routes change. Liveness is not in it: heartbeats do not change routes, so it is
/// read for the rows shown, at each request.
struct Summary {
    /// Every broker address, by cluster, broker name and id.
    rows: Vec<BrokerRow>,
    clusters: Vec<ClusterRow>,
    topics: usize,
}

struct BrokerRow {
    cluster: String,
    name: String,
    id: i64,
    addr: String,
    topics: usize,
}

struct ClusterRow {
    name: String,
    groups: usize,
    addresses: usize,
}

/// Concurrent requests wait for one build rather than each making their own.
#[derive(Default)]
struct PageCache(parking_lot::Mutex<Option<(u64, Arc<Summary>)>>);

impl PageCache {
    fn get(&self, state: &State) -> Arc<Summary> {
        let mut cached = self.0.lock();
        // Read before the registry: a summary built from newer state under an older number
        // is merely rebuilt later, never kept stale.
        let generation = state.routes.generation();
        match &*cached {
            Some((built, summary)) if *built == generation => summary.clone(),
            _ => {
                let summary = Arc::new(summarise(state));
                *cached = Some((generation, summary.clone()));
                summary
            }
        }
    }
}

fn summarise(state: &State) -> Summary {
    state.routes.read(|r| {
        let mut per_name: foldhash::HashMap<&str, usize> = Default::default();
        for (_, queues) in r.topic_queues() {
            for (name, _) in queues.iter() {
                *per_name.entry(name).or_default() += 1;
            }
        }
        let mut clusters: Vec<_> = r.clusters().collect();
        clusters.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut rows = Vec::new();
        let mut cluster_rows = Vec::with_capacity(clusters.len());
        for (cluster, names) in clusters {
            let before = rows.len();
            for name in names {
                let Some(bd) = r.group(name) else {
                    continue;
                };
                let topics = per_name.get(name.as_str()).copied().unwrap_or(0);
                for (id, addr) in &bd.broker_addrs {
                    rows.push(BrokerRow {
                        cluster: cluster.to_string(),
                        name: name.clone(),
                        id: *id,
                        addr: addr.clone(),
                        topics,
                    });
                }
            }
            cluster_rows.push(ClusterRow {
                name: cluster.to_string(),
                groups: names.len(),
                addresses: rows.len() - before,
            });
        }
        Summary {
            rows,
            clusters: cluster_rows,
            topics: r.topic_count(),
        }
    })
}

async fn status_page(AxumState(http): AxumState<Http>, Query(q): Query<PageQuery>) -> Response {
    // Walking a large registry takes long enough to hold up route lookups sharing the worker.
    match tokio::task::spawn_blocking(move || render_page(&http, q)).await {
        Ok(page) => Html(page).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn render_page(http: &Http, q: PageQuery) -> String {
    let state = &*http.state;
    let summary = http.page.get(state);
    let now = now_ms();
    let mut page = String::new();
    let _ = write!(
        page,
        "<!doctype html><html><head><meta charset=utf-8><title>NameServer {addr}</title><style>{STYLE}</style></head><body>\
         <h1>RocketMQ NameServer <span class=muted>{addr}</span></h1><p class=muted>up {up} s · {ready}</p>",
        addr = state.remoting_addr,
        up = state.started.elapsed().as_secs(),
        ready = if state.is_ready() { "ready" } else { "not ready" },
    );

    let _ = write!(
        page,
        "<h2>Clusters</h2><table id=clusters><tr><th>cluster</th><th>broker names</th><th>addresses</th></tr>"
    );
    for c in summary.clusters.iter().take(PAGE_ROWS) {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.name),
            c.groups,
            c.addresses
        );
    }
    page.push_str("</table>");
    not_shown(
        &mut page,
        summary.clusters.len().saturating_sub(PAGE_ROWS),
        "clusters",
    );

    let pages = summary.rows.len().div_ceil(PAGE_ROWS).max(1);
    let number = q.page.unwrap_or(1).clamp(1, pages);
    let first = (number - 1) * PAGE_ROWS;
    let shown = &summary.rows[first..(first + PAGE_ROWS).min(summary.rows.len())];
    let live: Vec<Option<(i32, i64)>> = state.routes.read(|r| {
        shown
            .iter()
            .map(|row| {
                r.live(&row.cluster, &row.addr)
                    .map(|l| (l.version, l.last_update_ms))
            })
            .collect()
    });
    let _ = write!(
        page,
        "<h2>Brokers</h2><table id=brokers><tr><th>cluster</th><th>broker name</th><th>id</th><th>role</th><th>address</th><th>version</th><th>last heartbeat</th><th>topics</th></tr>"
    );
    for (row, live) in shown.iter().zip(live) {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&row.cluster),
            esc(&row.name),
            row.id,
            if row.id == 0 { "master" } else { "slave" },
            esc(&row.addr),
            live.map_or("-".into(), |(v, _)| match version::release_name(v) {
                Some(name) => name.to_string(),
                None => format!("#{v}"),
            }),
            live.map_or("not live".into(), |(_, at)| format!(
                "{} s ago",
                (now - at).max(0) / 1000
            )),
            row.topics,
        );
    }
    page.push_str("</table>");
    if pages > 1 {
        let _ = write!(
            page,
            "<p id=pages>addresses {}–{} of {}, page {number} of {pages}",
            first + 1,
            first + shown.len(),
            summary.rows.len()
        );
        if number > 1 {
            let _ = write!(page, " · <a href=\"?page={}\">previous</a>", number - 1);
        }
        if number < pages {
            let _ = write!(page, " · <a href=\"?page={}\">next</a>", number + 1);
        }
        page.push_str("</p>");
    }
    let _ = write!(page, "<p>{} topics</p>", summary.topics);

    let _ = write!(
        page,
        "<h2>Topic route</h2><form method=get><input name=topic placeholder=topic value=\"{}\"> <button>Show</button></form>",
        esc(q.topic.as_deref().unwrap_or(""))
    );
    if let Some(topic) = q.topic.as_deref().filter(|t| !t.is_empty()) {
        route_section(&mut page, state, topic);
    }

    let (entries, total) = state.kv.first_entries(PAGE_ROWS);
    let _ = write!(
        page,
        "<h2>KV namespaces</h2><table id=kv><tr><th>namespace</th><th>key</th><th>value</th></tr>"
    );
    for (ns, k, v) in &entries {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(ns),
            esc(k),
            esc(v)
        );
    }
    page.push_str("</table>");
    not_shown(&mut page, total - entries.len(), "KV entries");
    page.push_str("</body></html>");
    page
}

fn not_shown(page: &mut String, hidden: usize, what: &str) {
    if hidden > 0 {
        let _ = write!(page, "<p class=muted>{hidden} more {what} not shown</p>");
    }
}

fn route_section(page: &mut String, state: &State, topic: &str) {
    match state.routes.route(topic, state.route_extras(topic)) {
        None => {
            let _ = write!(
                page,
                "<p id=route>No route for <code>{}</code></p>",
                esc(topic)
            );
        }
        Some(route) => {
            let _ = write!(page, "<table id=route><tr><th>broker name</th><th>perm</th><th>read queues</th><th>write queues</th><th>addresses</th></tr>");
            for qd in &route.queue_datas {
                let addrs = route
                    .broker_datas
                    .iter()
                    .find(|bd| bd.broker_name == qd.broker_name)
                    .map(|bd| {
                        bd.broker_addrs
                            .iter()
                            .map(|(id, a)| format!("{id}: {}", esc(a)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                let _ = write!(
                    page,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{addrs}</td></tr>",
                    esc(&qd.broker_name),
                    qd.perm,
                    qd.read_queue_nums,
                    qd.write_queue_nums
                );
            }
            let json = String::from_utf8_lossy(&route.encode(JsonStyle::Standard)).into_owned();
            let _ = write!(
                page,
                "</table><details><summary>JSON</summary><pre>{}</pre></details>",
                esc(&json)
            );
        }
    }
}
