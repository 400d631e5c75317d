//! Hostile peers against the real binary: every case asserts exactly what the offender gets
//! (a response with its code and remark, or a silently closed connection) and that another
//! client is served normally right afterwards, with the registry intact.

mod support;
use support::MQNAMESRV;

use std::io::Write;
use std::time::{Duration, Instant};

use bytes::Bytes;
use flate2::write::ZlibEncoder;
use flate2::Compression;
use namesrv_testkit::*;
use rocketmq_wire::body::{TopicList, TopicRouteData};
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::frame::decode_payload;
use rocketmq_wire::{RemotingCommand, SerializeType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The broker whose route must survive every attack, and the topic only it serves.
const KEEPER_ADDR: &str = "10.9.9.9:10911";
const KEEPER_TOPIC: &str = "KeeperTopic";

struct Target {
    server: Server,
    /// Heartbeats the keeper broker on its connection (closing it would unregister the broker),
    /// so that neither the idle limit nor expiry removes it, however long a case takes.
    keep_alive: tokio::task::JoinHandle<()>,
}

impl Drop for Target {
    fn drop(&mut self) {
        self.keep_alive.abort();
    }
}

impl Target {
    async fn start(props: &str) -> Self {
        let server = MQNAMESRV.start_with(props);
        let keeper = server.client().await;
        let broker = Broker::new("HostileCluster", "keeper", 0, KEEPER_ADDR);
        assert_eq!(
            broker
                .register(&keeper, &[(KEEPER_TOPIC, 6), ("TBW102", 7)], 1)
                .await
                .code,
            response::SUCCESS
        );
        let keep_alive = tokio::spawn(async move {
            loop {
                let heartbeat = RemotingCommand::request(request::BROKER_HEARTBEAT)
                    .with_ext("clusterName", "HostileCluster")
                    .with_ext("brokerName", "keeper")
                    .with_ext("brokerAddr", KEEPER_ADDR);
                let _ = call_result(&keeper, heartbeat).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Target { server, keep_alive }
    }

    /// A new client gets the keeper's route: the server still accepts, answers, and its
    /// registry was not damaged by `case`.
    async fn serves_others(&self, case: &str) {
        let client = Client::connect(self.server.addr.as_str())
            .await
            .unwrap_or_else(|e| panic!("{case}: cannot connect afterwards: {e}"));
        let resp = call_result(&client, route_request(KEEPER_TOPIC, 479))
            .await
            .unwrap_or_else(|e| panic!("{case}: no answer afterwards: {e}"));
        assert_eq!(resp.code, response::SUCCESS, "{case}: route lost");
        let route = TopicRouteData::decode(resp.body.as_deref().unwrap()).unwrap();
        let masters: Vec<&str> = route
            .broker_datas
            .iter()
            .filter_map(|bd| bd.broker_addrs.get(&0).map(String::as_str))
            .collect();
        assert_eq!(masters, [KEEPER_ADDR], "{case}: route changed");
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(&self.server.addr).await.unwrap()
    }
}

#[derive(Debug)]
enum Outcome {
    Closed,
    Answered(RemotingCommand),
}

/// Reads the next frame, or notices the close. Errors on our side (a reset because the server
/// closed while we were still writing) also count as closed.
async fn next_outcome(stream: &mut TcpStream, limit: Duration) -> Outcome {
    let mut len = [0u8; 4];
    match tokio::time::timeout(limit, stream.read_exact(&mut len)).await {
        Err(_) => panic!("neither an answer nor a close within {limit:?}"),
        Ok(Err(_)) => return Outcome::Closed,
        Ok(Ok(_)) => {}
    }
    let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut payload).await.unwrap();
    Outcome::Answered(decode_payload(Bytes::from(payload)).unwrap())
}

async fn send_raw(target: &Target, bytes: &[u8]) -> Outcome {
    send_raw_within(target, bytes, TIMEOUT).await
}

/// For inputs that take the (debug-built) server a while to chew through.
async fn send_raw_within(target: &Target, bytes: &[u8], limit: Duration) -> Outcome {
    let mut stream = target.connect().await;
    // The server may close before reading everything; what it did is judged by the read.
    let _ = stream.write_all(bytes).await;
    next_outcome(&mut stream, limit).await
}

const SLOW: Duration = Duration::from_secs(60);

fn expect_closed(case: &str, outcome: Outcome) {
    assert!(
        matches!(outcome, Outcome::Closed),
        "{case}: expected a silent close, got {outcome:?}"
    );
}

fn expect_answer(case: &str, outcome: Outcome, code: i32, remark: Option<&str>) -> RemotingCommand {
    let Outcome::Answered(resp) = outcome else {
        panic!("{case}: expected code {code}, connection closed");
    };
    assert_eq!(resp.code, code, "{case}: code (remark {:?})", resp.remark);
    if let Some(remark) = remark {
        assert_eq!(resp.remark.as_deref(), Some(remark), "{case}: remark");
    }
    resp
}

fn registration(name: &'static str, addr: &str) -> RemotingCommand {
    Broker::new("HostileCluster", name, 0, addr).register_request(&BASE_TOPICS, dv(1, 0))
}

/// Frames the decoder must refuse: each closes its own connection without an answer.
#[tokio::test]
async fn malformed_frames_close_silently() {
    let t = Target::start("").await;
    let get = br#"{"code":106,"flag":0,"opaque":1}"#;
    let huge_header_len = raw_frame(4 + get.len() as i32, 0, 0xFF_FFFF, get);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "length one past the 16 MiB cap",
            raw_frame(16 * 1024 * 1024 - 3, 0, 0, b""),
        ),
        ("length -1", raw_frame(-1, 0, 0, b"")),
        ("length i32::MIN", raw_frame(i32::MIN, 0, 0, b"")),
        ("length 0", vec![0, 0, 0, 0]),
        ("length 3", vec![0, 0, 0, 3, 0, 0, 0]),
        ("header length past the frame", huge_header_len),
        ("empty JSON header", frame_with_header(0, b"", b"")),
        ("unknown serialize type 2", frame_with_header(2, get, b"")),
        (
            "HTTP request on the remoting port",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "JSON header with invalid UTF-8",
            frame_with_header(0, b"{\"code\":106,\"remark\":\"\xff\xfe\"}", b""),
        ),
        (
            "JSON code beyond i32",
            frame_with_header(0, br#"{"code":99999999999}"#, b""),
        ),
        (
            "JSON header nested 100000 deep",
            frame_with_header(0, "[".repeat(100_000).as_bytes(), b""),
        ),
        (
            "JSON extFields nested 100000 deep",
            frame_with_header(
                0,
                format!(
                    r#"{{"code":106,"extFields":{{"a":{}}}}}"#,
                    "[".repeat(100_000)
                )
                .as_bytes(),
                b"",
            ),
        ),
        (
            "binary header shorter than its fixed part",
            frame_with_header(1, &[0, 106, 0], b""),
        ),
        (
            "binary remark length i32::MAX",
            frame_with_header(
                1,
                &{
                    let mut h = binary_header(106, 0, b"");
                    h[13..17].copy_from_slice(&i32::MAX.to_be_bytes());
                    h
                },
                b"",
            ),
        ),
        (
            "binary ext length past the header",
            frame_with_header(1, &binary_header(106, 1 << 30, b""), b""),
        ),
        (
            "binary ext length negative",
            frame_with_header(1, &binary_header(106, -8, b""), b""),
        ),
        (
            "binary ext key length negative",
            frame_with_header(1, &binary_header(106, 6, &[0xff, 0xff, 0, 0, 0, 0]), b""),
        ),
        (
            "binary ext value with invalid UTF-8",
            frame_with_header(
                1,
                &{
                    let e = binary_entry(b"topic", b"\xc3\x28");
                    binary_header(105, e.len() as i32, &e)
                },
                b"",
            ),
        ),
    ];
    for (case, bytes) in &cases {
        expect_closed(case, send_raw(&t, bytes).await);
        t.serves_others(case).await;
    }
}

/// The largest frame Java accepts is still served; nothing about its size is refused.
#[tokio::test]
async fn a_frame_exactly_at_the_cap_is_served() {
    let t = Target::start("").await;
    let header = br#"{"code":106,"flag":0,"opaque":4}"#;
    let body = vec![b'x'; 16 * 1024 * 1024 - 8 - header.len()];
    let bytes = frame_with_header(0, header, &body);
    assert_eq!(bytes.len(), 16 * 1024 * 1024);
    let resp = expect_answer("frame of 16 MiB", send_raw(&t, &bytes).await, 0, None);
    assert_eq!(resp.opaque, 4);
    t.serves_others("frame of 16 MiB").await;
}

/// A connection that ends in the middle of a frame is closed without an answer.
#[tokio::test]
async fn truncated_frame_then_eof_closes() {
    let t = Target::start("").await;
    let mut stream = t.connect().await;
    let full = frame(&RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO));
    stream.write_all(&full[..full.len() / 2]).await.unwrap();
    stream.shutdown().await.unwrap();
    expect_closed(
        "half a frame then EOF",
        next_outcome(&mut stream, TIMEOUT).await,
    );
    t.serves_others("half a frame then EOF").await;
}

/// Requests that decode but make no sense: each answered with Java's code and a clear remark.
#[tokio::test]
async fn bad_requests_get_exact_errors() {
    let t = Target::start("").await;
    let mut no_name = registration("b1", "10.0.0.1:1");
    no_name.ext_fields.as_mut().unwrap().remove("brokerName");
    let mut abc = registration("b2", "10.0.0.2:1");
    abc.ext_fields
        .as_mut()
        .unwrap()
        .insert("brokerId".into(), "abc".into());
    let mut crc = registration("b3", "10.0.0.3:1");
    crc.ext_fields
        .as_mut()
        .unwrap()
        .insert("bodyCrc32".into(), "12345".into());
    let mut crc_no_body = registration("b4", "10.0.0.4:1");
    crc_no_body.body = None;
    let negative_version = registration("b5", "10.0.0.5:1").with_version(-1);
    let not_json = registration("b6", "10.0.0.6:1").with_ext("bodyCrc32", 0);
    let not_json = RemotingCommand {
        body: Some(Bytes::from_static(b"\xff\xfe not json")),
        ..not_json
    };
    let deep_body = RemotingCommand {
        body: Some(Bytes::from("[".repeat(100_000))),
        ..registration("b7", "10.0.0.7:1").with_ext("bodyCrc32", 0)
    };
    let cases: Vec<(&str, RemotingCommand, i32, &str)> = vec![
        (
            "register without brokerName",
            no_name,
            response::SYSTEM_ERROR,
            "missing header field brokerName",
        ),
        (
            "register with brokerId=abc",
            abc,
            response::SYSTEM_ERROR,
            "header field brokerId is not a number: abc",
        ),
        (
            "register with a wrong CRC",
            crc,
            response::SYSTEM_ERROR,
            "crc32 not match",
        ),
        (
            "register with a CRC but no body",
            crc_no_body,
            response::SYSTEM_ERROR,
            "crc32 not match",
        ),
        (
            "register with a negative version",
            negative_version,
            response::SYSTEM_ERROR,
            "invalid version -1",
        ),
        (
            "register with a body that is not JSON",
            not_json,
            response::SYSTEM_ERROR,
            "invalid JSON at byte 2: invalid UTF-8",
        ),
        (
            "register with a body nested 100000 deep",
            deep_body,
            response::SYSTEM_ERROR,
            "invalid JSON at byte 129: nesting too deep",
        ),
        (
            "PUT_KV_CONFIG without key",
            RemotingCommand::request(request::PUT_KV_CONFIG).with_ext("namespace", "ns"),
            response::SYSTEM_ERROR,
            "namespace or key is null",
        ),
        (
            "UNREGISTER_BROKER with brokerId=1.5",
            Broker::new("HostileCluster", "keeper", 0, KEEPER_ADDR)
                .unregister_request()
                .with_ext("brokerId", "1.5"),
            response::SYSTEM_ERROR,
            "header field brokerId is not a number: 1.5",
        ),
        (
            "unknown request code",
            RemotingCommand::request(9999),
            response::REQUEST_CODE_NOT_SUPPORTED,
            " request type 9999 not supported",
        ),
        (
            "config update of a blacklisted key",
            RemotingCommand::request(request::UPDATE_NAMESRV_CONFIG)
                .with_body(&b"kvConfigPath=/tmp/elsewhere\n"[..]),
            response::NO_PERMISSION,
            "Can not update config in black list.",
        ),
    ];
    for (case, cmd, code, remark) in cases {
        expect_answer(case, send_raw(&t, &frame(&cmd)).await, code, Some(remark));
        t.serves_others(case).await;
    }
    // None of the refused registrations may have left a trace.
    let client = t.server.client().await;
    let info = body_text(
        &call(
            &client,
            RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
        )
        .await,
    );
    for name in ["b1", "b2", "b3", "b4", "b5", "b6", "b7"] {
        assert!(
            !info.contains(&format!("\"{name}\"")),
            "{name} registered: {info}"
        );
    }
}

/// Frames the server must ignore without closing: a stray response, and errors in oneway
/// requests. The next request on the same connection is answered first.
#[tokio::test]
async fn unanswerable_frames_are_dropped_silently() {
    let t = Target::start("").await;
    let mut stray = RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO);
    stray.flag = 1;
    let mut bad_oneway = registration("ow", "10.0.0.8:1")
        .with_ext("brokerId", "abc")
        .oneway();
    bad_oneway.opaque = 77;
    for (case, cmd) in [
        ("stray response", stray),
        ("oneway with brokerId=abc", bad_oneway),
    ] {
        let mut stream = t.connect().await;
        let mut probe = RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO);
        probe.opaque = 4242;
        stream
            .write_all(&[frame(&cmd), frame(&probe)].concat())
            .await
            .unwrap();
        let resp = expect_answer(case, next_outcome(&mut stream, TIMEOUT).await, 0, None);
        assert_eq!(resp.opaque, 4242, "{case}: answered the unanswerable frame");
        t.serves_others(case).await;
    }
}

/// Headers that are large but legal are served; the server does not choke on them.
#[tokio::test]
async fn huge_but_legal_headers_are_served() {
    let t = Target::start("").await;
    // 15 MiB of JSON extFields (the header length field allows just under 16 MiB).
    let mut json = String::from(
        r#"{"code":105,"flag":0,"opaque":9,"version":479,"extFields":{"topic":"KeeperTopic""#,
    );
    let mut i = 0;
    while json.len() < 15 * 1024 * 1024 {
        json.push_str(&format!(r#","k{i}":"{i}""#));
        i += 1;
    }
    json.push_str("}}");
    let resp = expect_answer(
        "15 MiB JSON header",
        send_raw_within(&t, &frame_with_header(0, json.as_bytes(), b""), SLOW).await,
        response::SUCCESS,
        None,
    );
    assert_eq!(resp.opaque, 9);
    t.serves_others("15 MiB JSON header").await;

    // 600,000 binary ext entries, the real one last.
    let mut ext = Vec::new();
    for i in 0..600_000 {
        ext.extend(binary_entry(format!("k{i}").as_bytes(), b"v"));
    }
    ext.extend(binary_entry(b"topic", KEEPER_TOPIC.as_bytes()));
    let header = binary_header(105, ext.len() as i32, &ext);
    let resp = expect_answer(
        "binary header with 600,000 ext entries",
        send_raw_within(&t, &frame_with_header(1, &header, b""), SLOW).await,
        response::SUCCESS,
        None,
    );
    assert!(TopicRouteData::decode(resp.body.as_deref().unwrap()).is_ok());
    t.serves_others("binary header with 600,000 ext entries")
        .await;
}

/// Topic names nobody would choose still round-trip exactly through registration, routes and
/// topic lists (the writer must escape them), or get Java's answer.
#[tokio::test]
async fn absurd_topic_names() {
    let t = Target::start("").await;
    let huge = "T".repeat(1024 * 1024);
    let control = "ctl\u{0}\u{1}\n\r\t\"\\\u{7f}\u{85}\u{2028}é😀/";
    let broker = Broker::new("HostileCluster", "absurd", 0, "10.0.0.9:1");
    let client = t.server.client().await;
    let resp = call(
        &client,
        broker.register_request(&[("TopicTest", 6), (&huge, 6), (control, 6)], dv(1, 0)),
    )
    .await;
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    for (case, topic) in [
        ("1 MiB topic name", huge.as_str()),
        ("control characters", control),
    ] {
        for version in [479, 317] {
            let resp = call(&client, route_request(topic, version)).await;
            assert_eq!(resp.code, response::SUCCESS, "{case} v{version}");
            let route = TopicRouteData::decode(resp.body.as_deref().unwrap())
                .unwrap_or_else(|e| panic!("{case} v{version}: route body unreadable: {e}"));
            assert_eq!(route.queue_datas[0].broker_name, "absurd", "{case}");
        }
        t.serves_others(case).await;
    }
    let list = call(
        &client,
        RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
    )
    .await;
    let list = TopicList::decode(list.body.as_deref().unwrap()).unwrap();
    assert!(
        list.topic_list.iter().any(|t| t == control),
        "control-char topic mangled"
    );
    assert!(list.topic_list.contains(&huge));

    // Empty: JSON keeps "", so the lookup is for the empty topic; binary turns it into null,
    // which Java reports as the topic "null".
    let empty = call(&client, route_request("", 479)).await;
    assert_eq!(empty.code, response::TOPIC_NOT_EXIST);
    assert_eq!(
        empty.remark.as_deref(),
        Some("No topic route info in name server for the topic: \nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")
    );
    let mut binary_empty = route_request("", 479);
    binary_empty.ser_type = SerializeType::RocketMq;
    let resp = expect_answer(
        "binary empty topic",
        send_raw(&t, &frame(&binary_empty)).await,
        response::TOPIC_NOT_EXIST,
        Some("No topic route info in name server for the topic: null\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."),
    );
    assert_eq!(resp.ser_type, SerializeType::Json);
    t.serves_others("empty topic").await;
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut enc = ZlibEncoder::new(Vec::new(), Compression::best());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn compressed_registration(name: &'static str, body: Vec<u8>) -> RemotingCommand {
    let crc = rocketmq_wire::body_crc32(&body);
    RemotingCommand {
        body: Some(Bytes::from(body)),
        ..registration(name, "10.0.0.10:1")
            .with_ext("compressed", true)
            .with_ext("bodyCrc32", crc)
    }
}

/// Sends a compressed register body inflating to 64 MiB of zeros on each of `count`
/// connections at once; each must be refused once the inflation bound is hit. Returns how far
/// the server's peak resident memory rose.
async fn bombs(t: &Target, count: usize) -> u64 {
    let bomb = zlib(&vec![0u8; 1 << 26]);
    assert!(bomb.len() < 2 * 1024 * 1024);
    let before = t.server.memory_kib("VmHWM");
    let sends: Vec<_> = (0..count)
        .map(|i| {
            let bytes = frame(&compressed_registration("bomb", bomb.clone()));
            let addr = t.server.addr.clone();
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(addr).await.unwrap();
                stream.write_all(&bytes).await.unwrap();
                let outcome = next_outcome(&mut stream, Duration::from_secs(120)).await;
                let resp =
                    expect_answer(&format!("bomb {i}"), outcome, response::SYSTEM_ERROR, None);
                let remark = resp.remark.unwrap_or_default();
                assert!(remark.starts_with("compressed body"), "bomb {i}: {remark}");
            })
        })
        .collect();
    for send in sends {
        send.await.unwrap();
    }
    t.server.memory_kib("VmHWM").saturating_sub(before)
}

/// With a 2 MiB frame cap inflation stops at a few times that (the default cap gives the same
/// behaviour, just slower to reach in a debug build).
const SMALL_FRAMES: &str = "maxFrameLength=2097152";

/// One bomb is refused with an error, and costs the server a bounded amount of memory.
#[tokio::test]
async fn decompression_bomb_is_refused() {
    let t = Target::start(SMALL_FRAMES).await;
    let growth = bombs(&t, 1).await;
    assert!(
        growth < 64 * 1024,
        "one bomb raised the peak by {growth} KiB"
    );
    t.serves_others("decompression bomb").await;
}

/// Concurrent bombs must not multiply: memory for inflation has to be bounded for the server
/// as a whole, not per request, or a handful of 1 MiB frames takes gigabytes.
#[tokio::test]
async fn concurrent_decompression_bombs_stay_bounded() {
    let t = Target::start(SMALL_FRAMES).await;
    let one = bombs(&t, 1).await.max(16 * 1024);
    let eight = bombs(&t, 8).await;
    assert!(
        eight < 3 * one,
        "one bomb raised the peak by {one} KiB, eight at once by {eight} KiB more"
    );
    t.serves_others("concurrent decompression bombs").await;
}

/// Bytes dribbled in slower than a frame completes do not keep a connection open: it is closed
/// once idle (serverChannelMaxIdleTimeSeconds=1), without an answer.
#[tokio::test]
async fn trickled_then_abandoned_frame_is_closed_when_idle() {
    let t = Target::start("serverChannelMaxIdleTimeSeconds=1").await;
    let mut stream = t.connect().await;
    let connected = Instant::now();
    let full = frame(&RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO));
    for byte in &full[..12] {
        stream.write_all(&[*byte]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let abandoned = Instant::now();
    expect_closed(
        "trickled frame",
        next_outcome(&mut stream, Duration::from_secs(5)).await,
    );
    assert!(
        connected.elapsed() >= Duration::from_millis(900),
        "closed before the idle limit"
    );
    assert!(
        abandoned.elapsed() < Duration::from_secs(3),
        "closed {:?} after the last byte",
        abandoned.elapsed()
    );
    t.serves_others("trickled frame").await;
}

/// Puts a 256 KiB order config so that every REGISTER_BROKER and GET_KVLIST_BY_NAMESPACE
/// answer carries 256 KiB: responses, not requests, are what a non-reading client makes the
/// server hold.
async fn big_order_config(t: &Target) {
    let client = t.server.client().await;
    let put = RemotingCommand::request(request::PUT_KV_CONFIG)
        .with_ext("namespace", "ORDER_TOPIC_CONFIG")
        .with_ext("key", "big")
        .with_ext("value", "x".repeat(256 * 1024));
    assert_eq!(call(&client, put).await.code, response::SUCCESS);
}

/// Floods `requests` copies of `cmd` on one connection that never reads, for `duration`,
/// then reports how much the server's resident memory grew, while checking that others are
/// served throughout.
async fn flood_without_reading(t: &Target, cmd: RemotingCommand, requests: usize) -> u64 {
    let before = t.server.memory_kib("VmRSS");
    let stream = std::net::TcpStream::connect(&t.server.addr).unwrap();
    let bytes = frame(&cmd).repeat(requests);
    // The server may stop reading: a blocking writer thread that we simply abandon.
    let writer = std::thread::spawn(move || {
        let mut stream = stream;
        let _ = stream.write_all(&bytes);
        stream
    });
    let mut peak = before;
    for round in 0..20 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        t.serves_others(&format!("flood round {round}")).await;
        peak = peak.max(t.server.memory_kib("VmRSS"));
    }
    drop(writer);
    peak.saturating_sub(before)
}

/// A client that only sends: answers served inline queue up to a fixed count per connection,
/// then the server stops reading from it.
#[tokio::test]
async fn non_reading_client_of_inline_requests_is_bounded() {
    let t = Target::start("").await;
    big_order_config(&t).await;
    let list = RemotingCommand::request(request::GET_KVLIST_BY_NAMESPACE)
        .with_ext("namespace", "ORDER_TOPIC_CONFIG");
    let growth = flood_without_reading(&t, list, 3000).await;
    assert!(growth < 192 * 1024, "server grew by {growth} KiB");
}

/// The same for requests served off the reader (registrations): their answers must be bounded
/// too, or 3000 small requests make the server hold 3000 × 256 KiB.
#[tokio::test]
async fn non_reading_client_of_blocking_requests_is_bounded() {
    let t = Target::start("").await;
    big_order_config(&t).await;
    let growth = flood_without_reading(&t, registration("flood", "10.0.0.11:1"), 3000).await;
    // The answers of the requests in flight plus one write batch: a few MiB, not hundreds.
    assert!(growth < 48 * 1024, "server grew by {growth} KiB");
}

/// Thousands of connections at once are all accepted and answered, sized below the soft limit
/// on open files (client and server ends both live in this process tree).
#[tokio::test]
async fn thousands_of_connections_at_once() {
    let t = Target::start("").await;
    let count = 3000.min((open_files_soft_limit().saturating_sub(200) / 2) as usize);
    assert!(count >= 400, "open-files limit too low to test: {count}");
    let addr = t.server.addr.clone();
    let conns =
        futures::future::join_all((0..count).map(|_| TcpStream::connect(addr.clone()))).await;
    let mut streams: Vec<TcpStream> = conns.into_iter().map(Result::unwrap).collect();
    let probe = frame(&RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO));
    for s in &mut streams {
        s.write_all(&probe).await.unwrap();
    }
    let answers = futures::future::join_all(
        streams
            .iter_mut()
            .map(|s| next_outcome(s, Duration::from_secs(30))),
    )
    .await;
    let answered = answers
        .iter()
        .filter(|o| matches!(o, Outcome::Answered(r) if r.code == response::SUCCESS))
        .count();
    assert_eq!(answered, count, "of {count} connections");
    t.serves_others("thousands of connections").await;
    drop(streams);
    t.serves_others("thousands of connections closed").await;
}

/// A config value with an escaped line break must not plant a blacklisted key in the persisted
/// config file, where the next start would read it.
#[tokio::test]
async fn config_values_cannot_smuggle_blacklisted_keys() {
    let t = Target::start("").await;
    let client = t.server.client().await;
    let smuggle = RemotingCommand::request(request::UPDATE_NAMESRV_CONFIG)
        .with_body(&b"productEnvName=center\\nkvConfigPath=/tmp/smuggled-kv.json\n"[..]);
    let resp = call(&client, smuggle).await;
    assert!(
        matches!(
            resp.code,
            response::SUCCESS | response::NO_PERMISSION | response::SYSTEM_ERROR
        ),
        "{resp:?}"
    );
    let persisted = std::fs::read_to_string(&t.server.config).unwrap();
    let reread = namesrv::config::parse_properties(persisted.as_bytes()).unwrap();
    let kv_paths: Vec<&str> = reread
        .iter()
        .filter(|(k, _)| k == "kvConfigPath")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        kv_paths,
        vec![t
            .server
            .home
            .join("namesrv/kvConfig.json")
            .to_str()
            .unwrap()],
        "persisted config:\n{persisted}"
    );
    t.serves_others("config smuggling").await;
}
