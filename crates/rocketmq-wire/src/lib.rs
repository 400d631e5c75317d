//! The RocketMQ remoting wire format, as spoken by the Java NameServer, brokers and clients.
//!
//! - [`frame`]: length-prefixed frames and the tokio codec, with a size cap;
//! - [`header_codec`]: the JSON and binary (ROCKETMQ) header forms, encoded and decoded;
//! - [`headers`]: the typed per-request header objects carried in a command's extFields, and
//!   the remarks for missing or malformed fields; the controller's in `headers::controller`;
//! - [`command`]: the in-memory command every frame decodes to;
//! - [`body`]: request and response bodies, written exactly as Java writes them, the
//!   controller's included;
//! - [`json`]: the fastjson-compatible writer and the lenient reader behind the bodies;
//! - [`codes`]: the request, response and language codes, and the version ordinals;
//! - [`properties`]: Java `.properties` text, as config files and config bodies carry it;
//! - [`key_table`]: the table of keys, types and defaults a server's settings are declared with,
//!   and the keys remote updates may never change;
//! - [`error`]: undecodable frames (which close their connection) and misshapen bodies;
//! - [`clock`]: the wall clock in Java's signed epoch milliseconds;
//! - [`client`]: a small async client for tools, tests and the servers' outbound calls;
//! - [`listener`]: the accepting side of a port: admission caps, refusal logging, deadlines;
//! - [`server`]: the serving side of a port behind a [`server::Service`]: PROXY headers, TLS,
//!   frame reading within a decode budget, dispatch, answers batched per write;
//! - [`acl`]: request signatures of RocketMQ's ACL clients.

pub mod acl;
pub mod body;
pub mod client;
pub mod clock;
pub mod codes;
pub mod command;
pub mod error;
pub mod frame;
pub mod header_codec;
pub mod headers;
pub mod json;
pub mod key_table;
pub mod listener;
pub mod properties;
pub mod server;

pub use command::{ExtFields, RemotingCommand, SerializeType};

/// The REGISTER_BROKER body checksum: CRC-32 (IEEE) masked to 31 bits.
pub fn body_crc32(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc_matches_the_reference_sample() {
        assert_eq!(super::body_crc32(br#"{"filterServerList":[]}"#), 2053024402);
    }
}
