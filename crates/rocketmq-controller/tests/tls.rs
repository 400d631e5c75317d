//! The controller's port with TLS, by the same `tls.server.*` keys and the same remoting server
//! as the NameServer's: real `mqcontroller` processes whose ports take only TLS elect, commit and
//! fail over over TLS links, and close plaintext connections.

mod support;
use support::{boot_node, MQCONTROLLER};

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use namesrv_testkit::{free_port, tls_client, tls_props, write_cert, ControllerProps};
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::headers::controller::{
    ApplyBrokerIdRequestHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
};
use rocketmq_wire::headers::{RequestHeader, ResponseHeader};
use rocketmq_wire::RemotingCommand;
use rustls::pki_types::CertificateDer;

const FAST: &str = "scanNotActiveBrokerInterval=200\nscanInactiveMasterInterval=500\n";
const ASK: Duration = Duration::from_secs(3);

/// One request over a fresh TLS connection that trusts only `cert`.
async fn tls_ask(
    addr: &str,
    cert: &CertificateDer<'static>,
    cmd: RemotingCommand,
) -> Option<RemotingCommand> {
    let client = tokio::time::timeout(ASK, tls_client(addr, cert))
        .await
        .ok()?
        .ok()?;
    client.invoke(cmd, ASK).await.ok()
}

/// The running node that says it leads, asked over TLS, within `limit`.
async fn leader(
    addrs: &[String],
    nodes: &[Option<Child>],
    cert: &CertificateDer<'static>,
    limit: Duration,
) -> Option<usize> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        for (i, addr) in addrs.iter().enumerate() {
            if nodes[i].is_none() {
                continue;
            }
            let metadata = RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO);
            if let Some(answer) = tls_ask(addr, cert, metadata).await {
                if GetMetaDataResponseHeader::from_command(&answer).is_ok_and(|h| h.is_leader) {
                    return Some(i);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

async fn next_broker_id(addr: &str, cert: &CertificateDer<'static>) -> Option<i64> {
    let ask = GetNextBrokerIdRequestHeader {
        cluster_name: "TlsCluster",
        broker_name: "broker-t",
    };
    let answer = tls_ask(addr, cert, ask.to_command()).await?;
    if answer.code != response::SUCCESS {
        return None;
    }
    GetNextBrokerIdResponseHeader::from_command(&answer)
        .ok()?
        .next_broker_id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_whose_ports_take_only_tls_elects_commits_and_fails_over_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let cert = write_cert(dir.path());
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let tls = format!("{}\n", tls_props(dir.path(), "enforcing"));
    let mut nodes: Vec<Option<Child>> = (0..3)
        .map(|i| {
            let props = ControllerProps::new(&addrs, i, dir.path().join(format!("store-{i}")))
                .group("tls")
                .extra(FAST)
                .extra(&tls);
            let conf = dir.path().join(format!("controller-{i}.conf"));
            std::fs::write(&conf, props.to_string()).unwrap();
            let mut command = Command::new(MQCONTROLLER);
            command.arg("-c").arg(&conf);
            let log = dir.path().join(format!("node-{i}.log"));
            Some(boot_node(command, &log).unwrap_or_else(|e| panic!("n{i} {e}")))
        })
        .collect();

    // The members reach each other only over TLS: a leader means their links speak it.
    let first = leader(&addrs, &nodes, &cert, Duration::from_secs(20))
        .await
        .expect("a group whose ports take only TLS elects a leader");
    for addr in &addrs {
        let metadata = RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO);
        assert!(
            support::ask(addr, metadata, ASK).await.is_none(),
            "{addr} answered a plaintext request although TLS is enforced"
        );
    }

    // A write commits only once a majority stored it, over those links.
    let apply = ApplyBrokerIdRequestHeader {
        cluster_name: "TlsCluster",
        broker_name: "broker-t",
        applied_broker_id: 1,
        register_check_code: "127.0.0.1:10911;1",
    };
    let applied = tls_ask(&addrs[first], &cert, apply.to_command())
        .await
        .expect("the leader answers over TLS");
    assert_eq!(applied.code, response::SUCCESS, "{:?}", applied.remark);
    assert_eq!(next_broker_id(&addrs[first], &cert).await, Some(2));

    // The others elect a new leader among themselves, over TLS, and it holds the write.
    let mut old = nodes[first].take().unwrap();
    old.kill().unwrap();
    old.wait().unwrap();
    let second = leader(&addrs, &nodes, &cert, Duration::from_secs(20))
        .await
        .expect("the other two elect a leader over TLS");
    assert_ne!(second, first);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut next = None;
    while Instant::now() < deadline && next != Some(2) {
        next = next_broker_id(&addrs[second], &cert).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        next,
        Some(2),
        "the new leader lost the write committed over TLS"
    );

    for child in nodes.iter_mut().flatten() {
        let _ = child.kill();
        let _ = child.wait();
    }
}
