//! The in-memory form of one remoting frame.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::codes::{version, LanguageCode};

const FLAG_RESPONSE: i32 = 1;
const FLAG_ONEWAY: i32 = 2;

/// How a frame's header is serialized (the frame's type byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SerializeType {
    #[default]
    Json,
    RocketMq,
}

impl SerializeType {
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }
}

/// Header fields travel as strings keyed by the Java field name.
pub type ExtFields = BTreeMap<String, String>;

#[derive(Clone, Debug, PartialEq, Default)]
pub struct RemotingCommand {
    pub code: i32,
    pub language: Option<LanguageCode>,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: Option<ExtFields>,
    pub body: Option<Bytes>,
    pub ser_type: SerializeType,
}

impl RemotingCommand {
    /// A request as this implementation sends it (JSON header, current version).
    pub fn request(code: i32) -> Self {
        RemotingCommand {
            code,
            language: Some(LanguageCode::JAVA),
            version: version::CURRENT,
            ..Default::default()
        }
    }

    /// A response to `request`: same opaque, response flag, no header fields.
    pub fn response_to(request: &RemotingCommand, code: i32) -> Self {
        RemotingCommand {
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            ..Self::request(code)
        }
    }

    pub fn with_ext(mut self, key: &str, value: impl ToString) -> Self {
        self.ext_fields
            .get_or_insert_with(Default::default)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Marks that the response has a header object, even if it stays empty (`"extFields":{}`).
    pub fn with_empty_ext(mut self) -> Self {
        self.ext_fields.get_or_insert_with(Default::default);
        self
    }

    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        let body = body.into();
        self.body = (!body.is_empty()).then_some(body);
        self
    }

    pub fn with_version(mut self, version: i32) -> Self {
        self.version = version;
        self
    }

    pub fn oneway(mut self) -> Self {
        self.flag |= FLAG_ONEWAY;
        self
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.as_ref()?.get(key).map(String::as_str)
    }

    /// An ext field as Java reads an `int`/`long` header field: decimal, no trimming.
    pub fn ext_i64(&self, key: &str) -> Option<i64> {
        self.ext(key)?.parse().ok()
    }

    /// An ext field as Java reads a `boolean`: true iff the text is "true" ignoring case.
    pub fn ext_bool(&self, key: &str) -> Option<bool> {
        self.ext(key).map(|v| v.eq_ignore_ascii_case("true"))
    }
}
