//! Members that prove who they are. With a cluster secret configured (a file every member has,
//! never logged, never sent), a link between members starts with a handshake (PEER_HELLO): the
//! connecting member sends a fresh nonce, the answering one another and a proof that it holds
//! the secret; both derive a key for this connection alone from the secret and the two nonces.
//! Every request on the link then carries a sequence number and an HMAC-SHA256 over it, its
//! code, its ext fields and its body under that key, and every answer an HMAC over its request's
//! opaque, its code, ext fields and body. A frame carries the MAC's first 128 bits (as
//! HMAC-SHA-256-128 of RFC 4868 does): forging one is still a 2^128 guess, and most peer frames
//! are digests of about 150 bytes, to which the whole tag in hex would add 64. A frame copied
//! to another connection fails there (other nonces, another key); one replayed on its own
//! connection repeats a sequence number already seen. No clock is involved. The source address stays a second fence (`trust`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use parking_lot::Mutex;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use rocketmq_wire::client::{Client, FrameSeal};
use rocketmq_wire::codes::peer::PEER_HELLO;
use rocketmq_wire::RemotingCommand;

/// Ext fields: the handshake's nonces and the answerer's proof; every sealed frame's sequence
/// number (requests, decimal) and MAC (binary fields in unpadded URL-safe base64).
use rocketmq_wire::codes::peer::keys::{CLIENT_NONCE, MAC, PROOF, SEQ, SERVER_NONCE};
/// The bytes of a frame's MAC that travel.
const MAC_BYTES: usize = 16;
/// The longest binary field decoded (a nonce, a proof or a MAC; 64 bytes in base64).
const MAX_FIELD_CHARS: usize = 88;
/// The shortest secret taken: a guessable one proves nothing.
pub const MIN_SECRET_BYTES: usize = 16;
/// Requests a session takes out of order (concurrent requests on one link are sealed in the
/// order written, but may be served in another).
const WINDOW: u64 = 64;

/// The cluster secret. Its bytes are never printed.
#[derive(Clone)]
pub struct PeerSecret(hmac::Key);

impl std::fmt::Debug for PeerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerSecret(..)")
    }
}

impl PeerSecret {
    /// The secret in the file at `path`: its contents without surrounding white space.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let bytes = std::fs::read(path)
            .map_err(|e| format!("cannot read the peer secret {}: {e}", path.display()))?;
        Self::from_bytes(bytes.trim_ascii())
            .map_err(|e| format!("the peer secret {}: {e}", path.display()))
    }

    pub fn from_bytes(secret: &[u8]) -> Result<Self, String> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "it must hold at least {MIN_SECRET_BYTES} bytes, it holds {}",
                secret.len()
            ));
        }
        Ok(PeerSecret(hmac::Key::new(hmac::HMAC_SHA256, secret)))
    }

    /// The key of the connection whose handshake exchanged these nonces.
    fn session(&self, client_nonce: &[u8], server_nonce: &[u8]) -> hmac::Key {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(b"rocketmq-peer-session\0");
        ctx.update(client_nonce);
        ctx.update(server_nonce);
        hmac::Key::new(hmac::HMAC_SHA256, ctx.sign().as_ref())
    }
}

fn nonce() -> [u8; 16] {
    let mut n = [0u8; 16];
    SystemRandom::new()
        .fill(&mut n)
        .expect("the system's random source works");
    n
}

fn decode(s: &str) -> Option<Vec<u8>> {
    if s.len() > MAX_FIELD_CHARS {
        return None;
    }
    B64.decode(s).ok()
}

/// What a frame's MAC covers: a label, a number (a request's sequence number, an answer's
/// opaque), the code, the ext fields but the MAC (sorted, as the map keeps them) and the body.
fn mac(key: &hmac::Key, label: &[u8], number: u64, cmd: &RemotingCommand) -> hmac::Tag {
    let mut ctx = hmac::Context::with_key(key);
    ctx.update(label);
    ctx.update(&number.to_be_bytes());
    ctx.update(&cmd.code.to_be_bytes());
    for (k, v) in cmd.ext_fields.iter().flatten().filter(|(k, _)| *k != MAC) {
        ctx.update(&(k.len() as u32).to_be_bytes());
        ctx.update(k.as_bytes());
        ctx.update(&(v.len() as u32).to_be_bytes());
        ctx.update(v.as_bytes());
    }
    let body = cmd.body.as_deref().unwrap_or_default();
    ctx.update(&(body.len() as u64).to_be_bytes());
    ctx.update(body);
    ctx.sign()
}

/// Whether `cmd` carries the MAC [`mac`] gives it, compared in constant time.
fn verify(key: &hmac::Key, label: &[u8], number: u64, cmd: &RemotingCommand) -> bool {
    let Some(given) = cmd.ext(MAC).and_then(decode) else {
        return false;
    };
    let expected = mac(key, label, number, cmd);
    subtle::ConstantTimeEq::ct_eq(&expected.as_ref()[..MAC_BYTES], given.as_slice()).into()
}

/// Puts `cmd`'s MAC in its ext fields (replacing any: [`mac`] leaves the field out).
fn put_mac(key: &hmac::Key, label: &[u8], number: u64, cmd: &mut RemotingCommand) {
    let tag = mac(key, label, number, cmd);
    cmd.ext_fields
        .get_or_insert_with(Default::default)
        .insert(MAC.into(), B64.encode(&tag.as_ref()[..MAC_BYTES]));
}

/// The connecting side of a sealed link.
struct ClientSeal {
    key: hmac::Key,
    next: AtomicU64,
}

impl FrameSeal for ClientSeal {
    fn seal(&self, request: &mut RemotingCommand) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        request
            .ext_fields
            .get_or_insert_with(Default::default)
            .insert(SEQ.into(), seq.to_string());
        put_mac(&self.key, b"request", seq, request);
    }

    fn check(&self, answer: &RemotingCommand) -> bool {
        verify(&self.key, b"answer", answer.opaque as u32 as u64, answer)
    }
}

/// Makes `client`, just connected to a member, a sealed link: the handshake, then every frame
/// sealed. Fails when the other side does not prove it holds the secret.
pub async fn handshake(
    client: &Client,
    secret: &PeerSecret,
    deadline: std::time::Duration,
) -> Result<(), String> {
    let mine = nonce();
    let hello = RemotingCommand::request(PEER_HELLO).with_ext(CLIENT_NONCE, B64.encode(mine));
    let answer = client
        .invoke(hello, deadline)
        .await
        .map_err(|e| format!("peer handshake: {e}"))?;
    if answer.code != 0 {
        return Err(format!(
            "peer handshake refused ({}): {}",
            answer.code,
            answer.remark.unwrap_or_default()
        ));
    }
    let theirs = answer
        .ext(SERVER_NONCE)
        .and_then(decode)
        .ok_or("peer handshake: no nonce in the answer")?;
    let key = secret.session(&mine, &theirs);
    let proof = answer.ext(PROOF).and_then(decode).unwrap_or_default();
    if hmac::verify(&key, b"proof", &proof).is_err() {
        return Err("peer handshake: the answering member does not hold the cluster secret".into());
    }
    client.seal_with(Arc::new(ClientSeal {
        key,
        next: AtomicU64::new(0),
    }));
    Ok(())
}

/// A [`crate::Connect`] whose links are sealed with `secret` (see [`handshake`]).
pub fn sealed(connect: crate::Connect, secret: PeerSecret) -> crate::Connect {
    Arc::new(move |addr, source, deadline| {
        let (connect, secret) = (connect.clone(), secret.clone());
        Box::pin(async move {
            let client = connect(addr, source, deadline).await?;
            handshake(&client, &secret, deadline).await?;
            Ok(client)
        })
    })
}

/// The answering side: the sessions of the connections that made a handshake.
pub struct PeerSessions {
    secret: PeerSecret,
    sessions: Mutex<HashMap<u64, Session>>,
}

struct Session {
    key: hmac::Key,
    /// The highest sequence number taken, and which of the [`WINDOW`] below it were.
    highest: u64,
    seen: u64,
}

impl Session {
    /// Takes `seq` once.
    fn take(&mut self, seq: u64) -> bool {
        if seq == 0 {
            return false;
        }
        if seq > self.highest {
            let shift = seq - self.highest;
            self.seen = if shift >= WINDOW {
                0
            } else {
                self.seen << shift
            } | 1;
            self.highest = seq;
            return true;
        }
        let back = self.highest - seq;
        if back >= WINDOW || self.seen & (1 << back) != 0 {
            return false;
        }
        self.seen |= 1 << back;
        true
    }
}

impl PeerSessions {
    pub fn new(secret: PeerSecret) -> Self {
        PeerSessions {
            secret,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Answers a handshake on connection `conn`, which it (re)starts.
    pub fn hello(&self, conn: u64, r: &RemotingCommand) -> RemotingCommand {
        let Some(theirs) = r
            .ext(CLIENT_NONCE)
            .and_then(decode)
            .filter(|n| n.len() >= 16)
        else {
            return RemotingCommand::response_to(r, rocketmq_wire::codes::response::NO_PERMISSION)
                .with_remark("peer handshake without a nonce");
        };
        let mine = nonce();
        let key = self.secret.session(&theirs, &mine);
        let proof = hmac::sign(&key, b"proof");
        self.sessions.lock().insert(
            conn,
            Session {
                key,
                highest: 0,
                seen: 0,
            },
        );
        RemotingCommand::response_to(r, rocketmq_wire::codes::response::SUCCESS)
            .with_ext(SERVER_NONCE, B64.encode(mine))
            .with_ext(PROOF, B64.encode(proof))
    }

    /// Whether `r` came sealed on connection `conn` by a member that made the handshake there,
    /// and not before; why not, if not.
    pub fn check(&self, conn: u64, r: &RemotingCommand) -> Result<(), &'static str> {
        let mut sessions = self.sessions.lock();
        let session = sessions
            .get_mut(&conn)
            .ok_or("peer requests must come on a link that made the peer handshake")?;
        let seq = r
            .ext(SEQ)
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or("peer request without a sequence number")?;
        if !verify(&session.key, b"request", seq, r) {
            return Err("peer request with a wrong MAC");
        }
        if !session.take(seq) {
            return Err("peer request replayed");
        }
        Ok(())
    }

    /// Seals the answer to a request taken on connection `conn`.
    pub fn seal_answer(&self, conn: u64, answer: &mut RemotingCommand) {
        let sessions = self.sessions.lock();
        let Some(session) = sessions.get(&conn) else {
            return;
        };
        put_mac(&session.key, b"answer", answer.opaque as u32 as u64, answer);
    }

    /// Forgets connection `conn`'s session.
    pub fn closed(&self, conn: u64) {
        self.sessions.lock().remove(&conn);
    }

    pub fn sessions(&self) -> usize {
        self.sessions.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> PeerSecret {
        PeerSecret::from_bytes(b"a cluster secret of some length").unwrap()
    }

    #[test]
    fn a_short_secret_is_refused_and_never_printed() {
        assert!(PeerSecret::from_bytes(b"short").is_err());
        assert_eq!(format!("{:?}", secret()), "PeerSecret(..)");
    }

    #[test]
    fn a_sealed_request_is_taken_once_on_its_own_connection_and_not_when_changed() {
        let sessions = PeerSessions::new(secret());
        let answer = sessions.hello(
            7,
            &RemotingCommand::request(PEER_HELLO).with_ext(CLIENT_NONCE, B64.encode([1; 16])),
        );
        let theirs = decode(answer.ext(SERVER_NONCE).unwrap()).unwrap();
        let seal = ClientSeal {
            key: secret().session(&[1; 16], &theirs),
            next: AtomicU64::new(0),
        };
        let mut first = RemotingCommand::request(1216).with_ext("x", "1");
        first.body = Some(bytes::Bytes::from_static(b"{\"Put\":{}}"));
        seal.seal(&mut first);
        let mut second = RemotingCommand::request(1220);
        seal.seal(&mut second);
        // Out of order within the window is fine; each only once.
        assert_eq!(sessions.check(7, &second), Ok(()));
        assert_eq!(sessions.check(7, &first), Ok(()));
        assert_eq!(sessions.check(7, &first), Err("peer request replayed"));
        // On another connection: no session there, or another key.
        assert!(sessions.check(8, &first).is_err());
        sessions.hello(
            8,
            &RemotingCommand::request(PEER_HELLO).with_ext(CLIENT_NONCE, B64.encode([2; 16])),
        );
        assert_eq!(
            sessions.check(8, &first),
            Err("peer request with a wrong MAC")
        );
        // Changed content under a valid MAC.
        let mut third = RemotingCommand::request(1216).with_ext("x", "1");
        seal.seal(&mut third);
        third
            .ext_fields
            .as_mut()
            .unwrap()
            .insert("x".into(), "2".into());
        assert_eq!(
            sessions.check(7, &third),
            Err("peer request with a wrong MAC")
        );
        // Unsealed.
        assert!(sessions.check(7, &RemotingCommand::request(1216)).is_err());
        // A frame carries 128 bits of its MAC; the whole tag, or its first 15 bytes, is refused.
        let mut fourth = RemotingCommand::request(1216).with_ext("x", "1");
        seal.seal(&mut fourth);
        assert_eq!(fourth.ext(MAC).map(str::len), Some(22));
        let tag = super::mac(&seal.key, b"request", 4, &fourth);
        for wrong in [tag.as_ref(), &tag.as_ref()[..MAC_BYTES - 1]] {
            let mut forged = fourth.clone();
            forged
                .ext_fields
                .as_mut()
                .unwrap()
                .insert(MAC.into(), B64.encode(wrong));
            assert_eq!(
                sessions.check(7, &forged),
                Err("peer request with a wrong MAC")
            );
        }
        assert_eq!(sessions.check(7, &fourth), Ok(()));
        // The answer is checked by the connecting side.
        let mut answer = RemotingCommand::response_to(&first, 0).with_ext("applied", 3);
        sessions.seal_answer(7, &mut answer);
        assert!(seal.check(&answer));
        answer
            .ext_fields
            .as_mut()
            .unwrap()
            .insert("applied".into(), "4".into());
        assert!(!seal.check(&answer));
        sessions.closed(7);
        assert_eq!(sessions.sessions(), 1);
    }

    #[test]
    fn the_window_takes_each_number_once() {
        let mut s = Session {
            key: hmac::Key::new(hmac::HMAC_SHA256, b"k"),
            highest: 0,
            seen: 0,
        };
        assert!(s.take(3) && s.take(1) && s.take(2));
        assert!(!s.take(2) && !s.take(0));
        assert!(s.take(200));
        assert!(!s.take(3), "too far behind");
        assert!(s.take(199) && !s.take(199));
    }
}
