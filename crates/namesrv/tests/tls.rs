//! TLS on the remoting port: the three modes, certificates from files, and reload.

mod support;
use support::MQNAMESRV;

use std::time::Duration;

use namesrv_testkit::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn permissive_serves_both_and_reloads_changed_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_cert(dir.path());
    let server = MQNAMESRV.start_with(&tls_props(dir.path(), "permissive"));
    assert!(plaintext_served(&server.addr).await);
    let client = tls_client(&server.addr, &first).await.unwrap();
    assert!(served(&client).await);

    // Modification times have a coarse grain on some filesystems: make the change visible.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = write_cert(dir.path());
    eventually(
        "new certificate in force",
        Duration::from_secs(8),
        || async { tls_client(&server.addr, &second).await.is_ok() },
    )
    .await;
    assert!(
        tls_client(&server.addr, &first).await.is_err(),
        "old certificate still served"
    );
    assert!(
        served(&client).await,
        "established TLS connections keep working"
    );
}

#[tokio::test]
async fn enforcing_closes_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let cert = write_cert(dir.path());
    let server = MQNAMESRV.start_with(&tls_props(dir.path(), "enforcing"));
    assert!(!plaintext_served(&server.addr).await);
    assert!(served(&tls_client(&server.addr, &cert).await.unwrap()).await);
}

#[tokio::test]
async fn disabled_closes_tls_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let cert = write_cert(dir.path());
    let server = MQNAMESRV.start_with(&tls_props(dir.path(), "disabled"));
    assert!(plaintext_served(&server.addr).await);
    assert!(tls_client(&server.addr, &cert).await.is_err());
}

#[tokio::test]
async fn default_mode_accepts_tls_with_a_self_signed_certificate() {
    let server = MQNAMESRV.start();
    let mut tcp = TcpStream::connect(&server.addr).await.unwrap();
    // A TLS 1.2 ClientHello record header is enough to see the server answer with a handshake.
    let hello = hex_client_hello();
    tcp.write_all(&hello).await.unwrap();
    let mut first = [0u8; 1];
    let n = tokio::time::timeout(TIMEOUT, tcp.read(&mut first))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((n, first[0]), (1, 0x16), "expected a TLS handshake record");
}

/// A minimal TLS 1.2 ClientHello offering ECDHE-ECDSA/RSA with AES-GCM.
fn hex_client_hello() -> Vec<u8> {
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[7u8; 32]);
    body.push(0);
    body.extend_from_slice(&[0, 4, 0xc0, 0x2b, 0xc0, 0x2f]);
    body.extend_from_slice(&[1, 0]);
    let mut ext = Vec::new();
    ext.extend_from_slice(&[0x00, 0x0a, 0, 4, 0, 2, 0, 0x17]);
    ext.extend_from_slice(&[0x00, 0x0b, 0, 2, 1, 0]);
    ext.extend_from_slice(&[0x00, 0x0d, 0, 6, 0, 4, 0x04, 0x03, 0x04, 0x01]);
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut handshake = vec![1];
    handshake.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}
