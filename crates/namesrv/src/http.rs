//! The read-only HTTP port: Prometheus metrics, health and readiness probes, the address list
//! that clients' address-server lookup reads, and a live status page.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Query, State as AxumState};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use remoting::codes::version;
use remoting::json::JsonStyle;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::state::{now_ms, State};

type Shared = Arc<State>;

pub async fn serve(state: Shared, listener: TcpListener, shutdown: CancellationToken) {
    let app = Router::new()
        .route("/", get(status_page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/rocketmq/nsaddr", get(nsaddr))
        .with_state(state);
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await;
}

fn text(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

async fn metrics(AxumState(state): AxumState<Shared>) -> Response {
    let (alive, topics) = state.routes.read(|r| {
        let mut alive: BTreeMap<String, usize> = BTreeMap::new();
        for key in r.live.keys() {
            *alive.entry(key.cluster.clone()).or_default() += 1;
        }
        (alive.into_iter().collect(), r.topics.len())
    });
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(alive, topics),
    )
        .into_response()
}

async fn ready(AxumState(state): AxumState<Shared>) -> Response {
    if state.is_ready() {
        text("ready\n".into())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

/// What a Java client's address-server lookup expects: `host:port;host:port`. Unless
/// configured, the address the caller reached us by, with the remoting port.
async fn nsaddr(AxumState(state): AxumState<Shared>, headers: HeaderMap) -> Response {
    let (configured, port) = {
        let s = state.settings.read();
        (
            s.server.advertised_addresses.clone(),
            state.remoting_addr.port(),
        )
    };
    if !configured.trim().is_empty() {
        return text(configured.trim().to_string());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<axum::http::uri::Authority>().ok())
        .map(|a| a.host().to_string())
        .unwrap_or_else(|| state.remoting_addr.ip().to_string());
    text(format!("{host}:{port}"))
}

#[derive(Deserialize)]
struct PageQuery {
    topic: Option<String>,
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

async fn status_page(
    AxumState(state): AxumState<Shared>,
    Query(q): Query<PageQuery>,
) -> Html<String> {
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
    state.routes.read(|r| {
        let _ = write!(
            page,
            "<h2>Clusters</h2><table id=brokers><tr><th>cluster</th><th>broker name</th><th>id</th><th>role</th><th>address</th><th>version</th><th>last heartbeat</th><th>topics</th></tr>"
        );
        for (cluster, names) in r.clusters.iter().collect::<BTreeMap<_, _>>() {
            for name in names {
                let Some(bd) = r.brokers.get(name) else { continue };
                let topics = r.topics.values().filter(|q| q.contains(name)).count();
                for (id, addr) in &bd.broker_addrs {
                    let live = r.live(cluster, addr);
                    let _ = write!(
                        page,
                        "<tr><td>{}</td><td>{}</td><td>{id}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{topics}</td></tr>",
                        esc(cluster),
                        esc(name),
                        if *id == 0 { "master" } else { "slave" },
                        esc(addr),
                        live.map_or("-".into(), |l| match version::release_name(l.version) {
                            Some(name) => name.to_string(),
                            None => format!("#{}", l.version),
                        }),
                        live.map_or("not live".into(), |l| format!("{} s ago", (now - l.last_update_ms).max(0) / 1000)),
                    );
                }
            }
        }
        let _ = write!(page, "</table><p>{} topics</p>", r.topics.len());
    });

    let _ = write!(
        page,
        "<h2>Topic route</h2><form method=get><input name=topic placeholder=topic value=\"{}\"> <button>Show</button></form>",
        esc(q.topic.as_deref().unwrap_or(""))
    );
    if let Some(topic) = q.topic.as_deref().filter(|t| !t.is_empty()) {
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

    let _ = write!(
        page,
        "<h2>KV namespaces</h2><table id=kv><tr><th>namespace</th><th>key</th><th>value</th></tr>"
    );
    for ns in state.kv.namespaces() {
        for (k, v) in state.kv.namespace(&ns).unwrap_or_default() {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&ns),
                esc(&k),
                esc(&v)
            );
        }
    }
    let _ = write!(page, "</table></body></html>");
    Html(page)
}
