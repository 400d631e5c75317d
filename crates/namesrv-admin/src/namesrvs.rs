//! The NameServers named by `-n` and how requests reach them: reads from the first that answers,
//! writes to every one (as mqadmin does, since NameServers do not replicate to each other). The
//! controller nodes of `-a` are reached the same way (`Controllers` wraps a `Namesrvs`).

use std::time::Duration;

use rocketmq_wire::body::TopicRouteData;
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::response;
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use rocketmq_wire::RemotingCommand;

use crate::error::AdminError;

#[derive(Clone)]
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

/// A server's response, with the address that gave it (a NameServer, or a controller node).
pub struct ServerResponse {
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
        let addrs = split_addrs(list.unwrap_or_default());
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

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `request` signed when credentials were given.
    pub fn signed(&self, request: RemotingCommand) -> RemotingCommand {
        match &self.credentials {
            Some(c) => rocketmq_wire::acl::sign(request, &c.access_key, &c.secret_key),
            None => request,
        }
    }

    pub async fn connect(&self, addr: &str) -> Result<Connection, AdminError> {
        Connection::open(addr, self.timeout).await
    }

    /// Sends a read to each NameServer in turn until one answers, whatever its answer.
    pub async fn read(&self, request: RemotingCommand) -> Result<ServerResponse, AdminError> {
        let mut failures = Vec::new();
        for addr in &self.addrs {
            match call_once(addr, self.timeout, request.clone()).await {
                Ok(reply) => return Ok(reply),
                Err(e) => failures.push(e),
            }
        }
        Err(AdminError::NoneAnswered(failures))
    }

    /// Sends `request` to every NameServer in turn, for what each holds on its own; one outcome
    /// per NameServer, in `-n` order, successful only for SUCCESS answers.
    pub async fn ask_each(
        &self,
        request: RemotingCommand,
    ) -> Vec<Result<ServerResponse, AdminError>> {
        let mut outcomes = Vec::with_capacity(self.addrs.len());
        for addr in &self.addrs {
            let outcome = call_once(addr, self.timeout, request.clone()).await;
            outcomes.push(outcome.and_then(ServerResponse::success));
        }
        outcomes
    }

    /// Sends a state change, signed when credentials were given, to every NameServer; outcomes
    /// as [`Namesrvs::ask_each`]'s.
    pub async fn write_all(
        &self,
        request: RemotingCommand,
    ) -> Vec<Result<ServerResponse, AdminError>> {
        self.ask_each(self.signed(request)).await
    }
}

/// mqadmin's address list form, `host:port;host:port`, blanks ignored.
pub fn split_addrs(list: &str) -> Vec<String> {
    list.split(';')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect()
}

/// One request on a connection of its own, whatever the answer.
pub async fn call_once(
    addr: &str,
    timeout: Duration,
    request: RemotingCommand,
) -> Result<ServerResponse, AdminError> {
    Connection::open(addr, timeout).await?.call(request).await
}

impl Connection {
    pub async fn open(addr: &str, timeout: Duration) -> Result<Connection, AdminError> {
        let unreachable = |reason: String| AdminError::Unreachable {
            addr: addr.to_string(),
            reason,
        };
        let client = Client::connect_within(addr, timeout)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(Connection {
            addr: addr.to_string(),
            client,
            timeout,
        })
    }

    pub async fn call(&self, request: RemotingCommand) -> Result<ServerResponse, AdminError> {
        let response = self
            .client
            .invoke(request, self.timeout)
            .await
            .map_err(|e| AdminError::Unreachable {
                addr: self.addr.clone(),
                reason: e.to_string(),
            })?;
        Ok(ServerResponse {
            addr: self.addr.clone(),
            response,
        })
    }

    /// The route of `topic`, `None` where this NameServer has none (TOPIC_NOT_EXIST).
    pub async fn route(&self, topic: &str) -> Result<Option<TopicRouteData>, AdminError> {
        let request = GetRouteInfoHeader::new(topic).to_command();
        let reply = self.call(request).await?;
        if reply.response.code == response::TOPIC_NOT_EXIST {
            return Ok(None);
        }
        let reply = reply.success()?;
        reply
            .decode("topic route", TopicRouteData::decode)
            .map(Some)
    }
}

impl ServerResponse {
    /// The reply if it is SUCCESS, else the error showing its code and remark.
    pub fn success(self) -> Result<ServerResponse, AdminError> {
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
