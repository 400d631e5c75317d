//! The status page at `/` and what it shows as JSON at `/status.json`, which a small script
//! on the page polls to update it in place. Both are made from one [`Status`] so that they
//! cannot disagree; the page is whole without the script. Its stylesheet and script are the
//! files beside this one (`status.css`, `status.js`), built in.
//!
//! Both stay bounded whatever the registry's size: one page of broker addresses, the first
//! clusters and flagged groups, the kept events and the kept samples. The walk over every
//! topic is made once per route generation ([`PageCache`]), off the request workers.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Query, State as AxumState};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde::{Deserialize, Serialize};

use rocketmq_http::page::{
    cells, chart, chart_marker, clock, empty_row, esc, members_table, micros, not_shown, rate,
    seconds, uptime, MemberRow,
};

use super::{host_of, is_dns_name, Http};
use crate::events::version_name;
use crate::metrics::{Sample, SAMPLES_KEPT, SAMPLE_EVERY};
use crate::state::State;
use rocketmq_wire::clock::now_ms;

/// Rows per table on the status page: its cost follows what it shows, not the registry's size.
const PAGE_ROWS: usize = 200;

/// How often the page asks for fresh data.
const POLL_MS: u64 = 5000;

/// Redraws the page from `/status.json`, on top of the shared page script.
const SCRIPT: &str = include_str!("status.js").trim_ascii_end();

#[derive(Deserialize)]
pub(super) struct PageQuery {
    /// The route search's topic or broker group (`search`).
    topic: Option<String>,
    broker: Option<String>,
    page: Option<usize>,
}

/// What the status page shows of the registry, built in one walk over the topics and kept
/// until the routes change. Liveness is not in it: heartbeats do not change routes, so it is
/// read for the rows shown, at each request.
struct Summary {
    /// Every broker address, by cluster, broker name and id.
    rows: Vec<BrokerRow>,
    clusters: Vec<ClusterView>,
    /// Groups to look at, by cluster and name.
    flagged: Vec<GroupView>,
    topics: usize,
}

struct BrokerRow {
    cluster: String,
    name: String,
    id: i64,
    addr: String,
    topics: usize,
    flags: Flags,
}

/// What is wrong with a broker group at a glance.
#[derive(Clone, Copy, Default)]
struct Flags {
    /// No broker with id 0: clients cannot write to it (unless acting master is on).
    masterless: bool,
    /// It serves topics but none writably: its write permission was wiped.
    read_only: bool,
}

impl Flags {
    fn names(self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.masterless {
            names.push("masterless");
        }
        if self.read_only {
            names.push("read-only");
        }
        names
    }

    fn any(self) -> bool {
        self.masterless || self.read_only
    }
}

/// Concurrent requests wait for one build rather than each making their own.
#[derive(Default)]
pub(super) struct PageCache(parking_lot::Mutex<Option<(u64, Arc<Summary>)>>);

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
    // Per broker name, topics served and how many of them writably: counted when the table
    // changes, off the registry's lock, not for each render (a second at a million topics).
    let lists = state.routes.topic_lists();
    state.routes.read(|r| {
        let mut clusters: Vec<_> = r.clusters().collect();
        clusters.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut rows = Vec::new();
        let mut flagged = Vec::new();
        let mut cluster_rows = Vec::with_capacity(clusters.len());
        for (cluster, names) in clusters {
            let before = rows.len();
            for name in names {
                let Some(bd) = r.group(name) else {
                    continue;
                };
                let served = lists.served_by(name);
                let (topics, writable) = (served.topics, served.writable);
                let flags = Flags {
                    masterless: !bd.broker_addrs.contains_key(&0),
                    read_only: topics > 0 && writable == 0,
                };
                if flags.any() {
                    flagged.push(GroupView {
                        cluster: cluster.to_string(),
                        name: name.clone(),
                        flags: flags.names(),
                    });
                }
                for (id, addr) in &bd.broker_addrs {
                    rows.push(BrokerRow {
                        cluster: cluster.to_string(),
                        name: name.clone(),
                        id: *id,
                        addr: addr.clone(),
                        topics,
                        flags,
                    });
                }
            }
            cluster_rows.push(ClusterView {
                name: cluster.to_string(),
                groups: names.len(),
                addresses: rows.len() - before,
            });
        }
        Summary {
            rows,
            clusters: cluster_rows,
            flagged,
            topics: r.topic_count(),
        }
    })
}

/// Everything the page shows but the route search and the KV entries, as `/status.json`
/// serves it.
#[derive(Serialize)]
struct Status {
    server: ServerView,
    now_ms: i64,
    topics: usize,
    clusters: Vec<ClusterView>,
    /// Clusters beyond the first [`PAGE_ROWS`], not listed.
    clusters_more: usize,
    /// Masterless and read-only groups.
    flagged: Vec<GroupView>,
    flagged_more: usize,
    brokers: BrokerPage,
    /// Newest first.
    changes: Vec<ChangeView>,
    series: SeriesView,
    /// The embedded controller node, when `enableControllerInNamesrv` is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    controller: Option<rocketmq_controller::ControllerView>,
    /// The NameServers' KV group, when `namesrvPeers` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    peers: Option<crate::peers::view::PeersView>,
    /// How this NameServer's routes stand with each peer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    peer_routes: Option<Vec<crate::peers::routes::PeerStanding>>,
}

#[derive(Serialize)]
struct ServerView {
    /// Where clients reach it, not where it is bound.
    address: String,
    version: &'static str,
    uptime_s: u64,
    ready: bool,
}

#[derive(Clone, Serialize)]
struct ClusterView {
    name: String,
    groups: usize,
    addresses: usize,
}

#[derive(Clone, Serialize)]
struct GroupView {
    cluster: String,
    name: String,
    flags: Vec<&'static str>,
}

#[derive(Serialize)]
struct BrokerPage {
    page: usize,
    pages: usize,
    /// Addresses on all pages.
    total: usize,
    /// The position of the first row shown, from 1.
    first: usize,
    rows: Vec<BrokerView>,
}

#[derive(Serialize)]
struct BrokerView {
    cluster: String,
    name: String,
    id: i64,
    role: &'static str,
    addr: String,
    /// `None` when not live.
    version: Option<String>,
    heartbeat: Option<Heartbeat>,
    topics: usize,
    flags: Vec<&'static str>,
}

#[derive(Serialize)]
struct Heartbeat {
    age_ms: i64,
    timeout_ms: i64,
    /// `ok` below half the timeout, `late` past it, `expiring` past nine tenths.
    health: &'static str,
}

fn health(age_ms: i64, timeout_ms: i64) -> &'static str {
    if age_ms.saturating_mul(2) < timeout_ms {
        "ok"
    } else if age_ms.saturating_mul(10) < timeout_ms.saturating_mul(9) {
        "late"
    } else {
        "expiring"
    }
}

#[derive(Serialize)]
struct ChangeView {
    at_ms: i64,
    kind: &'static str,
    label: &'static str,
    what: String,
    detail: String,
}

#[derive(Serialize)]
struct SeriesView {
    interval_s: u64,
    span_s: u64,
    /// Oldest first; the last is the interval under way (once it is a second long).
    points: Vec<Sample>,
}

/// The address clients reach the remoting port by: `advertisedAddresses` when set; for a
/// wildcard bind, the host the browser reached us by (else the machine's name) with the
/// remoting port; else the bound address.
fn advertised(state: &State, host: Option<&str>) -> String {
    let configured = state
        .config
        .settings()
        .server
        .advertised_addresses
        .trim()
        .to_string();
    if !configured.is_empty() {
        return configured;
    }
    let bound = state.remoting_addr;
    if !bound.ip().is_unspecified() {
        return bound.to_string();
    }
    let port = bound.port();
    match host.map(str::to_string).or_else(machine_name) {
        Some(host) => format!("{host}:{port}"),
        None => format!("port {port}"),
    }
}

fn machine_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    is_dns_name(name).then(|| name.to_string())
}

fn status(http: &Http, q: &PageQuery, host: Option<&str>) -> Status {
    let state = &*http.state;
    let summary = http.page.get(state);
    let now = now_ms();

    let pages = summary.rows.len().div_ceil(PAGE_ROWS).max(1);
    let number = q.page.unwrap_or(1).clamp(1, pages);
    let first = (number - 1) * PAGE_ROWS;
    let shown = &summary.rows[first..(first + PAGE_ROWS).min(summary.rows.len())];
    let live: Vec<Option<(i32, i64, i64)>> = state.routes.read(|r| {
        shown
            .iter()
            .map(|row| {
                r.live(&row.cluster, &row.addr)
                    .map(|l| (l.version, l.last_update_ms, l.timeout_ms))
            })
            .collect()
    });
    let rows = shown
        .iter()
        .zip(live)
        .map(|(row, live)| BrokerView {
            cluster: row.cluster.clone(),
            name: row.name.clone(),
            id: row.id,
            role: if row.id == 0 { "master" } else { "slave" },
            addr: row.addr.clone(),
            version: live.map(|(v, ..)| version_name(v)),
            heartbeat: live.map(|(_, at, timeout_ms)| {
                let age_ms = (now - at).max(0);
                Heartbeat {
                    age_ms,
                    timeout_ms,
                    health: health(age_ms, timeout_ms),
                }
            }),
            topics: row.topics,
            flags: row.flags.names(),
        })
        .collect();

    let changes = state
        .events
        .newest_first()
        .into_iter()
        .map(|e| ChangeView {
            at_ms: e.at_ms,
            kind: e.kind.key(),
            label: e.kind.label(),
            what: e.what,
            detail: e.detail,
        })
        .collect();

    let mut points = state.metrics.recent();
    // An interval just begun says nothing yet about its rate.
    if points.last().is_some_and(|p| p.secs < 1.0) {
        points.pop();
    }

    Status {
        server: ServerView {
            address: advertised(state, host),
            version: env!("CARGO_PKG_VERSION"),
            uptime_s: state.started.elapsed().as_secs(),
            ready: state.is_ready(),
        },
        now_ms: now,
        topics: summary.topics,
        clusters: summary.clusters.iter().take(PAGE_ROWS).cloned().collect(),
        clusters_more: summary.clusters.len().saturating_sub(PAGE_ROWS),
        flagged: summary.flagged.iter().take(PAGE_ROWS).cloned().collect(),
        flagged_more: summary.flagged.len().saturating_sub(PAGE_ROWS),
        brokers: BrokerPage {
            page: number,
            pages,
            total: summary.rows.len(),
            first: first + 1,
            rows,
        },
        changes,
        series: SeriesView {
            interval_s: SAMPLE_EVERY.as_secs(),
            span_s: SAMPLE_EVERY.as_secs() * SAMPLES_KEPT as u64,
            points,
        },
        controller: state.controller.as_ref().map(|c| c.view(PAGE_ROWS)),
        peers: state.peer_group.as_ref().map(|g| g.view()),
        peer_routes: state.peer_routes.as_ref().map(|p| p.standing()),
    }
}

fn request_host(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(host_of)
        .map(str::to_string)
}

pub(super) async fn page(
    AxumState(http): AxumState<Http>,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
) -> Response {
    let host = request_host(&headers);
    // Walking a large registry takes long enough to hold up route lookups sharing the worker.
    match tokio::task::spawn_blocking(move || render_page(&http, q, host.as_deref())).await {
        Ok(page) => Html(page).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

pub(super) async fn json(
    AxumState(http): AxumState<Http>,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
) -> Response {
    let host = request_host(&headers);
    rocketmq_http::json(move || status(&http, &q, host.as_deref())).await
}

fn render_page(http: &Http, q: PageQuery, host: Option<&str>) -> String {
    let state = &*http.state;
    let s = status(http, &q, host);
    let mut page = String::new();
    let addr = esc(&s.server.address);
    rocketmq_http::page::open(
        &mut page,
        &format!("NameServer {}", s.server.address),
        &format!("RocketMQ NameServer <span class=muted id=address>{addr}</span>"),
        &format!(
            "mqnamesrv {version} · up <span id=uptime>{up}</span> · <span id=ready>{ready}</span> · \
             <span id=updated>as of {clock} UTC</span>",
            version = s.server.version,
            up = uptime(s.server.uptime_s),
            ready = if s.server.ready { "ready" } else { "not ready" },
            clock = clock(s.now_ms),
        ),
    );

    let span_ms = (s.series.span_s * 1000) as f64;
    let points = &s.series.points;
    let rates: Vec<(i64, Option<f64>)> = points
        .iter()
        .map(|p| {
            let rate = if p.secs > 0.0 {
                p.requests as f64 / p.secs
            } else {
                0.0
            };
            (p.at_ms, Some(rate))
        })
        .collect();
    let p99s: Vec<(i64, Option<f64>)> = points.iter().map(|p| (p.at_ms, p.p99_us)).collect();
    chart_marker(&mut page);
    page.push_str("<div class=charts>");
    let mut draw = |id, title, points: &[_], format| {
        chart(&mut page, id, title, points, s.now_ms, span_ms, format)
    };
    draw("chart-rate", "requests/s", &rates, rate);
    draw("chart-p99", "p99 latency", &p99s, micros);
    page.push_str("</div>");

    page.push_str(
        "<h2>Clusters</h2><table id=clusters><tr><th>cluster</th><th>broker names</th><th>addresses</th></tr>",
    );
    for c in &s.clusters {
        cells(
            &mut page,
            &[&c.name, &c.groups.to_string(), &c.addresses.to_string()],
        );
    }
    if s.clusters.is_empty() {
        empty_row(&mut page, 3, "no cluster registered");
    }
    page.push_str("</table>");
    not_shown(&mut page, s.clusters_more, "clusters");

    if let Some(c) = &s.controller {
        rocketmq_controller::page::section(&mut page, c);
    }
    if let Some(p) = &s.peers {
        peers_section(&mut page, p, s.peer_routes.as_deref().unwrap_or_default());
    }

    page.push_str("<h2>Attention</h2><ul id=attention>");
    for g in &s.flagged {
        let _ = write!(
            page,
            "<li>{} / {}: {}</li>",
            esc(&g.cluster),
            esc(&g.name),
            g.flags.join(", ")
        );
    }
    if s.flagged.is_empty() {
        page.push_str("<li class=muted>no masterless or read-only groups</li>");
    }
    page.push_str("</ul>");
    not_shown(&mut page, s.flagged_more, "flagged groups");

    page.push_str(
        "<h2>Brokers</h2><table id=brokers><tr><th>cluster</th><th>broker name</th><th>id</th><th>role</th>\
         <th>address</th><th>version</th><th>heartbeat age / timeout</th><th>topics</th><th>flags</th></tr>",
    );
    for b in &s.brokers.rows {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            esc(&b.cluster),
            esc(&b.name),
            b.id,
            b.role,
            esc(&b.addr),
            b.version.as_deref().unwrap_or("-"),
        );
        match &b.heartbeat {
            Some(h) => {
                let _ = write!(
                    page,
                    "<td><span class=hb-{}>{} / {}</span></td>",
                    h.health,
                    seconds(h.age_ms),
                    seconds(h.timeout_ms)
                );
            }
            None => page.push_str("<td><span class=hb-dead>not live</span></td>"),
        }
        let _ = write!(
            page,
            "<td>{}</td><td>{}</td></tr>",
            b.topics,
            b.flags.join(", ")
        );
    }
    if s.brokers.rows.is_empty() {
        empty_row(&mut page, 9, "no broker registered");
    }
    page.push_str("</table>");
    let b = &s.brokers;
    if b.pages > 1 {
        let _ = write!(
            page,
            "<p id=pages>addresses {}–{} of {}, page {} of {}",
            b.first,
            b.first + b.rows.len() - 1,
            b.total,
            b.page,
            b.pages
        );
        if b.page > 1 {
            let _ = write!(page, " · <a href=\"?page={}\">previous</a>", b.page - 1);
        }
        if b.page < b.pages {
            let _ = write!(page, " · <a href=\"?page={}\">next</a>", b.page + 1);
        }
        page.push_str("</p>");
    }
    let _ = write!(page, "<div id=topics><p>{} topics</p></div>", s.topics);

    page.push_str(
        "<h2>Recent changes</h2><table id=changes><tr><th>time (UTC)</th><th>change</th><th>of</th><th>detail</th></tr>",
    );
    for e in &s.changes {
        cells(&mut page, &[&clock(e.at_ms), e.label, &e.what, &e.detail]);
    }
    if s.changes.is_empty() {
        empty_row(&mut page, 4, "no change since the server started");
    }
    page.push_str("</table>");

    super::search::section(&mut page, state, q.topic.as_deref(), q.broker.as_deref());

    let (entries, total) = state.kv.first_entries(PAGE_ROWS);
    page.push_str(
        "<h2>KV namespaces</h2><table id=kv><tr><th>namespace</th><th>key</th><th>value</th></tr>",
    );
    for (ns, k, v) in &entries {
        cells(&mut page, &[ns, k, v]);
    }
    if entries.is_empty() {
        empty_row(&mut page, 3, "no KV entries");
    }
    page.push_str("</table>");
    not_shown(&mut page, total - entries.len(), "KV entries");
    let scripts: &[&str] = if s.controller.is_some() {
        &[rocketmq_controller::page::SCRIPT, SCRIPT]
    } else {
        &[SCRIPT]
    };
    rocketmq_http::page::close(&mut page, POLL_MS, scripts);
    page
}

/// The KV group's section: this node's part and every member (`showPeers` in `status.js`
/// redraws it).
fn peers_section(
    page: &mut String,
    p: &crate::peers::view::PeersView,
    routes: &[crate::peers::routes::PeerStanding],
) {
    let _ = write!(
        page,
        "<h2>Peers</h2><p id=peers>{}</p>",
        esc(&peers_summary(p))
    );
    let rows: Vec<MemberRow<'_>> = p
        .members
        .iter()
        .map(|m| MemberRow {
            id: &m.id,
            address: &m.address,
            role: m.role,
            this_node: m.this_node,
            last_answer_ms: m.last_answer_ms,
            lag: m.lag,
        })
        .collect();
    members_table(page, "peer-members", &rows);
    page.push_str(
        "<table id=peer-routes><tr><th>peer</th><th>address</th><th>route differences</th>\
         <th>disagreeing for</th><th>last digest</th></tr>",
    );
    for r in routes {
        let (differences, since, last) = route_cells(r);
        cells(page, &[&r.id, &r.address, &differences, &since, &last]);
    }
    page.push_str("</table>");
}

/// A peer's route standing as the table shows it; `status.js` writes the same.
fn route_cells(r: &crate::peers::routes::PeerStanding) -> (String, String, String) {
    (
        r.differences.to_string(),
        r.disagreeing_ms
            .map_or("-".to_string(), |ms| seconds(ms as i64)),
        r.last_exchange_ms.map_or("never".to_string(), |ms| {
            format!("{} ago", seconds(ms as i64))
        }),
    )
}

/// One line on the node's part in the KV group; `status.js` writes the same.
fn peers_summary(p: &crate::peers::view::PeersView) -> String {
    format!(
        "NameServer {} of the KV group: {}, term {}, leader {}; applied entry {}; {}",
        p.self_id,
        p.role,
        p.term,
        p.leader.as_deref().unwrap_or("none"),
        p.applied.map_or("none".to_string(), |a| a.to_string()),
        if p.caught_up {
            "caught up"
        } else {
            "catching up"
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_turn_late_past_half_their_timeout_and_expiring_near_it() {
        assert_eq!(health(0, 120_000), "ok");
        assert_eq!(health(59_999, 120_000), "ok");
        assert_eq!(health(60_000, 120_000), "late");
        assert_eq!(health(107_999, 120_000), "late");
        assert_eq!(health(108_000, 120_000), "expiring");
        assert_eq!(
            health(1, 0),
            "expiring",
            "a nonsensical timeout is not healthy"
        );
    }
}
