//! The canned server: answers every request with the same success frame, carrying a body as
//! large as a real route answer for the given brokers. It looks nothing up, so its throughput
//! is what the framing, the sockets and this machine allow: the ceiling of any NameServer here.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use rocketmq_wire::codes::response;
use rocketmq_wire::frame::{encode_frame, RemotingCodec};
use rocketmq_wire::json::JsonStyle;
use rocketmq_wire::RemotingCommand;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Decoder;

use crate::cli::CannedArgs;
use crate::fleet::Layout;

pub async fn run(args: &CannedArgs) -> anyhow::Result<serde_json::Value> {
    let mut layout = Layout::new(args.brokers, 1, 0, args.queues);
    layout.slaves = args.slaves;
    let body: Bytes = layout.route().encode(JsonStyle::Standard).into();
    let listener = TcpListener::bind(&args.listen).await?;
    // The same readiness line as mqnamesrv, so scripts wait for either alike.
    println!(
        "The Name Server boot success. serializeType=JSON, address {} (canned, {} body bytes)",
        listener.local_addr()?,
        body.len()
    );
    let body = Arc::new(body);
    loop {
        let (stream, _) = listener.accept().await?;
        let body = body.clone();
        tokio::spawn(async move {
            let _ = serve(stream, &body).await;
        });
    }
}

/// Answers everything read so far in one write, as a batching real server would.
async fn serve(mut stream: TcpStream, body: &Bytes) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut codec = RemotingCodec::default();
    let mut inbound = BytesMut::with_capacity(64 * 1024);
    let mut outbound = BytesMut::with_capacity(64 * 1024);
    loop {
        if stream.read_buf(&mut inbound).await? == 0 {
            return Ok(());
        }
        while let Some(req) = codec
            .decode(&mut inbound)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?
        {
            if req.is_oneway() || req.is_response() {
                continue;
            }
            let answer =
                RemotingCommand::response_to(&req, response::SUCCESS).with_body(body.clone());
            encode_frame(&answer, &mut outbound);
        }
        stream.write_all(&outbound).await?;
        outbound.clear();
    }
}
