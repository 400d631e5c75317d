//! TLS on a remoting port, with the Java servers' modes: `disabled` (TLS attempts are
//! closed), `permissive` (the default: a connection whose first byte is a TLS handshake is TLS,
//! anything else plaintext) and `enforcing` (plaintext is closed). Certificates are reloaded
//! when their files change; without configured files the server uses a self-signed
//! certificate, as Java's default test mode does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::ClientConfig;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::watch;

/// The first byte of a TLS handshake record; no plaintext frame can start with it.
pub const HANDSHAKE_BYTE: u8 = 0x16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    Disabled,
    Permissive,
    Enforcing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientAuth {
    None,
    Optional,
    Require,
}

/// TLS settings, under the property names the Java servers read.
#[derive(Clone, Debug)]
pub struct TlsSettings {
    pub mode: TlsMode,
    cert_path: Option<PathBuf>,
    key_path: Option<PathBuf>,
    trust_cert_path: Option<PathBuf>,
    client_auth: ClientAuth,
    /// What this server trusts when it connects to the other members of its group
    /// (`tls.client.trustCertPath`, as Java's clients name it).
    client_trust_cert_path: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("invalid {key}: {value}")]
    Setting { key: &'static str, value: String },
    #[error("cannot read {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("no {what} found in {path}")]
    Missing { what: &'static str, path: PathBuf },
    #[error("TLS configuration: {0}")]
    Config(String),
}

impl TlsSettings {
    /// Reads `tls.server.mode`, `tls.server.certPath`, `tls.server.keyPath`,
    /// `tls.server.trustCertPath` and `tls.server.need.client.auth`.
    pub fn from_properties(get: impl Fn(&str) -> Option<String>) -> Result<Self, TlsError> {
        let mode = match get("tls.server.mode").as_deref().map(str::trim) {
            None | Some("permissive") => TlsMode::Permissive,
            Some("disabled") => TlsMode::Disabled,
            Some("enforcing") => TlsMode::Enforcing,
            Some(other) => {
                return Err(TlsError::Setting {
                    key: "tls.server.mode",
                    value: other.into(),
                })
            }
        };
        let client_auth = match get("tls.server.need.client.auth").as_deref().map(str::trim) {
            None | Some("none") => ClientAuth::None,
            Some("optional") => ClientAuth::Optional,
            Some("require") => ClientAuth::Require,
            Some(other) => {
                return Err(TlsError::Setting {
                    key: "tls.server.need.client.auth",
                    value: other.into(),
                })
            }
        };
        let path = |key| {
            get(key)
                .map(|p| PathBuf::from(p.trim()))
                .filter(|p| !p.as_os_str().is_empty())
        };
        let settings = TlsSettings {
            mode,
            cert_path: path("tls.server.certPath"),
            key_path: path("tls.server.keyPath"),
            trust_cert_path: path("tls.server.trustCertPath"),
            client_auth,
            client_trust_cert_path: path("tls.client.trustCertPath"),
        };
        if settings.cert_path.is_some() != settings.key_path.is_some() {
            return Err(TlsError::Config(
                "tls.server.certPath and tls.server.keyPath must be set together".into(),
            ));
        }
        if settings.client_auth != ClientAuth::None && settings.trust_cert_path.is_none() {
            return Err(TlsError::Config(
                "client authentication needs tls.server.trustCertPath".into(),
            ));
        }
        Ok(settings)
    }

    fn watched_files(&self) -> Vec<PathBuf> {
        [&self.cert_path, &self.key_path, &self.trust_cert_path]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    fn build(&self) -> Result<TlsAcceptor, TlsError> {
        let (certs, key) = match (&self.cert_path, &self.key_path) {
            (Some(cert), Some(key)) => (read_certs(cert)?, read_key(key)?),
            _ => self_signed()?,
        };
        // Explicit provider: the process-wide default would be ambiguous if another dependency
        // ever enabled a second one.
        let builder =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(config_error)?;
        let builder = match (&self.trust_cert_path, self.client_auth) {
            (Some(trust), auth) if auth != ClientAuth::None => {
                let verifier = WebPkiClientVerifier::builder(Arc::new(read_roots(trust)?));
                let verifier = if auth == ClientAuth::Optional {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder.with_client_cert_verifier(verifier.build().map_err(config_error)?)
            }
            _ => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(certs, key).map_err(config_error)?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }

    /// The client side of peer connections. Peers are named by address, which their
    /// certificates need not list (Java's TLS clients check no name either): a certificate is
    /// accepted when it chains to `tls.client.trustCertPath` (else `tls.server.trustCertPath`),
    /// whatever name it carries; with neither set, any certificate is (Java's test mode), and
    /// only the peer-address check guards the group. A server that asks for client certificates
    /// is shown this one's own.
    fn peer_client_config(&self) -> Result<ClientConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let trust = self
            .client_trust_cert_path
            .as_ref()
            .or(self.trust_cert_path.as_ref());
        let chain = match trust {
            Some(path) => Some(
                rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(read_roots(path)?),
                    provider.clone(),
                )
                .build()
                .map_err(config_error)?,
            ),
            None => {
                warn!(
                    "TLS to peers: no tls.client.trustCertPath or tls.server.trustCertPath, so any \
                     certificate a peer shows is accepted; only peer addresses and a peer secret guard the group"
                );
                None
            }
        };
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PeerVerifier { chain, provider }));
        match (&self.cert_path, &self.key_path) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(read_certs(cert)?, read_key(key)?)
                .map_err(config_error),
            _ => Ok(builder.with_no_client_auth()),
        }
    }
}

/// Checks a peer's certificate chain, not the name it was reached by (see
/// `peer_client_config`).
#[derive(Debug)]
struct PeerVerifier {
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for PeerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(rustls::client::danger::ServerCertVerified::assertion());
        };
        // The chain is checked before the name: a wrong name means the chain was good.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = std::fs::read(path).map_err(|e| TlsError::Read(path.into(), e))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Read(path.into(), e))?;
    if certs.is_empty() {
        return Err(TlsError::Missing {
            what: "certificate",
            path: path.into(),
        });
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = std::fs::read(path).map_err(|e| TlsError::Read(path.into(), e))?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| TlsError::Read(path.into(), e))?
        .ok_or(TlsError::Missing {
            what: "private key",
            path: path.into(),
        })
}

/// The certificates of `path` as the roots a verifier trusts.
fn read_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path)? {
        roots.add(cert).map_err(config_error)?;
    }
    Ok(roots)
}

fn config_error(e: impl std::fmt::Display) -> TlsError {
    TlsError::Config(e.to_string())
}

fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into()]).map_err(config_error)?;
    let key = PrivateKeyDer::try_from(cert.key_pair.serialize_der()).map_err(config_error)?;
    Ok((vec![cert.cert.der().clone()], key))
}

/// The acceptor in force, swapped when the certificate files change.
pub struct Tls {
    settings: TlsSettings,
    acceptor: RwLock<Option<TlsAcceptor>>,
}

impl Tls {
    /// Configured certificates are loaded now, so that a bad file stops the start; the
    /// self-signed one is made at the first TLS connection, keeping idle servers small.
    pub fn new(settings: TlsSettings) -> Result<Self, TlsError> {
        let acceptor = match settings.mode {
            TlsMode::Disabled => None,
            _ if settings.cert_path.is_none() => None,
            _ => Some(settings.build()?),
        };
        Ok(Tls {
            settings,
            acceptor: RwLock::new(acceptor),
        })
    }

    pub fn mode(&self) -> TlsMode {
        self.settings.mode
    }

    /// How this server connects to the other members of its group: over TLS when its own port
    /// takes only TLS, since theirs then do too (`Some`); plaintext otherwise (`None`).
    pub fn peer_client_config(&self) -> Result<Option<Arc<ClientConfig>>, TlsError> {
        if self.settings.mode != TlsMode::Enforcing {
            return Ok(None);
        }
        Ok(Some(Arc::new(self.settings.peer_client_config()?)))
    }

    pub fn acceptor(&self) -> Option<TlsAcceptor> {
        if self.settings.mode == TlsMode::Disabled {
            return None;
        }
        if let Some(acceptor) = self.acceptor.read().clone() {
            return Some(acceptor);
        }
        let mut slot = self.acceptor.write();
        if slot.is_none() {
            match self.settings.build() {
                Ok(acceptor) => *slot = Some(acceptor),
                Err(e) => warn!("cannot set up TLS: {e}"),
            }
        }
        slot.clone()
    }

    /// Rebuilds the acceptor when a certificate file changes; a broken new file keeps the
    /// previous certificate in force.
    pub fn spawn_reloader(self: Arc<Self>, shutdown: CancellationToken) {
        if self.settings.mode == TlsMode::Disabled {
            return;
        }
        let files = self.settings.watched_files();
        watch::on_change(files, shutdown, move || match self.settings.build() {
            Ok(acceptor) => {
                *self.acceptor.write() = Some(acceptor);
                info!("TLS certificates reloaded");
            }
            Err(e) => warn!("keeping the previous TLS certificates: {e}"),
        });
    }
}
