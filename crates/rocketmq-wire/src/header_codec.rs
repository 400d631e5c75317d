//! The two header forms: JSON (serialize type 0) and ROCKETMQ binary (serialize type 1).

use bytes::{Buf, BufMut, BytesMut};
use serde_json::Value;

use crate::codes::LanguageCode;
use crate::command::{ExtFields, RemotingCommand, SerializeType};
use crate::error::FrameError;
use crate::json::{parse_strict, parse_value, JsonStyle, JsonWriter, ObjectExt};

fn bad(msg: impl Into<String>) -> FrameError {
    FrameError::BadHeader(msg.into())
}

/// Writes the header as fastjson would: alphabetical keys, nulls omitted.
pub fn encode_json(cmd: &RemotingCommand, out: &mut BytesMut) {
    let mut w = JsonWriter::with_capacity(JsonStyle::Fastjson, 128);
    w.object(|w| {
        w.key("code").int(cmd.code as i64);
        if let Some(ext) = &cmd.ext_fields {
            w.key("extFields").object(|w| {
                for (k, v) in ext {
                    w.key(k).string(v);
                }
            });
        }
        w.key("flag").int(cmd.flag as i64);
        if let Some(lang) = cmd.language {
            w.key("language").string(lang.name());
        }
        w.key("opaque").int(cmd.opaque as i64);
        w.opt_str_field("remark", cmd.remark.as_deref());
        w.key("serializeTypeCurrentRPC")
            .string(SerializeType::Json.name());
        w.key("version").int(cmd.version as i64);
    });
    out.put_slice(&w.finish());
}

/// The header as well-behaved peers write it; anything else takes the lenient path.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct StrictHeader {
    code: i32,
    language: Option<StrictLanguage>,
    version: i32,
    opaque: i32,
    flag: i32,
    remark: Option<String>,
    #[serde(rename = "extFields")]
    ext_fields: Option<StrictExtFields>,
}

/// A language given by name or code; an unknown one is no language.
struct StrictLanguage(Option<LanguageCode>);

impl<'de> serde::Deserialize<'de> for StrictLanguage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = StrictLanguage;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a language name or code")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<StrictLanguage, E> {
                Ok(StrictLanguage(LanguageCode::from_name(name)))
            }
            fn visit_u64<E: serde::de::Error>(self, code: u64) -> Result<StrictLanguage, E> {
                let code = u8::try_from(code).ok();
                Ok(StrictLanguage(code.and_then(LanguageCode::from_code)))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<StrictLanguage, E> {
                Ok(StrictLanguage(None))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Ext fields whose values are all strings or null; anything else takes the lenient path,
/// which knows how Java renders numbers and booleans there.
struct StrictExtFields(ExtFields);

impl<'de> serde::Deserialize<'de> for StrictExtFields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = StrictExtFields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<StrictExtFields, A::Error> {
                let mut ext = ExtFields::new();
                while let Some((k, v)) = map.next_entry::<String, Option<String>>()? {
                    if let Some(v) = v {
                        ext.insert(k, v);
                    }
                }
                Ok(StrictExtFields(ext))
            }
        }
        d.deserialize_map(Visit)
    }
}

fn language(value: Option<&Value>) -> Option<LanguageCode> {
    match value? {
        Value::String(name) => LanguageCode::from_name(name),
        Value::Number(n) => n
            .as_u64()
            .and_then(|c| u8::try_from(c).ok())
            .and_then(LanguageCode::from_code),
        _ => None,
    }
}

fn ext_value(key: &str, value: Value) -> Result<Option<String>, FrameError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        Value::Number(_) | Value::Bool(_) => Ok(Some(value.to_string())),
        _ => Err(bad(format!("extFields.{key} is not a string"))),
    }
}

pub fn decode_json(header: &[u8]) -> Result<RemotingCommand, FrameError> {
    // serde would also fill the struct from a JSON array; a header is only ever an object.
    if header.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(bad("header is not an object"));
    }
    if let Some(h) = parse_strict::<StrictHeader>(header) {
        return Ok(RemotingCommand {
            code: h.code,
            language: h.language.and_then(|l| l.0),
            version: h.version,
            opaque: h.opaque,
            flag: h.flag,
            remark: h.remark,
            ext_fields: h.ext_fields.map(|e| e.0),
            ..Default::default()
        });
    }
    // The lenient reader builds a tree of tens of times the header's size: only plausible
    // headers get it (real ones are a few hundred bytes, and odd clients' not much more).
    if header.len() > LENIENT_HEADER_MAX {
        return Err(bad(format!(
            "a header of {} bytes must be standard JSON",
            header.len()
        )));
    }
    decode_lenient_json(header)
}

/// The largest JSON header read by the lenient reader.
pub const LENIENT_HEADER_MAX: usize = 64 * 1024;

fn decode_lenient_json(header: &[u8]) -> Result<RemotingCommand, FrameError> {
    let value = parse_value(header).map_err(|e| bad(e.to_string()))?;
    let Value::Object(obj) = value else {
        return Err(bad("header is not an object"));
    };
    let int = |key: &str| -> Result<i32, FrameError> {
        obj.i32_or(key, 0).map_err(|e| bad(e.to_string()))
    };
    let language = language(obj.present("language"));
    let remark = obj.opt_string("remark").map_err(|e| bad(e.to_string()))?;
    let mut ext_fields = None;
    if let Some(map) = obj
        .opt_object("extFields")
        .map_err(|e| bad(e.to_string()))?
    {
        let ext = ext_fields.insert(ExtFields::new());
        for (k, v) in map {
            if let Some(v) = ext_value(k, v.clone())? {
                ext.insert(k.clone(), v);
            }
        }
    }
    Ok(RemotingCommand {
        code: int("code")?,
        language,
        version: int("version")?,
        opaque: int("opaque")?,
        flag: int("flag")?,
        remark,
        ext_fields,
        ..Default::default()
    })
}

pub fn encode_binary(cmd: &RemotingCommand, out: &mut BytesMut) {
    out.put_i16(cmd.code as i16);
    out.put_u8(cmd.language.map_or(LanguageCode::JAVA.0, |l| l.0));
    out.put_i16(cmd.version as i16);
    out.put_i32(cmd.opaque);
    out.put_i32(cmd.flag);
    let remark = cmd.remark.as_deref().unwrap_or_default();
    out.put_i32(remark.len() as i32);
    out.put_slice(remark.as_bytes());
    let ext_len: usize = cmd
        .ext_fields
        .iter()
        .flatten()
        .map(|(k, v)| 2 + k.len() + 4 + v.len())
        .sum();
    out.put_i32(ext_len as i32);
    for (k, v) in cmd.ext_fields.iter().flatten() {
        out.put_i16(k.len() as i16);
        out.put_slice(k.as_bytes());
        out.put_i32(v.len() as i32);
        out.put_slice(v.as_bytes());
    }
}

/// Reads a length-prefixed string; Java turns a zero length into null.
fn binary_string(buf: &mut &[u8], len: usize, what: &str) -> Result<Option<String>, FrameError> {
    if len > buf.len() {
        return Err(bad(format!("{what} length {len} past the header")));
    }
    let (s, rest) = buf.split_at(len);
    *buf = rest;
    if len == 0 {
        return Ok(None);
    }
    String::from_utf8(s.to_vec())
        .map(Some)
        .map_err(|_| bad(format!("{what} is not UTF-8")))
}

fn need(buf: &[u8], n: usize) -> Result<(), FrameError> {
    (buf.len() >= n)
        .then_some(())
        .ok_or_else(|| bad("binary header truncated"))
}

pub fn decode_binary(mut buf: &[u8]) -> Result<RemotingCommand, FrameError> {
    need(buf, 21)?;
    let code = buf.get_i16() as i32;
    let language = LanguageCode::from_code(buf.get_u8());
    let version = buf.get_i16() as i32;
    let opaque = buf.get_i32();
    let flag = buf.get_i32();
    let remark_len = buf.get_i32();
    let remark_len = usize::try_from(remark_len).map_err(|_| bad("negative remark length"))?;
    let remark = binary_string(&mut buf, remark_len, "remark")?;
    need(buf, 4)?;
    let ext_len = usize::try_from(buf.get_i32()).map_err(|_| bad("negative ext length"))?;
    if ext_len > buf.len() {
        return Err(bad("ext map length past the header"));
    }
    let mut ext_buf = &buf[..ext_len];
    let ext_fields = if ext_len == 0 {
        None
    } else {
        let mut ext = ExtFields::new();
        while !ext_buf.is_empty() {
            need(ext_buf, 2)?;
            let klen =
                usize::try_from(ext_buf.get_i16()).map_err(|_| bad("negative key length"))?;
            let key = binary_string(&mut ext_buf, klen, "ext key")?;
            need(ext_buf, 4)?;
            let vlen =
                usize::try_from(ext_buf.get_i32()).map_err(|_| bad("negative value length"))?;
            let value = binary_string(&mut ext_buf, vlen, "ext value")?;
            if let (Some(k), Some(v)) = (key, value) {
                ext.insert(k, v);
            }
        }
        Some(ext)
    };
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        body: None,
        ser_type: SerializeType::RocketMq,
    })
}
