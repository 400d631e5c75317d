//! The read-only HTTP port: Prometheus metrics, health and readiness probes, the address list
//! that clients' address-server lookup reads, a live status page (`status`) with a route search
//! (`search`), and the route journal's answers as JSON (`journal`). The port's machinery
//! (bounds, deadlines) is `rocketmq_http`, shared with the standalone controller.

mod journal;
mod search;
mod status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State as AxumState;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use rocketmq_http::{openmetrics, text, ArrivedOn};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::state::State;

#[derive(Clone)]
struct Http {
    state: Arc<State>,
    page: Arc<status::PageCache>,
}

fn limits(state: &State) -> rocketmq_http::Limits {
    let s = &state.config.settings().server;
    let secs = |v: i32| Duration::from_secs(v.max(1) as u64);
    rocketmq_http::Limits {
        header_read: secs(s.http_header_read_timeout_seconds),
        idle: secs(s.http_idle_timeout_seconds),
        max_connections: s.http_max_connections.max(1) as usize,
    }
}

pub async fn serve(state: Arc<State>, listener: TcpListener, shutdown: CancellationToken) {
    let limits = limits(&state);
    let app = Router::new()
        .route("/", get(status::page))
        .route("/status.json", get(status::json))
        .route("/journal", get(journal::json))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/rocketmq/nsaddr", get(nsaddr))
        .with_state(Http {
            state,
            page: Default::default(),
        });
    rocketmq_http::serve(listener, app, limits, shutdown).await
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
    openmetrics(state.metrics.render(alive, topics, state.is_ready()))
}

async fn ready(AxumState(http): AxumState<Http>) -> Response {
    if http.state.is_ready() {
        return text("ready\n".into());
    }
    let why = http
        .state
        .peer_group
        .as_ref()
        .and_then(|g| g.unready_reason())
        .map_or(String::new(), |why| format!(": {why}"));
    (StatusCode::SERVICE_UNAVAILABLE, format!("not ready{why}\n")).into_response()
}

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
