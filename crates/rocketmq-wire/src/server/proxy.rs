//! HAProxy PROXY protocol headers (v1 text, v2 binary), which load balancers put before the
//! first frame. Java sniffs and consumes them; so do we.
//!
//! A connection whose first byte could start a header (`P` or CR) is read as one: no frame can
//! start with either byte, since both would announce a frame of hundreds of megabytes or more,
//! beyond any frame cap in use. Reading (rather than peeking until enough has arrived) means
//! the wait is for readability, never a poll, and a peer that closes mid-header is seen at once.

use std::io::{Error, ErrorKind};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const V1_PREFIX: &[u8] = b"PROXY ";
const V1_MAX_LEN: usize = 107;
const V2_SIGNATURE: [u8; 12] = [
    0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,
];
const V2_FIXED_LEN: usize = 16;

/// A load balancer sends its whole header at once; a peer that takes longer is not one.
pub const HEADER_DEADLINE: Duration = Duration::from_secs(3);

/// Consumes a PROXY header at the start of `stream`, if there is one, waiting at most
/// `first_byte` for the connection to send anything. Errors mean the connection is unusable
/// (silent, a broken header, or closed mid-header).
pub async fn skip_header(stream: &mut TcpStream, first_byte: Duration) -> std::io::Result<()> {
    let mut first = [0u8; 1];
    let seen = tokio::time::timeout(first_byte, stream.peek(&mut first))
        .await
        .map_err(|_| Error::from(ErrorKind::TimedOut))??;
    match (seen, first[0]) {
        (0, _) => Ok(()),
        (_, b) if b == V1_PREFIX[0] => within_deadline(read_v1(stream)).await,
        (_, b) if b == V2_SIGNATURE[0] => within_deadline(read_v2(stream)).await,
        _ => Ok(()),
    }
}

async fn within_deadline(
    read: impl std::future::Future<Output = std::io::Result<()>>,
) -> std::io::Result<()> {
    tokio::time::timeout(HEADER_DEADLINE, read)
        .await
        .map_err(|_| Error::from(ErrorKind::TimedOut))?
}

fn invalid(what: &str) -> Error {
    Error::new(ErrorKind::InvalidData, what.to_string())
}

async fn read_v1(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(V1_MAX_LEN);
    while line.len() < V1_MAX_LEN {
        line.push(stream.read_u8().await?);
        let n = line.len();
        if n <= V1_PREFIX.len() && line[..] != V1_PREFIX[..n] {
            return Err(invalid("not a PROXY v1 header"));
        }
        if line.ends_with(b"\r\n") {
            return Ok(());
        }
    }
    Err(invalid("PROXY v1 header too long"))
}

async fn read_v2(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut fixed = [0u8; V2_FIXED_LEN];
    stream.read_exact(&mut fixed).await?;
    if fixed[..V2_SIGNATURE.len()] != V2_SIGNATURE {
        return Err(invalid("not a PROXY v2 header"));
    }
    let len = u16::from_be_bytes([fixed[14], fixed[15]]) as usize;
    let mut rest = vec![0u8; len];
    stream.read_exact(&mut rest).await?;
    Ok(())
}
