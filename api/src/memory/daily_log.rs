//! Daily logs kept as segments (keys and cache in `segments`). A note
//! appended to a day that has no plain file is written as one new object and
//! indexed as one chunk, so the agent's per-turn log line costs the same at
//! the end of a busy day as at its start. Such a log reads as its segments in
//! order. A day with a plain file (written by a person, or by an older Onyx)
//! is appended to in place.
//!
//! Once no timezone's today is that day any more (13:00 UTC the next day), the
//! sync worker folds the segments into the plain file, which a prompt reads
//! by two ranged reads (`excerpt`). Segments found beside a
//! plain file are what a cut-short fold or a racing whole-file write leaves:
//! their text is appended to the plain file unless it already holds it.

use bytes::Bytes;

use super::chunker::{Chunk, content_hash, indexed_text};
use super::index::{ChunkRow, FileRow};
use super::paths::{self, FileKind};
use super::segments::{self, Tail};
use super::service::{Memory, MemoryError, WriteOutcome};
use crate::storage::{Bucket, ObjectInfo, PutCondition, StoreError};

/// Each lost race is another replica's append landing first.
const APPEND_ATTEMPTS: usize = 64;

/// Daily logs before this path's day are over in every timezone at `now`
/// (UTC-12 ends a day at 12:00 UTC the next; an hour more for clock skew),
/// so nothing appends to them as segments any more: the sync folds them.
pub(super) fn folds_before(now: chrono::DateTime<chrono::Utc>) -> String {
    paths::daily_path(&crate::clock::day(now - chrono::Duration::hours(13)))
}

/// A daily-log line's chunk, embedded before its place in the log is
/// known (`Memory::prepare_line`).
pub(super) struct PreparedLine {
    row: ChunkRow,
    /// The embedding its vector is of, when it has one.
    embedding: Option<String>,
}

/// A log kept as segments, read whole.
pub(super) struct Segmented {
    pub content: String,
    pub etag: String,
}

impl Memory {
    /// A daily log's segments as listed: (sequence number, object), in order.
    async fn listed_segments(&self, agent: &str, path: &str) -> Result<Vec<(u64, ObjectInfo)>, MemoryError> {
        let mut listed: Vec<(u64, ObjectInfo)> = self
            .objects
            .list(Bucket::Memory, &segments::prefix(agent, path))
            .await?
            .into_iter()
            .filter_map(|o| Some((segments::parse(&o.key)?.2, o)))
            .collect();
        listed.sort_unstable_by_key(|(seq, _)| *seq);
        Ok(listed)
    }

    /// A daily log's segment numbers, in order (a listing; no text is read).
    pub(super) async fn segment_seqs(&self, agent: &str, path: &str) -> Result<Vec<u64>, MemoryError> {
        Ok(self
            .listed_segments(agent, path)
            .await?
            .into_iter()
            .map(|(seq, _)| seq)
            .collect())
    }

    /// A daily log's segments in order, with their text; empty when it has none.
    async fn segments_of(&self, agent: &str, path: &str) -> Result<Vec<(u64, Bytes)>, MemoryError> {
        let listed: Vec<(u64, String)> = self
            .listed_segments(agent, path)
            .await?
            .into_iter()
            // Keyed by content token too: a fold frees sequence numbers for reuse.
            .map(|(seq, o)| (seq, format!("{} {}", o.key, o.etag)))
            .collect();
        let mut out = Vec::with_capacity(listed.len());
        for (seq, cache_key) in listed {
            if let Some(body) = self.segments.body(&cache_key) {
                out.push((seq, body));
                continue;
            }
            let object_key = segments::key(agent, path, seq)?;
            // Gone since the listing: a fold took it into the plain file.
            if let Some(object) = self.objects.get(Bucket::Memory, &object_key).await? {
                self.segments.keep_body(&cache_key, object.body.clone());
                out.push((seq, object.body));
            }
        }
        Ok(out)
    }

    /// A daily log kept as segments, whole; `None` when it has no segments.
    pub(super) async fn read_segmented(
        &self,
        agent: &str,
        path: &str,
    ) -> Result<Option<Segmented>, MemoryError> {
        let parts = self.segments_of(agent, path).await?;
        let Some(&(last, _)) = parts.last() else {
            return Ok(None);
        };
        let mut content = String::new();
        for (_, body) in &parts {
            content.push_str(&String::from_utf8_lossy(body));
        }
        Ok(Some(Segmented {
            content,
            etag: segments::etag(last),
        }))
    }

    /// Appends `line` to a daily log as a new segment (`header` first when it
    /// starts the log) and indexes it, with its chunk `prepared` beforehand
    /// or here; `Ok(None)` when the day has a plain file, which is appended
    /// to in place instead. The caller holds the file's lock.
    pub(super) async fn append_segment(
        &self,
        agent: &str,
        path: &str,
        header: &str,
        line: &str,
        prepared: Option<PreparedLine>,
    ) -> Result<Option<WriteOutcome>, MemoryError> {
        let plain = paths::object_key(agent, path)?;
        let mut tail = match self.segments.tail(agent, path) {
            Some(tail) => tail,
            None => {
                if self.objects.get(Bucket::Memory, &plain).await?.is_some() {
                    return Ok(None);
                }
                self.tail_from_store(agent, path).await?
            }
        };
        let prepared = match prepared {
            Some(prepared) => prepared,
            None => self.prepare_line(agent, path, line).await?,
        };
        for _ in 0..APPEND_ATTEMPTS {
            let starts = tail.next == 1 && tail.bytes == 0;
            let body = if starts {
                format!("{header}{line}")
            } else {
                line.to_string()
            };
            let key = segments::key(agent, path, tail.next)?;
            match self
                .objects
                .put(
                    Bucket::Memory,
                    &key,
                    Bytes::from(body.clone()),
                    PutCondition::IfAbsent,
                )
                .await
            {
                // Other replicas' appends took this number and maybe more:
                // step past each (one read apiece, not the whole log again).
                Err(StoreError::PreconditionFailed) => {
                    tail = match self.past_others(agent, path, tail).await? {
                        Some(moved) => moved,
                        // Deleted since (a fold or a whole-file write): start over.
                        None => self.tail_from_store(agent, path).await?,
                    };
                    continue;
                }
                Err(err) => return Err(err.into()),
                Ok(_) => {}
            }
            self.segments
                .keep_segment(agent, path, tail.next, Bytes::from(body.clone()));
            // A whole-file write on another replica may have made the plain
            // file meanwhile: then this note belongs in it.
            if self.objects.get(Bucket::Memory, &plain).await?.is_some() {
                self.segments.set_tail(agent, path, None);
                return self.fold_into_plain(agent, path).await.map(Some);
            }
            let first_line = tail.lines + 1 + if starts { header.lines().count() } else { 0 };
            let written = Tail {
                next: tail.next + 1,
                lines: tail.lines + body.lines().count(),
                bytes: tail.bytes + body.len() as u64,
            };
            self.segments.set_tail(agent, path, Some(written));
            let outcome = self
                .index_segment(agent, path, tail.next, first_line, prepared, written)
                .await?;
            return Ok(Some(outcome));
        }
        Err(MemoryError::Conflict {
            agent: agent.into(),
            path: path.into(),
        })
    }

    /// Where the log ends after the segments other replicas wrote from
    /// `tail` on, each read once (and kept); `None` when there is none at
    /// `tail` after all (the log was folded or replaced meanwhile).
    pub(super) async fn past_others(
        &self,
        agent: &str,
        path: &str,
        mut tail: Tail,
    ) -> Result<Option<Tail>, MemoryError> {
        let start = tail.next;
        loop {
            let seq = tail.next;
            let key = segments::key(agent, path, seq)?;
            let Some(object) = self.objects.get(Bucket::Memory, &key).await? else {
                return Ok((seq > start).then_some(tail));
            };
            tail = tail.after(&object.body);
            self.segments.keep_segment(agent, path, seq, object.body);
        }
    }

    /// Where the log ends, read from the store (a listing and every segment:
    /// once per replica and log, cached after).
    pub(super) async fn tail_from_store(&self, agent: &str, path: &str) -> Result<Tail, MemoryError> {
        let parts = self.segments_of(agent, path).await?;
        for (seq, body) in &parts {
            self.segments.keep_segment(agent, path, *seq, body.clone());
        }
        Ok(Tail {
            next: parts.last().map_or(1, |(seq, _)| seq + 1),
            lines: parts.iter().map(|(_, body)| count_lines(body)).sum(),
            bytes: parts.iter().map(|(_, body)| body.len() as u64).sum(),
        })
    }

    /// A line's chunk with its vector, made before the file's lock is taken:
    /// the embedder's round trip (tens of milliseconds for a real model)
    /// then does not hold up the agent's other notes to the same day.
    pub(super) async fn prepare_line(
        &self,
        agent: &str,
        path: &str,
        line: &str,
    ) -> Result<PreparedLine, MemoryError> {
        let day = paths::daily_date(path).unwrap_or_default();
        let text = line.trim_end().to_string();
        let chunk = Chunk {
            start_line: 1,
            end_line: text.lines().count().max(1),
            heading: day.to_string(),
            hash: content_hash(&indexed_text(day, &text)),
            text,
        };
        let mut row = ChunkRow::new(agent, path, FileKind::Daily, chunk, 0);
        let embedding = self.state.ready_fingerprint();
        self.attach_vectors(std::slice::from_mut(&mut row)).await?;
        Ok(PreparedLine { row, embedding })
    }

    /// Indexes one segment's note as one chunk, under the day's heading.
    async fn index_segment(
        &self,
        agent: &str,
        path: &str,
        seq: u64,
        first_line: usize,
        prepared: PreparedLine,
        tail: Tail,
    ) -> Result<WriteOutcome, MemoryError> {
        let PreparedLine { mut row, embedding } = prepared;
        row.id = segments::chunk_id(agent, path, seq);
        row.end_line = first_line + (row.end_line - row.start_line);
        row.start_line = first_line;
        // The embedder changed model since: the vector is of the old one,
        // so the chunk waits for the background drain like any pending one.
        let now = self.state.ready_fingerprint();
        if row.embedding.is_some() && now.is_some() && now != embedding {
            row.embedding = None;
            row.pending = true;
        }
        let rows = vec![row];
        let pending = rows.iter().filter(|r| r.pending).count();
        let etag = segments::etag(seq);
        let file = FileRow {
            agent: agent.into(),
            path: path.into(),
            checksum: String::new(),
            etag: etag.clone(),
            size: tail.bytes,
            chunks: 0,
            version: String::new(),
        };
        let chunks = self.index.append_chunks(&file, rows).await?;
        Ok(WriteOutcome {
            agent: agent.into(),
            path: path.into(),
            size: tail.bytes as usize,
            etag,
            chunks,
            pending,
        })
    }

    /// Makes the plain file hold every segment's text (unless it already
    /// does), deletes the segments and indexes the result. With no plain
    /// file, it is created from the segments. The caller holds the lock.
    pub(super) async fn fold_into_plain(&self, agent: &str, path: &str) -> Result<WriteOutcome, MemoryError> {
        let key = paths::object_key(agent, path)?;
        let parts = self.segments_of(agent, path).await?;
        for _ in 0..APPEND_ATTEMPTS {
            let current = self.objects.get(Bucket::Memory, &key).await?;
            let (mut content, condition) = match &current {
                Some(object) => (
                    String::from_utf8_lossy(&object.body).into_owned(),
                    PutCondition::IfMatch(object.version.clone()),
                ),
                None => (String::new(), PutCondition::IfAbsent),
            };
            for (_, body) in &parts {
                let text = String::from_utf8_lossy(body);
                // The heading a log's first segment starts with, when the plain file has its own.
                let text = match text.strip_prefix("# ") {
                    Some(rest) if !content.is_empty() => rest
                        .split_once('\n')
                        .map_or("", |(_, r)| r)
                        .trim_start_matches('\n'),
                    _ => &text,
                };
                if !text.trim().is_empty() && !content.contains(text.trim_end()) {
                    if !content.is_empty() && !content.ends_with('\n') {
                        content.push('\n');
                    }
                    content.push_str(text);
                }
            }
            let version = match self
                .objects
                .put(Bucket::Memory, &key, Bytes::from(content.clone()), condition)
                .await
            {
                Err(StoreError::PreconditionFailed) => continue,
                other => other?,
            };
            let folded: Vec<u64> = parts.iter().map(|(seq, _)| *seq).collect();
            self.delete_segments(agent, path, &folded).await?;
            return self.index_written(agent, path, content, version).await;
        }
        Err(MemoryError::Conflict {
            agent: agent.into(),
            path: path.into(),
        })
    }

    /// Deletes these segments of a daily log (what a fold or a whole-file
    /// write took in) and forgets where the log ended.
    pub(super) async fn delete_segments(
        &self,
        agent: &str,
        path: &str,
        seqs: &[u64],
    ) -> Result<(), MemoryError> {
        for seq in seqs {
            self.objects
                .delete(Bucket::Memory, &segments::key(agent, path, *seq)?)
                .await?;
        }
        self.segments.set_tail(agent, path, None);
        Ok(())
    }
}

fn count_lines(body: &[u8]) -> usize {
    String::from_utf8_lossy(body).lines().count()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::memory::NoteTarget;
    use crate::memory::counting_store::setup;
    use crate::storage::{Db, ObjectStore};

    async fn chunk_rows(db: &Db) -> usize {
        let rows: Vec<serde_json::Value> = db
            .rows(
                "SELECT count() AS n FROM memory_chunk GROUP ALL",
                serde_json::json!({}),
                0,
            )
            .await
            .unwrap();
        rows.first().and_then(|r| r["n"].as_u64()).unwrap_or(0) as usize
    }

    fn at(day: u32, minute: u32) -> chrono::DateTime<chrono::Utc> {
        use chrono::TimeZone;
        chrono::Utc.with_ymd_and_hms(2026, 11, day, 9, minute, 0).unwrap()
    }

    #[tokio::test]
    async fn an_append_costs_the_same_at_the_end_of_a_long_day_as_at_its_start() {
        let (_dir, store, memory, db) = setup().await;
        let daily = NoteTarget::Daily(chrono_tz::UTC);
        let mut moved = Vec::new();
        for i in 0..200 {
            let before = store.moved.load(Ordering::Relaxed);
            let note = format!(
                "turn {i:03}: asked about the {} garden",
                if i % 2 == 0 { "herb" } else { "rose" }
            );
            let outcome = memory
                .append_note_at("main", daily, &note, at(24, i % 60))
                .await
                .unwrap();
            assert_eq!(outcome.path, "memory/2026-11-24.md");
            moved.push(store.moved.load(Ordering::Relaxed) - before);
        }
        // One segment written per append, and nothing of the log read back.
        assert!(moved[199] <= moved[1] + 8, "bytes moved per append: {moved:?}");
        assert_eq!(chunk_rows(&db).await, 200, "one chunk per note");
        let plain = paths::object_key("main", "memory/2026-11-24.md").unwrap();
        assert!(
            store.get(Bucket::Memory, &plain).await.unwrap().is_none(),
            "no plain file yet"
        );

        let log = memory.read_file("main", "memory/2026-11-24.md").await.unwrap();
        assert!(
            log.content.starts_with("# 2026-11-24\n\n- 09:00 turn 000"),
            "{}",
            &log.content[..60]
        );
        assert_eq!(log.content.lines().count(), 202);
        assert_eq!(log.etag, segments::etag(200));
        let listed = memory.list_files("main").await.unwrap();
        assert!(
            listed
                .iter()
                .any(|f| f.path == "memory/2026-11-24.md" && f.size == log.content.len() as u64)
        );

        let found = memory
            .search("main", "turn 137", 3, crate::memory::Mode::Text)
            .await
            .unwrap();
        let hit = &found.data[0];
        assert!(hit.snippet.contains("137"), "{hit:?}");
        // Its lines are where the note is in the log.
        let line = log.content.lines().nth(hit.start_line - 1).unwrap();
        assert!(line.contains("turn 137"), "{line}");
    }

    #[tokio::test]
    async fn a_sync_behind_the_appends_reads_no_segment_again() {
        let (_dir, store, memory, db) = setup().await;
        let daily = NoteTarget::Daily(chrono_tz::UTC);
        let today = crate::clock::now();
        let path = paths::daily_path(&crate::clock::day(today));
        for i in 0..40 {
            memory
                .append_note_at("main", daily, &format!("note {i}"), today)
                .await
                .unwrap();
        }
        let indexed = memory.index.file("main", &path).await.unwrap().unwrap();
        assert_eq!(indexed.etag, segments::etag(40));
        // The index row as a sync reads it while appends go on: five behind the bucket.
        let behind = 40 - 5;
        let tail: u64 = (behind + 1..=40)
            .map(|seq| {
                format!(
                    "- {} note {}\n",
                    crate::clock::hour_minute_in(today, chrono_tz::UTC),
                    seq - 1
                )
                .len() as u64
            })
            .sum();
        assert!(
            memory
                .index
                .advance_file(
                    "main",
                    &path,
                    &indexed.etag,
                    &segments::etag(behind),
                    indexed.size - tail
                )
                .await
                .unwrap()
        );
        let reads = store.reads.load(Ordering::Relaxed);
        let report = memory.sync_files(&|_, _| {}).await.unwrap();
        // The listing alone: no segment read, nothing re-indexed.
        assert_eq!(store.reads.load(Ordering::Relaxed) - reads, 1);
        assert_eq!(report.reindexed, 0, "{report:?}");
        let caught_up = memory.index.file("main", &path).await.unwrap().unwrap();
        assert_eq!((caught_up.etag, caught_up.size), (indexed.etag, indexed.size));
        assert_eq!(chunk_rows(&db).await, 40, "one chunk per note, as appended");

        // A segment whose note was never indexed (its replica stopped in
        // between): the whole log is read and indexed again.
        let orphan = segments::key("main", &path, 41).unwrap();
        store
            .put(
                Bucket::Memory,
                &orphan,
                Bytes::from_static(b"- 23:59 the orphan\n"),
                PutCondition::IfAbsent,
            )
            .await
            .unwrap();
        let report = memory.sync_files(&|_, _| {}).await.unwrap();
        assert_eq!(report.reindexed, 1, "{report:?}");
        let found = memory
            .search("main", "orphan", 3, crate::memory::Mode::Text)
            .await
            .unwrap();
        assert!(
            found.data.iter().any(|hit| hit.text.contains("the orphan")),
            "{found:?}"
        );
    }

    #[test]
    fn a_day_folds_once_it_is_over_in_every_timezone() {
        let at = |text: &str| crate::clock::parse_stamp(text).unwrap();
        let latest: chrono_tz::Tz = "Etc/GMT+12".parse().unwrap();
        // 11:59 UTC on the 25th: still the 24th at UTC-12, so not folded.
        assert_eq!(
            crate::clock::day_in(at("2026-11-25T11:59:00Z"), latest),
            "2026-11-24"
        );
        assert!("memory/2026-11-24.md" >= folds_before(at("2026-11-25T11:59:00Z")).as_str());
        // From 13:00 UTC the 24th is over everywhere: folded, a day and a half early.
        assert!("memory/2026-11-24.md" < folds_before(at("2026-11-25T13:00:00Z")).as_str());
        assert!("memory/2026-11-25.md" >= folds_before(at("2026-11-25T13:00:00Z")).as_str());
    }

    #[tokio::test]
    async fn editing_a_segmented_log_makes_it_a_plain_file_and_a_finished_day_is_folded() {
        let (_dir, store, memory, _db) = setup().await;
        let daily = NoteTarget::Daily(chrono_tz::UTC);
        let today = crate::clock::now();
        let path = paths::daily_path(&crate::clock::day(today));
        for i in 0..3 {
            memory
                .append_note_at("main", daily, &format!("note {i}"), today)
                .await
                .unwrap();
        }
        let read = memory.read_file("main", &path).await.unwrap();
        let stale = memory
            .write_file("main", &path, "nope".into(), Some(segments::etag(1)))
            .await;
        assert!(matches!(stale, Err(MemoryError::Conflict { .. })), "{stale:?}");
        let edited = read.content.replace("note 1", "note one");
        memory
            .write_file("main", &path, edited.clone(), Some(read.etag))
            .await
            .unwrap();
        assert_eq!(memory.read_file("main", &path).await.unwrap().content, edited);
        assert!(
            store
                .list(Bucket::Memory, &segments::prefix("main", &path))
                .await
                .unwrap()
                .is_empty()
        );
        // Appends to a day with a plain file go into it.
        memory
            .append_note_at("main", daily, "note 3", today)
            .await
            .unwrap();
        let now = memory.read_file("main", &path).await.unwrap().content;
        assert!(now.contains("note one") && now.ends_with("note 3\n"), "{now}");

        // A day long over, kept as segments: the sync folds it into a plain file.
        let old = "memory/2026-01-05.md";
        for i in 0..2 {
            memory
                .append_note_at(
                    "main",
                    daily,
                    &format!("old note {i}"),
                    chrono::DateTime::parse_from_rfc3339("2026-01-05T10:00:00Z")
                        .unwrap()
                        .into(),
                )
                .await
                .unwrap();
        }
        let before = memory.read_file("main", old).await.unwrap().content;
        memory.sync_files(&|_, _| {}).await.unwrap();
        let plain = store
            .get(Bucket::Memory, &paths::object_key("main", old).unwrap())
            .await
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&plain.unwrap().body), before);
        assert!(
            store
                .list(Bucket::Memory, &segments::prefix("main", old))
                .await
                .unwrap()
                .is_empty()
        );
        let found = memory
            .search("main", "old note", 5, crate::memory::Mode::Text)
            .await
            .unwrap();
        let old_hits: Vec<_> = found.data.iter().filter(|h| h.path == old).collect();
        assert_eq!(old_hits.len(), 2, "{:?}", found.data);
        assert_eq!((old_hits[0].start_line, old_hits[1].start_line), (3, 4));
    }

    /// Embeds its first call at once, and each later one only once two
    /// calls are waiting at the same time.
    struct Rendezvous {
        calls: std::sync::atomic::AtomicUsize,
        pair: tokio::sync::Barrier,
    }

    impl crate::memory::embedder::Embedder for Rendezvous {
        fn kind(&self) -> &'static str {
            "ollama"
        }

        fn model(&self) -> &str {
            "rendezvous"
        }

        fn embed<'a>(
            &'a self,
            texts: &'a [String],
        ) -> futures::future::BoxFuture<'a, Result<Vec<Vec<f32>>, crate::memory::embedder::EmbedError>>
        {
            use futures::FutureExt;
            async move {
                if self.calls.fetch_add(1, Ordering::SeqCst) > 0 {
                    self.pair.wait().await;
                }
                Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect())
            }
            .boxed()
        }
    }

    /// Once the day is under way, a note embedding while it held the day's
    /// lock would keep the other from ever reaching the embedder: both
    /// would end up pending (after the embedder's timeout), not embedded.
    #[tokio::test]
    async fn notes_to_one_day_embed_at_once_not_one_after_the_other() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(crate::storage::LocalStore::new(dir.path()));
        store.ensure_buckets().await.unwrap();
        let embedder = std::sync::Arc::new(Rendezvous {
            calls: Default::default(),
            pair: tokio::sync::Barrier::new(2),
        });
        let memory = Memory::new(store, Db::scratch().await, Some(embedder), Default::default());
        memory.load_search_index().await.unwrap();
        memory.state.set_ready("rendezvous".into(), 2);
        memory.state.mark_up();
        let daily = NoteTarget::Daily(chrono_tz::UTC);
        let opening = memory
            .append_note_at("main", daily, "woke early", at(24, 0))
            .await
            .unwrap();
        assert_eq!(opening.pending, 0);
        let (first, second) = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            tokio::join!(
                memory.append_note_at("main", daily, "watered the herbs", at(24, 1)),
                memory.append_note_at("main", daily, "fed the cat", at(24, 2)),
            )
        })
        .await
        .expect("both notes embedded together");
        let (first, second) = (first.unwrap(), second.unwrap());
        assert_eq!(first.pending, 0);
        assert_eq!(
            (second.pending, second.path.as_str()),
            (0, "memory/2026-11-24.md")
        );
        let log = memory.read_file("main", "memory/2026-11-24.md").await.unwrap();
        assert_eq!(log.content.lines().count(), 5, "{}", log.content);
        let found = memory
            .search("main", "cat", 5, crate::memory::Mode::Text)
            .await
            .unwrap();
        assert_eq!(found.data.len(), 1);
        assert_eq!(
            found.data[0].start_line,
            4 + usize::from(first.etag < second.etag)
        );
    }
}
