//! Shortening text for previews, summaries and records, by characters (never
//! splitting a UTF-8 sequence), with `…` marking the cut.

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
}
