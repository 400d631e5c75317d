//! Java `.properties` text: the format of the config file, of UPDATE_NAMESRV_CONFIG bodies and
//! of GET_NAMESRV_CONFIG answers. (The java-properties crate panics on some inputs, e.g. a lone
//! 0xFE byte, which would put a panic one message away from a server or a tool; the format is
//! small enough to read here.)

/// A `\u` escape without four hex digits, which Java refuses too.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed \\uxxxx encoding")]
pub struct MalformedEscape;

/// Parses properties text. Bytes are taken as UTF-8 where valid and as ISO-8859-1 otherwise:
/// Java reads ISO-8859-1, but UTF-8 is what tools send.
pub fn parse(input: &[u8]) -> Result<Vec<(String, String)>, MalformedEscape> {
    let text = match std::str::from_utf8(input) {
        Ok(s) => s.to_string(),
        Err(_) => input.iter().map(|&b| b as char).collect(),
    };
    let mut out = Vec::new();
    let mut lines = text
        .split_inclusive(['\n', '\r'])
        .map(|l| l.trim_end_matches(['\n', '\r']));
    while let Some(first) = lines.next() {
        let mut logical = first.trim_start_matches([' ', '\t', '\u{c}']).to_string();
        if logical.is_empty() || logical.starts_with(['#', '!']) {
            continue;
        }
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some(next) => logical.push_str(next.trim_start_matches([' ', '\t', '\u{c}'])),
                None => break,
            }
        }
        out.push(split_pair(&logical)?);
    }
    Ok(out)
}

fn ends_with_odd_backslashes(line: &str) -> bool {
    line.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
}

/// Splits a logical line at the first unescaped `=`, `:` or whitespace, and unescapes both sides.
fn split_pair(line: &str) -> Result<(String, String), MalformedEscape> {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '=' | ':' | ' ' | '\t' | '\u{c}' => break,
            _ => i += 1,
        }
    }
    let key_end = i.min(chars.len());
    let mut j = key_end;
    while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\u{c}') {
        j += 1;
    }
    if j < chars.len() && matches!(chars[j], '=' | ':') {
        j += 1;
        while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\u{c}') {
            j += 1;
        }
    }
    Ok((unescape(&chars[..key_end])?, unescape(&chars[j..])?))
}

fn unescape(chars: &[char]) -> Result<String, MalformedEscape> {
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' || i == chars.len() {
            out.push(c);
            continue;
        }
        let e = chars[i];
        i += 1;
        match e {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\u{c}'),
            'u' => {
                let hex = chars.get(i..i + 4).ok_or(MalformedEscape)?;
                let code = hex
                    .iter()
                    .try_fold(0u32, |acc, c| Some(acc * 16 + c.to_digit(16)?))
                    .ok_or(MalformedEscape)?;
                out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                i += 4;
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// `key=value` lines, one a pair, escaped as Java's `Properties.store` writes them: what
/// [`parse`] reads back as the same pairs.
pub fn write<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    pairs
        .into_iter()
        .map(|(k, v)| format!("{}={}\n", escape(k, true), escape(v, false)))
        .collect()
}

/// Escapes text for the listing as Java's `Properties.store` does. In values: a line break must
/// not start a new (possibly blacklisted) key, a trailing backslash must not swallow the next
/// line, a leading space must survive. Keys also escape every character that would end the key
/// early (whitespace, `=`, `:`) and the comment marks `#` and `!`, and write control characters
/// as `\uXXXX` so that the line stays one readable line.
fn escape(text: &str, is_key: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{c}' => out.push_str("\\f"),
            ' ' if is_key || i == 0 => out.push_str("\\ "),
            '=' | ':' | '#' | '!' if is_key => {
                out.push('\\');
                out.push(c);
            }
            c if is_key && c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text.as_bytes()).unwrap()
    }

    proptest::proptest! {
        #[test]
        fn what_is_written_is_read_back_as_the_same_pairs(
            listed in proptest::collection::btree_map("[ -~\\t\\n\\r\\x0c\\u{e9}]{1,12}", "[ -~\\t\\n\\r\\u{e9}]{0,12}", 0..6)
        ) {
            let text = write(listed.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            let read: Vec<(String, String)> = parse(text.as_bytes()).unwrap();
            proptest::prop_assert_eq!(read, listed.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn separators_comments_and_blank_lines() {
        assert_eq!(
            pairs("# c\n! c\n\na=1\nb : 2\nc 3\n  d=\ne\n"),
            [("a", "1"), ("b", "2"), ("c", "3"), ("d", ""), ("e", "")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn continuations_escapes_and_line_endings() {
        assert_eq!(
            pairs("a=one \\\n    two\r\nb=x\\\\\rc=\\u00e9\\n\\=\\:\nk\\ ey=v"),
            [
                ("a", "one two"),
                ("b", "x\\"),
                ("c", "é\n=:"),
                ("k ey", "v")
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn odd_bytes_parse_and_bad_escapes_are_refused() {
        assert_eq!(
            parse(b"\xfe").unwrap(),
            [("\u{fe}".to_string(), String::new())]
        );
        assert_eq!(pairs("a=\\"), [("a".to_string(), String::new())]);
        assert_eq!(parse(b"a=\\u12"), Err(MalformedEscape));
        assert_eq!(parse(b"a=\\u+123"), Err(MalformedEscape));
    }
}
