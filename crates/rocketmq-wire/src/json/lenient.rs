//! A parser for the JSON dialect fastjson accepts: unquoted (often numeric) keys, single-quoted
//! strings and trailing commas, on top of standard JSON. Used only when strict parsing fails.

use serde_json::{Map, Number, Value};

/// Deeper nesting than any RocketMQ body needs is refused instead of recursing without bound.
const MAX_DEPTH: usize = 128;

#[derive(Debug, thiserror::Error)]
#[error("invalid JSON at byte {offset}: {reason}")]
pub struct LenientError {
    pub offset: usize,
    pub reason: &'static str,
}

pub fn parse(input: &[u8]) -> Result<Value, LenientError> {
    let mut p = Parser { input, pos: 0 };
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos != input.len() {
        return Err(p.error("trailing characters"));
    }
    Ok(value)
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, reason: &'static str) -> LenientError {
        LenientError {
            offset: self.pos,
            reason,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, LenientError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(q @ (b'"' | b'\'')) => self.string(q).map(Value::String),
            Some(_) => self.bare_value(),
            None => Err(self.error("unexpected end")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, LenientError> {
        self.pos += 1;
        let mut map = Map::new();
        loop {
            self.skip_ws();
            let key = match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                Some(q @ (b'"' | b'\'')) => self.string(q)?,
                Some(_) => self.bare_word()?.to_string(),
                None => return Err(self.error("unterminated object")),
            };
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error("expected ':'"));
            }
            self.pos += 1;
            let value = self.value(depth + 1)?;
            map.insert(key, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, LenientError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(b']') {
                self.pos += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {}
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    /// A run of characters up to a delimiter: an unquoted key, a number or a literal.
    fn bare_word(&mut self) -> Result<&str, LenientError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| !b":,{}[]\"' \t\n\r".contains(&c))
        {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.error("unexpected character"));
        }
        std::str::from_utf8(&self.input[start..self.pos]).map_err(|_| self.error("invalid UTF-8"))
    }

    fn bare_value(&mut self) -> Result<Value, LenientError> {
        let start = self.pos;
        let word = self.bare_word()?;
        let value = match word {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" => Value::Null,
            _ => {
                if let Ok(i) = word.parse::<i64>() {
                    Value::Number(i.into())
                } else if let Some(n) = word.parse::<f64>().ok().and_then(Number::from_f64) {
                    Value::Number(n)
                } else {
                    self.pos = start;
                    return Err(self.error("invalid literal"));
                }
            }
        };
        Ok(value)
    }

    fn string(&mut self, quote: u8) -> Result<String, LenientError> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error("unterminated string"));
            };
            self.pos += 1;
            match c {
                _ if c == quote => break,
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.error("unterminated escape"));
                    };
                    self.pos += 1;
                    match e {
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let c = self.unicode_escape()?;
                            let mut tmp = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                _ => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| self.error("invalid UTF-8 in string"))
    }

    fn hex4(&mut self) -> Result<u32, LenientError> {
        let digits = self
            .input
            .get(self.pos..self.pos + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| self.error("invalid \\u escape"))?;
        self.pos += 4;
        Ok(digits)
    }

    fn unicode_escape(&mut self) -> Result<char, LenientError> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first)
            && self.input.get(self.pos..self.pos + 2) == Some(b"\\u")
        {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(first).unwrap_or('\u{FFFD}'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_fastjson_numeric_keys() {
        let v = parse(br#"{"brokerAddrs":{0:"a:1",1:"b:2"},"x":[1,2,],}"#).unwrap();
        assert_eq!(
            v,
            json!({"brokerAddrs": {"0": "a:1", "1": "b:2"}, "x": [1, 2]})
        );
    }

    #[test]
    fn accepts_single_quotes_and_escapes() {
        let v = parse(br#"{'a':'it\'s \u00e9\uD83D\uDE00', b : -1.5, c:null}"#).unwrap();
        assert_eq!(v, json!({"a": "it's é😀", "b": -1.5, "c": null}));
    }

    #[test]
    fn rejects_broken_input_without_panicking() {
        for bad in [
            &b"{"[..],
            b"{\"a\" 1}",
            b"[1 2]",
            b"\"abc",
            b"{a:}",
            b"\"\\u12\"",
            b"1 2",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn refuses_deep_nesting() {
        let deep = "[".repeat(10_000);
        assert!(parse(deep.as_bytes()).is_err());
    }
}
