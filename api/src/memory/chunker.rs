//! Markdown-aware chunking. Memory is mostly lists: a daily log is one bullet
//! per conversation turn or note, MEMORY.md one bullet per fact, a transcript
//! one `Speaker: text` line per turn. Each such item is a chunk of its own, so
//! a hit points at the turn that answers and its vector is about one thing, not
//! the average of twenty. Other text (paragraphs) becomes chunks of about
//! `target_tokens` tokens (estimated as 4 characters each), with
//! `overlap_tokens` of trailing lines repeated at the start of the next chunk
//! so a fact on a boundary is found from either side. No chunk is longer than
//! the target: an item or a line that is gets cut. A code fence is never
//! split; a heading starts a new chunk, and the headings above a chunk (a
//! daily log's date) travel with it as context.

use sha2::{Digest, Sha256};

/// Bumped whenever chunk boundaries would change for the same input, so the
/// index fingerprint changes and everything is rebuilt.
pub const CHUNKER_VERSION: u32 = 2;
const CHARS_PER_TOKEN: usize = 4;

#[derive(Debug, Clone, Copy)]
pub struct ChunkParams {
    pub target_tokens: usize,
    pub overlap_tokens: usize,
}

/// Tokens of an embedder's input kept free for its own markers and the heading context.
const INPUT_RESERVE: usize = 16;

impl ChunkParams {
    /// These parameters with chunks that fit an embedder reading at most
    /// `input_tokens` word pieces (0: unknown, unchanged). Word pieces are
    /// shorter than the 4 characters a token is estimated at here (about 3.2
    /// in English prose, logs and code for all-MiniLM-L6-v2's vocabulary), so
    /// the target is three quarters of what is left after the reserve.
    pub fn within(self, input_tokens: usize) -> Self {
        if input_tokens == 0 {
            return self;
        }
        let fits = (input_tokens.saturating_sub(INPUT_RESERVE) * 3 / 4).max(16);
        if fits >= self.target_tokens {
            return self;
        }
        Self {
            target_tokens: fits,
            overlap_tokens: self.overlap_tokens.min(fits / 4),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// 1-based, inclusive.
    pub start_line: usize,
    pub end_line: usize,
    /// The headings above the chunk, outermost first (`Projects > Onyx`).
    pub heading: String,
    pub text: String,
    /// SHA-256 of what gets embedded (heading context and text).
    pub hash: String,
}

impl Chunk {
    /// The text that is embedded and full-text indexed: context, then content.
    pub fn indexed_text(&self) -> String {
        indexed_text(&self.heading, &self.text)
    }
}

pub fn indexed_text(heading: &str, text: &str) -> String {
    if heading.is_empty() {
        text.to_string()
    } else {
        format!("{heading}\n{text}")
    }
}

pub fn content_hash(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// A run of lines that is kept together or split only at line ends.
struct Block<'a> {
    first_line: usize,
    lines: Vec<&'a str>,
    /// A fenced code block: never split, never used as overlap.
    fenced: bool,
    /// `Some(level)` for a heading line.
    heading: Option<usize>,
    /// A list item or a transcript turn (with its continuation lines): a chunk of its own.
    item: bool,
}

impl Block<'_> {
    fn chars(&self) -> usize {
        self.lines.iter().map(|l| l.len() + 1).sum()
    }
}

pub fn chunk(content: &str, params: ChunkParams) -> Vec<Chunk> {
    let target = params.target_tokens.max(1) * CHARS_PER_TOKEN;
    let overlap = params.overlap_tokens * CHARS_PER_TOKEN;
    let mut builder = Builder {
        target,
        overlap,
        chunks: Vec::new(),
        lines: Vec::new(),
        size: 0,
        headings: Vec::new(),
        chunk_heading: String::new(),
        heading_line: None,
    };
    for block in blocks(content) {
        if let Some(level) = block.heading {
            builder.close();
            builder.lines.clear();
            builder.size = 0;
            builder.headings.retain(|(l, _)| *l < level);
            builder.chunk_heading = builder.breadcrumb();
            let title = block.lines[0].trim_start_matches('#').trim().to_string();
            builder.headings.push((level, title));
            builder.push(block.first_line, block.lines[0], false);
            builder.heading_line = Some(block.first_line);
            continue;
        }
        if block.item {
            // A heading alone is no chunk: it travels with the items under it.
            let only_heading = builder
                .lines
                .iter()
                .all(|l| l.1.trim().is_empty() || Some(l.0) == builder.heading_line);
            if !only_heading {
                builder.close();
            }
            builder.restart();
            for (offset, line) in block.lines.iter().enumerate() {
                if builder.size > 0 && builder.size + line.len() + 1 > target {
                    builder.close();
                    builder.restart();
                }
                builder.push_long(block.first_line + offset, line, false);
            }
            builder.close();
            builder.restart();
            continue;
        }
        if builder.size > 0 && builder.size + block.chars() > target {
            builder.close_with_overlap();
        }
        for (offset, line) in block.lines.iter().enumerate() {
            if !block.fenced && builder.size > 0 && builder.size + line.len() + 1 > target {
                builder.close_with_overlap();
            }
            builder.push_long(block.first_line + offset, line, block.fenced);
        }
    }
    builder.close();
    builder.chunks
}

struct Builder<'a> {
    target: usize,
    overlap: usize,
    chunks: Vec<Chunk>,
    /// (line number, text, inside a fence) of the open chunk.
    lines: Vec<(usize, std::borrow::Cow<'a, str>, bool)>,
    size: usize,
    headings: Vec<(usize, String)>,
    chunk_heading: String,
    /// The line of the last heading seen.
    heading_line: Option<usize>,
}

impl<'a> Builder<'a> {
    fn breadcrumb(&self) -> String {
        self.headings
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join(" > ")
    }

    /// Starts an empty chunk (no overlap) under the current headings.
    fn restart(&mut self) {
        self.lines.clear();
        self.size = 0;
        self.chunk_heading = self.breadcrumb();
    }

    fn push(&mut self, number: usize, line: &'a str, fenced: bool) {
        self.size += line.len() + 1;
        self.lines.push((number, line.into(), fenced));
    }

    /// Adds a line, cutting one longer than a whole chunk into pieces
    /// (outside fences) at character boundaries.
    fn push_long(&mut self, number: usize, line: &'a str, fenced: bool) {
        if fenced || line.len() <= self.target {
            self.push(number, line, fenced);
            return;
        }
        let mut rest = line;
        while !rest.is_empty() {
            let mut cut = rest.len().min(self.target);
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            if cut < rest.len()
                && let Some(space) = rest[..cut].rfind(' ')
                && space > 0
            {
                cut = space + 1;
            }
            if self.size > 0 {
                self.close_with_overlap();
            }
            self.size += cut;
            self.lines.push((number, rest[..cut].to_string().into(), false));
            rest = &rest[cut..];
        }
    }

    fn close(&mut self) {
        // Blank lines at either end belong to no chunk.
        let blank = |l: &(usize, std::borrow::Cow<'a, str>, bool)| l.1.trim().is_empty();
        let Some(first) = self.lines.iter().position(|l| !blank(l)) else {
            return;
        };
        let last = self.lines.iter().rposition(|l| !blank(l)).unwrap_or(first);
        let lines = &self.lines[first..=last];
        let text = lines
            .iter()
            .map(|(_, l, _)| l.as_ref())
            .collect::<Vec<_>>()
            .join("\n");
        let start_line = lines[0].0;
        let end_line = lines[lines.len() - 1].0;
        let hash = content_hash(&indexed_text(&self.chunk_heading, &text));
        self.chunks.push(Chunk {
            start_line,
            end_line,
            heading: self.chunk_heading.clone(),
            text,
            hash,
        });
    }

    /// Closes the open chunk and starts the next with its trailing lines
    /// (never fenced ones) up to the overlap budget.
    fn close_with_overlap(&mut self) {
        self.close();
        let mut keep = Vec::new();
        let mut kept = 0;
        for line in self.lines.iter().rev() {
            if line.2 || kept + line.1.len() + 1 > self.overlap {
                break;
            }
            kept += line.1.len() + 1;
            keep.push(line.clone());
        }
        keep.reverse();
        // A chunk made only of overlap would repeat forever: keep none then.
        if keep.len() == self.lines.len() {
            keep.clear();
            kept = 0;
        }
        self.lines = keep;
        self.size = kept;
        self.chunk_heading = self.breadcrumb();
    }
}

/// Splits a document into headings, fenced code blocks, and runs of other lines.
fn blocks(content: &str) -> Vec<Block<'_>> {
    let mut out: Vec<Block<'_>> = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (index, line) in content.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        if let Some((mark, len)) = fence {
            if let Some(block) = out.last_mut() {
                block.lines.push(line);
            }
            let run = trimmed.chars().take_while(|c| *c == mark).count();
            if run >= len && trimmed[run * mark.len_utf8()..].trim().is_empty() {
                fence = None;
            }
            continue;
        }
        if let Some(mark) = ['`', '~']
            .into_iter()
            .find(|m| trimmed.starts_with(&m.to_string().repeat(3)))
        {
            fence = Some((mark, trimmed.chars().take_while(|c| *c == mark).count()));
            out.push(Block {
                first_line: number,
                lines: vec![line],
                fenced: true,
                heading: None,
                item: false,
            });
            continue;
        }
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&level) && trimmed[level..].starts_with(' ') && line.len() == trimmed.len() {
            out.push(Block {
                first_line: number,
                lines: vec![line],
                fenced: false,
                heading: Some(level),
                item: false,
            });
            continue;
        }
        let blank = line.trim().is_empty();
        let starts_item = !blank && starts_item(line);
        match out.last_mut() {
            // An indented line continues an item; any other line after an item starts a paragraph.
            Some(block)
                if !block.fenced
                    && block.heading.is_none()
                    && !blank
                    && !starts_item
                    && (!block.item || line.starts_with([' ', '\t'])) =>
            {
                block.lines.push(line);
            }
            _ => out.push(Block {
                first_line: number,
                lines: vec![line],
                fenced: false,
                heading: None,
                item: starts_item,
            }),
        }
    }
    out
}

/// A list item (`- `, `* `, `+ `, `1. `, `1) `) or a transcript turn
/// (`Name: text`, a capitalised name of up to three words), not indented.
fn starts_item(line: &str) -> bool {
    if line.starts_with([' ', '\t']) {
        return false;
    }
    if ["- ", "* ", "+ "].iter().any(|m| line.starts_with(m)) {
        return true;
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=3).contains(&digits) && (line[digits..].starts_with(". ") || line[digits..].starts_with(") ")) {
        return true;
    }
    let Some((speaker, rest)) = line.split_once(": ") else {
        return false;
    };
    !rest.trim().is_empty()
        && speaker.len() <= 40
        && speaker.chars().next().is_some_and(char::is_uppercase)
        && speaker.split(' ').count() <= 3
        && speaker
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '.' | '\'' | '-' | '_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: ChunkParams = ChunkParams {
        target_tokens: 20,
        overlap_tokens: 5,
    };

    #[test]
    fn headings_start_chunks_and_travel_as_context() {
        let doc = "# Projects\nintro line\n## Onyx\nrust gateway\n## Garden\ntomatoes\n";
        let chunks = chunk(doc, SMALL);
        let summary: Vec<_> = chunks
            .iter()
            .map(|c| (c.start_line, c.end_line, c.heading.as_str(), c.text.as_str()))
            .collect();
        assert_eq!(
            summary,
            vec![
                (1, 2, "", "# Projects\nintro line"),
                (3, 4, "Projects", "## Onyx\nrust gateway"),
                (5, 6, "Projects", "## Garden\ntomatoes"),
            ]
        );
        assert_eq!(chunks[1].indexed_text(), "Projects\n## Onyx\nrust gateway");
    }

    #[test]
    fn code_fences_are_never_split() {
        let fence: String = (0..40).map(|i| format!("let x{i} = {i};\n")).collect();
        let doc = format!("before\n```rust\n{fence}```\nafter\n");
        let chunks = chunk(&doc, SMALL);
        let with_fence: Vec<_> = chunks.iter().filter(|c| c.text.contains("```")).collect();
        assert_eq!(with_fence.len(), 1, "{chunks:#?}");
        let fenced = with_fence[0];
        assert!(fenced.text.contains("let x0 = 0;") && fenced.text.contains("let x39 = 39;"));
        assert_eq!(fenced.text.matches("```").count(), 2);
    }

    #[test]
    fn long_text_is_split_with_overlap_and_line_numbers() {
        let doc: String = (1..=30).map(|i| format!("line number {i:02}\n")).collect();
        let chunks = chunk(&doc, SMALL);
        assert!(chunks.len() > 3);
        for pair in chunks.windows(2) {
            assert!(pair[1].start_line <= pair[0].end_line, "no overlap: {pair:#?}");
            assert!(pair[1].end_line > pair[0].end_line);
        }
        assert_eq!(chunks[0].start_line, 1);
        assert_eq!(chunks.last().unwrap().end_line, 30);
        for c in &chunks {
            let expected: Vec<String> = (c.start_line..=c.end_line)
                .map(|i| format!("line number {i:02}"))
                .collect();
            assert_eq!(c.text, expected.join("\n"));
        }
    }

    #[test]
    fn a_huge_line_is_cut_on_char_boundaries() {
        let doc = "é".repeat(500);
        let chunks = chunk(&doc, SMALL);
        assert!(chunks.len() > 1);
        assert_eq!(chunks.iter().map(|c| c.text.chars().count()).sum::<usize>(), 500);
    }

    #[test]
    fn each_turn_of_a_daily_log_is_a_chunk_under_its_date() {
        let doc = "# 2026-07-01\n\n- 08:54 asked “GP results” → answered “vitamin D is low”\n\
                   - 09:10 note: book the dentist\n  (after the holidays)\n\nA closing paragraph.\n";
        let chunks = chunk(doc, SMALL);
        let summary: Vec<_> = chunks
            .iter()
            .map(|c| (c.start_line, c.end_line, c.heading.as_str()))
            .collect();
        assert_eq!(
            summary,
            vec![(3, 3, "2026-07-01"), (4, 5, "2026-07-01"), (7, 7, "2026-07-01")]
        );
        assert_eq!(
            chunks[1].indexed_text(),
            "2026-07-01\n- 09:10 note: book the dentist\n  (after the holidays)"
        );
    }

    #[test]
    fn transcript_turns_and_numbered_items_are_chunks() {
        let doc = "Caroline: I went to the support group yesterday.\nMelanie: How was it?\n\
                   1. first step\n2) second step\nnot: a turn because lowercase\n";
        let lines: Vec<_> = chunk(
            doc,
            ChunkParams {
                target_tokens: 200,
                overlap_tokens: 0,
            },
        )
        .iter()
        .map(|c| (c.start_line, c.end_line))
        .collect();
        // An unindented line after an item is a paragraph of its own.
        assert_eq!(lines, vec![(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]);
    }

    #[test]
    fn a_long_item_is_cut_to_the_target() {
        let doc = format!("- {}\n", "word ".repeat(60));
        let chunks = chunk(&doc, SMALL);
        assert!(chunks.len() > 1, "{chunks:#?}");
        assert!(chunks.iter().all(|c| c.text.len() <= 20 * 4));
    }

    #[test]
    fn chunks_fit_the_embedders_input() {
        let params = ChunkParams {
            target_tokens: 400,
            overlap_tokens: 80,
        };
        let minilm = params.within(256);
        assert_eq!((minilm.target_tokens, minilm.overlap_tokens), (180, 45));
        assert_eq!(params.within(8191).target_tokens, 400);
        assert_eq!(params.within(0).target_tokens, 400);
    }

    #[test]
    fn hashes_follow_content_and_context() {
        let a = chunk("# A\ntext\n", SMALL);
        let b = chunk("# A\ntext\n", SMALL);
        let c = chunk("# B\ntext\n", SMALL);
        assert_eq!(a[0].hash, b[0].hash);
        assert_ne!(a[0].hash, c[0].hash);
        assert!(chunk("\n\n  \n", SMALL).is_empty());
    }
}
