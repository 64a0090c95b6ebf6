//! What a prompt reads of a daily log: its start and its end, never the whole
//! of a long one. A turn reads today's and yesterday's logs, so this costs a
//! bounded number of reads and bytes however busy the day was:
//!
//! - a plain file: one ranged read of its start (the whole file when it is
//!   short), and one of its end;
//! - a log kept as segments: the segments from the first until the head is
//!   full, and from the last back until the tail is, each read once per
//!   replica (segments never change) and found by number, not by a listing.
//!   Where the log ends is what this replica last wrote or saw, checked with
//!   one read of the next number (another replica's appends are found there).
//!
//! Listing, search and the Memory page still read a log whole (`read_file`).

use bytes::Bytes;

use super::paths;
use super::segments::{self, Tail};
use super::service::{Memory, MemoryError};
use crate::storage::{Bucket, ByteRange};

/// The segments read on one side at most, whatever their sizes: a bound on
/// reads when notes are tiny.
const MAX_SEGMENTS_A_SIDE: u64 = 2_048;

/// A daily log as a prompt sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Excerpt {
    /// The log is short enough to read whole.
    Whole(String),
    /// A long log: its first and last whole lines, and how many bytes lie between.
    Ends {
        head: String,
        tail: String,
        omitted_bytes: u64,
    },
}

impl Memory {
    /// The first `head` and last `tail` bytes of a daily log, cut at line
    /// ends (the whole log when it is not longer than both); `None` when the
    /// log does not exist.
    pub async fn read_excerpt(
        &self,
        agent: &str,
        path: &str,
        head: u64,
        tail: u64,
    ) -> Result<Option<Excerpt>, MemoryError> {
        let (agent, path) = (paths::agent(agent)?, paths::file(path)?);
        let key = paths::object_key(agent, path)?;
        let Some(start) = self
            .objects
            .get_range(Bucket::Memory, &key, ByteRange::Head(head + tail))
            .await?
        else {
            return match paths::daily_date(path) {
                Some(_) => self.segmented_excerpt(agent, path, head, tail).await,
                None => Ok(None),
            };
        };
        if start.total <= head + tail {
            return Ok(Some(Excerpt::Whole(text(&start.body))));
        }
        let end = self
            .objects
            .get_range(Bucket::Memory, &key, ByteRange::Tail(tail))
            .await?
            .map(|r| r.body)
            .unwrap_or_default();
        let start_of = &start.body[..start.body.len().min(head as usize)];
        Ok(Some(ends(start_of, &end, start.total)))
    }

    async fn segmented_excerpt(
        &self,
        agent: &str,
        path: &str,
        head: u64,
        tail: u64,
    ) -> Result<Option<Excerpt>, MemoryError> {
        let Some(end) = self.current_tail(agent, path).await? else {
            return Ok(None);
        };
        let last = end.next.saturating_sub(1);
        if end.bytes <= head + tail {
            let mut whole = Vec::new();
            for seq in 1..=last {
                if let Some(body) = self.segment_body(agent, path, seq).await? {
                    whole.extend_from_slice(&body);
                }
            }
            return Ok((!whole.is_empty()).then(|| Excerpt::Whole(text(&whole))));
        }
        let mut start = Vec::new();
        let mut first_after_head = 1;
        while (start.len() as u64) < head && first_after_head <= last.min(MAX_SEGMENTS_A_SIDE) {
            if let Some(body) = self.segment_body(agent, path, first_after_head).await? {
                start.extend_from_slice(&body);
            }
            first_after_head += 1;
        }
        let mut parts: Vec<Bytes> = Vec::new();
        let (mut tail_bytes, mut seq) = (0u64, last);
        while tail_bytes < tail && seq >= first_after_head && last - seq < MAX_SEGMENTS_A_SIDE {
            if let Some(body) = self.segment_body(agent, path, seq).await? {
                tail_bytes += body.len() as u64;
                parts.push(body);
            }
            seq -= 1;
        }
        let finish: Vec<u8> = parts.iter().rev().flat_map(|b| b.iter().copied()).collect();
        let start = &start[..start.len().min(head as usize)];
        let finish = &finish[finish.len() - finish.len().min(tail as usize)..];
        Ok(Some(ends(start, finish, end.bytes)))
    }

    /// Where a segmented log ends now: this replica's last knowledge (or, the
    /// first time, a listing), moved on past segments other replicas wrote
    /// since. `None` when the log has no segments.
    async fn current_tail(&self, agent: &str, path: &str) -> Result<Option<Tail>, MemoryError> {
        let mut tail = match self.segments.tail(agent, path) {
            Some(tail) if self.first_segment_unchanged(agent, path).await? => tail,
            _ => self.tail_from_store(agent, path).await?,
        };
        if let Some(moved) = self.past_others(agent, path, tail).await? {
            tail = moved;
        }
        if tail.next <= 1 {
            return Ok(None);
        }
        self.segments.advance_tail(agent, path, tail);
        Ok(Some(tail))
    }

    /// Whether the log's first segment is still the one this replica read
    /// (a deleted and restarted log numbers its segments from 1 again).
    async fn first_segment_unchanged(&self, agent: &str, path: &str) -> Result<bool, MemoryError> {
        let Some(cached) = self.segments.segment(agent, path, 1) else {
            return Ok(true);
        };
        let current = self
            .objects
            .get(Bucket::Memory, &segments::key(agent, path, 1)?)
            .await?;
        if current.as_ref().is_some_and(|o| o.body == cached) {
            return Ok(true);
        }
        self.segments.forget_log(agent, path);
        Ok(false)
    }

    /// One segment's text, read once per replica.
    async fn segment_body(&self, agent: &str, path: &str, seq: u64) -> Result<Option<Bytes>, MemoryError> {
        if let Some(body) = self.segments.segment(agent, path, seq) {
            return Ok(Some(body));
        }
        let Some(object) = self
            .objects
            .get(Bucket::Memory, &segments::key(agent, path, seq)?)
            .await?
        else {
            return Ok(None);
        };
        self.segments.keep_segment(agent, path, seq, object.body.clone());
        Ok(Some(object.body))
    }
}

/// Text from bytes that may be cut inside a character at either end.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A long log's start up to its last whole line and end from its first whole
/// line (a cut inside a line, or inside a character, is dropped).
fn ends(start: &[u8], end: &[u8], total: u64) -> Excerpt {
    let head = match start.iter().rposition(|b| *b == b'\n') {
        Some(at) => &start[..=at],
        None => start,
    };
    let tail = match end.iter().position(|b| *b == b'\n') {
        Some(at) if at + 1 < end.len() => &end[at + 1..],
        _ => end,
    };
    Excerpt::Ends {
        head: text(head).trim_end_matches('\u{FFFD}').to_string(),
        tail: text(tail).trim_start_matches('\u{FFFD}').to_string(),
        omitted_bytes: total.saturating_sub((head.len() + tail.len()) as u64),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::memory::counting_store::{Counting, setup};
    use crate::memory::{NoteTarget, Settings};

    const HEAD: u64 = 4_000;
    const TAIL: u64 = 1_000;

    fn at(minute: u32) -> chrono::DateTime<chrono::Utc> {
        use chrono::TimeZone;
        chrono::Utc
            .with_ymd_and_hms(2026, 11, 24, 9 + minute / 60, minute % 60, 0)
            .unwrap()
    }

    async fn note(memory: &Memory, i: usize) {
        let text = format!("turn {i:05}: the herb garden needs water before the frost comes");
        memory
            .append_note_at(
                "main",
                NoteTarget::Daily(chrono_tz::UTC),
                &text,
                at((i % 600) as u32),
            )
            .await
            .unwrap();
    }

    /// Reads and bytes one excerpt costs.
    async fn excerpt_cost(store: &Counting, memory: &Memory) -> (Excerpt, u64, u64) {
        let (reads, moved) = (
            store.reads.load(Ordering::Relaxed),
            store.moved.load(Ordering::Relaxed),
        );
        let excerpt = memory
            .read_excerpt("main", "memory/2026-11-24.md", HEAD, TAIL)
            .await
            .unwrap()
            .unwrap();
        (
            excerpt,
            store.reads.load(Ordering::Relaxed) - reads,
            store.moved.load(Ordering::Relaxed) - moved,
        )
    }

    fn assert_ends_of(excerpt: &Excerpt, whole: &str) {
        let Excerpt::Ends {
            head,
            tail,
            omitted_bytes,
        } = excerpt
        else {
            panic!("a long log is read by its ends: {excerpt:?}")
        };
        assert!(
            whole.starts_with(head.as_str()) && head.len() as u64 > HEAD - 100,
            "{head}"
        );
        assert!(
            whole.ends_with(tail.as_str()) && tail.len() as u64 > TAIL - 100,
            "{tail}"
        );
        assert_eq!(*omitted_bytes, (whole.len() - head.len() - tail.len()) as u64);
    }

    /// The excerpt of a busy day's log costs the same reads and bytes at its
    /// thousandth note as just past its start, and matches the log's ends.
    #[tokio::test]
    async fn reading_a_busy_days_ends_costs_the_same_however_long_the_day() {
        let (_dir, store, memory, db) = setup().await;
        for i in 0..20 {
            note(&memory, i).await;
        }
        let whole = memory
            .read_file("main", "memory/2026-11-24.md")
            .await
            .unwrap()
            .content;
        let (short, _, _) = excerpt_cost(&store, &memory).await;
        assert_eq!(short, Excerpt::Whole(whole));

        for i in 20..100 {
            note(&memory, i).await;
        }
        let (early, early_reads, early_bytes) = excerpt_cost(&store, &memory).await;
        let whole = memory
            .read_file("main", "memory/2026-11-24.md")
            .await
            .unwrap()
            .content;
        assert_ends_of(&early, &whole);
        for i in 100..1_000 {
            note(&memory, i).await;
        }
        let (late, late_reads, late_bytes) = excerpt_cost(&store, &memory).await;
        let whole = memory
            .read_file("main", "memory/2026-11-24.md")
            .await
            .unwrap()
            .content;
        assert_ends_of(&late, &whole);
        assert!(whole.len() > 60_000, "a long day: {}", whole.len());
        // The plain-file check, the first segment and the one past the end.
        assert_eq!((early_reads, late_reads), (3, 3));
        assert_eq!(
            early_bytes, late_bytes,
            "the same segments' bytes, none from the middle"
        );

        // A fresh replica (nothing cached) lists once, then reads only the ends.
        let other = Memory::new(store.clone(), db.clone(), None, Settings::default());
        let (first, _, _) = excerpt_cost(&store, &other).await;
        assert_eq!(first, late);
        let (again, reads, _) = excerpt_cost(&store, &other).await;
        assert_eq!((again, reads), (late, 3));
    }

    /// Two replicas append to one day at the same time: every note lands once,
    /// and each replica's excerpt ends with the other's latest notes.
    #[tokio::test]
    async fn two_replicas_appending_at_once_both_see_the_whole_tail() {
        let (_dir, store, a, db) = setup().await;
        let b = Memory::new(store.clone(), db, None, Settings::default());
        for i in 0..100 {
            note(&a, i).await;
        }
        let (a_run, b_run) = (
            async {
                for i in 100..300 {
                    note(&a, i).await;
                }
            },
            async {
                for i in 300..500 {
                    note(&b, i).await;
                }
            },
        );
        tokio::join!(a_run, b_run);
        let whole = a.read_file("main", "memory/2026-11-24.md").await.unwrap().content;
        for i in 0..500 {
            assert_eq!(whole.matches(&format!("turn {i:05}:")).count(), 1, "note {i}");
        }
        for replica in [&a, &b] {
            let (excerpt, _, _) = excerpt_cost(&store, replica).await;
            assert_ends_of(&excerpt, &whole);
        }
        // A plain file (the day folded, or written by a person) is read by two ranges.
        let folded = a
            .write_file("main", "memory/2026-11-24.md", whole.clone(), None)
            .await
            .unwrap();
        assert!(folded.size > 30_000);
        let (excerpt, reads, bytes) = excerpt_cost(&store, &b).await;
        assert_ends_of(&excerpt, &whole);
        assert_eq!(reads, 2);
        assert_eq!(bytes, HEAD + TAIL + TAIL);
    }

    #[test]
    fn a_long_log_is_cut_at_line_ends_and_inside_no_character() {
        let Excerpt::Ends {
            head,
            tail,
            omitted_bytes,
        } = ends(b"# day\n\n- one\n- tw", b"ee\n- four \xc3\xa9\n", 100)
        else {
            panic!("a long log is cut")
        };
        assert_eq!(head, "# day\n\n- one\n");
        assert_eq!(tail, "- four é\n");
        assert_eq!(omitted_bytes, 100 - 13 - 10);
        // A cut inside a multi-byte character leaves no replacement character.
        let Excerpt::Ends { head, tail, .. } =
            ends("ab é".as_bytes()[..4].as_ref(), &"é x".as_bytes()[1..], 50)
        else {
            panic!("a long log is cut")
        };
        assert_eq!((head.as_str(), tail.as_str()), ("ab ", " x"));
    }
}
