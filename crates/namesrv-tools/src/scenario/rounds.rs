//! What a server writes per re-registration round: a fleet registers, then re-registers round
//! after round (every broker once a round, spread evenly over it, as independent brokers are),
//! and the size of a directory the server writes, such as its route journal, is read with
//! `du -sb` once the first registrations are written and at the end of each round. The growth
//! over the rounds, per broker and per day, is what the server keeps writing for a fleet that
//! only stays alive.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;

use super::rss_kib;
use crate::cli::RoundsArgs;
use crate::fleet::{Background, ChangePolicy, Fleet};

/// How often the size is read while the first registrations are being written.
const SETTLE_POLL: Duration = Duration::from_millis(500);
/// How long the server gets to write what the first registrations changed.
const SETTLE_LIMIT: Duration = Duration::from_secs(300);
/// Of the changes (with --change-share), the share that creates or deletes a topic, as in the
/// mixed workload.
const CREATE_DELETE_SHARE: f64 = 0.2;
const SECONDS_A_DAY: f64 = 86_400.0;

pub async fn run(args: &RoundsArgs) -> anyhow::Result<serde_json::Value> {
    anyhow::ensure!(
        args.fleet.reregister_secs > 0,
        "a round is --reregister-secs long, which must not be 0"
    );
    let period = Duration::from_secs(args.fleet.reregister_secs);
    let before = du(&args.du).await?;
    let (fleet, registration) = Fleet::register(&args.target.addr, &args.fleet).await?;
    let registered = Instant::now();
    let (first_bytes, settled) =
        settle(&args.du, Duration::from_secs_f64(args.settle_secs)).await?;
    let settled_secs = registered.elapsed().as_secs_f64();

    let started = Instant::now();
    let reregistration = fleet.reregistration_changing(
        period,
        args.change_share,
        ChangePolicy {
            create_delete_share: CREATE_DELETE_SHARE,
        },
    );
    let mut rounds = Vec::with_capacity(args.rounds);
    let mut last = first_bytes;
    for round in 1..=args.rounds {
        tokio::time::sleep_until((started + period * round as u32).into()).await;
        last = du(&args.du).await?;
        rounds.push(json!({
            "round": round,
            "secs": started.elapsed().as_secs_f64(),
            "bytes": last,
        }));
    }
    let reregistration = Background::stop(reregistration);

    let members = fleet.layout.members();
    let growth = last as i64 - first_bytes as i64;
    let secs = (period * args.rounds as u32).as_secs_f64();
    let per_broker_per_day =
        (secs > 0.0).then(|| growth as f64 / secs * SECONDS_A_DAY / members as f64);
    Ok(json!({
        "scenario": "rounds",
        "layout": fleet.layout,
        "body": format!("{:?}", fleet.form).to_lowercase(),
        "reregister_secs": args.fleet.reregister_secs,
        "change_share": args.change_share,
        "path": args.du,
        "registration": registration,
        "bytes_before": before,
        "first_round": {
            "bytes": first_bytes,
            "settled": settled,
            "secs_after_registration": settled_secs,
            "bytes_per_broker": (first_bytes.saturating_sub(before)) as f64 / members as f64,
        },
        "rounds": rounds,
        "growth_bytes": growth,
        "growth_secs": secs,
        "bytes_per_broker_per_day": per_broker_per_day,
        "reregistration": reregistration,
        "server_rss_kib": rss_kib(args.target.server_pid),
    }))
}

/// Reads the size until it has stayed the same for `quiet`: the server has written what the
/// registrations changed. Says whether it did within [`SETTLE_LIMIT`].
async fn settle(path: &Path, quiet: Duration) -> anyhow::Result<(u64, bool)> {
    let started = Instant::now();
    let mut size = du(path).await?;
    let mut since = Instant::now();
    while started.elapsed() < SETTLE_LIMIT {
        tokio::time::sleep(SETTLE_POLL).await;
        let now = du(path).await?;
        if now != size {
            size = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return Ok((size, true));
        }
    }
    Ok((size, false))
}

/// `du -sb PATH`: the apparent size of every file and directory under it, in bytes.
async fn du(path: &Path) -> anyhow::Result<u64> {
    let path = path.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("du")
            .arg("-sb")
            .arg(&path)
            .output()
            .with_context(|| format!("running du -sb {}", path.display()))
    })
    .await??;
    anyhow::ensure!(
        out.status.success(),
        "du -sb failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    parse_du(&String::from_utf8_lossy(&out.stdout))
}

fn parse_du(out: &str) -> anyhow::Result<u64> {
    out.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("cannot read a size from du's answer {out:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_size_du_prints() {
        assert_eq!(parse_du("66279584\t/srv/journal\n").unwrap(), 66_279_584);
        assert!(parse_du("").is_err());
    }

    #[tokio::test]
    async fn du_counts_the_bytes_of_the_files() {
        let dir = std::env::temp_dir().join(format!("nsbench-du-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = du(&dir).await.unwrap();
        std::fs::write(dir.join("a"), vec![0u8; 1000]).unwrap();
        let grown = du(&dir).await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(grown >= empty + 1000, "{empty} → {grown}");
    }
}
