use std::io::Write as _;

/// The two JSON dialects Java peers exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonStyle {
    /// fastjson's default output: numeric map keys unquoted, non-ASCII written raw.
    Fastjson,
    /// Valid JSON as Java's "standard" route form writes it: numeric keys quoted, non-ASCII and
    /// `/` escaped, longs beyond 2^53 as strings.
    Standard,
}

/// Writes compact JSON into a buffer. Callers emit properties in alphabetical order and skip
/// nulls, as fastjson does.
pub struct JsonWriter {
    buf: Vec<u8>,
    style: JsonStyle,
    /// One entry per open container: whether nothing has been written into it yet.
    first: Vec<bool>,
    after_key: bool,
}

const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

impl JsonWriter {
    pub fn new(style: JsonStyle) -> Self {
        Self::with_capacity(style, 256)
    }

    pub fn with_capacity(style: JsonStyle, capacity: usize) -> Self {
        JsonWriter {
            buf: Vec::with_capacity(capacity),
            style,
            first: Vec::new(),
            after_key: false,
        }
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    fn before_value(&mut self) {
        if self.after_key {
            self.after_key = false;
        } else {
            self.separate();
        }
    }

    fn separate(&mut self) {
        if let Some(first) = self.first.last_mut() {
            if !*first {
                self.buf.push(b',');
            }
            *first = false;
        }
    }

    pub fn object(&mut self, body: impl FnOnce(&mut Self)) -> &mut Self {
        self.before_value();
        self.buf.push(b'{');
        self.first.push(true);
        body(self);
        self.first.pop();
        self.buf.push(b'}');
        self
    }

    pub fn array(&mut self, body: impl FnOnce(&mut Self)) -> &mut Self {
        self.before_value();
        self.buf.push(b'[');
        self.first.push(true);
        body(self);
        self.first.pop();
        self.buf.push(b']');
        self
    }

    /// A property name or string map key.
    pub fn key(&mut self, key: &str) -> &mut Self {
        self.separate();
        self.write_str(key);
        self.buf.push(b':');
        self.after_key = true;
        self
    }

    /// A numeric map key: unquoted in fastjson's form, quoted in the standard one.
    pub fn num_key(&mut self, key: i64) -> &mut Self {
        self.separate();
        match self.style {
            JsonStyle::Fastjson => self.digits(key),
            JsonStyle::Standard => {
                self.buf.push(b'"');
                self.digits(key);
                self.buf.push(b'"');
            }
        }
        self.buf.push(b':');
        self.after_key = true;
        self
    }

    pub fn string(&mut self, value: &str) -> &mut Self {
        self.before_value();
        self.write_str(value);
        self
    }

    pub fn int(&mut self, value: i64) -> &mut Self {
        self.before_value();
        self.digits(value);
        self
    }

    fn digits(&mut self, value: i64) {
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    /// A Java `long` that may exceed what JavaScript numbers hold exactly.
    pub fn long(&mut self, value: i64) -> &mut Self {
        if self.style == JsonStyle::Standard
            && !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&value)
        {
            self.before_value();
            self.buf.push(b'"');
            self.digits(value);
            self.buf.push(b'"');
            self
        } else {
            self.int(value)
        }
    }

    pub fn bool(&mut self, value: bool) -> &mut Self {
        self.before_value();
        self.buf
            .extend_from_slice(if value { b"true" } else { b"false" });
        self
    }

    /// A property holding a string, omitted when absent (fastjson skips nulls).
    pub fn opt_str_field(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        if let Some(v) = value {
            self.key(key).string(v);
        }
        self
    }

    pub fn string_array<'a>(&mut self, items: impl IntoIterator<Item = &'a str>) -> &mut Self {
        self.array(|w| {
            for item in items {
                w.string(item);
            }
        })
    }

    fn write_str(&mut self, s: &str) {
        let standard = self.style == JsonStyle::Standard;
        self.buf.push(b'"');
        // Names, addresses and header values are nearly always printable ASCII.
        let plain = |b: &u8| {
            (0x20..0x7f).contains(b) && !matches!(b, b'"' | b'\\') && !(standard && *b == b'/')
        };
        if s.as_bytes().iter().all(plain) {
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.push(b'"');
            return;
        }
        let mut start = 0;
        for (i, c) in s.char_indices() {
            let escape: Option<&[u8]> = match c {
                '"' => Some(b"\\\""),
                '\\' => Some(b"\\\\"),
                '\u{8}' => Some(b"\\b"),
                '\u{c}' => Some(b"\\f"),
                '\n' => Some(b"\\n"),
                '\r' => Some(b"\\r"),
                '\t' => Some(b"\\t"),
                '/' if standard => Some(b"\\/"),
                _ => None,
            };
            let needs_unicode = (c as u32) < 0x20
                || (0x7f..=0x9f).contains(&(c as u32))
                || c == '\u{2028}'
                || c == '\u{2029}'
                || (standard && !c.is_ascii());
            if escape.is_none() && !needs_unicode {
                continue;
            }
            self.buf.extend_from_slice(&s.as_bytes()[start..i]);
            start = i + c.len_utf8();
            match escape {
                Some(e) => self.buf.extend_from_slice(e),
                None => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        let _ = write!(self.buf, "\\u{unit:04X}");
                    }
                }
            }
        }
        self.buf.extend_from_slice(&s.as_bytes()[start..]);
        self.buf.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(style: JsonStyle, s: &str) -> String {
        let mut w = JsonWriter::new(style);
        w.string(s);
        String::from_utf8(w.finish()).unwrap()
    }

    #[test]
    fn fastjson_escapes_controls_and_keeps_non_ascii_raw() {
        assert_eq!(
            text(JsonStyle::Fastjson, "hello \"x\" é/\u{1}\u{7f}\n"),
            "\"hello \\\"x\\\" é/\\u0001\\u007F\\n\""
        );
    }

    #[test]
    fn standard_escapes_non_ascii_and_slash() {
        assert_eq!(
            text(JsonStyle::Standard, "é/😀"),
            "\"\\u00E9\\/\\uD83D\\uDE00\""
        );
    }

    #[test]
    fn numeric_keys_follow_the_style() {
        for (style, expected) in [
            (JsonStyle::Fastjson, "{0:\"a\",1:\"b\"}"),
            (JsonStyle::Standard, "{\"0\":\"a\",\"1\":\"b\"}"),
        ] {
            let mut w = JsonWriter::new(style);
            w.object(|w| {
                w.num_key(0).string("a");
                w.num_key(1).string("b");
            });
            assert_eq!(String::from_utf8(w.finish()).unwrap(), expected);
        }
    }

    #[test]
    fn nested_containers_get_commas_only_between_items() {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        w.object(|w| {
            w.key("a").array(|w| {
                w.int(1).int(2);
                w.object(|_| {});
            });
            w.key("b").bool(false);
            w.key("c").long(1 << 60);
        });
        assert_eq!(
            String::from_utf8(w.finish()).unwrap(),
            "{\"a\":[1,2,{}],\"b\":false,\"c\":1152921504606846976}"
        );
    }
}
