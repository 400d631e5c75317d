//! `nsadmin`: the NameServer commands of RocketMQ's `mqadmin`, with its command names and flags,
//! plus `diff` to check that several NameServers agree.

mod cli;
mod diff;
mod error;
mod namesrvs;
mod reads;
mod report;
mod writes;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use cli::{Cli, Command};
use error::AdminError;
use namesrvs::{Credentials, Namesrvs};
use report::Report;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.global.json;
    let trouble_code = match cli.command {
        Command::Diff { .. } => diff::TROUBLE,
        _ => 1,
    };
    match run(cli).await {
        Ok(report) => {
            print(&report, json);
            ExitCode::from(report.exit_code as u8)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(trouble_code as u8)
        }
    }
}

fn print(report: &Report, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json).expect("JSON values always serialize")
        );
    } else {
        print!("{}", report.text);
    }
    for failure in &report.failures {
        eprintln!("error: {failure}");
    }
}

async fn run(cli: Cli) -> Result<Report, AdminError> {
    let global = cli.global;
    let credentials = global
        .access_key
        .zip(global.secret_key)
        .map(|(access_key, secret_key)| Credentials {
            access_key,
            secret_key,
        });
    let ns = Namesrvs::parse(
        global.namesrv_addr.as_deref(),
        Duration::from_millis(global.timeout_ms),
        credentials,
    )?;
    let report = match cli.command {
        Command::ClusterList => reads::cluster_list(&ns).await?,
        Command::TopicRoute { topic } => reads::topic_route(&ns, &topic).await?,
        Command::TopicList { cluster } => reads::topic_list(&ns, cluster.as_deref()).await?,
        Command::GetKvConfig(k) => reads::get_kv_config(&ns, &k.namespace, &k.key).await?,
        Command::GetKvListByNamespace { namespace } => reads::get_kv_list(&ns, &namespace).await?,
        Command::GetNamesrvConfig => reads::get_namesrv_config(&ns).await,
        Command::UpdateKvConfig { key, value } => {
            writes::update_kv_config(&ns, &key.namespace, &key.key, &value).await
        }
        Command::DeleteKvConfig(k) => writes::delete_kv_config(&ns, &k.namespace, &k.key).await,
        Command::UpdateNamesrvConfig { key, value } => {
            writes::update_namesrv_config(&ns, &key, &value).await
        }
        Command::WipeWritePerm { broker } => writes::write_perm(&ns, &broker, true).await,
        Command::AddWritePerm { broker } => writes::write_perm(&ns, &broker, false).await,
        Command::DeleteTopic { topic, cluster } => {
            writes::delete_topic(&ns, &topic, cluster.as_deref()).await
        }
        Command::Diff { namespaces } => diff::diff(&ns, &namespaces).await?,
    };
    Ok(report)
}
