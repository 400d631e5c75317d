//! Request dispatch: one entry per request code, each handled in the module of its family.

mod broker;
mod config;
// Its answer is also what the HTTP port's `/journal` serves.
pub(crate) mod journal;
mod kv;
mod members;
mod peer;
mod perm;
mod route;
mod topic;

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use rocketmq_wire::codes::peer::namesrv as peer_codes;
use rocketmq_wire::codes::{request as req, response as resp, version};
use rocketmq_wire::headers::keys;
use rocketmq_wire::server::Dispatch;
use rocketmq_wire::RemotingCommand;

use crate::state::State;

/// A request that could not be served: answered SYSTEM_ERROR with this remark.
pub struct SystemError(pub String);

impl<E: std::fmt::Display> From<E> for SystemError {
    fn from(e: E) -> Self {
        SystemError(e.to_string())
    }
}

pub type HandlerResult = Result<RemotingCommand, SystemError>;

/// The connection a request arrived on.
pub use rocketmq_wire::server::Origin;

/// What a handler knows of the request besides its content.
#[derive(Clone, Copy)]
pub struct Context {
    pub origin: Origin,
    /// Whether the request may keep a broker alive: authentication is off, or a valid
    /// signature vouches for it. Anyone can send an unsigned heartbeat; it must not keep a
    /// broker in the routes (one restored from a snapshot, say) that no longer exists.
    pub may_extend_liveness: bool,
}

type Handler = fn(&State, Context, &RemotingCommand) -> HandlerResult;

/// A handler that waits for a consensus group to commit (a Raft request, a KV or admin write).
type Agreed = for<'a> fn(
    &'a State,
    Context,
    &'a RemotingCommand,
) -> Pin<Box<dyn Future<Output = HandlerResult> + Send + 'a>>;

#[derive(Clone, Copy)]
enum Serve {
    Now(Handler),
    /// Served as a task on the async workers: its wait holds no thread, and it never queues on
    /// the blocking pool behind the registrations decoded there (a Raft heartbeat that waits
    /// for a thread there is a leader losing its lease).
    Agreed(Agreed),
}

/// Everything the server knows about one request code.
#[derive(Clone, Copy)]
pub struct Facts {
    serve: Serve,
    /// Disk writes, large bodies or walks over every topic: served off the connection's
    /// reader, where it would delay route lookups.
    pub blocking: bool,
    /// Cheap in the common case, and moves its own expensive steps off the reader when it has
    /// them (`offload::now`): served on the reader, even in a large frame.
    pub moves_its_own_work: bool,
    /// Changes the registry, the KV store or the config: needs a signature when
    /// authentication is on.
    pub changes_state: bool,
    /// Refreshes a broker's deadline.
    pub extends_liveness: bool,
}

impl Facts {
    const fn new(handler: Handler) -> Self {
        Facts::with(Serve::Now(handler))
    }
    const fn agreed(handler: Agreed) -> Self {
        Facts::with(Serve::Agreed(handler))
    }
    const fn with(serve: Serve) -> Self {
        Facts {
            serve,
            blocking: false,
            moves_its_own_work: false,
            changes_state: false,
            extends_liveness: false,
        }
    }
    /// Whether the request waits for a consensus group (see `Serve::Agreed`).
    pub const fn waits_on_consensus(&self) -> bool {
        matches!(self.serve, Serve::Agreed(_))
    }
    const fn blocking(mut self) -> Self {
        self.blocking = true;
        self
    }
    const fn moves_its_own_work(mut self) -> Self {
        self.moves_its_own_work = true;
        self
    }
    const fn changes_state(mut self) -> Self {
        self.changes_state = true;
        self
    }
    const fn extends_liveness(mut self) -> Self {
        self.extends_liveness = true;
        self
    }
}

/// The one table of request codes: each code's handler, and how the server must treat the
/// request. `None` for codes the NameServer does not serve.
pub fn facts(code: i32) -> Option<Facts> {
    let facts = match code {
        req::PUT_KV_CONFIG => Facts::agreed(|s, _, r| Box::pin(kv::put(s, r))).changes_state(),
        req::GET_KV_CONFIG => Facts::new(|s, _, r| kv::get(s, r)),
        req::DELETE_KV_CONFIG => {
            Facts::agreed(|s, _, r| Box::pin(kv::delete(s, r))).changes_state()
        }
        req::GET_KVLIST_BY_NAMESPACE => Facts::new(|s, _, r| kv::list(s, r)),
        req::REGISTER_BROKER => Facts::new(|s, c, r| broker::register(s, c.origin, r))
            .moves_its_own_work()
            .changes_state()
            .extends_liveness(),
        req::UNREGISTER_BROKER => Facts::new(|s, _, r| broker::unregister(s, r)).changes_state(),
        req::QUERY_DATA_VERSION => Facts::new(broker::query_data_version).extends_liveness(),
        req::BROKER_HEARTBEAT => Facts::new(broker::heartbeat).extends_liveness(),
        req::GET_BROKER_MEMBER_GROUP => Facts::new(|s, _, r| broker::member_group(s, r)),
        req::GET_ROUTEINFO_BY_TOPIC => Facts::new(|s, _, r| route::topic_route(s, r)),
        req::GET_BROKER_CLUSTER_INFO => Facts::new(|s, _, r| route::cluster_info(s, r)),
        req::WIPE_WRITE_PERM_OF_BROKER => {
            Facts::agreed(|s, c, r| Box::pin(perm::wipe(s, c, r))).changes_state()
        }
        req::ADD_WRITE_PERM_OF_BROKER => {
            Facts::agreed(|s, c, r| Box::pin(perm::add(s, c, r))).changes_state()
        }
        req::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
            Facts::new(|s, _, r| topic::all(s, r)).blocking()
        }
        // With peers they wait for the KV group (`admin_change`).
        req::DELETE_TOPIC_IN_NAMESRV => {
            Facts::agreed(|s, c, r| Box::pin(topic::delete(s, c, r))).changes_state()
        }
        req::REGISTER_TOPIC_IN_NAMESRV => {
            Facts::agreed(|s, c, r| Box::pin(topic::register(s, c, r))).changes_state()
        }
        req::GET_TOPICS_BY_CLUSTER => Facts::new(|s, _, r| topic::by_cluster(s, r)).blocking(),
        req::GET_SYSTEM_TOPIC_LIST_FROM_NS => Facts::new(|s, _, r| topic::system(s, r)),
        req::GET_UNIT_TOPIC_LIST
        | req::GET_HAS_UNIT_SUB_TOPIC_LIST
        | req::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => {
            Facts::new(|s, _, r| topic::unit(s, r)).blocking()
        }
        req::UPDATE_NAMESRV_CONFIG => Facts::new(|s, _, r| config::update(s, r))
            .blocking()
            .changes_state(),
        req::GET_NAMESRV_CONFIG => Facts::new(|s, _, r| config::get(s, r)),
        // Blocking: it reads the journal's files.
        req::ROUTE_JOURNAL => Facts::new(|s, _, r| journal::query(s, r)).blocking(),
        req::NAMESRV_LIST_MEMBERS => Facts::new(|s, _, r| members::list(s, r)),
        req::NAMESRV_ADD_MEMBER | req::NAMESRV_REMOVE_MEMBER | req::NAMESRV_TRANSFER_LEADER => {
            Facts::agreed(|s, c, r| Box::pin(members::change(s, c, r))).changes_state()
        }
        // A digest or a pull walks many brokers' routes; the rest wait on the KV group.
        peer_codes::ROUTE_DIGEST | peer_codes::ROUTE_PULL => {
            Facts::new(peer::serve_routes).blocking()
        }
        c if peer_codes::is_peer_code(c) => Facts::agreed(|s, c, r| Box::pin(peer::serve(s, c, r))),
        _ => return None,
    };
    Some(facts)
}

/// How the server serves the request, by its facts: a code it does not know is answered at once.
/// (Frames large enough to block by their size alone never reach the reader whatever their
/// code: see `rocketmq_wire::server`.)
pub fn dispatch(request: &RemotingCommand) -> Dispatch {
    match facts(request.code) {
        Some(f) if f.waits_on_consensus() => Dispatch::Waits,
        Some(f) if f.blocking => Dispatch::Blocking,
        Some(f) if f.moves_its_own_work => Dispatch::MovesItsOwnWork,
        _ => Dispatch::Inline,
    }
}

/// Serves one request; `None` for oneway requests, which are never answered. A request that
/// waits on consensus (`Facts::waits_on_consensus`) goes to [`serve`] instead; here it would
/// hold this thread until the group answers.
pub fn handle(state: &State, origin: Origin, request: &RemotingCommand) -> Option<RemotingCommand> {
    match prepare(state, origin, request) {
        Prepared::Answered(answer) => answer,
        Prepared::Agreed(wait) => tokio::runtime::Handle::current().block_on(wait),
    }
}

/// Serves one request on the async workers, awaiting a consensus group where its handler does.
pub async fn serve(
    state: &State,
    origin: Origin,
    request: &RemotingCommand,
) -> Option<RemotingCommand> {
    match prepare(state, origin, request) {
        Prepared::Answered(answer) => answer,
        Prepared::Agreed(wait) => wait.await,
    }
}

/// A request admitted and dispatched: answered already, or waiting on a consensus group.
enum Prepared<'a> {
    Answered(Option<RemotingCommand>),
    Agreed(Pin<Box<dyn Future<Output = Option<RemotingCommand>> + Send + 'a>>),
}

/// Admits the request and runs its handler, up to the wait of one that waits on consensus; the
/// answer is counted once it is known.
fn prepare<'a>(state: &'a State, origin: Origin, request: &'a RemotingCommand) -> Prepared<'a> {
    let started = Instant::now();
    let facts = facts(request.code);
    let known = facts.is_some();
    // Counts the request and gives its answer, none for a oneway request; an unexpected
    // failure is SYSTEM_ERROR with its text.
    let finish = move |result: HandlerResult| {
        let response = result.unwrap_or_else(|SystemError(remark)| {
            RemotingCommand::response_to(request, resp::SYSTEM_ERROR).with_remark(remark)
        });
        state
            .metrics
            .request(request.code, known, response.code, started.elapsed());
        (!request.is_oneway()).then_some(response)
    };
    let result = match admit(state, origin, request, facts) {
        Err(refused) => Ok(refused),
        Ok(context) => match facts.map(|f| f.serve) {
            Some(Serve::Now(handler)) => handler(state, context, request),
            Some(Serve::Agreed(handler)) => {
                let wait = handler(state, context, request);
                return Prepared::Agreed(Box::pin(async move { finish(wait.await) }));
            }
            None => Ok(not_supported(request)),
        },
    };
    Prepared::Answered(finish(result))
}

/// The context to serve the request in, or the answer that refuses it: GO_AWAY while shutting
/// down, NO_PERMISSION for an unsigned write when authentication is on.
fn admit(
    state: &State,
    origin: Origin,
    request: &RemotingCommand,
    facts: Option<Facts>,
) -> Result<Context, RemotingCommand> {
    let checked = facts.is_some_and(|f| f.changes_state || f.extends_liveness);
    let signature = match &state.credentials {
        Some(credentials) if checked => Some(credentials.check(request)),
        _ => None,
    };
    if state.is_shutting_down() && request.version > version::V5_3_1 {
        return Err(
            RemotingCommand::response_to(request, resp::GO_AWAY).with_remark("please go away")
        );
    }
    if let Some(Err(remark)) = signature
        .as_ref()
        .filter(|_| facts.is_some_and(|f| f.changes_state))
    {
        tracing::warn!(
            code = request.code,
            "refused an unauthenticated write: {remark}"
        );
        if request.code == req::REGISTER_BROKER {
            let ext = |k| request.ext(k).unwrap_or_default();
            state.routes.journal().refused(
                crate::journal::Entry::new(crate::journal::Cause::Refused)
                    .broker(
                        ext(keys::CLUSTER_NAME),
                        ext(keys::BROKER_NAME),
                        ext(keys::BROKER_ADDR),
                        request.ext_i64(keys::BROKER_ID).unwrap_or(-1),
                    )
                    .detail(format!("not authenticated: {remark}")),
            );
        }
        return Err(
            RemotingCommand::response_to(request, resp::NO_PERMISSION).with_remark(remark.clone())
        );
    }
    Ok(Context {
        origin,
        may_extend_liveness: signature.as_ref().is_none_or(Result::is_ok),
    })
}

fn not_supported(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, resp::REQUEST_CODE_NOT_SUPPORTED)
        .with_remark(format!(" request type {} not supported", request.code))
}

/// Applies an admin topic change (write permission, topic deletion or registration) here, or,
/// with peers, through the KV group so that every NameServer applies it; how many topics it
/// touched here.
async fn admin_change(
    state: &State,
    asked: (Context, &RemotingCommand),
    op: crate::peers::replicated::AdminOp,
) -> Result<i64, SystemError> {
    let by = asker(state, asked.0, asked.1);
    match &state.peer_group {
        Some(group) => Ok(group.admin(state, op, by).await?),
        // A broker's every topic may be touched: not on a worker other connections wait for.
        None => Ok(rocketmq_wire::server::offload::now(|| {
            op.apply(&state.routes, Some(by))
        })),
    }
}

/// Who asked for an admin change, as the route journal names them: the client's address, and
/// the access key that signed the request when authentication is on.
fn asker(state: &State, c: Context, r: &RemotingCommand) -> String {
    match r.ext("AccessKey").filter(|_| state.credentials.is_some()) {
        Some(key) => format!("admin from {} (access key {key})", c.origin.peer),
        None => format!("admin from {}", c.origin.peer),
    }
}

fn success(r: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(r, resp::SUCCESS)
}
