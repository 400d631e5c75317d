use std::path::Path;
use std::sync::Arc;

use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::server::call_result;

/// Writes a fresh self-signed certificate and key for "localhost" as `server.pem` and
/// `server.key` in `dir`; returns the certificate.
pub fn write_cert(dir: &Path) -> CertificateDer<'static> {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(dir.join("server.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), cert.key_pair.serialize_pem()).unwrap();
    cert.cert.der().clone()
}

/// The properties that serve TLS in `mode` with the certificate [`write_cert`] wrote to `dir`.
pub fn tls_props(dir: &Path, mode: &str) -> String {
    format!(
        "tls.server.mode={mode}\ntls.server.certPath={}\ntls.server.keyPath={}",
        dir.join("server.pem").display(),
        dir.join("server.key").display()
    )
}

/// A client over TLS that trusts only `trusted`, as "localhost".
pub async fn tls_client(addr: &str, trusted: &CertificateDer<'static>) -> std::io::Result<Client> {
    let mut roots = RootCertStore::empty();
    roots.add(trusted.clone()).unwrap();
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await?;
    let stream = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await?;
    Ok(Client::from_io(stream))
}

/// Whether `client` gets an answer to a request every server serves.
pub async fn served(client: &Client) -> bool {
    matches!(
        call_result(client, RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO)).await,
        Ok(r) if r.code == response::SUCCESS
    )
}

/// Whether a plaintext request is answered (false: the server closed the connection).
pub async fn plaintext_served(addr: &str) -> bool {
    match Client::connect(addr).await {
        Ok(c) => served(&c).await,
        Err(_) => false,
    }
}
