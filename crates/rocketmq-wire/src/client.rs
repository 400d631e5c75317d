//! A small async remoting client: many requests in flight on one connection, matched by opaque.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::command::RemotingCommand;
use crate::frame::{release_if_large, RemotingCodec};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect failed: {0}")]
    Connect(std::io::Error),
    #[error("connection closed")]
    Closed,
    #[error("request timed out")]
    Timeout,
}

/// What seals a connection's frames once its peer and it share a session key (a link between
/// members that prove who they are): every request written is sealed in the order written, and
/// every answer read is checked; an answer that fails closes the connection.
pub trait FrameSeal: Send + Sync {
    fn seal(&self, request: &mut RemotingCommand);
    fn check(&self, answer: &RemotingCommand) -> bool;
}

/// Set once, after the handshake that makes the session: frames before it go as they are.
type Seal = Arc<std::sync::OnceLock<Arc<dyn FrameSeal>>>;

/// Waiters by opaque; `None` once the connection has closed, so that no waiter is added after
/// the reader has gone.
type Pending = Arc<Mutex<Option<HashMap<i32, oneshot::Sender<RemotingCommand>>>>>;

/// A connection to a remoting server. Cloning shares the connection; once the last clone is
/// dropped the connection closes, its reader with it (a reader left to run would buffer
/// whatever the other side still sends).
#[derive(Clone)]
pub struct Client {
    outbound: mpsc::Sender<RemotingCommand>,
    pending: Pending,
    next_opaque: Arc<AtomicI32>,
    seal: Seal,
    _open: Arc<tokio_util::sync::DropGuard>,
}

impl Client {
    pub async fn connect(addr: impl ToSocketAddrs) -> Result<Self, ClientError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(ClientError::Connect)?;
        stream.set_nodelay(true).map_err(ClientError::Connect)?;
        Ok(Self::from_stream(stream))
    }

    /// Connects within `deadline`: a peer that is down or cut off must not hold the caller for
    /// the system's connect timeout (minutes on Linux when SYNs go unanswered).
    pub async fn connect_within(
        addr: &str,
        deadline: std::time::Duration,
    ) -> Result<Self, ClientError> {
        Self::connect_from(addr, None, deadline).await
    }

    /// Connects within `deadline`, from `source` when it is given (a node whose peers know it
    /// by one address speaks from that address, whatever interface the route would pick).
    pub async fn connect_from(
        addr: &str,
        source: Option<std::net::IpAddr>,
        deadline: std::time::Duration,
    ) -> Result<Self, ClientError> {
        Self::connect_capped(addr, source, deadline, usize::MAX).await
    }

    /// As [`Client::connect_from`], taking no answer frame longer than `max_frame` bytes: the
    /// connection closes at the first that announces more, before any of it is buffered. For
    /// links to peers, which a process at a peer's address could make answer gigabytes.
    pub async fn connect_capped(
        addr: &str,
        source: Option<std::net::IpAddr>,
        deadline: std::time::Duration,
        max_frame: usize,
    ) -> Result<Self, ClientError> {
        let stream = tcp_from(addr, source, deadline)
            .await
            .map_err(ClientError::Connect)?;
        let (read, write) = stream.into_split();
        Ok(Self::from_halves(read, write, max_frame))
    }

    /// As [`Client::connect_capped`], over TLS with `config`; the name `addr` gives is what the
    /// handshake presents (the server's certificate is checked as `config` says).
    pub async fn connect_tls_capped(
        addr: &str,
        source: Option<std::net::IpAddr>,
        deadline: std::time::Duration,
        max_frame: usize,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<Self, String> {
        let tcp = tcp_from(addr, source, deadline)
            .await
            .map_err(|e| e.to_string())?;
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_matches(['[', ']']);
        let name =
            rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
        let tls = tokio::time::timeout(
            deadline,
            tokio_rustls::TlsConnector::from(config).connect(name, tcp),
        )
        .await
        .map_err(|_| "TLS handshake timed out".to_string())?
        .map_err(|e| format!("TLS handshake: {e}"))?;
        Ok(Self::from_io_capped(tls, max_frame))
    }

    pub fn from_stream(stream: TcpStream) -> Self {
        let (read, write) = stream.into_split();
        Self::from_halves(read, write, usize::MAX)
    }

    /// A client over any byte stream, TLS for one.
    pub fn from_io<S>(stream: S) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        Self::from_io_capped(stream, usize::MAX)
    }

    /// As [`Client::from_io`], taking no answer frame longer than `max_frame` bytes.
    pub fn from_io_capped<S>(stream: S, max_frame: usize) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read, write) = tokio::io::split(stream);
        Self::from_halves(read, write, max_frame)
    }

    fn from_halves<R, W>(read: R, write: W, max_frame: usize) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let (outbound, mut rx) = mpsc::channel::<RemotingCommand>(1024);
        let seal: Seal = Arc::default();
        let writer_seal = seal.clone();
        tokio::spawn(async move {
            let mut sink = FramedWrite::new(write, RemotingCodec::new(usize::MAX));
            // Sealed here, in the order written: the peer sees the sequence numbers in order.
            let sealed = |mut cmd: RemotingCommand| {
                if let Some(seal) = writer_seal.get() {
                    seal.seal(&mut cmd);
                }
                cmd
            };
            while let Some(cmd) = rx.recv().await {
                if sink.feed(sealed(cmd)).await.is_err() {
                    return;
                }
                while let Ok(cmd) = rx.try_recv() {
                    if sink.feed(sealed(cmd)).await.is_err() {
                        return;
                    }
                }
                if sink.flush().await.is_err() {
                    return;
                }
                release_if_large(sink.write_buffer_mut());
            }
        });
        let reader_pending = pending.clone();
        let reader_seal = seal.clone();
        let open = tokio_util::sync::CancellationToken::new();
        let closed = open.clone();
        tokio::spawn(async move {
            let mut frames = FramedRead::new(read, RemotingCodec::new(max_frame));
            loop {
                let cmd = tokio::select! {
                    _ = closed.cancelled() => break,
                    frame = frames.next() => match frame {
                        Some(Ok(cmd)) => cmd,
                        // A frame over the cap, a malformed one, or the end: the connection is
                        // done either way.
                        _ => break,
                    },
                };
                release_if_large(frames.read_buffer_mut());
                if !cmd.is_response() {
                    continue;
                }
                if reader_seal.get().is_some_and(|seal| !seal.check(&cmd)) {
                    // Not from who the handshake proved: nothing more from this connection.
                    break;
                }
                let waiter = reader_pending
                    .lock()
                    .unwrap()
                    .as_mut()
                    .and_then(|p| p.remove(&cmd.opaque));
                if let Some(tx) = waiter {
                    let _ = tx.send(cmd);
                }
            }
            // Dropping the senders wakes every waiter with `Closed`.
            reader_pending.lock().unwrap().take();
        });
        Client {
            outbound,
            pending,
            next_opaque: Arc::new(AtomicI32::new(1)),
            seal,
            _open: Arc::new(open.drop_guard()),
        }
    }

    /// Seals every request written from now on and checks every answer read (see
    /// [`FrameSeal`]); a connection is sealed once.
    pub fn seal_with(&self, seal: Arc<dyn FrameSeal>) {
        let _ = self.seal.set(seal);
    }

    /// Sends `request` (its opaque is assigned here) and waits for the matching response.
    pub async fn invoke(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.opaque = opaque;
        let (tx, rx) = oneshot::channel();
        match self.pending.lock().unwrap().as_mut() {
            Some(pending) => pending.insert(opaque, tx),
            None => return Err(ClientError::Closed),
        };
        if self.outbound.send(request).await.is_err() {
            self.forget(opaque);
            return Err(ClientError::Closed);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(_)) => Err(ClientError::Closed),
            Err(_) => {
                self.forget(opaque);
                Err(ClientError::Timeout)
            }
        }
    }

    fn forget(&self, opaque: i32) {
        if let Some(pending) = self.pending.lock().unwrap().as_mut() {
            pending.remove(&opaque);
        }
    }

    /// Sends a oneway request; no response is expected. Refused once the peer has closed the
    /// connection: its end is gone, and what is written after its close would be taken by the
    /// local socket and lost without an error (a peer whose host vanished never resets it).
    pub async fn send_oneway(&self, request: RemotingCommand) -> Result<(), ClientError> {
        if self.pending.lock().unwrap().is_none() {
            return Err(ClientError::Closed);
        }
        let mut request = request.oneway();
        request.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        self.outbound
            .send(request)
            .await
            .map_err(|_| ClientError::Closed)
    }
}

/// A TCP connection to `addr` within `deadline`, from `source` when it is given, with Nagle off:
/// what [`Client::connect_from`] speaks over, and what a TLS client wraps.
pub async fn tcp_from(
    addr: &str,
    source: Option<std::net::IpAddr>,
    deadline: std::time::Duration,
) -> std::io::Result<TcpStream> {
    let connect = async {
        let Some(source) = source.filter(|ip| !ip.is_unspecified()) else {
            return TcpStream::connect(addr).await;
        };
        let mut last = None;
        for target in tokio::net::lookup_host(addr).await? {
            let socket = if target.is_ipv4() {
                tokio::net::TcpSocket::new_v4()?
            } else {
                tokio::net::TcpSocket::new_v6()?
            };
            if socket.bind(std::net::SocketAddr::new(source, 0)).is_err() {
                // Not an address of this host for that family: let the route choose.
                return TcpStream::connect(target).await;
            }
            match socket.connect(target).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "no address to connect to")
        }))
    };
    let stream = tokio::time::timeout(deadline, connect)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    stream.set_nodelay(true)?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_oneway_send_is_refused_once_the_peer_closed_the_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = Client::connect(addr).await.unwrap();
        let (peer, _) = listener.accept().await.unwrap();
        assert!(client
            .send_oneway(RemotingCommand::request(1))
            .await
            .is_ok());
        drop(peer);
        // The close reaches the reader in its own time.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut refused = false;
        while !refused && std::time::Instant::now() < deadline {
            refused = client
                .send_oneway(RemotingCommand::request(1))
                .await
                .is_err();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(refused, "oneway sends still taken after the peer closed");
    }
}
