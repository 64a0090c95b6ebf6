//! What a word is for the text leg: split at blanks, punctuation and
//! letter/digit boundaries; lowercased; folded to ASCII; English Snowball
//! stems. The one analysis the index, queries and the highlighter share.

use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Changes whenever the analysis does (here or in `indexed_text`): snapshots
/// store analysed words, and one analysed by another version is not used.
pub const VERSION: u64 = 1;

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// One analysed word and where it sits in the source text (bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub term: String,
    pub start: usize,
    pub end: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Digit,
    Other,
}

fn class(c: char) -> Class {
    if c.is_numeric() {
        Class::Digit
    } else if c.is_alphabetic() {
        Class::Letter
    } else {
        Class::Other
    }
}

/// The analysed words of `text`, in order.
pub fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut start: Option<(usize, Class)> = None;
    for (at, c) in text.char_indices() {
        let here = class(c);
        if let Some((begun, was)) = start
            && was != here
        {
            push(&mut out, text, begun, at);
            start = None;
        }
        if start.is_none() && here != Class::Other {
            start = Some((at, here));
        }
    }
    if let Some((begun, _)) = start {
        push(&mut out, text, begun, text.len());
    }
    out
}

fn push(out: &mut Vec<Token>, text: &str, start: usize, end: usize) {
    let term = analyse(&text[start..end]);
    if !term.is_empty() {
        out.push(Token { term, start, end });
    }
}

/// Lowercase, ASCII-fold and stem one word.
pub fn analyse(word: &str) -> String {
    let lower = word.to_lowercase();
    let ascii = if lower.is_ascii() {
        lower
    } else {
        deunicode::deunicode(&lower).to_lowercase()
    };
    STEMMER.stem(&ascii).into_owned()
}

/// The distinct analysed words of a query, in order of first appearance.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for token in tokens(query) {
        if !terms.contains(&token.term) {
            terms.push(token.term);
        }
    }
    terms
}

/// `text` with every word whose analysis is one of `terms` wrapped in `mark`.
pub fn highlight(text: &str, terms: &[String], mark: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut copied = 0;
    for token in tokens(text) {
        if terms.contains(&token.term) {
            out.push_str(&text[copied..token.start]);
            out.push_str(mark);
            out.push_str(&text[token.start..token.end]);
            out.push_str(mark);
            copied = token.end;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        tokens(text).into_iter().map(|t| t.term).collect()
    }

    #[test]
    fn splits_at_blanks_punctuation_and_letter_digit_boundaries() {
        assert_eq!(
            terms("Deploying OX-1234 to prod!"),
            ["deploy", "ox", "1234", "to", "prod"]
        );
        assert_eq!(terms("v2beta café"), ["v", "2", "beta", "cafe"]);
        assert_eq!(terms("  "), Vec::<String>::new());
    }

    #[test]
    fn byte_ranges_point_at_the_source_words() {
        let text = "Ünïcode runs";
        let found = tokens(text);
        assert_eq!(&text[found[0].start..found[0].end], "Ünïcode");
        assert_eq!(found[1].term, "run");
    }

    #[test]
    fn highlights_every_form_of_a_query_word() {
        let terms = query_terms("deploy");
        assert_eq!(
            highlight("We deployed; deploys fail.", &terms, "**"),
            "We **deployed**; **deploys** fail."
        );
        assert_eq!(query_terms("run runs RUN"), ["run"]);
    }
}
