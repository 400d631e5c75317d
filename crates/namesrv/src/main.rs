//! `mqnamesrv`: the NameServer's command line, as the Java `mqnamesrv` script offers it.

use std::io::IsTerminal;
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
    namesrv::memory::tune_allocator();
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
    let _log_guard = init_logging(&settings.server.log_dir);

    // Blocking requests (disk writes, large registrations) queue for these threads rather than
    // each taking one: a flood of them costs queue entries, not hundreds of threads.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(64)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::from(255);
        }
    };
    let signals = runtime.block_on(count_signals());
    let result = runtime.block_on(namesrv::run(
        settings,
        |endpoints| {
            if let Some(http) = endpoints.http {
                println!("The Name Server HTTP port: http://{http}");
            }
            let line = format!(
                "The Name Server boot success. serializeType=JSON, address {}",
                endpoints.remoting
            );
            tracing::info!("{line}");
            println!("{line}");
            // After the NameServer's line: tools read the address from the first boot line.
            if let Some(controller) = endpoints.controller {
                println!(
                    "The ControllerManager boot success. serializeType=JSON, address {controller}"
                );
            }
        },
        nth_signal(signals.clone(), 1),
        nth_signal(signals, 2),
    ));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mqnamesrv failed: {e:#}");
            ExitCode::from(255)
        }
    }
}

/// Logs go to stderr and, as Java's NameServer logs, to `namesrv.log` under `logDir`, rotated
/// daily with a week kept. An empty `logDir` keeps logs on stderr only.
fn init_logging(log_dir: &str) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    // RUST_LOG as `target=level` directives; span and field filters (which need a regex
    // engine in the binary) are not supported.
    let filter = || {
        std::env::var("RUST_LOG")
            .ok()
            .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
            .unwrap_or_else(|| "info,openraft=error".parse().expect("a valid filter"))
    };
    let console = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .with_filter(filter());
    let (file, guard) = if log_dir.is_empty() {
        (None, None)
    } else {
        // The appender prunes old files at start and complains if the directory is missing.
        let _ = std::fs::create_dir_all(log_dir);
        let appender = tracing_appender::rolling::Builder::new()
            .rotation(tracing_appender::rolling::Rotation::DAILY)
            .filename_prefix("namesrv")
            .filename_suffix("log")
            .max_log_files(7)
            .build(log_dir);
        match appender {
            Ok(appender) => {
                // The default queue preallocates room for 128k lines (megabytes at idle).
                let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
                    .buffered_lines_limit(1024)
                    .finish(appender);
                let layer = tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(writer)
                    .with_filter(filter());
                (Some(layer), Some(guard))
            }
            Err(e) => {
                eprintln!("logging to the console only: cannot log to {log_dir}: {e}");
                (None, None)
            }
        }
    };
    tracing_subscriber::registry()
        .with(console)
        .with(file)
        .init();
    guard
}

/// Counts SIGTERM and SIGINT from now on: the first shuts the server down, a second cuts the
/// graceful wait short.
async fn count_signals() -> tokio::sync::watch::Receiver<u32> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    let (count, counted) = tokio::sync::watch::channel(0);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            count.send_modify(|n| *n += 1);
        }
    });
    counted
}

async fn nth_signal(mut counted: tokio::sync::watch::Receiver<u32>, n: u32) {
    let _ = counted.wait_for(|count| *count >= n).await;
}
