//! REGISTER_BROKER, UNREGISTER_BROKER, QUERY_DATA_VERSION, BROKER_HEARTBEAT,
//! GET_BROKER_MEMBER_GROUP: what brokers send.

use std::sync::Arc;

use rocketmq_wire::body::{
    BrokerMemberGroup, DataVersion, KvTable, RegisterBrokerBody, TableIndex, TableRead,
};
use rocketmq_wire::codes::{response as resp, version};
use rocketmq_wire::headers::{
    BrokerHeartbeatHeader, GetBrokerMemberGroupHeader, QueryDataVersionHeader,
    QueryDataVersionResponseHeader, RegisterBrokerHeader, RegisterBrokerResponseHeader,
    RequestHeader, ResponseHeader, UnregisterBrokerHeader,
};
use rocketmq_wire::RemotingCommand;
use xxhash_rust::xxh3::Xxh3;

use super::{success, Context, HandlerResult, Origin, SystemError};
use crate::journal::{Cause, Entry};
use crate::kv::ORDER_TOPIC_CONFIG;
use crate::notify;
use crate::registry::{
    Applied, Apply, Fingerprint, RegisterOutcome, RegisterPolicy, RegisterRequest, Registrant,
    Registration, TableBase,
};
use crate::state::State;
use rocketmq_wire::clock::now_ms;
use rocketmq_wire::server::offload;

pub fn register(state: &State, origin: Origin, r: &RemotingCommand) -> HandlerResult {
    let header = RegisterBrokerHeader::from_command(r)?;
    if r.version < 0 {
        return Err(SystemError(format!("invalid version {}", r.version)));
    }
    let expected_crc = header.body_crc32.unwrap_or(0);
    if expected_crc != 0 {
        let actual = r.body.as_deref().map_or(0, rocketmq_wire::body_crc32);
        if actual as i64 != expected_crc {
            refused(
                state,
                &header,
                "its body does not match its crc32 (bodyCrc32)",
            );
            // Java answers its errors on the response it already made, header object and all.
            return Ok(RemotingCommand::response_to(r, resp::SYSTEM_ERROR)
                .with_empty_ext()
                .with_remark("crc32 not match"));
        }
    }
    let (policy, return_order_conf, max_inflated) = {
        let s = state.config.settings();
        (
            RegisterPolicy {
                notify_min_id: s.server.notify_min_broker_id_changed,
                delete_unlisted_topics: s.server.delete_topic_with_broker_registration,
            },
            s.server.return_order_topic_config_to_broker,
            inflate_limit(s.server.max_frame_length),
        )
    };
    let from = Registrant {
        cluster: header.cluster_name.to_string(),
        broker_addr: header.broker_addr.to_string(),
        broker_name: header.broker_name.to_string(),
        broker_id: header.broker_id,
        conn: origin.conn,
        now_ms: now_ms(),
    };
    let compressed = header.compressed;
    let request = Request {
        state,
        r,
        // A JSON table may be read as its difference from the broker's previous one, unless a
        // registration is the whole truth about the group's topics.
        by_difference: !compressed
            && r.version >= version::V3_0_11
            && !policy.delete_unlisted_topics,
        compressed,
        max_inflated,
        header,
    };
    let identity = (
        from.cluster.clone(),
        from.broker_name.clone(),
        from.broker_addr.clone(),
        from.broker_id,
    );
    let done = state
        .routes
        .register_broker(&from, fingerprint(r, Part::Whole), policy, request)
        .inspect_err(|SystemError(why)| {
            let (cluster, name, addr, id) = &identity;
            state.routes.journal().refused(
                Entry::new(Cause::Refused)
                    .broker(cluster, name, addr, *id)
                    .detail(format!("its body could not be read: {why}")),
            );
        })?;
    if !done.repeat && matches!(done.outcome, RegisterOutcome::Registered { .. }) {
        state.admission.trust(origin.peer);
    }
    state.metrics.registered(done.repeat);
    if let Some(notice) = done.notice {
        notify::min_broker_id_changed(notice);
    }
    Ok(registered(state, r, done.outcome, return_order_conf))
}

/// Bodies up to this size are read whole on the connection's reader (a few hundred topics).
const INLINE_READ: usize = 64 * 1024;

/// A REGISTER_BROKER request, its body read on the connection's reader but for a large table
/// read whole.
struct Request<'a> {
    state: &'a State,
    r: &'a RemotingCommand,
    by_difference: bool,
    compressed: bool,
    max_inflated: usize,
    header: RegisterBrokerHeader<'a>,
}

impl RegisterRequest for Request<'_> {
    type Error = SystemError;

    fn headers(&self) -> Fingerprint {
        fingerprint(self.r, Part::Headers)
    }

    fn by_difference(&self) -> bool {
        self.by_difference
    }

    fn read(&self, base: Option<TableBase>, apply: Apply<'_>) -> Result<Applied, SystemError> {
        // Reading a table whole takes milliseconds from a few thousand topics on: not where
        // route lookups wait.
        if base.is_none() && self.r.body.as_ref().is_some_and(|b| b.len() > INLINE_READ) {
            return offload::now(|| self.read_here(base, apply));
        }
        self.read_here(base, apply)
    }
}

impl Request<'_> {
    /// Reads the body on this thread and applies it.
    fn read_here(&self, base: Option<TableBase>, apply: Apply<'_>) -> Result<Applied, SystemError> {
        let r = self.r;
        let read = read_body(
            self.state,
            r,
            self.compressed,
            self.max_inflated,
            self.by_difference,
            base,
        );
        // Whole tables are counted: their memory is given back once registrations pause.
        if let Some(read) = read.as_ref().ok().filter(|r| r.changes_since.is_none()) {
            crate::memory::note_topics_read(read.body.wrapper.topic_configs.len());
        }
        let read = read?;
        let header = &self.header;
        let registration = Registration {
            from: apply.from().clone(),
            ha_server_addr: header.ha_server_addr.unwrap_or_default().to_string(),
            zone_name: header.zone_name.map(String::from),
            timeout_ms: header.heartbeat_timeout_millis,
            enable_acting_master: header.enable_acting_master,
            body: read.body,
            version: r.version,
            listed: read.listed,
            changes_since: read.changes_since,
            headers: apply.headers(),
            table: read.table,
        };
        Ok(apply.run(registration))
    }
}

/// A register body as the registry takes it.
struct ReadBody {
    body: RegisterBrokerBody,
    listed: usize,
    changes_since: Option<TableBase>,
    table: Option<Arc<TableIndex>>,
}

/// Reads a register body: as a difference from `base` when it is given and the body is in the
/// shape brokers write, else whole.
fn read_body(
    state: &State,
    r: &RemotingCommand,
    compressed: bool,
    max_inflated: usize,
    by_difference: bool,
    base: Option<TableBase>,
) -> Result<ReadBody, SystemError> {
    if let (true, Some(body)) = (by_difference, r.body.as_deref()) {
        if let Some(read) = TableRead::read(body, base.as_ref().map(|b| &*b.table)) {
            let read = read?;
            return Ok(ReadBody {
                changes_since: base.filter(|_| read.partial),
                listed: read.listed,
                table: read.index.map(Arc::new),
                body: read.body,
            });
        }
    }
    let gate = compressed.then(|| state.inflate_gate.lock());
    let body = RegisterBrokerBody::decode(r.body.as_deref(), r.version, compressed, max_inflated);
    drop(gate);
    let body = body?;
    Ok(ReadBody {
        listed: body.wrapper.topic_configs.len(),
        body,
        changes_since: None,
        table: None,
    })
}

/// What a registration's fingerprint covers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Everything that identifies it: applied again, it would change nothing.
    Whole,
    /// What identifies how its body is to be applied: all but the body and its checksum.
    Headers,
}

/// Identifies `part` of a registration: its protocol version and header fields, and for the
/// whole one its body.
fn fingerprint(r: &RemotingCommand, part: Part) -> Fingerprint {
    let whole = part == Part::Whole;
    let mut h = Xxh3::new();
    h.update(&r.version.to_le_bytes());
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for (k, v) in r.ext_fields.iter().flatten() {
        if whole || k != "bodyCrc32" {
            field(k.as_bytes());
            field(v.as_bytes());
        }
    }
    if whole {
        match r.body.as_deref() {
            Some(body) => field(body),
            None => h.update(b"no body"),
        }
    }
    h.digest128()
}

/// The answer to an accepted registration.
fn registered(
    state: &State,
    r: &RemotingCommand,
    outcome: RegisterOutcome,
    return_order_conf: bool,
) -> RemotingCommand {
    let mut response = success(r).with_empty_ext();
    match outcome {
        // An error on the response already made, as Java's handlers answer.
        RegisterOutcome::Refused => {
            response.code = resp::SYSTEM_ERROR;
            return response.with_remark("register broker failed");
        }
        RegisterOutcome::Stale => {}
        RegisterOutcome::Registered {
            master_addr,
            ha_server_addr,
        } => {
            response = RegisterBrokerResponseHeader {
                ha_server_addr: ha_server_addr.as_deref(),
                master_addr: master_addr.as_deref(),
            }
            .write(response);
        }
    }
    if return_order_conf {
        if let Some(table) = state.kv.namespace(ORDER_TOPIC_CONFIG) {
            response = response.with_body(KvTable { table }.encode());
        }
    }
    response
}

/// Compressed bodies may inflate to a few times the largest frame (real ones compress about
/// tenfold at most), so that a small hostile body cannot claim unbounded memory.
fn inflate_limit(max_frame: i64) -> usize {
    usize::try_from(max_frame.max(0))
        .unwrap_or(usize::MAX)
        .saturating_mul(4)
}

/// Journals a registration refused before the registry saw it.
fn refused(state: &State, header: &RegisterBrokerHeader<'_>, why: &str) {
    state.routes.journal().refused(
        Entry::new(Cause::Refused)
            .broker(
                header.cluster_name,
                header.broker_name,
                header.broker_addr,
                header.broker_id,
            )
            .detail(why),
    );
}

pub fn unregister(state: &State, r: &RemotingCommand) -> HandlerResult {
    let header = UnregisterBrokerHeader::from_command(r)?;
    // Numbered against the broker's registration as of now: a registration the broker makes
    // after this answer is newer, and the queued removal leaves it alone.
    let request = state.routes.read(|reg| {
        reg.unregistration(
            header.cluster_name,
            header.broker_addr,
            header.broker_name,
            header.broker_id,
        )
    });
    if state.unregister_queue.try_send(request).is_err() {
        return Ok(RemotingCommand::response_to(r, resp::SYSTEM_ERROR));
    }
    Ok(success(r))
}

pub fn query_data_version(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let QueryDataVersionHeader {
        cluster_name: cluster,
        broker_addr: addr,
        ..
    } = QueryDataVersionHeader::from_command(r)?;
    let incoming = r.body.as_deref().map(DataVersion::decode).transpose()?;
    let stored = if c.may_extend_liveness {
        state
            .routes
            .change(|reg| reg.touch(cluster, addr, now_ms()).map(|l| l.data_version))
    } else {
        state
            .routes
            .read(|reg| reg.live(cluster, addr).map(|l| l.data_version))
    };
    let changed = stored.is_none() || stored != incoming;
    let mut response = QueryDataVersionResponseHeader { changed }.write(success(r));
    if let Some(dv) = stored {
        response = response.with_body(dv.encode());
    }
    Ok(response)
}

/// Answered alike whether or not it may extend liveness, as Java answers every heartbeat.
pub fn heartbeat(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let BrokerHeartbeatHeader {
        cluster_name: cluster,
        broker_addr: addr,
        ..
    } = BrokerHeartbeatHeader::from_command(r)?;
    if c.may_extend_liveness {
        state.routes.change(|reg| {
            reg.touch(cluster, addr, now_ms());
        });
    }
    Ok(success(r))
}

pub fn member_group(state: &State, r: &RemotingCommand) -> HandlerResult {
    let GetBrokerMemberGroupHeader {
        cluster_name: cluster,
        broker_name,
    } = GetBrokerMemberGroupHeader::from_command(r)?;
    let broker_addrs = state.routes.read(|reg| {
        reg.group(broker_name)
            .map(|bd| bd.broker_addrs.clone())
            .unwrap_or_default()
    });
    let group = BrokerMemberGroup {
        cluster: cluster.to_string(),
        broker_name: broker_name.to_string(),
        broker_addrs,
    };
    Ok(success(r).with_body(group.encode()))
}
