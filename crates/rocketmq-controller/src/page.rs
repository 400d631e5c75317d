//! The controller's part of a status page, for `mqcontroller`'s own page and for the
//! NameServer's when the controller is embedded: one rendering, one script (`page.js`, which
//! redraws it from the node's [`ControllerView`] in `status.json`).

use std::fmt::Write as _;

use rocketmq_http::page::{
    cells, clock, empty_row, esc, members_table, not_shown, seconds, MemberRow,
};

use crate::node::ControllerView;

/// Redraws the section: `showController(view, now_ms)`, on top of the shared page script.
pub const SCRIPT: &str = include_str!("page.js").trim_ascii_end();

/// The controller section: the node, the group's members, every broker group and what happened
/// lately.
pub fn section(page: &mut String, c: &ControllerView) {
    let leader = match (&c.leader_id, &c.leader_address) {
        (Some(id), Some(addr)) => format!("{id} ({addr})"),
        _ => "none".to_string(),
    };
    let _ = write!(
        page,
        "<h2>Controller</h2><p id=controller>node {} of group {} at {}: {}, term {}, leader {}; \
         hears from {} brokers; elections: {} new master, {} kept, {} without a master</p>",
        esc(&c.self_id),
        esc(&c.group),
        esc(&c.address),
        esc(&c.role),
        c.term,
        esc(&leader),
        c.live_brokers,
        c.elections_new_master,
        c.elections_kept_master,
        c.elections_no_master,
    );

    let rows: Vec<MemberRow<'_>> = c
        .members
        .iter()
        .map(|v| MemberRow {
            id: &v.member.id,
            address: &v.member.address,
            role: &v.member.role,
            this_node: v.this_node,
            last_answer_ms: v.last_answer_ms,
            lag: v.member.lag,
        })
        .collect();
    members_table(page, "controller-members", &rows);

    page.push_str(
        "<table id=replica-groups><tr><th>cluster</th><th>broker name</th><th>master id</th>\
         <th>master epoch</th><th>sync-state set</th><th>set epoch</th><th>brokers</th>\
         <th>heard from (silent for)</th></tr>",
    );
    for g in &c.groups {
        let set: Vec<String> = g.sync_state_set.iter().map(i64::to_string).collect();
        let brokers: Vec<String> = g
            .brokers
            .iter()
            .map(|(id, addr)| format!("{id}={addr}"))
            .collect();
        let live: Vec<String> = c
            .live
            .iter()
            .filter(|l| l.cluster_name == g.cluster_name && l.broker_name == g.broker_name)
            .map(|l| format!("{}: {}", l.broker_id, seconds(l.silent_ms as i64)))
            .collect();
        let heard = if live.is_empty() {
            "none heard".to_string()
        } else {
            live.join(", ")
        };
        cells(
            page,
            &[
                &g.cluster_name,
                &g.broker_name,
                &g.master_broker_id
                    .map_or("none".to_string(), |m| m.to_string()),
                &g.master_epoch.to_string(),
                &set.join(", "),
                &g.sync_state_set_epoch.to_string(),
                &brokers.join(", "),
                &heard,
            ],
        );
    }
    if c.groups.is_empty() {
        empty_row(page, 8, "no broker group has registered");
    }
    page.push_str("</table>");
    not_shown(
        page,
        c.groups_total.saturating_sub(c.groups.len()),
        "broker groups",
    );

    page.push_str(
        "<h3>Elections and leadership</h3><table id=controller-recent><tr><th>time (UTC)</th>\
         <th>what</th><th>of</th><th>detail</th></tr>",
    );
    for e in &c.recent {
        cells(page, &[&clock(e.at_ms), e.kind, &e.of, &e.detail]);
    }
    if c.recent.is_empty() {
        empty_row(
            page,
            4,
            "no election or leadership change since this node started",
        );
    }
    page.push_str("</table>");
}
