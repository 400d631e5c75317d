//! `mqnamesrv`: the NameServer's command line, as the Java `mqnamesrv` script offers it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use namesrv::config::Settings;

#[derive(Parser, Debug)]
#[command(name = "mqnamesrv", version, about = "RocketMQ NameServer")]
struct Cli {
    /// Name server config properties file
    #[arg(short = 'c', long = "configFile", value_name = "FILE")]
    config_file: Option<PathBuf>,
    /// Print all config items and exit
    #[arg(short = 'p', long = "printConfigItem")]
    print_config_item: bool,
    /// Name server address list (accepted for compatibility, unused)
    #[arg(short = 'n', long = "namesrvAddr", value_name = "ADDRS")]
    namesrv_addr: Option<String>,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    let rocketmq_home = std::env::var("ROCKETMQ_HOME")
        .ok()
        .filter(|h| !h.is_empty());
    let mut settings = Settings::defaults(&home, rocketmq_home);
    if let Some(file) = &cli.config_file {
        if let Err(e) = settings.load_file(file) {
            eprintln!("{e}");
            return ExitCode::from(255);
        }
        println!("load config properties file OK, {}", file.display());
    }
    if cli.print_config_item {
        print!("{}", settings.listing());
        return ExitCode::SUCCESS;
    }

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::from(255);
        }
    };
    let result = runtime.block_on(namesrv::run(
        settings,
        |endpoints| {
            if let Some(http) = endpoints.http {
                println!("The Name Server HTTP port: http://{http}");
            }
            println!(
                "The Name Server boot success. serializeType=JSON, address {}",
                endpoints.remoting
            );
        },
        shutdown_signal(),
    ));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mqnamesrv failed: {e:#}");
            ExitCode::from(255)
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
