//! `mqcontroller -c controller.conf`: a standalone controller node, as Java's `ControllerStartup`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use rocketmq_controller::ControllerConfig;

#[derive(Parser)]
#[command(
    name = "mqcontroller",
    about = "RocketMQ controller (RIP-44) replicated with openraft"
)]
struct Cli {
    /// Controller config properties file (Java's controller.conf keys).
    #[arg(short = 'c', long = "configFile")]
    config_file: Option<PathBuf>,
    /// Print every config item and exit.
    #[arg(short = 'p', long = "printConfigItem")]
    print_config_item: bool,
}

fn main() -> ExitCode {
    run(Cli::parse()).unwrap_or_else(refused)
}

/// A node that cannot start says why and exits with 255.
fn refused(e: anyhow::Error) -> ExitCode {
    eprintln!("{e:#}");
    ExitCode::from(255)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let props = match &cli.config_file {
        Some(path) => std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|b| rocketmq_wire::properties::parse(&b).map_err(|e| e.to_string()))
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?,
        None => Vec::new(),
    };
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    let config = ControllerConfig::from_properties(&props, &home)?;
    if cli.print_config_item {
        print!("{}", config.listing());
        return Ok(ExitCode::SUCCESS);
    }
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        // RUST_LOG as `target=level` directives; span and field filters (which need a regex
        // engine in the binary) are not supported.
        let filter = std::env::var("RUST_LOG")
            .ok()
            .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
            .unwrap_or_else(|| "info,openraft=error".parse().expect("a valid filter"));
        tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer())
            .with(filter)
            .init();
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
    let served = runtime.block_on(async move {
        // SIGTERM is how systemd and Docker stop a service, SIGINT a terminal's Ctrl-C: both take
        // the graceful path, also when they arrive while the node is still starting.
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        // Bound first: a port that is taken fails the start before the node joins its group.
        let http = match &config.http {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen for HTTP on {addr}"))?,
            ),
            None => None,
        };
        let running = rocketmq_controller::start(config).await?;
        println!("Controller Server boot success, address {}", running.addr);
        let controller = running.controller.clone();
        let stop_http = tokio_util::sync::CancellationToken::new();
        let http = http.map(|listener| {
            if let Ok(addr) = listener.local_addr() {
                println!("HTTP (metrics, /healthz, /readyz, status page) at http://{addr}/");
            }
            tokio::spawn(rocketmq_controller::http::serve(
                listener,
                controller.clone(),
                stop_http.clone(),
            ))
        });
        let stop = async {
            stop_http.cancel();
            if let Some(task) = http {
                let _ = task.await;
            }
        };
        let stop_signal = async {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        anyhow::Ok(tokio::select! {
            _ = stop_signal => {
                running.prepare_to_leave().await;
                stop.await;
                running.shutdown().await;
                ExitCode::SUCCESS
            }
            // Fail-stop: a node whose store cannot be written must not linger as a member that
            // answers errors forever; a supervisor restarts it once the disk is fixed.
            _ = controller.group().failed() => {
                eprintln!(
                    "controller stopped: {}",
                    controller.group().failure().unwrap_or_default()
                );
                ExitCode::FAILURE
            }
        })
    });
    // Said before the runtime is dropped: dropping it waits for its blocking tasks.
    Ok(served.unwrap_or_else(refused))
}
