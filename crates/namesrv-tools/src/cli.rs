//! The command line: one subcommand per measurement, plus the canned server and the report.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "nsbench",
    version,
    about = "Load generator and benchmarks for RocketMQ NameServers"
)]
pub struct Cli {
    /// Worker threads of the load generator's runtime
    #[arg(long, global = true, default_value_t = 2)]
    pub threads: usize,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Register a broker fleet, then drive closed-loop GET_ROUTEINFO_BY_TOPIC
    Route(RouteArgs),
    /// Route reads while brokers re-register and poll cluster info and topic lists
    Mixed(MixedArgs),
    /// One broker registering many topics, repeatedly, with a fresh data version each time
    Register(RegisterArgs),
    /// Brokers restarting at once (unregister, register again, then their route): none may be lost
    Restarts(RestartArgs),
    /// One admin client's PUT_KV_CONFIG, one after another: write latency
    KvWrites(KvWritesArgs),
    /// NameServers that agree: a stream of KV writes to each while they are killed and
    /// restarted, then every acknowledged write read back from all of them
    KvStream(KvStreamArgs),
    /// NameServers that agree: time from a change on one until all of them route it
    Agreement(AgreementArgs),
    /// Start a server command repeatedly: time to the first route answer, idle memory
    Startup(StartupArgs),
    /// A fleet registers, then re-registers round after round: the size of a directory the
    /// server writes (du -sb) after the first registrations and after each round
    Rounds(RoundsArgs),
    /// A NameServer that agrees starts with no routes while its peers hold a fleet: time until
    /// it says it is ready, and whether its table is then complete
    Refill(RefillArgs),
    /// A large table (a million topics): the first topic lists, the status page and metrics,
    /// route lookups, the route snapshot's lag behind a change, memory
    Large(LargeArgs),
    /// Every broker of a fleet registering with a NameServer with no routes in the same second:
    /// time until every route is complete, route p99 during the storm against idle
    Storm(StormArgs),
    /// One broker registering a large table in chunks, as with enableSplitRegistration: time to
    /// apply a round, route p99 during the rounds against idle
    Split(SplitArgs),
    /// NameServers that agree, with the embedded controller, while a fleet registers with all of
    /// them at once and a client writes KV entries: elections, quorum contact ages, KV latency
    Consensus(ConsensusArgs),
    /// Serve a fixed route-sized answer to every request: the ceiling of any NameServer here
    Canned(CannedArgs),
    /// Write BENCHMARKS.md from a results directory produced by scripts/bench
    Report(ReportArgs),
}

/// How brokers encode REGISTER_BROKER, which also decides the header they send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BodyForm {
    /// JSON body, version 479 headers with enableActingMaster=false, as a 5.x broker sends
    Json,
    /// zlib body, version 399 headers without enableActingMaster, as a 4.9 broker sends
    Compressed,
}

#[derive(Args, Debug, Clone)]
pub struct Target {
    /// NameServer address
    #[arg(long, default_value = "127.0.0.1:9876")]
    pub addr: String,
    /// PID of the server process, to report its resident memory
    #[arg(long)]
    pub server_pid: Option<u32>,
}

#[derive(Args, Debug, Clone)]
pub struct FleetArgs {
    /// Master brokers, each on its own connection
    #[arg(long, default_value_t = 10)]
    pub brokers: usize,
    /// Topics each broker carries
    #[arg(long, default_value_t = 1000)]
    pub topics: usize,
    /// Brokers that carry the same topic set (0 = all brokers carry the same topics)
    #[arg(long, default_value_t = 0)]
    pub group_size: usize,
    /// Read and write queues per topic and broker
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    /// Give every master a slave (broker id 1) that registers too
    #[arg(long)]
    pub slaves: bool,
    #[arg(long, value_enum, default_value_t = BodyForm::Json)]
    pub body: BodyForm,
    /// Seconds between re-registrations of each broker (0 = never)
    #[arg(long, default_value_t = 30)]
    pub reregister_secs: u64,
    /// Initial registrations in flight at once
    #[arg(long, default_value_t = 8)]
    pub register_concurrency: usize,
    /// Give every topic a route of its own (a subset of the brokers, its own queue counts);
    /// --topics is then the number of topics in all
    #[arg(long)]
    pub distinct_routes: bool,
    /// With --distinct-routes: on how many quarters of the brokers each topic is, about (1 to 4)
    #[arg(long, default_value_t = 2)]
    pub route_quarters: u64,
}

#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Route connections
    #[arg(long, default_value_t = 16)]
    pub conns: usize,
    /// Requests in flight per connection
    #[arg(long, default_value_t = 8)]
    pub depth: usize,
    /// Seconds of load before measuring
    #[arg(long, default_value_t = 2.0)]
    pub warmup_secs: f64,
    /// Seconds per measured run
    #[arg(long, default_value_t = 10.0)]
    pub duration_secs: f64,
    /// Measured runs (the report takes their median)
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
}

#[derive(Args, Debug)]
pub struct RouteArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER requests timed after the route runs
    #[arg(long, default_value_t = 0)]
    pub topic_list_runs: usize,
    /// Fail unless every run answered requests and nothing failed
    #[arg(long)]
    pub require_clean: bool,
}

#[derive(Args, Debug)]
pub struct StormArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Seconds the route lookups run from the start of the storm, and again once it is over
    #[arg(long, default_value_t = 5.0)]
    pub window_secs: f64,
}

#[derive(Args, Debug)]
pub struct ConsensusArgs {
    /// The NameServers' remoting addresses; every broker registers with every one
    #[arg(long, value_delimiter = ',', required = true)]
    pub addrs: Vec<String>,
    /// Their HTTP addresses, in the same order, for their metrics
    #[arg(long, value_delimiter = ',', required = true)]
    pub http: Vec<String>,
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Which NameServer (0-based) the KV writes go through
    #[arg(long, default_value_t = 0)]
    pub writer: usize,
    /// Milliseconds between two KV writes' starts (each waits for its answer)
    #[arg(long, default_value_t = 20)]
    pub write_every_ms: u64,
    /// Seconds of writes before the fleet starts registering
    #[arg(long, default_value_t = 2.0)]
    pub lead_in_secs: f64,
    /// Seconds of writes once every NameServer has answered the whole fleet
    #[arg(long, default_value_t = 5.0)]
    pub after_secs: f64,
}

#[derive(Args, Debug)]
pub struct SplitArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Topics of the broker
    #[arg(long, default_value_t = 100_000)]
    pub topics: usize,
    /// Topics a chunk (the broker's splitRegistrationSize)
    #[arg(long, default_value_t = 800)]
    pub chunk: usize,
    /// Queues of every topic
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    /// Seconds the route lookups run from the first round's start, again during the periodic
    /// rounds, and once the broker is quiet
    #[arg(long, default_value_t = 5.0)]
    pub window_secs: f64,
}

#[derive(Args, Debug)]
pub struct LargeArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Seconds between the last registration and the first topic list asked for
    #[arg(long, default_value_t = 2.0)]
    pub settle_secs: f64,
    /// Times each topic list and page is asked for (the first is reported on its own)
    #[arg(long, default_value_t = 5)]
    pub list_runs: usize,
    /// The server's HTTP address, to time its status page and metrics
    #[arg(long)]
    pub http: Option<String>,
    /// The server's route snapshot file, to time how long a change takes to reach it
    #[arg(long)]
    pub snapshot: Option<PathBuf>,
    /// Changes timed into the snapshot, one after the other
    #[arg(long, default_value_t = 3)]
    pub snapshot_changes: usize,
}

#[derive(Args, Debug)]
pub struct MixedArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Route load; its runs are measured with the fleet idle, before the churn starts
    #[command(flatten)]
    pub load: LoadArgs,
    /// Measured runs while brokers re-register and poll
    #[arg(long, default_value_t = 3)]
    pub churn_runs: usize,
    /// Seconds per churn run
    #[arg(long, default_value_t = 20.0)]
    pub churn_secs: f64,
    /// Seconds between GET_BROKER_CLUSTER_INFO polls of each broker (0 = none)
    #[arg(long, default_value_t = 5)]
    pub cluster_poll_secs: u64,
    /// Seconds between GET_ALL_TOPIC_LIST_FROM_NAMESERVER polls of one admin client (0 = none)
    #[arg(long, default_value_t = 1)]
    pub topic_list_poll_secs: u64,
    /// Registrations a second that change one thing in a master's table (0 = none)
    #[arg(long, default_value_t = 0.0)]
    pub changes_per_sec: f64,
    /// Share of the periodic re-registrations of masters that change a topic first
    #[arg(long, default_value_t = 0.0)]
    pub change_share: f64,
    /// Of the changes, the share that creates or deletes a topic instead of changing queues
    #[arg(long, default_value_t = 0.2)]
    pub create_delete_share: f64,
}

#[derive(Args, Debug)]
pub struct RegisterArgs {
    #[command(flatten)]
    pub target: Target,
    #[arg(long, default_value_t = 10_000)]
    pub topics: usize,
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    #[arg(long, value_enum, default_value_t = BodyForm::Compressed)]
    pub body: BodyForm,
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// After each registration, check that its first and last topics are routable
    #[arg(long)]
    pub verify_route: bool,
}

/// Where a restarting broker's unregistration and new registration travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RestartVariant {
    /// Unregister on the old connection, register on a new one, close the old one after
    NewConnection,
    /// The same, with the old connection kept open until the round ends
    NewConnectionKept,
    /// Unregister and register on one connection
    SameConnection,
    /// Each of the above in turn
    All,
}

impl RestartVariant {
    pub fn name(self) -> &'static str {
        match self {
            RestartVariant::NewConnection => "new-connection",
            RestartVariant::NewConnectionKept => "new-connection-kept",
            RestartVariant::SameConnection => "same-connection",
            RestartVariant::All => "all",
        }
    }
}

#[derive(Args, Debug)]
pub struct RestartArgs {
    #[command(flatten)]
    pub target: Target,
    /// Rounds of each variant, shared among the brokers
    #[arg(long, default_value_t = 1000)]
    pub rounds: usize,
    /// Brokers restarting at the same time, each with its own name, address and topics
    #[arg(long, default_value_t = 8)]
    pub brokers: usize,
    #[arg(long, value_enum, default_value_t = RestartVariant::All)]
    pub variant: RestartVariant,
    /// Milliseconds between the registration's answer and the route check
    #[arg(long, default_value_t = 50)]
    pub settle_ms: u64,
    /// Fail if any round lost its broker
    #[arg(long)]
    pub require_none_lost: bool,
}

#[derive(Args, Debug)]
pub struct KvWritesArgs {
    #[command(flatten)]
    pub target: Target,
    /// Measured writes
    #[arg(long, default_value_t = 2000)]
    pub writes: usize,
    /// Writes before measuring
    #[arg(long, default_value_t = 200)]
    pub warmup: usize,
    /// Distinct keys written in turn (the KV file holds this many entries)
    #[arg(long, default_value_t = 100)]
    pub keys: usize,
}

#[derive(Args, Debug)]
pub struct KvStreamArgs {
    /// The NameServers' addresses; one writer writes to each
    #[arg(long, value_delimiter = ',', required = true)]
    pub addrs: Vec<String>,
    /// Seconds the writers write for
    #[arg(long, default_value_t = 30)]
    pub duration_secs: u64,
    /// Seconds a NameServer is given after the stream to show every acknowledged write
    #[arg(long, default_value_t = 10)]
    pub settle_secs: u64,
    /// The namespace written to; its keys are distinct per write
    #[arg(long, default_value = "NSBENCH_STREAM")]
    pub namespace: String,
}

#[derive(Args, Debug)]
pub struct AgreementArgs {
    /// The NameServers' addresses; broker b registers with the (b mod n)-th only
    #[arg(long, value_delimiter = ',', required = true)]
    pub addrs: Vec<String>,
    #[arg(long, default_value_t = 30)]
    pub brokers: usize,
    /// Topics of each broker before changes start
    #[arg(long, default_value_t = 100)]
    pub topics: usize,
    /// Changes made and timed
    #[arg(long, default_value_t = 1000)]
    pub changes: usize,
    /// Changes started per second (each broker's own changes one at a time)
    #[arg(long, default_value_t = 20.0)]
    pub per_sec: f64,
    /// Every this-many-th change is an admin change of write permission (0: none)
    #[arg(long, default_value_t = 10)]
    pub admin_every: usize,
    /// Milliseconds between two route checks of a change not yet seen everywhere
    #[arg(long, default_value_t = 10)]
    pub poll_ms: u64,
    /// Seconds after which a change not seen everywhere counts as a failure
    #[arg(long, default_value_t = 10)]
    pub limit_secs: u64,
}

#[derive(Args, Debug)]
pub struct RefillArgs {
    /// NameServers that stay up; the fleet registers with the first only
    #[arg(long, value_delimiter = ',', required = true)]
    pub peers: Vec<String>,
    /// Remoting address of the NameServer started by the command
    #[arg(long)]
    pub addr: String,
    /// Its HTTP address, whose /readyz answers 200 once it is ready
    #[arg(long)]
    pub http: String,
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Starts timed
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Topics whose routes are compared with the first peer's after each start
    #[arg(long, default_value_t = 100)]
    pub sample: usize,
    /// Append the server's output here
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// The server command line; it must start the NameServer with no routes of its own
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct StartupArgs {
    /// Address the started server listens on
    #[arg(long, default_value = "127.0.0.1:9876")]
    pub addr: String,
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seconds to wait after the first answer before reading the idle resident memory
    #[arg(long, default_value_t = 3.0)]
    pub settle_secs: f64,
    /// Append the server's output here
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// The server command line
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RoundsArgs {
    #[command(flatten)]
    pub target: Target,
    /// The fleet; --reregister-secs is the length of a round
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Rounds of re-registration after the first registrations
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// The directory whose size (`du -sb`) is read, such as the server's route journal
    #[arg(long)]
    pub du: PathBuf,
    /// Seconds the size must stay the same before the first registrations count as written
    #[arg(long, default_value_t = 3.0)]
    pub settle_secs: f64,
    /// Share of the masters' re-registrations that change a topic first
    #[arg(long, default_value_t = 0.0)]
    pub change_share: f64,
}

#[derive(Args, Debug)]
pub struct CannedArgs {
    #[arg(long, default_value = "127.0.0.1:9876")]
    pub listen: String,
    /// Brokers in the canned route (its size matches what a NameServer returns for them)
    #[arg(long, default_value_t = 10)]
    pub brokers: usize,
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    #[arg(long)]
    pub slaves: bool,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Directory with one sub-directory of results per server
    #[arg(long)]
    pub results: PathBuf,
    /// Where to write the Markdown
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
}
