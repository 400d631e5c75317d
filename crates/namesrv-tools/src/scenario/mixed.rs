//! The mixed workload: route reads measured first with the fleet idle, then while every broker
//! re-registers its full table and polls cluster info and an admin client polls the topic list,
//! as a live cluster does. Ends by checking that no broker was dropped.

use std::time::{Duration, Instant};

use rocketmq_wire::client::Client;
use serde_json::json;

use super::{measure, measure_runs, route_load, rss_kib};
use crate::cli::MixedArgs;
use crate::fleet::{cluster_members, Background, ChangePolicy, Fleet};

pub async fn run(args: &MixedArgs) -> anyhow::Result<serde_json::Value> {
    let addr = &args.target.addr;
    let (fleet, registration) = Fleet::register(addr, &args.fleet).await?;
    let load = route_load(addr, &args.load, fleet.layout.all_topics());
    let idle = measure(&load, &args.load).await;
    let rss_idle = rss_kib(args.target.server_pid);

    let policy = ChangePolicy {
        create_delete_share: args.create_delete_share,
    };
    let reregistration = (args.fleet.reregister_secs > 0).then(|| {
        fleet.reregistration_changing(
            Duration::from_secs(args.fleet.reregister_secs),
            args.change_share,
            policy,
        )
    });
    let changes = (args.changes_per_sec > 0.0).then(|| fleet.changes(args.changes_per_sec, policy));
    let cluster_polls = (args.cluster_poll_secs > 0)
        .then(|| fleet.cluster_polls(Duration::from_secs(args.cluster_poll_secs)));
    let topic_lists = match args.topic_list_poll_secs {
        0 => None,
        secs => Some(topic_list_polls(addr, Duration::from_secs(secs)).await?),
    };
    let churn = measure_runs(&load, 0.0, args.churn_runs, args.churn_secs).await;
    let rss_churn = rss_kib(args.target.server_pid);
    let reregistration = reregistration.map(Background::stop);
    let cluster_polls = cluster_polls.map(Background::stop);
    let topic_lists = topic_lists.map(Background::stop);
    let changes = changes.map(Background::stop);

    // A server too busy to answer this still gets its measurements reported.
    let (registered_at_end, final_check_error) = match final_count(addr).await {
        Ok(n) => (Some(n), None),
        Err(e) => (None, Some(format!("{e:#}"))),
    };
    Ok(json!({
        "scenario": "mixed",
        "layout": fleet.layout,
        "body": format!("{:?}", fleet.form).to_lowercase(),
        "conns": load.conns,
        "depth": load.depth,
        "reregister_secs": args.fleet.reregister_secs,
        "registration": registration,
        "idle": idle,
        "churn": churn,
        "p99_churn_over_idle": churn.median_p99_ms.zip(idle.median_p99_ms).map(|(c, i)| c / i),
        "reregistration": reregistration,
        "change_share": args.change_share,
        "changes_per_sec": args.changes_per_sec,
        "create_delete_share": args.create_delete_share,
        "changing_registrations": changes,
        "qps_churn_over_idle": (idle.median_qps > 0.0).then(|| churn.median_qps / idle.median_qps),
        "cluster_polls": cluster_polls,
        "topic_list_polls": topic_lists,
        "brokers_expected": fleet.layout.members(),
        "brokers_listed_at_end": registered_at_end,
        "final_check_error": final_check_error,
        "server_rss_kib": { "idle": rss_idle, "churn": rss_churn },
    }))
}

async fn final_count(addr: &str) -> anyhow::Result<usize> {
    let client = Client::connect(addr).await?;
    cluster_members(&client)
        .await
        .map_err(|e| e.context("GET_BROKER_CLUSTER_INFO after the run"))
}

async fn topic_list_polls(addr: &str, period: Duration) -> anyhow::Result<Background> {
    let client = Client::connect(addr).await?;
    let mut bg = Background::new();
    bg.every(Duration::ZERO, period, move || {
        let client = client.clone();
        async move {
            let started = Instant::now();
            crate::fleet::topic_list(&client).await?;
            Ok(started.elapsed())
        }
    });
    Ok(bg)
}
