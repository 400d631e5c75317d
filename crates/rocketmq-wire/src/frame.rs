//! Length-prefixed frames: `frameLen i32 | serType u8 | headerLen u24 | header | body`.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::command::{RemotingCommand, SerializeType};
use crate::error::FrameError;
use crate::header_codec;

/// Java's default cap on a whole frame, length field included.
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct RemotingCodec {
    max_frame: usize,
}

impl Default for RemotingCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME)
    }
}

impl RemotingCodec {
    pub fn new(max_frame: usize) -> Self {
        RemotingCodec { max_frame }
    }
}

/// The header length a frame payload (everything after the length field) announces: the low
/// 24 bits of its first word, whose high byte is the serialize type; 0 for a payload too short.
pub fn payload_header_len(payload: &[u8]) -> usize {
    payload.get(..4).map_or(0, |b| {
        (u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x00FF_FFFF) as usize
    })
}

/// The payload length the length field at the start of `buf` (4 bytes at least) announces,
/// checked against `max_frame` (the whole frame's cap, length field included): a payload too
/// short for the header-length word, or over the cap, ends the connection.
pub fn announced_payload_len(buf: &[u8], max_frame: usize) -> Result<usize, FrameError> {
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as i64;
    let max_payload = max_frame - 4;
    if len < 4 || len as usize > max_payload {
        return Err(FrameError::BadLength(len, max_payload));
    }
    Ok(len as usize)
}

/// Decodes one complete frame payload (everything after the length field).
pub fn decode_payload(mut payload: Bytes) -> Result<RemotingCommand, FrameError> {
    let frame_len = payload.len();
    if frame_len < 4 {
        return Err(FrameError::BadLength(frame_len as i64, 4));
    }
    let header_len = payload_header_len(&payload);
    let ori = payload.get_u32();
    let ser = SerializeType::from_code((ori >> 24) as u8)
        .ok_or(FrameError::UnknownSerializeType((ori >> 24) as u8))?;
    if header_len > payload.len() {
        return Err(FrameError::HeaderTooLong {
            header: header_len,
            frame: frame_len,
        });
    }
    let header_bytes = payload.split_to(header_len);
    let mut cmd = match ser {
        SerializeType::Json => header_codec::decode_json(&header_bytes)?,
        SerializeType::RocketMq => header_codec::decode_binary(&header_bytes)?,
    };
    cmd.body = (!payload.is_empty()).then_some(payload);
    Ok(cmd)
}

/// What a connection's buffer may keep between frames.
const BUFFER_KEPT: usize = 64 * 1024;

/// Gives an emptied buffer's memory back once a large frame made it large: a connection that
/// once carried megabytes would otherwise hold them for its whole life.
pub(crate) fn release_if_large(buf: &mut BytesMut) {
    if buf.is_empty() && buf.capacity() > BUFFER_KEPT {
        *buf = BytesMut::new();
    }
}

/// The whole frame of `cmd` on its own, for peers that write bytes to a socket themselves.
pub fn frame_bytes(cmd: &RemotingCommand) -> Vec<u8> {
    let mut buf = BytesMut::new();
    encode_frame(cmd, &mut buf);
    buf.to_vec()
}

/// Appends the whole frame of `cmd`, length field included.
pub fn encode_frame(cmd: &RemotingCommand, dst: &mut BytesMut) {
    encode_frame_head(cmd, dst);
    dst.put_slice(cmd.body.as_deref().unwrap_or_default());
}

/// The frame of `cmd` up to its body, which the caller writes right after it.
pub fn encode_frame_head(cmd: &RemotingCommand, dst: &mut BytesMut) {
    let start = dst.len();
    dst.put_u32(0);
    dst.put_u32(0);
    match cmd.ser_type {
        SerializeType::Json => header_codec::encode_json(cmd, dst),
        SerializeType::RocketMq => header_codec::encode_binary(cmd, dst),
    }
    let header_len = dst.len() - start - 8;
    let frame_len = (dst.len() - start - 4 + cmd.body.as_ref().map_or(0, |b| b.len())) as u32;
    dst[start..start + 4].copy_from_slice(&frame_len.to_be_bytes());
    let ori = ((cmd.ser_type.code() as u32) << 24) | (header_len as u32 & 0x00FF_FFFF);
    dst[start + 4..start + 8].copy_from_slice(&ori.to_be_bytes());
}

impl Decoder for RemotingCodec {
    type Item = RemotingCommand;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        if src.len() < 4 {
            return Ok(None);
        }
        let frame_len = announced_payload_len(src, self.max_frame)?;
        let total = 4 + frame_len;
        if src.len() < total {
            // No reserve for the announced size: a peer that announces 16 MiB and sends nothing
            // must not make us allocate it.
            return Ok(None);
        }
        src.advance(4);
        let payload = src.split_to(frame_len).freeze();
        decode_payload(payload).map(Some)
    }
}

impl Encoder<RemotingCommand> for RemotingCodec {
    type Error = FrameError;

    fn encode(&mut self, cmd: RemotingCommand, dst: &mut BytesMut) -> Result<(), Self::Error> {
        encode_frame(&cmd, dst);
        Ok(())
    }
}
