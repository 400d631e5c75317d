//! `nsbench`: drives a RocketMQ NameServer the way a fleet of brokers and clients would, and
//! measures it; also the canned ceiling server and the report writer of `scripts/bench`.
//!
//! - [`cli`]: the command line, one subcommand per measurement plus the canned server and report;
//! - [`broker_body`]: REGISTER_BROKER bodies in the forms brokers send;
//! - [`fleet`]: simulated brokers on long-lived connections, registering like real ones;
//! - [`route_load`]: closed-loop, pipelined GET_ROUTEINFO_BY_TOPIC connections;
//! - [`scenario`]: one module per measurement (route, mixed, register, restarts, KV writes,
//!   KV writes across kills, startup, what a server writes per re-registration round);
//! - [`canned`]: a server that answers every request with one fixed route-sized frame;
//! - [`stats`], [`server_proc`]: latency summaries and the server process's memory;
//! - [`report`]: turns a directory of results into `BENCHMARKS.md`.

mod broker_body;
mod canned;
mod cli;
mod fleet;
mod report;
mod route_load;
mod scenario;
mod server_proc;
mod stats;

use clap::Parser;

fn main() -> std::process::ExitCode {
    match run(cli::Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line with every cause: scripts quote the first line of a failure.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: cli::Cli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cli.threads.max(1))
        .enable_all()
        .build()?;
    let output = match cli.command {
        cli::Command::Route(args) => runtime.block_on(scenario::route::run(&args))?,
        cli::Command::Mixed(args) => runtime.block_on(scenario::mixed::run(&args))?,
        cli::Command::Register(args) => runtime.block_on(scenario::register::run(&args))?,
        cli::Command::Restarts(args) => runtime.block_on(scenario::restarts::run(&args))?,
        cli::Command::KvWrites(args) => runtime.block_on(scenario::kv_writes::run(&args))?,
        cli::Command::KvStream(args) => runtime.block_on(scenario::kv_stream::run(&args))?,
        cli::Command::Agreement(args) => runtime.block_on(scenario::agreement::run(&args))?,
        cli::Command::Startup(args) => runtime.block_on(scenario::startup::run(&args))?,
        cli::Command::Refill(args) => runtime.block_on(scenario::refill::run(&args))?,
        cli::Command::Rounds(args) => runtime.block_on(scenario::rounds::run(&args))?,
        cli::Command::Storm(args) => runtime.block_on(scenario::storm::run(&args))?,
        cli::Command::Split(args) => runtime.block_on(scenario::split::run(&args))?,
        cli::Command::Consensus(args) => runtime.block_on(scenario::consensus::run(&args))?,
        cli::Command::Large(args) => runtime.block_on(scenario::large::run(&args))?,
        cli::Command::Canned(args) => runtime.block_on(canned::run(&args))?,
        cli::Command::Report(args) => return report::run(&args),
    };
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(())
}
