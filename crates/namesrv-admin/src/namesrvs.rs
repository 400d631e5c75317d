//! The NameServers named by `-n` and how requests reach them: reads from the first that answers,
//! writes to every one (as mqadmin does, since NameServers do not replicate to each other).

use std::time::Duration;

use rocketmq_wire::client::Client;
use rocketmq_wire::codes::response;
use rocketmq_wire::RemotingCommand;

use crate::error::AdminError;

pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
}

pub struct Namesrvs {
    addrs: Vec<String>,
    timeout: Duration,
    credentials: Option<Credentials>,
}

/// One open connection to one NameServer.
pub struct Connection {
    pub addr: String,
    client: Client,
    timeout: Duration,
}

/// A NameServer's answer, with who gave it.
pub struct Reply {
    pub addr: String,
    pub response: RemotingCommand,
}

impl Namesrvs {
    /// `list` is mqadmin's form, `host:port;host:port`.
    pub fn parse(
        list: Option<&str>,
        timeout: Duration,
        credentials: Option<Credentials>,
    ) -> Result<Self, AdminError> {
        let addrs: Vec<String> = list
            .unwrap_or_default()
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(String::from)
            .collect();
        if addrs.is_empty() {
            return Err(AdminError::NoAddress);
        }
        Ok(Namesrvs {
            addrs,
            timeout,
            credentials,
        })
    }

    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    pub async fn connect(&self, addr: &str) -> Result<Connection, AdminError> {
        let unreachable = |reason: String| AdminError::Unreachable {
            addr: addr.to_string(),
            reason,
        };
        let client = tokio::time::timeout(self.timeout, Client::connect(addr))
            .await
            .map_err(|_| unreachable("connect timed out".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(Connection {
            addr: addr.to_string(),
            client,
            timeout: self.timeout,
        })
    }

    /// Sends a read to each NameServer in turn until one answers, whatever its answer.
    pub async fn read(&self, request: RemotingCommand) -> Result<Reply, AdminError> {
        let mut failures = Vec::new();
        for addr in &self.addrs {
            let attempt = match self.connect(addr).await {
                Ok(conn) => conn.call(request.clone()).await,
                Err(e) => Err(e),
            };
            match attempt {
                Ok(reply) => return Ok(reply),
                Err(e) => failures.push(e),
            }
        }
        Err(AdminError::NoneAnswered(failures))
    }

    /// Sends a state change, signed when credentials were given, to every NameServer; one
    /// outcome per NameServer, in `-n` order, successful only for SUCCESS answers.
    pub async fn write_all(&self, request: RemotingCommand) -> Vec<Result<Reply, AdminError>> {
        let request = match &self.credentials {
            Some(c) => rocketmq_wire::acl::sign(request, &c.access_key, &c.secret_key),
            None => request,
        };
        let mut outcomes = Vec::with_capacity(self.addrs.len());
        for addr in &self.addrs {
            let outcome = match self.connect(addr).await {
                Ok(conn) => conn.call(request.clone()).await.and_then(Reply::success),
                Err(e) => Err(e),
            };
            outcomes.push(outcome);
        }
        outcomes
    }
}

impl Connection {
    pub async fn call(&self, request: RemotingCommand) -> Result<Reply, AdminError> {
        let response = self
            .client
            .invoke(request, self.timeout)
            .await
            .map_err(|e| AdminError::Unreachable {
                addr: self.addr.clone(),
                reason: e.to_string(),
            })?;
        Ok(Reply {
            addr: self.addr.clone(),
            response,
        })
    }
}

impl Reply {
    /// The reply if it is SUCCESS, else the error showing its code and remark.
    pub fn success(self) -> Result<Reply, AdminError> {
        if self.response.code == response::SUCCESS {
            Ok(self)
        } else {
            Err(AdminError::Response {
                addr: self.addr,
                code: self.response.code,
                remark: self.response.remark,
            })
        }
    }

    pub fn decode<T, E: std::fmt::Display>(
        &self,
        what: &'static str,
        decode: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<T, AdminError> {
        decode(self.response.body.as_deref().unwrap_or_default()).map_err(|e| AdminError::Body {
            addr: self.addr.clone(),
            what,
            reason: e.to_string(),
        })
    }
}
