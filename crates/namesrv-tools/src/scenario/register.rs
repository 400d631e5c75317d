//! Registration latency: one broker registers its whole table repeatedly, each time with a fresh
//! data version so that the server must take the table in again.

use std::time::Duration;

use rocketmq_wire::client::Client;
use rocketmq_wire::codes::response;
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use serde_json::json;

use super::rss_kib;
use crate::cli::RegisterArgs;
use crate::fleet::{fresh_data_version, Layout, Member};
use crate::stats::median;

const ROUTE_TIMEOUT: Duration = Duration::from_secs(5);

pub async fn run(args: &RegisterArgs) -> anyhow::Result<serde_json::Value> {
    let layout = Layout::new(1, args.topics, 1, args.queues);
    let member = Member::new(0, 0, Client::connect(&args.target.addr).await?);
    let mut millis = Vec::new();
    let mut failure = None;
    let mut routable = None;
    let mut body_bytes = 0;
    for run in 0..args.runs.max(1) {
        let body = layout.register_body(0, fresh_data_version(run as i64 + 1), args.body);
        body_bytes = body.len();
        match member.register(&body, args.body).await {
            Ok(elapsed) => millis.push(elapsed.as_secs_f64() * 1000.0),
            Err(e) => {
                // A refused or dropped registration will not go better on a second try.
                failure = Some(format!("{e:#}"));
                break;
            }
        }
    }
    if args.verify_route {
        // A fresh connection: the server may have closed the broker's.
        let client = Client::connect(&args.target.addr).await?;
        let first = Layout::topic(0, 0);
        let last = Layout::topic(0, args.topics.saturating_sub(1));
        routable = Some(routes(&client, &first).await? && routes(&client, &last).await?);
    }
    Ok(json!({
        "scenario": "register",
        "topics": args.topics,
        "body": format!("{:?}", args.body).to_lowercase(),
        "version": args.body.version(),
        "body_bytes": body_bytes,
        "runs_ms": millis,
        "median_ms": median(millis.iter().copied()),
        "failure": failure,
        "routable": routable,
        "server_rss_kib": rss_kib(args.target.server_pid),
    }))
}

async fn routes(client: &Client, topic: &str) -> anyhow::Result<bool> {
    let resp = client
        .invoke(GetRouteInfoHeader::new(topic).to_command(), ROUTE_TIMEOUT)
        .await?;
    Ok(resp.code == response::SUCCESS)
}
