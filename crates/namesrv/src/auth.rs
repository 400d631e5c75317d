//! Authenticated writes. When enabled, every request that changes state must be signed the way
//! RocketMQ's ACL clients sign (`AccessKey` + `Signature` ext fields) with a key pair listed in
//! the credentials file; reads stay open.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use rocketmq_wire::acl::{self, ACCESS_KEY, SIGNATURE};
use rocketmq_wire::RemotingCommand;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::parse_properties;
use rocketmq_wire::server::watch;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read credentials file {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("credentials file {0}: {1}")]
    Parse(PathBuf, String),
}

const SIGNATURE_CHECK_FAILED: &str = "signature check failed";

/// Access keys and their secrets, from a properties file of `accessKey=secretKey` lines.
pub struct Credentials {
    path: PathBuf,
    secrets: RwLock<HashMap<String, String>>,
}

fn load(path: &Path) -> Result<HashMap<String, String>, AuthError> {
    let bytes = std::fs::read(path).map_err(|e| AuthError::Read(path.into(), e))?;
    Ok(parse_properties(&bytes)
        .map_err(|e| AuthError::Parse(path.into(), e.to_string()))?
        .into_iter()
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .collect())
}

impl Credentials {
    pub fn open(path: PathBuf) -> Result<Self, AuthError> {
        let secrets = load(&path)?;
        if secrets.is_empty() {
            warn!(path = %path.display(), "authentication is on but no credentials are listed: every write will be refused");
        }
        Ok(Credentials {
            path,
            secrets: RwLock::new(secrets),
        })
    }

    /// Checks the request's signature; the error is the remark of the NO_PERMISSION answer.
    pub fn check(&self, r: &RemotingCommand) -> Result<(), String> {
        let (Some(access_key), Some(signature)) = (r.ext(ACCESS_KEY), r.ext(SIGNATURE)) else {
            return Err(format!(
                "request code {} changes state and needs {ACCESS_KEY} and {SIGNATURE}",
                r.code
            ));
        };
        // An unknown key and a wrong signature are answered alike, so that the answers do not
        // tell which access keys exist; only the server's log says which it was.
        let secrets = self.secrets.read();
        let Some(secret) = secrets.get(access_key) else {
            info!(access_key = ?access_key, "refused a write signed with an unknown access key");
            return Err(SIGNATURE_CHECK_FAILED.into());
        };
        if acl::verify(r.ext_fields.as_ref(), r.body.as_deref(), secret, signature) {
            Ok(())
        } else {
            info!(access_key = ?access_key, "refused a write with a wrong signature");
            Err(SIGNATURE_CHECK_FAILED.into())
        }
    }

    /// Reloads the file when it changes; a broken file keeps the previous credentials.
    pub fn spawn_reloader(self: Arc<Self>, shutdown: CancellationToken) {
        watch::on_change(vec![self.path.clone()], shutdown, move || {
            match load(&self.path) {
                Ok(secrets) => {
                    *self.secrets.write() = secrets;
                    info!("credentials reloaded");
                }
                Err(e) => warn!("keeping the previous credentials: {e}"),
            }
        });
    }
}
