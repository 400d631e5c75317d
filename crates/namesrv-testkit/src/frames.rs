//! Frames as bytes, for peers that write to the socket themselves: well-formed ones, and ones
//! with any length field, type byte or header a hostile peer could send.

use bytes::{BufMut, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::server::TIMEOUT;

/// `cmd` framed as the client would send it.
pub use rocketmq_wire::frame::frame_bytes as frame;

/// A frame with any length field, type byte and header length, around `rest`.
pub fn raw_frame(frame_len: i32, ser_type: u8, header_len: u32, rest: &[u8]) -> Vec<u8> {
    let mut v = frame_len.to_be_bytes().to_vec();
    v.extend_from_slice(&((u32::from(ser_type) << 24) | header_len).to_be_bytes());
    v.extend_from_slice(rest);
    v
}

/// A well-formed frame around an arbitrary JSON (`ser_type` 0) or binary (1) header and body.
pub fn frame_with_header(ser_type: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    raw_frame(
        (4 + header.len() + body.len()) as i32,
        ser_type,
        header.len() as u32,
        &[header, body].concat(),
    )
}

/// A binary (ROCKETMQ) header for `code` with the given raw ext-map bytes and declared length.
pub fn binary_header(code: i16, ext_len: i32, ext: &[u8]) -> Vec<u8> {
    let mut h = BytesMut::new();
    h.put_i16(code);
    h.put_u8(0);
    h.put_i16(479);
    h.put_i32(1);
    h.put_i32(0);
    h.put_i32(0);
    h.put_i32(ext_len);
    h.put_slice(ext);
    h.to_vec()
}

/// One entry of a binary header's ext map.
pub fn binary_entry(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut e = BytesMut::new();
    e.put_i16(key.len() as i16);
    e.put_slice(key);
    e.put_i32(value.len() as i32);
    e.put_slice(value);
    e.to_vec()
}

/// The payload of the next frame (what follows the length field), or `None` if the connection
/// closes or nothing whole arrives within [`TIMEOUT`].
pub async fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    tokio::time::timeout(TIMEOUT, stream.read_exact(&mut len))
        .await
        .ok()?
        .ok()?;
    let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut payload).await.ok()?;
    Some(payload)
}

/// Whether the peer closed `stream` within `wait`: a read that ends (or fails), not one still
/// waiting for data and not an answer.
pub async fn closed_within(stream: &mut TcpStream, wait: std::time::Duration) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(wait, stream.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}
