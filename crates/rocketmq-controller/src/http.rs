//! `mqcontroller`'s HTTP port, on when `metricsExporterType=PROM`: `/metrics` (the series an
//! embedded node adds to the NameServer's), `/healthz`, `/readyz` (a member of a group with a
//! leader, caught up) and the live status page at `/` with its data at `/status.json`. Bounded
//! like the NameServer's HTTP port, whose machinery it shares (`rocketmq_http`).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State as AxumState;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;
use rocketmq_http::page;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::node::{Controller, ControllerView};

/// Rows per table: the page's cost follows what it shows, not the number of broker groups.
const PAGE_ROWS: usize = 200;

/// How often the page asks for fresh data.
const POLL_MS: u64 = 5000;

#[derive(Clone)]
struct Http {
    controller: Arc<Controller>,
    registry: Arc<Registry>,
    started: Instant,
}

/// What the page shows, as `/status.json` serves it.
#[derive(Serialize)]
struct Status {
    now_ms: i64,
    version: &'static str,
    uptime_s: u64,
    ready: bool,
    controller: ControllerView,
}

/// Serves the port until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    controller: Arc<Controller>,
    shutdown: CancellationToken,
) {
    let mut registry = Registry::with_prefix("namesrv");
    crate::metrics::register(&mut registry, controller.clone());
    let app = Router::new()
        .route("/", get(status_page))
        .route("/status.json", get(status_json))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(Http {
            controller,
            registry: Arc::new(registry),
            started: Instant::now(),
        });
    rocketmq_http::serve(listener, app, rocketmq_http::Limits::default(), shutdown).await
}

fn status(http: &Http) -> Status {
    Status {
        now_ms: rocketmq_wire::clock::now_ms(),
        version: env!("CARGO_PKG_VERSION"),
        uptime_s: http.started.elapsed().as_secs(),
        ready: http.controller.group().unready_reason().is_none(),
        controller: http.controller.view(PAGE_ROWS),
    }
}

async fn metrics(AxumState(http): AxumState<Http>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &http.registry) {
        Ok(()) => rocketmq_http::openmetrics(body),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn ready(AxumState(http): AxumState<Http>) -> Response {
    match http.controller.group().unready_reason() {
        None => rocketmq_http::text("ready\n".into()),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

async fn status_json(AxumState(http): AxumState<Http>) -> Response {
    rocketmq_http::json(move || status(&http)).await
}

async fn status_page(AxumState(http): AxumState<Http>) -> Response {
    let s = status(&http);
    let c = &s.controller;
    let mut out = String::new();
    page::open(
        &mut out,
        &format!("Controller {}", c.address),
        &format!(
            "RocketMQ controller <span class=muted id=address>{}</span>",
            page::esc(&c.address)
        ),
        &format!(
            "mqcontroller {} · up <span id=uptime>{}</span> · <span id=ready>{}</span> · \
             <span id=updated>as of {} UTC</span>",
            s.version,
            page::uptime(s.uptime_s),
            if s.ready { "ready" } else { "not ready" },
            page::clock(s.now_ms),
        ),
    );
    crate::page::section(&mut out, c);
    page::close(
        &mut out,
        POLL_MS,
        &[
            crate::page::SCRIPT,
            "live.start((s) => {\n  live.text('uptime', live.uptime(s.uptime_s));\n  \
             live.text('ready', s.ready ? 'ready' : 'not ready');\n  \
             showController(s.controller, s.now_ms);\n});",
        ],
    );
    Html(out).into_response()
}
