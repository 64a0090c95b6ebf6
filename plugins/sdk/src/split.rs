//! Splitting a long reply into messages within a platform's limit: at
//! paragraph breaks first, then line breaks, then spaces, and never inside a
//! code fence (a fence longer than the limit is closed and reopened, so each
//! part still renders as code).

/// Splits `text` into parts of at most `limit` characters.
pub fn split_message(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(16);
    let text = text.trim();
    if text.chars().count() <= limit {
        return if text.is_empty() {
            Vec::new()
        } else {
            vec![text.to_string()]
        };
    }
    let mut parts = Vec::new();
    let mut current = String::new();
    for block in blocks(text) {
        let joined = if current.is_empty() {
            block.clone()
        } else {
            format!("{current}\n\n{block}")
        };
        if chars(&joined) <= limit {
            current = joined;
            continue;
        }
        if !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        if chars(&block) <= limit {
            current = block;
        } else if block.starts_with("```") {
            parts.extend(split_fence(&block, limit));
        } else {
            parts.extend(split_prose(&block, limit));
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// Paragraphs, with each fenced code block (blank lines and all) kept whole.
fn blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        if fence && !in_fence {
            flush(&mut blocks, &mut current);
            in_fence = true;
            current.push(line);
        } else if fence && in_fence {
            current.push(line);
            in_fence = false;
            flush(&mut blocks, &mut current);
        } else if !in_fence && line.trim().is_empty() {
            flush(&mut blocks, &mut current);
        } else {
            current.push(line);
        }
    }
    flush(&mut blocks, &mut current);
    blocks
}

fn flush(blocks: &mut Vec<String>, current: &mut Vec<&str>) {
    if !current.is_empty() {
        blocks.push(current.join("\n"));
        current.clear();
    }
}

/// A paragraph too long for one message: by lines, then by words, then hard.
fn split_prose(block: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        for piece in pieces(line, limit) {
            let sep = if current.is_empty() { "" } else { "\n" };
            if chars(&current) + sep.len() + chars(&piece) <= limit {
                current.push_str(sep);
                current.push_str(&piece);
            } else {
                if !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
                current = piece;
            }
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// One line cut at spaces into pieces of at most `limit` characters.
fn pieces(line: &str, limit: usize) -> Vec<String> {
    if chars(line) <= limit {
        return vec![line.to_string()];
    }
    let mut out = Vec::new();
    let mut current = String::new();
    for word in line.split(' ') {
        let sep = if current.is_empty() { "" } else { " " };
        if chars(&current) + sep.len() + chars(word) <= limit {
            current.push_str(sep);
            current.push_str(word);
            continue;
        }
        if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        let mut rest: Vec<char> = word.chars().collect();
        while rest.len() > limit {
            out.push(rest.drain(..limit).collect());
        }
        current = rest.into_iter().collect();
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A code block longer than the limit: cut between lines, each part closed
/// and reopened with the same fence line so it stays code.
fn split_fence(block: &str, limit: usize) -> Vec<String> {
    let mut lines = block.lines();
    let opening = lines.next().unwrap_or("```").to_string();
    let body: Vec<&str> = lines.collect();
    let body = match body.last() {
        Some(last) if last.trim_start().starts_with("```") => &body[..body.len() - 1],
        _ => &body[..],
    };
    // Room for the fence lines around each part.
    let room = limit.saturating_sub(chars(&opening) + 5).max(8);
    let mut parts = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut size = 0;
    for line in body {
        for piece in hard_cut(line, room) {
            let added = chars(&piece) + 1;
            if size + added > room && !current.is_empty() {
                parts.push(format!("{opening}\n{}\n```", current.join("\n")));
                current.clear();
                size = 0;
            }
            size += added;
            current.push(piece);
        }
    }
    if !current.is_empty() {
        parts.push(format!("{opening}\n{}\n```", current.join("\n")));
    }
    parts
}

fn hard_cut(line: &str, room: usize) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(room).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::split_message;

    fn fences_balanced(part: &str) -> bool {
        part.lines().filter(|l| l.trim_start().starts_with("```")).count() % 2 == 0
    }

    #[test]
    fn short_text_is_one_message() {
        assert_eq!(split_message("hello", 100), vec!["hello"]);
        assert!(split_message("  ", 100).is_empty());
    }

    #[test]
    fn long_text_splits_at_paragraphs_within_the_limit() {
        let paragraph = "word ".repeat(30).trim().to_string(); // 149 chars
        let text = vec![paragraph.clone(); 5].join("\n\n");
        let parts = split_message(&text, 320);
        assert!(parts.iter().all(|p| p.chars().count() <= 320), "{parts:?}");
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0], format!("{paragraph}\n\n{paragraph}"));
        assert_eq!(parts.join("\n\n"), text);
    }

    #[test]
    fn a_code_fence_is_never_split_open() {
        let code = (0..40)
            .map(|i| format!("let x{i} = {i};"))
            .collect::<Vec<_>>()
            .join("\n");
        let text = format!("Here is the code:\n\n```rust\n{code}\n```\n\nThat is all.");
        for limit in [120, 200, 400] {
            let parts = split_message(&text, limit);
            for part in &parts {
                assert!(part.chars().count() <= limit, "{limit}: {part:?}");
                assert!(fences_balanced(part), "{limit}: unbalanced fence in {part:?}");
            }
            let all = parts.join("\n");
            for i in 0..40 {
                assert!(
                    all.contains(&format!("let x{i} = {i};")),
                    "line {i} lost at {limit}"
                );
            }
        }
        // A fence that fits stays in one part even when prose around it does not.
        let small = "```\nshort code\n\nwith a blank line\n```";
        let text = format!("{}\n\n{small}", "a ".repeat(60));
        let parts = split_message(&text, 100);
        assert!(parts.contains(&small.to_string()), "{parts:?}");
    }

    #[test]
    fn unbroken_text_is_cut_hard_and_nothing_is_lost() {
        let text = "x".repeat(250);
        let parts = split_message(&text, 100);
        assert_eq!(
            parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            vec![100, 100, 50]
        );
        let unicode = "é".repeat(150);
        let parts = split_message(&unicode, 100);
        assert_eq!(parts.concat(), unicode);
    }
}
