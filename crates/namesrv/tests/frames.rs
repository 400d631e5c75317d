//! The wire itself: both header forms, exact response headers, pipelining, and malformed
//! frames that must close only their own connection.

mod support;
use support::MQNAMESRV;

use std::time::Duration;

use namesrv_testkit::*;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::frame::decode_payload;
use rocketmq_wire::{RemotingCommand, SerializeType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends raw bytes and reports whether the server closed the connection without answering.
async fn closes_silently(server: &Server, bytes: &[u8]) -> bool {
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    closed_within(&mut stream, TIMEOUT).await
}

#[tokio::test]
async fn response_headers_are_exactly_javas() {
    let server = MQNAMESRV.start();
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();
    let mut get = RemotingCommand::request(request::GET_KV_CONFIG)
        .with_ext("namespace", "ns")
        .with_ext("key", "k");
    get.opaque = 5;
    stream.write_all(&frame(&get)).await.unwrap();
    let payload = read_frame(&mut stream).await.unwrap();
    let header_len = u32::from_be_bytes(payload[..4].try_into().unwrap()) as usize;
    assert_eq!(payload[0], 0, "JSON serialize type");
    assert_eq!(
        std::str::from_utf8(&payload[4..4 + header_len]).unwrap(),
        r#"{"code":22,"extFields":{},"flag":1,"language":"JAVA","opaque":5,"remark":"No config item, Namespace: ns Key: k","serializeTypeCurrentRPC":"JSON","version":479}"#
    );
    let mut info = RemotingCommand::request(request::GET_NAMESRV_CONFIG);
    info.opaque = 6;
    stream.write_all(&frame(&info)).await.unwrap();
    let payload = read_frame(&mut stream).await.unwrap();
    let header_len = u32::from_be_bytes(payload[..4].try_into().unwrap()) as usize;
    assert_eq!(
        std::str::from_utf8(&payload[4..4 + header_len]).unwrap(),
        r#"{"code":0,"flag":1,"language":"JAVA","opaque":6,"serializeTypeCurrentRPC":"JSON","version":479}"#
    );
}

#[tokio::test]
async fn binary_and_go_style_requests_are_understood() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    Broker::new("c", "b", 0, "127.0.0.1:10911")
        .register(&client, &BASE_TOPICS, 1)
        .await;
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();

    // The reference's binary sample: GET_ROUTEINFO_BY_TOPIC, opaque 7, version 479.
    let sample: [u8; 49] = [
        0x00, 0x00, 0x00, 0x2d, 0x01, 0x00, 0x00, 0x29, 0x00, 0x69, 0x00, 0x01, 0xdf, 0x00, 0x00,
        0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00,
        0x05, 0x74, 0x6f, 0x70, 0x69, 0x63, 0x00, 0x00, 0x00, 0x09, 0x54, 0x6f, 0x70, 0x69, 0x63,
        0x54, 0x65, 0x73, 0x74,
    ];
    stream.write_all(&sample).await.unwrap();
    let resp = decode_payload(read_frame(&mut stream).await.unwrap().into()).unwrap();
    assert_eq!(
        resp.ser_type,
        SerializeType::Json,
        "responses are JSON whatever the request"
    );
    assert_eq!(
        (resp.code, resp.opaque, resp.flag),
        (response::SUCCESS, 7, 1)
    );
    assert!(body_text(&resp).contains(r#""brokerAddrs":{"0":"127.0.0.1:10911"}"#));

    // The Go client's header: struct order, remark always present, version 317.
    let go = br#"{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"TopicTest"}}"#;
    let mut frame = Vec::new();
    frame.extend_from_slice(&((4 + go.len()) as u32).to_be_bytes());
    frame.extend_from_slice(&(go.len() as u32).to_be_bytes());
    frame.extend_from_slice(go);
    stream.write_all(&frame).await.unwrap();
    let resp = decode_payload(read_frame(&mut stream).await.unwrap().into()).unwrap();
    assert_eq!(resp.opaque, 1);
    assert!(
        body_text(&resp).contains(r#""brokerAddrs":{0:"127.0.0.1:10911"}"#),
        "old clients get unquoted numeric keys"
    );
}

#[tokio::test]
async fn pipelined_requests_are_each_answered_with_their_opaque() {
    let server = MQNAMESRV.start();
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();
    let mut burst = Vec::new();
    for opaque in 1..=200 {
        let mut cmd = RemotingCommand::request(if opaque % 2 == 0 {
            request::GET_BROKER_CLUSTER_INFO
        } else {
            request::GET_ROUTEINFO_BY_TOPIC
        })
        .with_ext("topic", "none");
        cmd.opaque = opaque;
        burst.extend_from_slice(&frame(&cmd));
    }
    stream.write_all(&burst).await.unwrap();
    let mut seen = Vec::new();
    for _ in 1..=200 {
        let resp = decode_payload(read_frame(&mut stream).await.unwrap().into()).unwrap();
        assert!(resp.is_response());
        let expected = if resp.opaque % 2 == 0 {
            response::SUCCESS
        } else {
            response::TOPIC_NOT_EXIST
        };
        assert_eq!(resp.code, expected);
        seen.push(resp.opaque);
    }
    seen.sort();
    assert_eq!(seen, (1..=200).collect::<Vec<_>>());
}

#[tokio::test]
async fn malformed_frames_close_only_their_connection() {
    let server = MQNAMESRV.start();
    let survivor = server.client().await;
    let header = br#"{"code":105}"#;
    let with_len = |frame_len: i32, ori: u32, rest: &[u8]| {
        let mut v = frame_len.to_be_bytes().to_vec();
        v.extend_from_slice(&ori.to_be_bytes());
        v.extend_from_slice(rest);
        v
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("negative length", with_len(-5, 0, b"")),
        ("length below 4", with_len(2, 0, b"")),
        ("oversize length", with_len(16 * 1024 * 1024, 0, b"")),
        ("header past frame", with_len(4 + 12, 100, header)),
        (
            "unknown serialize type",
            with_len(4 + 12, (7 << 24) | 12, header),
        ),
        ("broken JSON header", with_len(4 + 5, 5, b"{\"cod")),
        ("JSON header not an object", with_len(4 + 2, 2, b"[]")),
        (
            "binary header truncated",
            with_len(4 + 3, (1 << 24) | 3, b"\x00\x69\x00"),
        ),
        (
            "binary remark past header",
            with_len(
                4 + 21,
                (1 << 24) | 21,
                &[
                    0, 105, 0, 1, 223, 0, 0, 0, 1, 0, 0, 0, 0, 0x7f, 0, 0, 0, 0, 0, 0, 0,
                ],
            ),
        ),
        (
            "invalid UTF-8 header",
            with_len(4 + 4, 4, b"\xff\xfe\xfd\xfc"),
        ),
    ];
    for (name, bytes) in &cases {
        assert!(
            closes_silently(&server, bytes).await,
            "{name}: connection not closed"
        );
        let still = call(
            &survivor,
            RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
        )
        .await;
        assert_eq!(
            still.code,
            response::SUCCESS,
            "{name}: server stopped serving others"
        );
    }
}

#[tokio::test]
async fn idle_connections_are_closed() {
    let server = MQNAMESRV.start_with("serverChannelMaxIdleTimeSeconds=1");
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();
    // Half a frame, then silence.
    stream.write_all(&[0, 0, 0, 50, 0]).await.unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .expect("idle connection was not closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn proxy_protocol_headers_are_consumed() {
    let server = MQNAMESRV.start();
    let mut get = RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO);
    get.opaque = 3;
    let mut v2 = vec![
        0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0, 12,
    ];
    v2.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0x04, 0x57, 0x08, 0xAE]);
    for header in [b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n".to_vec(), v2] {
        let mut stream = TcpStream::connect(&server.addr).await.unwrap();
        let mut bytes = header;
        bytes.extend_from_slice(&frame(&get));
        stream.write_all(&bytes).await.unwrap();
        let resp = decode_payload(read_frame(&mut stream).await.unwrap().into()).unwrap();
        assert_eq!((resp.code, resp.opaque), (response::SUCCESS, 3));
    }
}
