//! The parts of a live status page: its style, its script's shared half, and the HTML pieces
//! both servers' pages are made of. A page is whole without the script; the script polls the
//! page's `status.json` and redraws what changed with the same formats as the server.

use std::fmt::Write as _;

/// The pages' stylesheet, without its file's final newline.
pub const STYLE: &str = include_str!("page.css").trim_ascii_end();

/// The shared half of the pages' script: `live.start(show)` polls `status.json` every `EVERY`
/// ms and hands each answer to `show`; `live.fill` and `live.chart` redraw a table or a chart.
/// Cells are built as text, never as markup, since names come from peers.
pub const LIVE_SCRIPT: &str = include_str!("live.js").trim_ascii_end();

/// A page's opening: title, heading and the line under it (markup, escaped by the caller).
pub fn open(page: &mut String, title: &str, heading: &str, about: &str) {
    let _ = write!(
        page,
        "<!doctype html><html><head><meta charset=utf-8><title>{}</title><style>{STYLE}</style></head>\
         <body><h1>{heading}</h1><p class=muted id=about>{about}</p>",
        esc(title),
    );
}

/// A page's end: the shared script, then the page's own (`scripts`, joined), polling every
/// `every_ms`.
pub fn close(page: &mut String, every_ms: u64, scripts: &[&str]) {
    let _ = write!(page, "<script>const EVERY = {every_ms};\n{LIVE_SCRIPT}");
    for script in scripts {
        page.push('\n');
        page.push_str(script);
    }
    page.push_str("</script></body></html>");
}

pub fn esc(s: &str) -> String {
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

pub fn uptime(s: u64) -> String {
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min {} s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{} h {} min", s / 3600, s % 3600 / 60)
    } else {
        format!("{} d {} h", s / 86_400, s % 86_400 / 3600)
    }
}

/// `HH:MM:SS` of a Unix time in milliseconds, in UTC.
pub fn clock(at_ms: i64) -> String {
    let s = at_ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
}

pub fn rate(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub fn micros(v: f64) -> String {
    if v < 1000.0 {
        format!("{v:.0} µs")
    } else if v < 1e6 {
        format!("{:.1} ms", v / 1000.0)
    } else {
        format!("{:.2} s", v / 1e6)
    }
}

const CHART_W: f64 = 300.0;
const CHART_H: f64 = 60.0;

/// A line over the last 15 minutes, scaled to its largest value; the script redraws it alike.
pub fn chart(
    page: &mut String,
    id: &str,
    title: &str,
    points: &[(i64, Option<f64>)],
    now_ms: i64,
    span_ms: f64,
    fmt: fn(f64) -> String,
) {
    let shown: Vec<(i64, f64)> = points
        .iter()
        .filter_map(|(at, v)| v.map(|v| (*at, v)))
        .collect();
    let max = shown.iter().map(|p| p.1).fold(0.0, f64::max);
    let top = if max > 0.0 { max } else { 1.0 };
    let line: Vec<String> = shown
        .iter()
        .map(|(at, v)| {
            let x = CHART_W * (1.0 - (now_ms - at) as f64 / span_ms).max(0.0);
            let y = CHART_H - 2.0 - v / top * (CHART_H - 4.0);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let (now, max) = match shown.last() {
        Some((_, v)) => (fmt(*v), fmt(max)),
        None => ("–".to_string(), "–".to_string()),
    };
    let _ = write!(
        page,
        "<figure><figcaption>{title} <b id={id}-now>{now}</b> <span class=muted>· max <span id={id}-max>{max}</span> · last 15 min</span></figcaption>\
         <svg id={id} class=chart viewBox=\"0 0 {CHART_W} {CHART_H}\" width={CHART_W} height={CHART_H} data-points={count} role=img aria-label=\"{title}\"><polyline points=\"{line}\"/></svg></figure>",
        count = shown.len(),
        line = line.join(" "),
    );
}

/// The line an empty table shows instead of only its header: what the emptiness means.
pub fn empty_row(page: &mut String, columns: usize, text: &str) {
    let _ = write!(
        page,
        "<tr class=empty><td colspan={columns}>{}</td></tr>",
        esc(text)
    );
}

/// A table row of text cells.
pub fn cells(page: &mut String, cells: &[&str]) {
    page.push_str("<tr>");
    for cell in cells {
        let _ = write!(page, "<td>{}</td>", esc(cell));
    }
    page.push_str("</tr>");
}

/// One member of a replicated group (the controller's, the NameServers' KV group) as both pages
/// list them.
pub struct MemberRow<'a> {
    pub id: &'a str,
    pub address: &'a str,
    pub role: &'a str,
    pub this_node: bool,
    pub last_answer_ms: Option<u64>,
    pub lag: Option<u64>,
}

/// A group's member table under `id`: member, address, role, last answer, log lag.
pub fn members_table(page: &mut String, id: &str, rows: &[MemberRow<'_>]) {
    let _ = write!(
        page,
        "<table id={id}><tr><th>member</th><th>address</th><th>role</th>\
         <th>last answer</th><th>log lag</th></tr>"
    );
    for m in rows {
        let name = if m.this_node {
            format!("{} (this node)", m.id)
        } else {
            m.id.to_string()
        };
        let answer = match (m.this_node, m.last_answer_ms) {
            (true, _) => "-".to_string(),
            (false, Some(ms)) => format!("{} ago", seconds(ms as i64)),
            (false, None) => "not known here".to_string(),
        };
        let lag = m.lag.map_or("-".to_string(), |l| l.to_string());
        cells(page, &[&name, m.address, m.role, &answer, &lag]);
    }
    if rows.is_empty() {
        empty_row(page, 5, "no member: the group has not formed");
    }
    page.push_str("</table>");
}

/// A muted line saying how many rows a bounded table left out.
pub fn not_shown(page: &mut String, hidden: usize, what: &str) {
    if hidden > 0 {
        let _ = write!(page, "<p class=muted>{hidden} more {what} not shown</p>");
    }
}

/// A duration as the pages show it: tenths below ten seconds.
pub fn seconds(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 10_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} s", ms / 1000)
    }
}

/// Defines the dot every chart marks its samples with; once per page, before the charts.
pub fn chart_marker(page: &mut String) {
    // A dot on every sample: with little history, the line alone is a sliver at the right.
    page.push_str(
        "<svg width=0 height=0 style=position:absolute aria-hidden=true><defs><marker id=dot \
         markerUnits=userSpaceOnUse markerWidth=4 markerHeight=4 refX=2 refY=2>\
         <circle cx=2 cy=2 r=2 fill=#2f6fb0 /></marker></defs></svg>",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_a_person_writes_them() {
        assert_eq!(clock(1_700_000_000_000), "22:13:20");
        assert_eq!(uptime(59), "59 s");
        assert_eq!(uptime(61), "1 min 1 s");
        assert_eq!(uptime(7260), "2 h 1 min");
        assert_eq!(uptime(90_000), "1 d 1 h");
        assert_eq!(micros(12.4), "12 µs");
        assert_eq!(micros(2500.0), "2.5 ms");
        assert_eq!(rate(4.26), "4.3");
        assert_eq!(rate(1234.4), "1234");
        assert_eq!(seconds(1500), "1.5 s");
        assert_eq!(seconds(12_345), "12 s");
        assert_eq!(seconds(-5), "0.0 s");
    }

    #[test]
    fn names_from_peers_cannot_become_markup() {
        let mut page = String::new();
        cells(&mut page, &["<script>x</script>", "a&b"]);
        assert_eq!(
            page,
            "<tr><td>&lt;script&gt;x&lt;/script&gt;</td><td>a&amp;b</td></tr>"
        );
        let mut page = String::new();
        open(&mut page, "<b>", "h", "a");
        assert!(page.contains("<title>&lt;b&gt;</title>"));
    }
}
