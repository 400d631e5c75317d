//! Brokers restarting quickly, as a real one does when it is stopped and started again at once:
//! each round, a broker unregisters, waits for the answer, registers again with a newer data
//! version, waits for that answer, and after a pause asks for its own topic's route. The route
//! must list it: whatever the server acknowledged last for a broker is what stands. A server
//! that applies a queued unregistration after the registration that followed it loses the
//! broker until its next heartbeat (apache/rocketmq#11043).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rocketmq_wire::body::{DataVersion, TopicRouteData};
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::response;
use rocketmq_wire::headers::{
    GetRouteInfoHeader, RegisterBrokerHeader, RequestHeader, UnregisterBrokerHeader,
};
use serde_json::json;

use crate::broker_body::encode_table;
use crate::cli::{BodyForm, RestartArgs, RestartVariant};
use crate::fleet::expect_success;
use crate::stats::Latency;

const CLUSTER: &str = "RestartCluster";
const TIMEOUT: Duration = Duration::from_secs(5);
/// Rounds reported by number when they lost the broker, at most.
const LOST_LISTED: usize = 20;

#[derive(Default)]
struct Tally {
    register: Latency,
    unregister: Latency,
    lost: Vec<(usize, u64)>,
}

pub async fn run(args: &RestartArgs) -> anyhow::Result<serde_json::Value> {
    let variants = match args.variant {
        RestartVariant::All => vec![
            RestartVariant::NewConnection,
            RestartVariant::NewConnectionKept,
            RestartVariant::SameConnection,
        ],
        one => vec![one],
    };
    let mut results = Vec::new();
    for variant in variants {
        results.push(run_variant(args, variant).await?);
    }
    let lost: u64 = results
        .iter()
        .map(|r| r["lost"].as_u64().unwrap_or(0))
        .sum();
    if args.require_none_lost {
        anyhow::ensure!(lost == 0, "{lost} fresh registrations lost: {results:?}");
    }
    Ok(json!({
        "scenario": "restarts",
        "rounds_per_variant": args.rounds,
        "brokers": args.brokers,
        "settle_ms": args.settle_ms,
        "lost": lost,
        "variants": results,
    }))
}

async fn run_variant(
    args: &RestartArgs,
    variant: RestartVariant,
) -> anyhow::Result<serde_json::Value> {
    let next_round = Arc::new(AtomicU64::new(0));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let mut brokers = Vec::new();
    for b in 0..args.brokers.max(1) {
        let (next_round, tally) = (next_round.clone(), tally.clone());
        let (addr, rounds, settle) = (
            args.target.addr.clone(),
            args.rounds as u64,
            Duration::from_millis(args.settle_ms),
        );
        brokers.push(tokio::spawn(async move {
            let broker = RestartingBroker::new(b, variant);
            broker
                .rounds(&addr, &next_round, rounds, settle, &tally)
                .await
        }));
    }
    for broker in brokers {
        broker.await??;
    }
    let tally = tally.lock().unwrap();
    Ok(json!({
        "variant": variant.name(),
        "rounds": next_round.load(Ordering::Relaxed).min(args.rounds as u64),
        "lost": tally.lost.len(),
        "lost_rounds": tally.lost.iter().take(LOST_LISTED).map(|(b, r)| json!({"broker": b, "round": r})).collect::<Vec<_>>(),
        "register": tally.register.summary(),
        "unregister": tally.unregister.summary(),
        "secs": started.elapsed().as_secs_f64(),
    }))
}

struct RestartingBroker {
    index: usize,
    variant: RestartVariant,
    name: String,
    addr: String,
    topics: [String; 2],
}

impl RestartingBroker {
    fn new(index: usize, variant: RestartVariant) -> Self {
        RestartingBroker {
            index,
            variant,
            name: format!("restart-{}-{index}", variant.name()),
            addr: format!("127.0.0.{}:{}", 10 + index / 1000, 20_000 + index % 1000),
            topics: [
                format!("restart-{}-{index}-a", variant.name()),
                format!("restart-{}-{index}-b", variant.name()),
            ],
        }
    }

    /// Takes rounds from the shared counter until `rounds` are taken.
    async fn rounds(
        &self,
        server: &str,
        next_round: &AtomicU64,
        rounds: u64,
        settle: Duration,
        tally: &Mutex<Tally>,
    ) -> anyhow::Result<()> {
        let mut conn = Client::connect(server).await?;
        let mut counter = 1;
        self.register(&conn, counter).await?;
        let reader = Client::connect(server).await?;
        loop {
            let round = next_round.fetch_add(1, Ordering::Relaxed);
            if round >= rounds {
                return Ok(());
            }
            let t = Instant::now();
            self.unregister(&conn).await?;
            let unregister = t.elapsed();
            counter += 1;
            let old = match self.variant {
                RestartVariant::SameConnection => None,
                _ => Some(std::mem::replace(&mut conn, Client::connect(server).await?)),
            };
            let t = Instant::now();
            self.register(&conn, counter).await?;
            let register = t.elapsed();
            let kept = match (self.variant, old) {
                // Closed after the new registration was answered, as a broker's old channel is.
                (RestartVariant::NewConnection, Some(old)) => {
                    drop(old);
                    None
                }
                (_, old) => old,
            };
            tokio::time::sleep(settle).await;
            let routable = self.routable(&reader).await?;
            drop(kept);
            {
                let mut tally = tally.lock().unwrap();
                tally.unregister.record(unregister);
                tally.register.record(register);
                if !routable {
                    tally.lost.push((self.index, round));
                }
            }
            if !routable {
                // Registered again so that the next round starts from a routable broker.
                counter += 1;
                self.register(&conn, counter).await?;
            }
        }
    }

    async fn register(&self, client: &Client, counter: i64) -> anyhow::Result<()> {
        let table: Vec<(&str, i32)> = self.topics.iter().map(|t| (t.as_str(), 4)).collect();
        let version = DataVersion {
            counter,
            state_version: 0,
            timestamp: 1_700_000_000_000 + counter,
        };
        let body: Bytes = encode_table(&table, version, BodyForm::Json);
        let request = RegisterBrokerHeader {
            broker_name: &self.name,
            broker_addr: &self.addr,
            cluster_name: CLUSTER,
            ha_server_addr: Some(&self.addr),
            broker_id: 0,
            heartbeat_timeout_millis: None,
            enable_acting_master: Some(false),
            compressed: false,
            body_crc32: Some(rocketmq_wire::body_crc32(&body).into()),
            zone_name: None,
        }
        .to_command()
        .with_version(BodyForm::Json.version())
        .with_body(body);
        expect_success(client.invoke(request, TIMEOUT).await?, "REGISTER_BROKER")
    }

    async fn unregister(&self, client: &Client) -> anyhow::Result<()> {
        let request = UnregisterBrokerHeader {
            broker_name: &self.name,
            broker_addr: &self.addr,
            cluster_name: CLUSTER,
            broker_id: 0,
        }
        .to_command();
        expect_success(client.invoke(request, TIMEOUT).await?, "UNREGISTER_BROKER")
    }

    /// Whether the route of the broker's first topic lists it as master.
    async fn routable(&self, reader: &Client) -> anyhow::Result<bool> {
        let resp = reader
            .invoke(
                GetRouteInfoHeader::new(&self.topics[0]).to_command(),
                TIMEOUT,
            )
            .await?;
        if resp.code != response::SUCCESS {
            return Ok(false);
        }
        let route = TopicRouteData::decode(resp.body.as_deref().unwrap_or_default())?;
        Ok(route
            .broker_datas
            .iter()
            .any(|bd| bd.broker_name == self.name && bd.broker_addrs.get(&0) == Some(&self.addr)))
    }
}
