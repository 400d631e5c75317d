use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};

use bytes::BufMut;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use flate2::Compression;
use serde_json::{Map, Value};

use super::{as_object, parse_peer_object, DataVersion, TopicQueueMappingInfo};
use crate::codes::version;
use crate::error::BodyError;
use crate::json::{
    parse_value, parse_value_bounded, value_as_string, JsonStyle, JsonWriter, ObjectExt,
};

/// Upper bound on what a compressed register body may inflate to, so that a small hostile body
/// cannot exhaust memory.
pub const MAX_INFLATED_BODY: usize = 256 * 1024 * 1024;

/// One topic as a broker describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicConfig {
    pub topic_name: Option<String>,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
    pub topic_sys_flag: i32,
    pub topic_filter_type: String,
    pub order: bool,
    pub attributes: BTreeMap<String, String>,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            topic_name: None,
            read_queue_nums: 16,
            write_queue_nums: 16,
            perm: 6,
            topic_sys_flag: 0,
            topic_filter_type: "SINGLE_TAG".into(),
            order: false,
            attributes: BTreeMap::new(),
        }
    }
}

impl TopicConfig {
    pub fn new(topic: &str, queues: i32, perm: i32) -> Self {
        TopicConfig {
            topic_name: Some(topic.to_string()),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm,
            ..Default::default()
        }
    }

    fn from_object(obj: &Map<String, Value>) -> Result<Self, BodyError> {
        let d = TopicConfig::default();
        let topic_filter_type = match obj.present("topicFilterType") {
            Some(Value::Number(n)) if n.as_i64() == Some(1) => "MULTI_TAG".to_string(),
            Some(Value::Number(_)) | None => d.topic_filter_type.clone(),
            Some(v) => value_as_string("topicFilterType", v)?,
        };
        let mut attributes = BTreeMap::new();
        for (k, v) in obj.opt_object("attributes")?.into_iter().flatten() {
            if !v.is_null() {
                attributes.insert(k.clone(), value_as_string(k, v)?);
            }
        }
        Ok(TopicConfig {
            topic_name: obj.opt_string("topicName")?,
            read_queue_nums: obj.i32_or("readQueueNums", d.read_queue_nums)?,
            write_queue_nums: obj.i32_or("writeQueueNums", d.write_queue_nums)?,
            perm: obj.i32_or("perm", d.perm)?,
            topic_sys_flag: obj.i32_or("topicSysFlag", d.topic_sys_flag)?,
            topic_filter_type,
            order: obj.bool_or("order", false)?,
            attributes,
        })
    }

    fn write_attributes(&self, w: &mut JsonWriter) {
        w.object(|w| {
            for (k, v) in &self.attributes {
                w.key(k).string(v);
            }
        });
    }

    fn write(&self, w: &mut JsonWriter) {
        w.object(|w| {
            w.key("attributes");
            self.write_attributes(w);
            w.key("order").bool(self.order);
            w.key("perm").int(self.perm as i64);
            w.key("readQueueNums").int(self.read_queue_nums as i64);
            w.key("topicFilterType").string(&self.topic_filter_type);
            w.opt_str_field("topicName", self.topic_name.as_deref());
            w.key("topicSysFlag").int(self.topic_sys_flag as i64);
            w.key("writeQueueNums").int(self.write_queue_nums as i64);
        });
    }

    /// The space-separated line of the compressed body; it does not carry sys flag or order.
    fn encode_line(&self) -> String {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        self.write_attributes(&mut w);
        format!(
            "{} {} {} {} {} {}",
            self.topic_name.as_deref().unwrap_or("null"),
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type,
            String::from_utf8_lossy(&w.finish())
        )
    }

    fn decode_line(line: &str) -> Result<Self, BodyError> {
        // Split by hand: a body carries one line per topic, and a collected split costs more
        // than the rest of the line's decoding.
        let mut parts = [""; 6];
        let mut count = 0;
        let mut start = 0;
        for (i, b) in line.bytes().enumerate() {
            if b == b' ' {
                if count < parts.len() {
                    parts[count] = &line[start..i];
                }
                count += 1;
                start = i + 1;
            }
        }
        if count < parts.len() {
            parts[count] = &line[start..];
        }
        count += 1;
        if count < 5 {
            return Err(BodyError::Format(format!("bad topic config line: {line}")));
        }
        let num = |i: usize| -> Result<i32, BodyError> {
            parts[i]
                .parse()
                .map_err(|_| BodyError::Format(format!("bad number in topic config line: {line}")))
        };
        let mut attributes = BTreeMap::new();
        // Attributes whose JSON contains a space were split apart; Java drops them too.
        if count == 6 && parts[5] != "{}" {
            if let Ok(Value::Object(obj)) = parse_value(parts[5].as_bytes()) {
                for (k, v) in obj {
                    if let Ok(s) = value_as_string(&k, &v) {
                        attributes.insert(k, s);
                    }
                }
            }
        }
        Ok(TopicConfig {
            topic_name: Some(parts[0].to_string()),
            read_queue_nums: num(1)?,
            write_queue_nums: num(2)?,
            perm: num(3)?,
            topic_sys_flag: 0,
            topic_filter_type: parts[4].to_string(),
            order: false,
            attributes,
        })
    }
}

/// A broker's topic table with its version and static-topic mappings.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TopicConfigWrapper {
    pub data_version: DataVersion,
    pub topic_configs: Vec<TopicConfig>,
    pub mapping_info: Vec<(String, TopicQueueMappingInfo)>,
}

impl TopicConfigWrapper {
    fn from_object(obj: &Map<String, Value>) -> Result<Self, BodyError> {
        let data_version =
            DataVersion::from_object(obj.opt_object("dataVersion")?.unwrap_or(&Map::new()))?;
        let mut topic_configs = Vec::new();
        for tc in obj
            .opt_object("topicConfigTable")?
            .into_iter()
            .flatten()
            .map(|(_, v)| v)
        {
            if !tc.is_null() {
                topic_configs.push(TopicConfig::from_object(as_object(tc, "TopicConfig")?)?);
            }
        }
        let mut mapping_info = Vec::new();
        for (topic, info) in obj
            .opt_object("topicQueueMappingInfoMap")?
            .into_iter()
            .flatten()
        {
            if !info.is_null() {
                let info = TopicQueueMappingInfo::from_object(as_object(info, "mapping")?)?;
                mapping_info.push((topic.clone(), info));
            }
        }
        Ok(TopicConfigWrapper {
            data_version,
            topic_configs,
            mapping_info,
        })
    }

    fn write(&self, w: &mut JsonWriter) {
        w.object(|w| {
            w.key("dataVersion");
            self.data_version.write(w);
            w.key("topicConfigTable").object(|w| {
                for tc in &self.topic_configs {
                    w.key(tc.topic_name.as_deref().unwrap_or("null"));
                    tc.write(w);
                }
            });
            w.key("topicQueueMappingInfoMap").object(|w| {
                for (topic, info) in &self.mapping_info {
                    w.key(topic);
                    info.write(w);
                }
            });
        });
    }
}

/// The REGISTER_BROKER body.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RegisterBrokerBody {
    pub wrapper: TopicConfigWrapper,
    /// `None` leaves the NameServer's filter-server entry of the broker untouched.
    pub filter_server_list: Option<Vec<String>>,
}

fn string_list(v: &Value) -> Result<Vec<String>, BodyError> {
    match v {
        Value::Array(items) => items
            .iter()
            .filter(|i| !i.is_null())
            .map(|i| value_as_string("filterServerList", i))
            .collect(),
        _ => Err(BodyError::field("filterServerList", "not an array")),
    }
}

/// Reads the inflated sections as they come out of the decoder, within a budget of inflated
/// bytes, so that memory follows what is real rather than what a header claims.
struct Sections<R> {
    inner: std::io::Take<R>,
}

impl<R: Read> Sections<R> {
    fn failure(&self, e: std::io::Error) -> BodyError {
        if self.inner.limit() == 0 {
            BodyError::Format("compressed body inflates past its limit".into())
        } else if e.kind() == std::io::ErrorKind::UnexpectedEof {
            BodyError::Format("compressed body truncated".into())
        } else {
            BodyError::Format(format!("compressed body: {e}"))
        }
    }

    fn len(&mut self) -> Result<usize, BodyError> {
        let mut raw = [0u8; 4];
        self.inner
            .read_exact(&mut raw)
            .map_err(|e| self.failure(e))?;
        usize::try_from(i32::from_be_bytes(raw))
            .map_err(|_| BodyError::Format("compressed body: negative length".into()))
    }

    /// Reads the next section into `out`.
    fn bytes_into(&mut self, out: &mut Vec<u8>) -> Result<(), BodyError> {
        const SMALL: usize = 64 * 1024;
        let len = self.len()?;
        out.clear();
        if len <= SMALL {
            out.resize(len, 0);
            return self.inner.read_exact(out).map_err(|e| self.failure(e));
        }
        // A large length is only a claim: memory grows with what really arrives.
        (&mut self.inner)
            .take(len as u64)
            .read_to_end(out)
            .map_err(|e| self.failure(e))?;
        if out.len() < len {
            return Err(self.failure(std::io::ErrorKind::UnexpectedEof.into()));
        }
        Ok(())
    }

    fn bytes(&mut self) -> Result<Vec<u8>, BodyError> {
        let mut out = Vec::new();
        self.bytes_into(&mut out)?;
        Ok(out)
    }
}

impl RegisterBrokerBody {
    /// Decodes the body of a REGISTER_BROKER request of protocol `version`.
    pub fn decode(
        body: Option<&[u8]>,
        version: i32,
        compressed: bool,
        max_inflated: usize,
    ) -> Result<Self, BodyError> {
        let Some(body) = body else {
            return Ok(RegisterBrokerBody {
                wrapper: TopicConfigWrapper::default(),
                filter_server_list: (version >= version::V3_0_11).then(Vec::new),
            });
        };
        if version < version::V3_0_11 {
            let wrapper = match super::register_strict::wrapper(body) {
                Some(strict) => strict?,
                None => TopicConfigWrapper::from_object(&parse_peer_object(body, "wrapper")?)?,
            };
            return Ok(RegisterBrokerBody {
                wrapper,
                filter_server_list: None,
            });
        }
        if compressed {
            return Self::decode_compressed(body, version, max_inflated).map_err(|e| match e {
                BodyError::Format(m) if m.starts_with("compressed body") => BodyError::Format(m),
                other => BodyError::Format(format!("compressed body: {other}")),
            });
        }
        if let Some(strict) = super::register_strict::register_body(body) {
            return strict;
        }
        let obj = parse_peer_object(body, "RegisterBrokerBody")?;
        let filter_server_list = match obj.get("filterServerList") {
            None => Some(Vec::new()),
            Some(Value::Null) => None,
            Some(v) => Some(string_list(v)?),
        };
        let wrapper = match obj.opt_object("topicConfigSerializeWrapper")? {
            Some(w) => TopicConfigWrapper::from_object(w)?,
            None => TopicConfigWrapper::from_object(&Map::new())?,
        };
        Ok(RegisterBrokerBody {
            wrapper,
            filter_server_list,
        })
    }

    fn decode_compressed(
        body: &[u8],
        version: i32,
        max_inflated: usize,
    ) -> Result<Self, BodyError> {
        let mut sections = Sections {
            // Buffered: the sections are mostly short lines, each a separate read.
            inner: BufReader::with_capacity(64 * 1024, ZlibDecoder::new(body))
                .take(max_inflated as u64),
        };
        let data_version = DataVersion::decode(&sections.bytes()?)?;
        let count = sections.len()?;
        // The count is only a claim: capacity grows with the lines that really arrive.
        let mut topic_configs = Vec::with_capacity(count.min(1024));
        let mut line = Vec::new();
        for _ in 0..count {
            sections.bytes_into(&mut line)?;
            let line = std::str::from_utf8(&line)
                .map_err(|_| BodyError::Format("compressed body is not UTF-8".into()))?;
            topic_configs.push(TopicConfig::decode_line(line)?);
        }
        let filter_server_list = match parse_value_bounded(&sections.bytes()?, "filterServerList")?
        {
            Value::Null => None,
            v => Some(string_list(&v)?),
        };
        let mut mapping_info = Vec::new();
        if version >= version::V5_0_0 {
            for _ in 0..sections.len()? {
                let info = TopicQueueMappingInfo::decode(&sections.bytes()?)?;
                mapping_info.push((info.topic.clone().unwrap_or_default(), info));
            }
        }
        Ok(RegisterBrokerBody {
            wrapper: TopicConfigWrapper {
                data_version,
                topic_configs,
                mapping_info,
            },
            filter_server_list,
        })
    }

    /// The JSON form a 5.x broker sends.
    pub fn encode_json(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        w.object(|w| {
            if let Some(list) = &self.filter_server_list {
                w.key("filterServerList")
                    .string_array(list.iter().map(String::as_str));
            }
            w.key("topicConfigSerializeWrapper");
            self.wrapper.write(w);
        });
        w.finish()
    }

    /// The zlib form a 4.x broker sends with `compressedRegister`, for protocol `version`.
    pub fn encode_compressed(&self, version: i32) -> Vec<u8> {
        fn put(raw: &mut Vec<u8>, bytes: &[u8]) {
            raw.put_i32(bytes.len() as i32);
            raw.extend_from_slice(bytes);
        }
        let mut raw = Vec::new();
        put(&mut raw, &self.wrapper.data_version.encode());
        raw.put_i32(self.wrapper.topic_configs.len() as i32);
        for tc in &self.wrapper.topic_configs {
            put(&mut raw, tc.encode_line().as_bytes());
        }
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        w.string_array(self.filter_server_list.iter().flatten().map(String::as_str));
        put(&mut raw, &w.finish());
        if version >= version::V5_0_0 {
            raw.put_i32(self.wrapper.mapping_info.len() as i32);
            for (_, info) in &self.wrapper.mapping_info {
                put(&mut raw, &info.encode());
            }
        }
        let mut enc = ZlibEncoder::new(Vec::new(), Compression::best());
        enc.write_all(&raw).expect("writing to a Vec cannot fail");
        enc.finish().expect("writing to a Vec cannot fail")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BROKER_BODY: &str = r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":42,"stateVersion":0,"timestamp":1700000000000},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000001},"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}"#;

    #[test]
    fn decodes_the_body_a_5x_broker_sends() {
        let body =
            RegisterBrokerBody::decode(Some(BROKER_BODY.as_bytes()), 479, false, 1 << 20).unwrap();
        assert_eq!(body.filter_server_list, Some(vec![]));
        assert_eq!(
            body.wrapper.data_version,
            DataVersion {
                counter: 42,
                state_version: 0,
                timestamp: 1700000000000
            }
        );
        assert_eq!(
            body.wrapper.topic_configs,
            vec![TopicConfig::new("TopicTest", 4, 6)]
        );
    }

    #[test]
    fn strict_and_lenient_readers_agree() {
        let strict =
            RegisterBrokerBody::decode(Some(BROKER_BODY.as_bytes()), 479, false, 1 << 20).unwrap();
        // Numbers as strings and unquoted keys only pass the lenient reader.
        let lenient_text = BROKER_BODY
            .replace(r#""perm":6"#, r#""perm":"6""#)
            .replace(r#""topicConfigTable""#, "topicConfigTable");
        let lenient =
            RegisterBrokerBody::decode(Some(lenient_text.as_bytes()), 479, false, 1 << 20).unwrap();
        assert_eq!(strict, lenient);
        let explicit_null = RegisterBrokerBody::decode(
            Some(br#"{"filterServerList":null,"topicConfigSerializeWrapper":{"topicConfigTable":{"a":{"topicName":"a"},"b":null}}}"#),
            479,
            false,
            0,
        )
        .unwrap();
        assert_eq!(explicit_null.filter_server_list, None);
        assert_eq!(explicit_null.wrapper.topic_configs.len(), 1);
    }

    #[test]
    fn topic_config_defaults_are_16_16_rw() {
        let body = RegisterBrokerBody::decode(
            Some(
                br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"a":{"topicName":"a"}}}}"#,
            ),
            479,
            false,
            1 << 20,
        )
        .unwrap();
        let tc = &body.wrapper.topic_configs[0];
        assert_eq!(
            (tc.read_queue_nums, tc.write_queue_nums, tc.perm),
            (16, 16, 6)
        );
        assert!(body.wrapper.data_version.timestamp > 0);
    }

    #[test]
    fn compressed_round_trip_loses_sys_flag_like_java() {
        let mut tc = TopicConfig::new("TopicTest", 4, 6);
        tc.topic_sys_flag = 1;
        let mapping = TopicQueueMappingInfo {
            topic: Some("TopicTest".into()),
            bname: Some("broker-a".into()),
            total_queues: 8,
            ..Default::default()
        };
        let body = RegisterBrokerBody {
            wrapper: TopicConfigWrapper {
                data_version: DataVersion {
                    counter: 42,
                    state_version: 0,
                    timestamp: 1700000000000,
                },
                topic_configs: vec![tc],
                mapping_info: vec![("TopicTest".into(), mapping)],
            },
            filter_server_list: Some(vec![]),
        };
        let bytes = body.encode_compressed(479);
        assert_eq!(&bytes[..2], &[0x78, 0xDA]);
        let back = RegisterBrokerBody::decode(Some(&bytes), 479, true, 1 << 20).unwrap();
        assert_eq!(back.wrapper.topic_configs[0].topic_sys_flag, 0);
        assert_eq!(back.wrapper.topic_configs[0].read_queue_nums, 4);
        assert_eq!(back.wrapper.mapping_info, body.wrapper.mapping_info);
        let old =
            RegisterBrokerBody::decode(Some(&body.encode_compressed(400)), 400, true, 1 << 20)
                .unwrap();
        assert!(old.wrapper.mapping_info.is_empty());
    }

    #[test]
    fn inflation_is_bounded() {
        let zeros = vec![0u8; 1 << 20];
        let mut enc = ZlibEncoder::new(Vec::new(), Compression::best());
        enc.write_all(&zeros).unwrap();
        let bomb = enc.finish().unwrap();
        let err = RegisterBrokerBody::decode(Some(&bomb), 479, true, 1024).unwrap_err();
        assert!(err.to_string().starts_with("compressed body"), "{err}");
        let mut sections = Vec::new();
        sections.put_i32(1 << 20);
        sections.extend_from_slice(&vec![b' '; 1 << 20]);
        let mut enc = ZlibEncoder::new(Vec::new(), Compression::best());
        enc.write_all(&sections).unwrap();
        let big_record = enc.finish().unwrap();
        let err = RegisterBrokerBody::decode(Some(&big_record), 479, true, 4096).unwrap_err();
        assert_eq!(err.to_string(), "compressed body inflates past its limit");
    }

    #[test]
    fn missing_body_depends_on_version() {
        let new = RegisterBrokerBody::decode(None, 479, false, 0).unwrap();
        assert_eq!(new.filter_server_list, Some(vec![]));
        assert_eq!(new.wrapper.data_version, DataVersion::default());
        let old = RegisterBrokerBody::decode(None, 0, false, 0).unwrap();
        assert_eq!(old.filter_server_list, None);
    }
}
