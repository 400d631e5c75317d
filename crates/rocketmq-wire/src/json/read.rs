//! Typed, lenient access to parsed JSON, with the defaults and conversions fastjson applies.

use serde_json::{Map, Value};

use crate::error::BodyError;

/// Parses a body as strict JSON first (the common case, and fast), then as fastjson's dialect.
pub fn parse_value(input: &[u8]) -> Result<Value, BodyError> {
    serde_json::from_slice(input)
        .or_else(|_| super::parse_lenient(input).map_err(|e| BodyError::Json(e.to_string())))
}

/// The largest input read into a tree (`serde_json::Value`) where a peer chooses the input: a
/// tree takes tens of times the text's size, so anything larger must be in the exact shape a
/// typed reader takes.
pub const TREE_MAX: usize = 256 * 1024;

/// `parse_value` for input a peer chose: refused beyond [`TREE_MAX`].
pub fn parse_value_bounded(input: &[u8], what: &str) -> Result<Value, BodyError> {
    if input.len() > TREE_MAX {
        return Err(BodyError::Format(format!(
            "{what} of {} bytes is not in the form Java writes, and too large to read leniently",
            input.len()
        )));
    }
    parse_value(input)
}

/// Reads input that is exactly in the shape `T` expects, or `None` (for a lenient reader to
/// take over). UTF-8 is validated once for the whole input: parsing from bytes checks every
/// string again, and headers and register bodies are mostly strings.
pub(crate) fn parse_strict<'a, T: serde::Deserialize<'a>>(input: &'a [u8]) -> Option<T> {
    serde_json::from_str(std::str::from_utf8(input).ok()?).ok()
}

/// Field readers that accept numbers and booleans written as strings, and treat `null` like a
/// missing property.
pub trait ObjectExt {
    fn present(&self, key: &str) -> Option<&Value>;
    fn i64_or(&self, key: &str, default: i64) -> Result<i64, BodyError>;
    fn i32_or(&self, key: &str, default: i32) -> Result<i32, BodyError>;
    fn bool_or(&self, key: &str, default: bool) -> Result<bool, BodyError>;
    fn opt_string(&self, key: &str) -> Result<Option<String>, BodyError>;
    fn opt_object(&self, key: &str) -> Result<Option<&Map<String, Value>>, BodyError>;
    fn opt_array(&self, key: &str) -> Result<Option<&Vec<Value>>, BodyError>;
}

pub(crate) fn value_as_i64(key: &str, v: &Value) -> Result<i64, BodyError> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .ok_or_else(|| BodyError::field(key, "not an integer")),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| BodyError::field(key, "not an integer")),
        Value::Bool(b) => Ok(*b as i64),
        _ => Err(BodyError::field(key, "not an integer")),
    }
}

pub(crate) fn value_as_string(key: &str, v: &Value) -> Result<String, BodyError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(BodyError::field(key, "not a string")),
    }
}

impl ObjectExt for Map<String, Value> {
    fn present(&self, key: &str) -> Option<&Value> {
        self.get(key).filter(|v| !v.is_null())
    }

    fn i64_or(&self, key: &str, default: i64) -> Result<i64, BodyError> {
        self.present(key)
            .map_or(Ok(default), |v| value_as_i64(key, v))
    }

    fn i32_or(&self, key: &str, default: i32) -> Result<i32, BodyError> {
        let v = self.i64_or(key, default as i64)?;
        i32::try_from(v).map_err(|_| BodyError::field(key, "out of range"))
    }

    fn bool_or(&self, key: &str, default: bool) -> Result<bool, BodyError> {
        match self.present(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) => Ok(s.eq_ignore_ascii_case("true")),
            Some(Value::Number(n)) => Ok(n.as_i64() == Some(1)),
            Some(_) => Err(BodyError::field(key, "not a boolean")),
        }
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, BodyError> {
        self.present(key)
            .map(|v| value_as_string(key, v))
            .transpose()
    }

    fn opt_object(&self, key: &str) -> Result<Option<&Map<String, Value>>, BodyError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(_) => Err(BodyError::field(key, "not an object")),
        }
    }

    fn opt_array(&self, key: &str) -> Result<Option<&Vec<Value>>, BodyError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(_) => Err(BodyError::field(key, "not an array")),
        }
    }
}
