//! HAProxy PROXY protocol headers (v1 text, v2 binary), which load balancers put before the
//! first frame. Java sniffs and consumes them; so do we. Neither can be mistaken for a frame:
//! both would announce a frame of hundreds of megabytes.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const V1_PREFIX: &[u8] = b"PROXY ";
const V1_MAX_LEN: usize = 107;
const V2_SIGNATURE: [u8; 12] = [
    0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,
];
const V2_FIXED_LEN: usize = 16;

/// Consumes a PROXY header at the start of `stream`, if there is one. Errors mean the
/// connection is unusable (a broken header, or closed mid-header).
pub async fn skip_header(stream: &mut TcpStream, patience: Duration) -> std::io::Result<()> {
    tokio::time::timeout(patience, skip(stream))
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

async fn skip(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut head = [0u8; V2_FIXED_LEN];
    loop {
        let n = stream.peek(&mut head).await?;
        if n == 0 {
            return Ok(());
        }
        let seen = &head[..n];
        let maybe_v1 = V1_PREFIX.starts_with(&seen[..n.min(V1_PREFIX.len())]);
        let maybe_v2 = V2_SIGNATURE.starts_with(&seen[..n.min(V2_SIGNATURE.len())]);
        if maybe_v1 && n >= V1_PREFIX.len() {
            return skip_v1(stream).await;
        }
        if maybe_v2 && n >= V2_FIXED_LEN {
            return skip_v2(stream).await;
        }
        if !maybe_v1 && !maybe_v2 {
            return Ok(());
        }
        // A prefix of a header has arrived; wait for the rest without spinning.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn skip_v1(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(V1_MAX_LEN);
    while line.len() < V1_MAX_LEN {
        line.push(stream.read_u8().await?);
        if line.ends_with(b"\r\n") {
            return Ok(());
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "PROXY v1 header too long",
    ))
}

async fn skip_v2(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut fixed = [0u8; V2_FIXED_LEN];
    stream.read_exact(&mut fixed).await?;
    let len = u16::from_be_bytes([fixed[14], fixed[15]]) as usize;
    let mut rest = vec![0u8; len];
    stream.read_exact(&mut rest).await?;
    Ok(())
}
