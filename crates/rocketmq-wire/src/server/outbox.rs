//! A connection's answers waiting to be written: small ones gathered into one buffer, so that
//! every frame already received is answered in one write; a large body written from the shared
//! bytes it already is. A cached topic list is megabytes, and copying it into the buffer for
//! every console that polls it cost more than sending it.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::frame::{encode_frame, encode_frame_head, release_if_large};
use crate::RemotingCommand;

/// Bodies at least this large are written from their own bytes rather than copied.
const SHARED_BODY: usize = 64 * 1024;

pub(super) struct Outbox {
    /// Written first, in order: what was gathered before each large body, and the body.
    queued: Vec<Bytes>,
    queued_len: usize,
    /// What follows the last queued body.
    gathered: BytesMut,
}

impl Outbox {
    pub fn new() -> Self {
        Outbox {
            queued: Vec::new(),
            queued_len: 0,
            gathered: BytesMut::with_capacity(4096),
        }
    }

    pub fn push(&mut self, cmd: &RemotingCommand) {
        match &cmd.body {
            Some(body) if body.len() >= SHARED_BODY => {
                encode_frame_head(cmd, &mut self.gathered);
                let head = self.gathered.split().freeze();
                self.queued_len += head.len() + body.len();
                self.queued.extend([head, body.clone()]);
            }
            _ => encode_frame(cmd, &mut self.gathered),
        }
    }

    /// Bytes waiting to be written.
    pub fn len(&self) -> usize {
        self.queued_len + self.gathered.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes everything waiting, in the order it was pushed; then lets go of what a large
    /// answer left behind.
    pub async fn write_to<W: AsyncWrite + Unpin>(&mut self, write: &mut W) -> std::io::Result<()> {
        for chunk in self.queued.drain(..) {
            write.write_all(&chunk).await?;
        }
        self.queued_len = 0;
        write.write_all(&self.gathered).await?;
        self.gathered.clear();
        release_if_large(&mut self.gathered);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::frame_bytes;

    fn answer(body_len: usize, fill: u8) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(1);
        cmd.body = (body_len > 0).then(|| Bytes::from(vec![fill; body_len]));
        cmd
    }

    #[tokio::test]
    async fn answers_large_and_small_are_written_as_their_frames_in_the_order_pushed() {
        let answers = [
            answer(10, 1),
            answer(SHARED_BODY, 2),
            answer(0, 3),
            answer(SHARED_BODY * 3, 4),
            answer(100, 5),
        ];
        let mut outbox = Outbox::new();
        for a in &answers {
            outbox.push(a);
        }
        let expected: Vec<u8> = answers.iter().flat_map(frame_bytes).collect();
        assert_eq!(outbox.len(), expected.len());
        let mut written = Vec::new();
        outbox.write_to(&mut written).await.unwrap();
        assert_eq!(written, expected);
        assert!(outbox.is_empty());
    }
}
