//! `nsadmin`: the NameServer and controller commands of RocketMQ's `mqadmin`, with its command
//! names and flags, plus `diff` to check that several NameServers agree.
//!
//! - [`cli`]: the command line under mqadmin's command names and flags;
//! - [`namesrvs`]: the NameServers of `-n`: reads from the first that answers, writes to all;
//! - [`reads`]: commands that only look;
//! - [`writes`]: commands that change state, sent to every NameServer since they share nothing;
//! - [`controller`]: the controller commands, sent to the nodes of `-a` or to their leader;
//! - [`members`]: the members of our replicated groups (controller nodes, NameServers that
//!   agree), listed and changed through the group's leader;
//! - [`diff`]: where several NameServers tell clients different things;
//! - [`explain`]: why a topic has no route, or where a broker stands, from each route journal;
//! - [`report`]: text for people, JSON for programs, and the failures behind the exit code;
//! - [`error`]: what can go wrong with a NameServer or controller, worded as mqadmin words it.

mod cli;
mod controller;
mod diff;
mod error;
mod explain;
mod members;
mod namesrvs;
mod reads;
mod report;
mod writes;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use cli::{Cli, Command};
use controller::Controllers;
use error::AdminError;
use namesrvs::{Credentials, Namesrvs};
use report::Report;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse_from(cli::mqadmin_args(std::env::args_os()));
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
    let timeout = Duration::from_millis(global.timeout_ms);
    let credentials = global
        .access_key
        .zip(global.secret_key)
        .map(|(access_key, secret_key)| Credentials {
            access_key,
            secret_key,
        });
    // Controller commands need no NameServer, so -n is only required where it is used.
    let namesrv_addr = global.namesrv_addr;
    let namesrvs = || Namesrvs::parse(namesrv_addr.as_deref(), timeout, credentials.clone());
    let controllers = |list: &str| Controllers::parse(list, timeout, credentials.clone());
    let report = match cli.command {
        Command::ClusterList => reads::cluster_list(&namesrvs()?).await?,
        Command::TopicRoute { topic } => reads::topic_route(&namesrvs()?, &topic).await?,
        Command::TopicList { cluster } => {
            reads::topic_list(&namesrvs()?, cluster.as_deref()).await?
        }
        Command::GetKvConfig(k) => reads::get_kv_config(&namesrvs()?, &k.namespace, &k.key).await?,
        Command::GetKvListByNamespace { namespace } => {
            reads::get_kv_list(&namesrvs()?, &namespace).await?
        }
        Command::GetNamesrvConfig => reads::get_namesrv_config(&namesrvs()?).await,
        Command::UpdateKvConfig { key, value } => {
            writes::update_kv_config(&namesrvs()?, &key.namespace, &key.key, &value).await
        }
        Command::DeleteKvConfig(k) => {
            writes::delete_kv_config(&namesrvs()?, &k.namespace, &k.key).await
        }
        Command::UpdateNamesrvConfig { key, value } => {
            writes::update_namesrv_config(&namesrvs()?, &key, &value).await
        }
        Command::WipeWritePerm { broker } => writes::write_perm(&namesrvs()?, &broker, true).await,
        Command::AddWritePerm { broker } => writes::write_perm(&namesrvs()?, &broker, false).await,
        Command::DeleteTopic { topic, cluster } => {
            writes::delete_topic(&namesrvs()?, &topic, cluster.as_deref()).await
        }
        Command::ListNamesrvMembers => members::list_members(&namesrvs()?).await?,
        Command::AddNamesrvMember { id, addr } => {
            members::add_member(&namesrvs()?, &id, &addr).await?
        }
        Command::RemoveNamesrvMember { id } => members::remove_member(&namesrvs()?, &id).await?,
        Command::TransferNamesrvLeader { id } => {
            members::transfer_leader(&namesrvs()?, &id).await?
        }
        Command::Diff { namespaces } => diff::diff(&namesrvs()?, &namespaces).await?,
        Command::ExplainRoute { topic } => explain::explain_route(&namesrvs()?, &topic).await?,
        Command::ExplainBroker { broker } => explain::explain_broker(&namesrvs()?, &broker).await?,
        Command::GetControllerMetaData { controller } => {
            controller::get_controller_metadata(&controllers(&controller.addrs)?).await
        }
        Command::GetSyncStateSet { controller, sets } => {
            controller::get_sync_state_set(&controllers(&controller.addrs)?, &sets, namesrvs)
                .await?
        }
        Command::ElectMaster {
            controller,
            cluster,
            broker,
            broker_id,
        } => {
            let ctl = controllers(&controller.addrs)?;
            controller::elect_master(&ctl, &cluster, &broker, broker_id).await?
        }
        Command::CleanBrokerMetadata {
            controller,
            broker,
            cluster,
            ids,
            clean_living,
        } => {
            let ctl = controllers(&controller.addrs)?;
            let (cluster, ids) = (cluster.as_deref(), ids.as_deref());
            controller::clean_broker_metadata(&ctl, &broker, cluster, ids, clean_living).await?
        }
        Command::GetControllerConfig { controller } => {
            controller::get_controller_config(&controllers(&controller.addrs)?).await
        }
        Command::UpdateControllerConfig {
            controller,
            key,
            value,
        } => {
            let ctl = controllers(&controller.addrs)?;
            controller::update_controller_config(&ctl, &key, &value).await
        }
        Command::ListControllerMembers { controller } => {
            members::list_members(&controllers(&controller.addrs)?).await?
        }
        Command::AddControllerMember {
            controller,
            id,
            addr,
        } => members::add_member(&controllers(&controller.addrs)?, &id, &addr).await?,
        Command::RemoveControllerMember { controller, id } => {
            members::remove_member(&controllers(&controller.addrs)?, &id).await?
        }
        Command::TransferControllerLeader { controller, id } => {
            members::transfer_leader(&controllers(&controller.addrs)?, &id).await?
        }
    };
    Ok(report)
}
