//! Commands that change state: sent to every NameServer, since NameServers share nothing and a
//! change made on one only is a split view for clients.

use rocketmq_wire::codes::request;
use rocketmq_wire::headers::{
    keys, AddWritePermHeader, AddWritePermResponseHeader, DeleteKvConfigHeader, DeleteTopicHeader,
    PutKvConfigHeader, RequestHeader, ResponseHeader, WipeWritePermHeader,
    WipeWritePermResponseHeader,
};
use rocketmq_wire::RemotingCommand;
use serde_json::{json, Value};

use crate::error::AdminError;
use crate::namesrvs::{Namesrvs, ServerResponse};
use crate::report::Report;

/// Sends `request` everywhere; `describe` words one NameServer's success and adds its JSON fields.
async fn write_all(
    ns: &Namesrvs,
    request: RemotingCommand,
    describe: impl Fn(&ServerResponse) -> (String, Value),
) -> Report {
    report_each(ns.write_all(request).await, "namesrv", describe)
}

/// A line and a JSON entry (keyed `role`: the kind of server) per server's outcome of a change
/// sent to several; any failure makes the exit code 1.
pub fn report_each(
    outcomes: Vec<Result<ServerResponse, AdminError>>,
    role: &str,
    describe: impl Fn(&ServerResponse) -> (String, Value),
) -> Report {
    let mut text = String::new();
    let mut json = Vec::new();
    let mut failures = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(reply) => {
                let (message, fields) = describe(&reply);
                text.push_str(&format!("{}: {message}\n", reply.addr));
                let mut entry = json!({ role: reply.addr, "ok": true });
                if let (Some(entry), Value::Object(fields)) = (entry.as_object_mut(), fields) {
                    entry.extend(fields);
                }
                json.push(entry);
            }
            Err(e) => {
                json.push(failure_json(&e, role));
                failures.push(e);
            }
        }
    }
    Report::partial(text, Value::Array(json), failures)
}

/// A describer for a change whose answer says nothing more than success.
pub(crate) fn said(message: impl Into<String>) -> impl Fn(&ServerResponse) -> (String, Value) {
    let message = message.into();
    move |_| (message.clone(), json!({}))
}

fn failure_json(e: &AdminError, role: &str) -> Value {
    let mut fields = json!({ role: null, "ok": false, "error": e.to_string() });
    match e {
        AdminError::Response { addr, code, remark } => {
            fields[role] = json!(addr);
            fields["code"] = json!(code);
            fields["remark"] = json!(remark);
        }
        AdminError::Unreachable { addr, .. } | AdminError::Body { addr, .. } => {
            fields[role] = json!(addr);
        }
        AdminError::NoAddress
        | AdminError::NothingToCompare
        | AdminError::NoneAnswered(_)
        | AdminError::NoControllerAddress
        | AdminError::NoLeader(_)
        | AdminError::NoGroupLeader(_)
        | AdminError::UnknownCluster(_)
        | AdminError::UnknownBrokerSet { .. } => {}
    }
    fields
}

/// A one-key properties body, as mqadmin's config updates send it.
pub fn config_body(key: &str, value: &str) -> Vec<u8> {
    // mqadmin sends `key=value\n` unescaped; the server parses it as properties text.
    format!("{key}={value}\n").into_bytes()
}

pub async fn update_kv_config(ns: &Namesrvs, namespace: &str, key: &str, value: &str) -> Report {
    let request = PutKvConfigHeader {
        namespace,
        key,
        value: Some(value),
    }
    .to_command();
    write_all(ns, request, said("update kv config in namespace success.")).await
}

pub async fn delete_kv_config(ns: &Namesrvs, namespace: &str, key: &str) -> Report {
    let request = DeleteKvConfigHeader { namespace, key }.to_command();
    let message = "delete kv config from namespace success.";
    write_all(ns, request, said(message)).await
}

pub async fn update_namesrv_config(ns: &Namesrvs, key: &str, value: &str) -> Report {
    let request =
        RemotingCommand::request(request::UPDATE_NAMESRV_CONFIG).with_body(config_body(key, value));
    let message = format!("update name server config success! {key} : {value}");
    write_all(ns, request, said(message)).await
}

/// WIPE_WRITE_PERM_OF_BROKER (`wipe`) or ADD_WRITE_PERM_OF_BROKER; both answer how many topics
/// they touched.
pub async fn write_perm(ns: &Namesrvs, broker: &str, wipe: bool) -> Report {
    let (request, count_key, verb) = if wipe {
        let header = WipeWritePermHeader {
            broker_name: broker,
        };
        (header.to_command(), keys::WIPE_TOPIC_COUNT, "wipe")
    } else {
        let header = AddWritePermHeader {
            broker_name: broker,
        };
        (header.to_command(), keys::ADD_TOPIC_COUNT, "add")
    };
    write_all(ns, request, |reply| {
        let r = &reply.response;
        let count = if wipe {
            WipeWritePermResponseHeader::from_command(r).map(|h| h.wipe_topic_count)
        } else {
            AddWritePermResponseHeader::from_command(r).map(|h| h.add_topic_count)
        }
        .unwrap_or(0);
        (
            format!("{verb} write perm of broker[{broker}] OK, {count}"),
            json!({ count_key: count }),
        )
    })
    .await
}

pub async fn delete_topic(ns: &Namesrvs, topic: &str, cluster: Option<&str>) -> Report {
    let request = DeleteTopicHeader {
        topic,
        cluster_name: cluster,
    }
    .to_command();
    let scope = cluster
        .map(|c| format!(" of cluster [{c}]"))
        .unwrap_or_default();
    let message = format!("delete topic [{topic}]{scope} from NameServer success.");
    write_all(ns, request, said(message)).await
}
