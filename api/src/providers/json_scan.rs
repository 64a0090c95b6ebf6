//! A quick check that bytes are one JSON object, finding its top-level
//! fields on the way: for forwarded answers (where is `usage`) and for
//! requests forwarded as they came (which fields to pass on). serde_json's
//! checking of a value it does not build costs a few times more per byte (a
//! visitor call and a peek per token), and every proxied call does both.
//!
//! It only ever says yes to what serde_json accepts: anything it is not sure
//! of (an error, escapes or non-ASCII in a top-level key, a key given twice,
//! deep nesting) is `None`, and the caller asks serde_json, which also words
//! the error.

use std::ops::Range;

/// Nesting past this is left to serde_json (its own limit is 128).
const MAX_DEPTH: usize = 100;
/// Longer number text is left to serde_json (it may be out of range).
const MAX_NUMBER: usize = 64;

/// One top-level field: where its key's text (inside the quotes) and its value are.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

/// The fields of a valid JSON object, in order, as serde_json would read
/// them into a map; `None` when not sure it is valid, or when a key is not
/// plain printable ASCII or comes twice.
pub fn object_fields(text: &str) -> Option<Vec<Field>> {
    let json = text.as_bytes();
    let mut fields: Vec<Field> = Vec::with_capacity(8);
    scan_object(json, |field| {
        let key = &json[field.key.clone()];
        if fields.iter().any(|seen| &json[seen.key.clone()] == key) {
            return None;
        }
        fields.push(field);
        Some(())
    })?;
    Some(fields)
}

/// For a valid JSON object, `Some` of where its top-level `usage` value is
/// (`None` inside when it has none); `None` when not sure it is valid.
pub fn object_usage(json: &[u8]) -> Option<Option<Range<usize>>> {
    let mut usage = None;
    scan_object(json, |field| {
        if &json[field.key] == b"usage" {
            // serde_json reads it as text, which must be UTF-8.
            if usage.is_some() || std::str::from_utf8(&json[field.value.clone()]).is_err() {
                return None;
            }
            usage = Some(field.value);
        }
        Some(())
    })?;
    Some(usage)
}

/// Checks that `json` is one object (white space around it allowed),
/// handing each top-level field to `on_field`, which may refuse it.
fn scan_object(json: &[u8], on_field: impl FnMut(Field) -> Option<()>) -> Option<()> {
    let mut scan = Scanner { json, at: 0 };
    scan.skip_whitespace();
    scan.top_object(on_field)?;
    scan.skip_whitespace();
    (scan.at == json.len()).then_some(())
}

struct Scanner<'a> {
    json: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.json.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn top_object(&mut self, mut on_field: impl FnMut(Field) -> Option<()>) -> Option<()> {
        self.items(b'{', b'}', 0, |scan| {
            let key = scan.plain_key()?;
            scan.colon()?;
            let start = scan.at;
            scan.value(1)?;
            on_field(Field {
                key,
                value: start..scan.at,
            })
        })
    }

    /// `open`, then items separated by commas, then `close`: an object's
    /// fields or an array's values.
    fn items(
        &mut self,
        open: u8,
        close: u8,
        depth: usize,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(open)?;
        self.skip_whitespace();
        if self.peek()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            self.skip_whitespace();
            item(self)?;
            self.skip_whitespace();
            match self.next()? {
                b',' => {}
                byte if byte == close => return Some(()),
                _ => return None,
            }
        }
    }

    /// The `:` between a key and its value, with the white space around it.
    fn colon(&mut self) -> Option<()> {
        self.skip_whitespace();
        self.eat(b':')?;
        self.skip_whitespace();
        Some(())
    }

    /// A key read as-is: printable ASCII without escapes (serde_json would
    /// unescape and check UTF-8 first, so anything else goes to it).
    fn plain_key(&mut self) -> Option<Range<usize>> {
        self.eat(b'"')?;
        let start = self.at;
        let rest = self.json.get(start..)?;
        let end = rest
            .iter()
            .position(|&b| !(0x20..0x80).contains(&b) || b == b'"' || b == b'\\')?;
        if rest[end] != b'"' {
            return None;
        }
        self.at = start + end + 1;
        Some(start..start + end)
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        self.items(b'{', b'}', depth, |scan| {
            scan.string()?;
            scan.colon()?;
            scan.value(depth)
        })
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.items(b'[', b']', depth, |scan| scan.value(depth))
    }

    /// A string as serde_json skips one: escapes checked, control characters
    /// refused, other bytes taken as they are.
    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            let rest = self.json.get(self.at..)?;
            let stop = string_stop(rest)?;
            self.at += stop + 1;
            match rest[stop] {
                b'"' => return Some(()),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => self.unicode_escape()?,
                    _ => return None,
                },
                _ => return None,
            }
        }
    }

    /// The four hex digits after `\\u`, as serde_json reads them into text:
    /// a surrogate must be a leading one followed by a trailing one.
    fn unicode_escape(&mut self) -> Option<()> {
        let unit = self.hex4()?;
        match unit {
            0xDC00..=0xDFFF => None,
            0xD800..=0xDBFF => {
                (self.next()? == b'\\' && self.next()? == b'u').then_some(())?;
                (0xDC00..=0xDFFF).contains(&self.hex4()?).then_some(())
            }
            _ => Some(()),
        }
    }

    fn hex4(&mut self) -> Option<u16> {
        let hex = std::str::from_utf8(self.json.get(self.at..self.at + 4)?).ok()?;
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u16::from_str_radix(hex, 16).ok()
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.json.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, short enough that
    /// serde_json cannot find it out of range (a long one is left to it).
    fn number(&mut self) -> Option<()> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            let digits = self.at;
            self.some_digits()?;
            if self.at - digits > 2 {
                return None;
            }
        }
        (self.at - start <= MAX_NUMBER).then_some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

/// Where the first byte that ends a string's plain text is (`"`, `\\` or a
/// control character), eight bytes at a time: most of a request or an
/// answer is string text, and a byte-by-byte search was the scanner's main
/// cost.
fn string_stop(text: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH_BITS: u64 = ONES << 7;
    let mut at = 0;
    while let Some(chunk) = text.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // The classic "has a zero byte" and "has a byte below n" tests: the
        // lowest flagged byte is always a real one (a false flag can only
        // follow a real one, from the borrow), and the load is little-endian,
        // so the lowest is the first in the text.
        let flags = (quote.wrapping_sub(ONES) & !quote
            | backslash.wrapping_sub(ONES) & !backslash
            | word.wrapping_sub(ONES * 0x20) & !word)
            & HIGH_BITS;
        if flags != 0 {
            return Some(at + flags.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    let tail = text.get(at..)?;
    let stop = tail.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    Some(at + stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::value::RawValue;

    /// What serde_json makes of an answer: whether it accepts it, and its usage.
    fn by_serde(json: &[u8]) -> Result<Option<String>, serde_json::Error> {
        #[derive(Deserialize)]
        struct UsageField<'a> {
            #[serde(borrow, default)]
            usage: Option<&'a RawValue>,
        }
        let field: UsageField = serde_json::from_slice(json)?;
        Ok(field.usage.map(|raw| raw.get().to_string()))
    }

    fn usage_of(json: &str) -> Option<Option<&str>> {
        object_usage(json.as_bytes()).map(|usage| usage.map(|range| &json[range]))
    }

    #[test]
    fn finds_the_top_level_usage_of_a_valid_object() {
        let answer = r#" {"id":"c","choices":[{"message":{"content":"a \"q\" \u00e9 é","usage":1}}],
            "usage": {"prompt_tokens":3,"completion_tokens":4.5e-1} , "n":[-0,1.25E+3,true,false,null]} "#;
        assert_eq!(
            usage_of(answer),
            Some(Some(r#"{"prompt_tokens":3,"completion_tokens":4.5e-1}"#))
        );
        assert_eq!(usage_of("{}"), Some(None));
        assert_eq!(usage_of(r#"{"a":"\ud83d\ude00","b":1e99}"#), Some(None));
        assert_eq!(usage_of(r#"{"usage":null}"#), Some(Some("null")));
    }

    #[test]
    fn leaves_what_it_is_not_sure_of_to_serde_json() {
        for unsure in [
            "",
            "[]",
            "{",
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":tru}"#,
            r#"{"a":"\x"}"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"a":1} x"#,
            r#"{"us\u0061ge":1}"#,
            r#"{"usage":1,"usage":2}"#,
            r#"{"é":1}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00"}"#,
            r#"{"a":"\ud800\u0041"}"#,
            r#"{"a":1e400}"#,
        ] {
            assert_eq!(object_usage(unsure.as_bytes()), None, "{unsure:?}");
        }
        let deep = format!(r#"{{"a":{}{}}}"#, "[".repeat(150), "]".repeat(150));
        assert_eq!(object_usage(deep.as_bytes()), None);
    }

    /// JSON-like text: valid answers, and the same with bytes cut, doubled or changed.
    fn answers() -> impl Strategy<Value = Vec<u8>> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            "-?(0|[1-9][0-9]{0,3})(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,3})?",
            "\"([a-z é\\\\\"/]|\\\\[\"\\\\/bfnrtu]|\\\\u[0-9a-fA-F]{4}|\\\\ud[89ab][0-9a-f]{2}(\\\\ud[c-f][0-9a-f]{2})?){0,8}\"",
        ];
        let value = leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(|items| format!("[{}]", items.join(","))),
                prop::collection::vec(("(usage|id|[a-z]{1,3})", inner), 0..4).prop_map(|fields| {
                    let fields: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\" : {v}")).collect();
                    format!("{{ {} }}", fields.join(","))
                }),
            ]
        });
        let object = prop::collection::vec(("(usage|id|model|[a-z]{1,4})", value), 0..5).prop_map(|fields| {
            let fields: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", fields.join(","))
        });
        (object, any::<u16>(), any::<u8>(), 0..4u8).prop_map(|(text, at, byte, how)| {
            let mut bytes = text.into_bytes();
            let at = usize::from(at) % (bytes.len() + 1);
            match how {
                0 => {}
                1 => bytes.truncate(at),
                2 => bytes.insert(at, byte),
                _ => {
                    if at < bytes.len() {
                        bytes[at] = byte;
                    }
                }
            }
            bytes
        })
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(2048))]

        /// Fields found are serde_json's, value for value, in order.
        #[test]
        fn fields_agree_with_serde_json(json in answers()) {
            if let Ok(text) = std::str::from_utf8(&json) && let Some(fields) = object_fields(text) {
                let tree: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&json)
                    .map_err(|err| TestCaseError::fail(format!("accepted what serde_json refuses: {err}")))?;
                prop_assert_eq!(fields.len(), tree.len());
                for (field, (key, value)) in fields.iter().zip(&tree) {
                    prop_assert_eq!(&json[field.key.clone()], key.as_bytes());
                    let found: serde_json::Value = serde_json::from_slice(&json[field.value.clone()])
                        .map_err(|err| TestCaseError::fail(err.to_string()))?;
                    prop_assert_eq!(&found, value);
                }
            }
        }

        /// The word-at-a-time search stops where a byte-by-byte one does.
        #[test]
        fn string_stop_is_the_first_special_byte(
            text in proptest::collection::vec(prop_oneof![
                4 => 0x20u8..=0x7f,
                1 => Just(b'"'),
                1 => Just(b'\\'),
                1 => 0u8..0x20,
                1 => 0x80u8..=0xff,
            ], 0..40)
        ) {
            let expected = text.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
            prop_assert_eq!(string_stop(&text), expected);
        }

        /// Whatever the scan accepts, serde_json accepts, with the same usage.
        #[test]
        fn agrees_with_serde_json(json in answers()) {
            if let Some(usage) = object_usage(&json) {
                // serde_json reads `"usage": null` as no usage; so does the caller.
                let usage = usage
                    .map(|range| String::from_utf8_lossy(&json[range]).into_owned())
                    .filter(|usage| usage != "null");
                let serde = by_serde(&json);
                prop_assert!(serde.is_ok(), "accepted what serde_json refuses: {:?}", String::from_utf8_lossy(&json));
                let serde = serde.unwrap_or_default();
                prop_assert_eq!(usage, serde);
            }
        }
    }
}
