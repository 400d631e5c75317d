//! The status page's search: a topic's route now (`?topic=NAME`) or a broker group's members
//! (`?broker=NAME`), and why they changed, newest first, from the route journal. It is made
//! from the answer `/journal` serves, so that the page and the JSON cannot disagree.
//!
//! Every name shown came from a broker or a client and is escaped.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rocketmq_http::page::{cells, clock, empty_row, esc, seconds};
use rocketmq_wire::json::JsonStyle;
use serde::Deserialize;

use super::journal::Asked;
use crate::handler::journal::answer;
use crate::journal::entry::QueuesNote;
use crate::journal::{Entry, Move};
use crate::state::State;

/// Entries the page shows at most; `/journal?limit=` reaches further back.
const SHOWN: usize = 100;

/// The parts of the journal's answer the page shows.
#[derive(Deserialize)]
struct Answer {
    journal: JournalState,
    /// Each group the answer names, as it is now; `None` when not registered here.
    brokers: BTreeMap<String, Option<GroupNow>>,
    /// Oldest first.
    entries: Vec<Entry>,
    more: bool,
}

#[derive(Deserialize)]
struct JournalState {
    enabled: bool,
    since: Option<i64>,
}

#[derive(Deserialize)]
struct GroupNow {
    cluster: String,
    members: Vec<MemberNow>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MemberNow {
    id: i64,
    addr: String,
    heard_ago_ms: Option<i64>,
    timeout_ms: Option<i64>,
}

/// The search forms and, when a topic or a group is asked for, what is known of it.
pub(super) fn section(page: &mut String, state: &State, topic: Option<&str>, broker: Option<&str>) {
    let asked = Asked::from_query(topic, broker);
    let (topic_box, broker_box) = match &asked {
        Ok(Some(Asked::Topic(t))) => (t.as_str(), ""),
        Ok(Some(Asked::Broker(b))) => ("", b.as_str()),
        _ => ("", ""),
    };
    // The forms lead back to this section, not to the top of a long page.
    let _ = write!(
        page,
        "<h2 id=search>Route search</h2>\
         <p class=muted>A topic's route and a broker group's members as they are now, and every \
         change to them the route journal kept, newest first, with its cause.</p>\
         <form method=get action=\"#search\"><label>topic <input name=topic placeholder=TopicTest \
         value=\"{}\"></label> <button>Show</button></form>\
         <form method=get action=\"#search\"><label>broker group <input name=broker \
         placeholder=broker-a value=\"{}\"></label> <button>Show</button></form>",
        esc(topic_box),
        esc(broker_box)
    );
    let asked = match asked {
        Ok(Some(asked)) => asked,
        Ok(None) => return,
        Err(why) => {
            let _ = write!(page, "<p id=search-error>{}</p>", esc(&why));
            return;
        }
    };
    let answer = serde_json::from_value::<Answer>(answer(state, asked.subject(), SHOWN));
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) => {
            let _ = write!(
                page,
                "<p id=search-error>the journal's answer is unreadable: {}</p>",
                esc(&e.to_string())
            );
            return;
        }
    };
    let json = format!(
        "/journal?{}={}",
        match asked {
            Asked::Topic(_) => "topic",
            Asked::Broker(_) => "broker",
        },
        query_value(asked.name())
    );
    match &asked {
        Asked::Topic(t) => {
            let _ = write!(page, "<h3>Topic <code>{}</code></h3>", esc(t));
            route_section(page, state, t);
        }
        Asked::Broker(b) => {
            let _ = write!(page, "<h3>Broker group <code>{}</code></h3>", esc(b));
        }
    }
    groups_now(page, &answer.brokers);
    journal_table(page, &answer, &json);
}

/// Each group the answer names, with its members and when each was last heard.
fn groups_now(page: &mut String, groups: &BTreeMap<String, Option<GroupNow>>) {
    page.push_str(
        "<p class=muted>The broker groups it names, as they are now:</p>\
         <table id=groups-now><tr><th>broker group</th><th>cluster</th><th>id</th>\
         <th>address</th><th>heard / timeout</th></tr>",
    );
    for (name, group) in groups {
        match group {
            None => {
                let _ = write!(
                    page,
                    "<tr><td>{}</td><td colspan=4 class=muted>not registered here now</td></tr>",
                    esc(name)
                );
            }
            Some(g) => {
                for m in &g.members {
                    let heard = match (m.heard_ago_ms, m.timeout_ms) {
                        (Some(ago), Some(timeout)) => {
                            format!("{} ago / {}", seconds(ago), seconds(timeout))
                        }
                        _ => "not live".to_string(),
                    };
                    cells(
                        page,
                        &[name, &g.cluster, &m.id.to_string(), &m.addr, &heard],
                    );
                }
            }
        }
    }
    if groups.is_empty() {
        empty_row(
            page,
            5,
            "no broker group serves it, and the journal names none",
        );
    }
    page.push_str("</table>");
}

fn journal_table(page: &mut String, answer: &Answer, json: &str) {
    if !answer.journal.enabled {
        page.push_str(
            "<p id=journal class=muted>The route journal is off (routeJournalEnable=false): no \
             history to show.</p>",
        );
        return;
    }
    let _ = write!(
        page,
        "<p class=muted>Changes kept by the route journal, newest first ({SHOWN} at most):</p>"
    );
    page.push_str(
        "<table id=journal><tr><th>time (UTC)</th><th>cause</th><th>broker</th><th>address</th>\
         <th>asked by</th><th>detail</th><th>route was → now</th></tr>",
    );
    for e in answer.entries.iter().rev() {
        let broker = match (&e.cluster, &e.broker) {
            (Some(c), Some(b)) => format!("{c} / {b}"),
            (None, Some(b)) => b.clone(),
            _ => String::new(),
        };
        let addr = match (&e.addr, e.id) {
            (Some(a), Some(id)) => format!("{a} (id {id})"),
            (Some(a), None) => a.clone(),
            _ => String::new(),
        };
        cells(
            page,
            &[
                &date_time(e.at),
                e.cause().key(),
                &broker,
                &addr,
                e.by.as_deref().unwrap_or(""),
                &detail(e),
                &moves(&e.topics, e.more_topics),
            ],
        );
    }
    if answer.entries.is_empty() {
        let since = answer
            .journal
            .since
            .map_or(String::new(), |at| format!(" since {}", date_time(at)));
        empty_row(page, 7, &format!("the journal kept no change to it{since}"));
    }
    page.push_str("</table>");
    let _ = write!(
        page,
        "<p class=muted>{}As JSON: <a href=\"{}\">{}</a></p>",
        if answer.more {
            format!("The newest {SHOWN} changes are shown; older ones are kept. ")
        } else {
            String::new()
        },
        esc(json),
        esc(json)
    );
}

/// An entry's detail, with how long a broker that expired had been silent.
fn detail(e: &Entry) -> String {
    let silence = match (e.silent_ms, e.timeout_ms) {
        (Some(silent), Some(timeout)) => Some(format!(
            "silent {} (timeout {})",
            seconds(silent),
            seconds(timeout)
        )),
        (Some(silent), None) => Some(format!("silent {}", seconds(silent))),
        _ => None,
    };
    match silence {
        Some(s) if e.detail.is_empty() => s,
        Some(s) => format!("{s}; {}", e.detail),
        None => e.detail.clone(),
    }
}

/// The topics an entry moved, each as its queues before and after on its group.
fn moves(moves: &[Move], more: usize) -> String {
    let queues = |q: Option<QueuesNote>| match q {
        Some([read, write, perm]) => format!("read {read}, write {write}, perm {perm}"),
        None => "none".to_string(),
    };
    let mut out: Vec<String> = moves
        .iter()
        .map(|m| {
            format!(
                "{} on {}: {} → {}",
                m.topic,
                m.broker,
                queues(m.was),
                queues(m.now)
            )
        })
        .collect();
    match more {
        0 => {}
        1 => out.push("1 more topic".to_string()),
        n => out.push(format!("{n} more topics")),
    }
    out.join("; ")
}

/// `YYYY-MM-DD HH:MM:SS` of a Unix time in milliseconds, in UTC: the journal reaches back days.
fn date_time(at_ms: i64) -> String {
    let (y, m, d) = civil_date(at_ms.div_euclid(86_400_000));
    format!("{y:04}-{m:02}-{d:02} {}", clock(at_ms))
}

/// The Gregorian date `days` days after 1970-01-01. Years are counted from March, so that a
/// leap day is the last day of its year, in eras of 400 years (146,097 days), which repeat.
fn civil_date(days: i64) -> (i64, u32, u32) {
    // Days from 0000-03-01 to 1970-01-01.
    let from_march_0 = days + 719_468;
    let era = from_march_0.div_euclid(146_097);
    let day_of_era = from_march_0.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March: 31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 31, then February.
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

/// A name as a URL's query value: every byte but the unreserved ones percent-encoded.
fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A topic's route now: its queues on each group and the groups' addresses, and the answer
/// clients get, as JSON.
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
            page.push_str(
                "<table id=route><tr><th>broker name</th><th>perm</th><th>read queues</th>\
                 <th>write queues</th><th>addresses</th></tr>",
            );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_gregorian_across_leap_days_and_before_the_epoch() {
        assert_eq!(date_time(0), "1970-01-01 00:00:00");
        assert_eq!(date_time(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(date_time(1_735_689_599_000), "2024-12-31 23:59:59");
        assert_eq!(date_time(-1_000), "1969-12-31 23:59:59");
        assert_eq!(date_time(4_107_542_400_000), "2100-03-01 00:00:00");
    }

    #[test]
    fn a_name_goes_into_a_link_percent_encoded() {
        assert_eq!(query_value("Topic-1_a.b~"), "Topic-1_a.b~");
        assert_eq!(
            query_value("<a href=\"x\">&'"),
            "%3Ca%20href%3D%22x%22%3E%26%27"
        );
        assert_eq!(query_value("é"), "%C3%A9");
    }

    #[test]
    fn a_move_reads_as_queues_before_and_after() {
        let m = Move {
            topic: "T".into(),
            broker: "b".into(),
            was: Some([8, 8, 6]),
            now: None,
        };
        assert_eq!(
            moves(&[m], 3),
            "T on b: read 8, write 8, perm 6 → none; 3 more topics"
        );
        assert_eq!(moves(&[], 1), "1 more topic");
    }
}
