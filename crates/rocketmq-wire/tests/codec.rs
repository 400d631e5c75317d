//! Frame and header codec: golden bytes from the reference, and round trips of arbitrary
//! commands through both header forms.

use bytes::BytesMut;
use proptest::prelude::*;
use rocketmq_wire::codes::LanguageCode;
use rocketmq_wire::frame::{decode_payload, encode_frame, frame_bytes as frame, RemotingCodec};
use rocketmq_wire::{ExtFields, RemotingCommand, SerializeType};
use tokio_util::codec::Decoder;

const BINARY_SAMPLE: [u8; 49] = [
    0x00, 0x00, 0x00, 0x2d, 0x01, 0x00, 0x00, 0x29, 0x00, 0x69, 0x00, 0x01, 0xdf, 0x00, 0x00, 0x00,
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x05, 0x74,
    0x6f, 0x70, 0x69, 0x63, 0x00, 0x00, 0x00, 0x09, 0x54, 0x6f, 0x70, 0x69, 0x63, 0x54, 0x65, 0x73,
    0x74,
];

fn route_request() -> RemotingCommand {
    let mut cmd = RemotingCommand::request(105).with_ext("topic", "TopicTest");
    cmd.opaque = 7;
    cmd
}

#[test]
fn binary_header_matches_the_reference_sample() {
    let mut cmd = route_request();
    cmd.ser_type = SerializeType::RocketMq;
    let buf = frame(&cmd);
    assert_eq!(&buf[..], &BINARY_SAMPLE[..]);
    let decoded = RemotingCodec::default()
        .decode(&mut BytesMut::from(&BINARY_SAMPLE[..]))
        .unwrap()
        .unwrap();
    assert_eq!(decoded, cmd);
}

#[test]
fn json_header_matches_what_the_java_client_sends() {
    let buf = frame(&route_request());
    let expected = r#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    assert_eq!(&buf[..4], &((4 + expected.len()) as u32).to_be_bytes());
    assert_eq!(&buf[4..8], &(expected.len() as u32).to_be_bytes());
    assert_eq!(std::str::from_utf8(&buf[8..]).unwrap(), expected);
}

#[test]
fn lenient_json_headers_are_accepted() {
    for header in [
        r#"{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"x"}}"#,
        r#"{"code":105,"language":0,"opaque":1,"extFields":{"topic":"x","n":5,"z":null}}"#,
        r#"{code:105,'opaque':1,"extFields":{"topic":"x"},}"#,
    ] {
        let mut payload = (header.len() as u32).to_be_bytes().to_vec();
        payload.extend_from_slice(header.as_bytes());
        let cmd = decode_payload(payload.into()).unwrap();
        assert_eq!((cmd.code, cmd.opaque), (105, 1));
        assert_eq!(cmd.ext("topic"), Some("x"));
    }
    let mut payload = 60u32.to_be_bytes().to_vec();
    payload.extend_from_slice(br#"{"code":105,"language":0,"extFields":{"n":5,"z":null}}      "#);
    let cmd = decode_payload(payload.into()).unwrap();
    assert_eq!(cmd.ext("n"), Some("5"));
    assert_eq!(cmd.ext("z"), None);
    assert_eq!(cmd.language, Some(LanguageCode::JAVA));
    assert_eq!(cmd.version, 0, "a missing version means 3.0.0");
}

#[test]
fn decoder_waits_for_whole_frames_and_rejects_bad_lengths() {
    let mut buf = BytesMut::new();
    encode_frame(&route_request(), &mut buf);
    let whole = buf.clone();
    let mut codec = RemotingCodec::default();
    let mut partial = BytesMut::from(&whole[..whole.len() - 1]);
    assert!(codec.decode(&mut partial).unwrap().is_none());
    partial.extend_from_slice(&whole[whole.len() - 1..]);
    assert!(codec.decode(&mut partial).unwrap().is_some());

    let mut small = RemotingCodec::new(64);
    assert!(small.decode(&mut whole.clone()).is_err(), "over the cap");
    assert!(codec
        .decode(&mut BytesMut::from(&(-1i32).to_be_bytes()[..]))
        .is_err());
}

fn arb_command() -> impl Strategy<Value = RemotingCommand> {
    (
        any::<i16>(),
        0u8..14,
        any::<i16>(),
        any::<i32>(),
        0i32..4,
        proptest::option::of("[^\u{0}]{1,40}"),
        proptest::option::of(proptest::collection::btree_map(
            "[a-zA-Z_]{1,12}",
            ".{1,30}",
            1..6,
        )),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 1..200)),
    )
        .prop_map(
            |(code, lang, version, opaque, flag, remark, ext, body)| RemotingCommand {
                code: code as i32,
                language: LanguageCode::from_code(lang),
                version: version as i32,
                opaque,
                flag,
                remark,
                ext_fields: ext.map(|m| m.into_iter().collect::<ExtFields>()),
                body: body.map(Into::into),
                ser_type: SerializeType::Json,
            },
        )
}

proptest! {
    #[test]
    fn commands_round_trip_in_both_forms(cmd in arb_command(), binary in any::<bool>()) {
        let mut cmd = cmd;
        if binary {
            cmd.ser_type = SerializeType::RocketMq;
        }
        let mut buf = BytesMut::new();
        encode_frame(&cmd, &mut buf);
        let decoded = RemotingCodec::default().decode(&mut buf).unwrap().unwrap();
        prop_assert_eq!(decoded, cmd);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut buf = BytesMut::from(&bytes[..]);
        let _ = RemotingCodec::new(1 << 16).decode(&mut buf);
    }
}
