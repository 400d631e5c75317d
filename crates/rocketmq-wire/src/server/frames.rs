//! Reading frames off a connection: small ones from a small buffer and decoded at once, a large
//! one only once the port's [`DecodeBudget`] has room for it, and left raw for the connection
//! to decode where it will not stall the reader's worker.

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::OwnedSemaphorePermit;

use super::DecodeBudget;
use crate::error::FrameError;
use crate::frame::{announced_payload_len, decode_payload};
use crate::RemotingCommand;

/// Frames up to this size are read without asking the decode budget, and decoded and served on
/// the reader (unless their request blocks). Larger ones block by their size alone, whatever
/// their code: decoding megabytes on an async worker would stall every connection sharing it.
pub const SMALL_FRAME: usize = 64 * 1024;

/// A large frame's claim on the decode budget, in KiB: its own bytes and what decoding them may
/// build (typed structures a few times the text; small lenient bodies a tree of many times it).
fn frame_weight(frame_len: usize, budget_kib: u32) -> u32 {
    let kib = (frame_len / 1024).max(1);
    let weight = kib.saturating_mul(DECODE_FACTOR).max(MIN_LARGE_WEIGHT_KIB);
    u32::try_from(weight).unwrap_or(u32::MAX).min(budget_kib)
}

const DECODE_FACTOR: usize = 5;
const MIN_LARGE_WEIGHT_KIB: usize = 10 * 1024;

/// How much is read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;

/// A frame as read: small ones decoded, large ones still raw with their claim on the budget.
pub enum Frame {
    Small(RemotingCommand),
    Large(Bytes, OwnedSemaphorePermit),
}

pub struct FrameReader<'b, R> {
    read: R,
    buf: BytesMut,
    max_frame: usize,
    budget: &'b DecodeBudget,
    /// Held from the moment a large frame's length is known until its request is answered.
    permit: Option<OwnedSemaphorePermit>,
}

impl<'b, R: AsyncRead + Unpin> FrameReader<'b, R> {
    pub fn new(read: R, max_frame: usize, budget: &'b DecodeBudget) -> Self {
        FrameReader {
            read,
            buf: BytesMut::with_capacity(4096),
            max_frame,
            budget,
            permit: None,
        }
    }

    /// The next frame already complete in the buffer, without reading.
    pub fn buffered(&mut self) -> Result<Option<Frame>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = announced_payload_len(&self.buf, self.max_frame)?;
        if len > SMALL_FRAME && self.permit.is_none() {
            return Ok(None);
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        self.buf.advance(4);
        let payload = self.buf.split_to(len).freeze();
        match self.permit.take() {
            Some(permit) => {
                // What follows the frame still shares its block and would keep it for the life
                // of the connection: a copy of it (seldom more than nothing) lets the block go
                // with the frame.
                self.buf = BytesMut::from(&self.buf[..]);
                Ok(Some(Frame::Large(payload, permit)))
            }
            None => decode_payload(payload).map(|cmd| Some(Frame::Small(cmd))),
        }
    }

    /// The next frame, reading as needed; `None` at the end of the stream. Cancel-safe: what
    /// was read and the budget claimed stay with the reader.
    pub async fn next(&mut self) -> Option<Result<Frame, FrameError>> {
        loop {
            match self.buffered() {
                Ok(Some(frame)) => return Some(Ok(frame)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            let wanted = if self.buf.len() >= 4 {
                let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                    as usize;
                if len > SMALL_FRAME && self.permit.is_none() {
                    let weight = frame_weight(len, self.budget.kib);
                    match self.budget.permits.clone().acquire_many_owned(weight).await {
                        Ok(permit) => self.permit = Some(permit),
                        Err(_) => return None,
                    }
                    continue;
                }
                4 + len - self.buf.len()
            } else {
                4 - self.buf.len()
            };
            // Small frames and lengths are read a chunk at a time. A large frame that holds its
            // claim on the budget gets its whole length at once: grown a chunk at a time, its
            // megabytes were copied from buffer to buffer on the way. The claim already bounds
            // it, and a block that large is mapped, so what a silent peer announced takes
            // address space, not memory.
            let step = if self.permit.is_some() {
                wanted
            } else {
                wanted.clamp(1, READ_CHUNK)
            };
            self.buf.reserve(step);
            match self.read.read_buf(&mut self.buf).await {
                Ok(0) if self.buf.is_empty() => return None,
                Ok(0) => {
                    return Some(Err(FrameError::Io(std::io::Error::from(
                        std::io::ErrorKind::UnexpectedEof,
                    ))))
                }
                Ok(_) => {}
                Err(e) => return Some(Err(FrameError::Io(e))),
            }
        }
    }

    /// A large frame (a registration) leaves its buffer behind; brokers send one every 30 s,
    /// and keeping it in between pins megabytes per broker connection.
    pub fn shrink_when_idle(&mut self) {
        crate::frame::release_if_large(&mut self.buf);
    }
}
