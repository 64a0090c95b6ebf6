//! Text for previews, summaries and records: a chat message's content as
//! plain text, and shortening by characters (never splitting a UTF-8
//! sequence) with `…` marking the cut.

use serde_json::Value;

/// An OpenAI message `content` as text: a string as is, the text parts of a
/// parts array joined by spaces, anything else empty.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// `text` cut to at most `max` characters, with `…` after a cut.
pub fn ellipsize(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// One line: newlines become spaces, then [`ellipsize`].
pub fn one_line(text: &str, max: usize) -> String {
    ellipsize(&text.replace('\n', " "), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_by_characters_and_marks_the_cut() {
        assert_eq!(ellipsize("short", 10), "short");
        assert_eq!(ellipsize("exactly10!", 10), "exactly10!");
        assert_eq!(ellipsize("ééééé", 3), "ééé…");
        assert_eq!(one_line("a\nb\nc", 3), "a b…");
    }

    #[test]
    fn content_is_text_whether_a_string_or_parts() {
        use serde_json::json;
        assert_eq!(content_text(&json!("hi")), "hi");
        let parts =
            json!([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]);
        assert_eq!(content_text(&parts), "a b");
        assert_eq!(content_text(&Value::Null), "");
    }
}
