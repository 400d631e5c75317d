//! What each fuzz target checks, one function per target. The corpus replay test
//! (`crates/namesrv/tests/fuzz_corpus.rs`) includes this file, so that CI runs the committed
//! inputs through exactly the code the fuzzer ran.

use std::io::Write;
use std::path::Path;

use bytes::{Bytes, BytesMut};
use flate2::write::ZlibEncoder;
use flate2::Compression;
use rocketmq_wire::body::{
    ClusterInfo, DataVersion, KvTable, RegisterBrokerBody, TableRead, TopicList,
    TopicQueueMappingInfo, TopicRouteData,
};
use rocketmq_wire::codes::LanguageCode;
use rocketmq_wire::frame::{decode_payload, encode_frame, RemotingCodec};
use rocketmq_wire::header_codec::{decode_binary, decode_json, encode_binary, encode_json};
use rocketmq_wire::{RemotingCommand, SerializeType};
use tokio_util::codec::Decoder;

/// A frame cap far below the real 16 MiB, so that short inputs reach the too-long paths.
pub const FRAME_CAP: usize = 64 * 1024;
/// The inflation bound handed to the compressed register decoder.
pub const INFLATE_CAP: usize = 1 << 20;

/// What a target does with one input; it panics on a finding.
pub type Check = fn(&[u8]);

/// Every target by name, as its corpus directory is named.
pub const TARGETS: &[(&str, Check)] = &[
    ("frame", frame),
    ("header_json", header_json),
    ("header_binary", header_binary),
    ("register_json", register_json),
    ("register_compressed", register_compressed),
    ("bodies", bodies),
    ("properties", properties),
];

/// The same command after re-encoding, up to what the binary form cannot carry: it writes an
/// unknown language as JAVA, and an ext map whose entries were all dropped (Java reads
/// zero-length strings as null) as no map, as Java does.
fn comparable(mut cmd: RemotingCommand) -> RemotingCommand {
    if cmd.ser_type == SerializeType::RocketMq {
        cmd.language.get_or_insert(LanguageCode::JAVA);
        if cmd.ext_fields.as_ref().is_some_and(|e| e.is_empty()) {
            cmd.ext_fields = None;
        }
    }
    cmd
}

/// Whatever the server decodes it must be able to write back unchanged: responses echo
/// request fields, and the writer is the same one that produces every response header.
fn round_trips(cmd: &RemotingCommand) {
    let mut out = BytesMut::new();
    encode_frame(cmd, &mut out);
    let back = RemotingCodec::new(usize::MAX)
        .decode(&mut out)
        .expect("a re-encoded frame decodes")
        .expect("a re-encoded frame is complete");
    assert_eq!(comparable(back), comparable(cmd.clone()));
}

pub fn frame(data: &[u8]) {
    let mut codec = RemotingCodec::new(FRAME_CAP);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(cmd)) = codec.decode(&mut buf) {
        round_trips(&cmd);
    }
    if let Ok(cmd) = decode_payload(Bytes::copy_from_slice(data)) {
        round_trips(&cmd);
    }
}

pub fn header_json(data: &[u8]) {
    if let Ok(cmd) = decode_json(data) {
        let mut out = BytesMut::new();
        encode_json(&cmd, &mut out);
        assert_eq!(decode_json(&out).expect("re-encoded JSON header"), cmd);
    }
}

pub fn header_binary(data: &[u8]) {
    if let Ok(cmd) = decode_binary(data) {
        let mut out = BytesMut::new();
        encode_binary(&cmd, &mut out);
        let back = decode_binary(&out).expect("re-encoded binary header");
        assert_eq!(comparable(back), comparable(cmd));
    }
}

/// Both body forms a JSON register can take: a 5.x RegisterBrokerBody and, below protocol
/// version 37, the bare topic-config wrapper.
pub fn register_json(data: &[u8]) {
    for version in [479, 36] {
        if let Ok(body) = RegisterBrokerBody::decode(Some(data), version, false, INFLATE_CAP) {
            body.encode_json();
        }
    }
    // Read as a difference: whatever it accepts, the whole reading reads alike, and the body
    // read against its own index decodes nothing.
    if let Some(Ok(read)) = TableRead::read(data, None) {
        let whole = RegisterBrokerBody::decode(Some(data), 479, false, INFLATE_CAP);
        assert_eq!(whole.as_ref().ok(), Some(&read.body));
        if let Some(index) = &read.index {
            let again = TableRead::read(data, Some(index));
            let again = again.expect("read before").expect("read before");
            assert!(again.body.wrapper.topic_configs.is_empty());
            assert_eq!(again.listed, read.listed);
        }
    }
}

/// The input is tried both as the zlib stream itself (bombs, broken streams) and as the
/// inflated content, compressed here, so that the fuzzer can also shape the length-prefixed
/// sections behind the zlib layer; with and without the V5_0_0 mapping section.
pub fn register_compressed(data: &[u8]) {
    let mut enc = ZlibEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(data).expect("writing to a Vec cannot fail");
    let zlib = enc.finish().expect("writing to a Vec cannot fail");
    for body in [data, zlib.as_slice()] {
        for version in [479, 400] {
            let _ = RegisterBrokerBody::decode(Some(body), version, true, INFLATE_CAP);
        }
    }
}

/// Every other body the NameServer or its clients parse.
pub fn bodies(data: &[u8]) {
    let _ = TopicRouteData::decode(data);
    let _ = ClusterInfo::decode(data);
    let _ = DataVersion::decode(data);
    let _ = KvTable::decode(data);
    let _ = TopicList::decode(data);
    let _ = TopicQueueMappingInfo::decode(data);
    let _ = rocketmq_wire::json::parse_lenient(data);
}

/// An UPDATE_NAMESRV_CONFIG body. The persisted listing is re-read at the next start, so it
/// must carry exactly the keys the server holds: a value that smuggles a line break would
/// plant keys the blacklist refused.
pub fn properties(data: &[u8]) {
    let Ok(props) = namesrv::config::parse_properties(data) else {
        return;
    };
    let mut settings = settings_defaults();
    if settings
        .blacklisted(props.iter().map(|(k, _)| k.as_str()))
        .is_some()
    {
        return;
    }
    settings.apply_update(&props);
    let reread = namesrv::config::parse_properties(settings.listing().as_bytes())
        .expect("the persisted listing parses");
    // A fresh server remembers no extra keys, so an update can change values but never the
    // set of keys.
    let keys = |props: Vec<(String, String)>| -> Vec<String> {
        props.into_iter().map(|(k, _)| k).collect()
    };
    let expected: Vec<String> = keys(
        namesrv::config::parse_properties(settings_defaults().listing().as_bytes())
            .expect("the default listing parses"),
    );
    assert_eq!(
        keys(reread),
        expected,
        "the persisted listing re-reads as other keys"
    );
}

fn settings_defaults() -> namesrv::config::Settings {
    namesrv::config::Settings::defaults(Path::new("/fuzz-home"), None)
}
