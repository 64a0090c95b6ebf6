//! The resident index saved on this replica's disk, so a restart is
//! searchable in a second or two instead of re-reading every chunk from
//! SurrealDB. The snapshot holds the chunks (text and unit vectors) and each
//! file's `memory_file.version`; on load, only files whose version in
//! SurrealDB differs are read again (see `load`). A snapshot that is missing,
//! unreadable or from another format is ignored: the load reads everything.
//!
//! Chunks are saved with their words as analysed (word ids into a saved
//! vocabulary), so a restart does not stem every chunk again; a snapshot
//! made by another version of the analyser is ignored.
//!
//! Format (little-endian): magic, the analyser's version, the file versions
//! (count, then agent, path, version), the vocabulary (count, then words by
//! id), the chunks (count, then id, agent, path, kind, day, lines, heading,
//! text, the vector as held (its dimension count, then its scale as f32 and
//! one i8 per dimension: what the index holds, so a load quantizes it back to
//! the same row), then the word count and (word id, frequency) pairs as u32),
//! and the magic again, so a torn write is refused.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::analyzer;
use super::text::DocTerms;
use super::{ResidentChunk, State};

const MAGIC: &[u8; 8] = b"ONYXMI03";

/// The snapshot of `state`, encoded in memory: the caller holds the index's
/// lock only for this, not for the write to disk.
pub fn encode(state: &State) -> Vec<u8> {
    let mut out = Vec::with_capacity(state.chunks() * 1024);
    out.extend_from_slice(MAGIC);
    put_u64(&mut out, analyzer::VERSION);
    let versions = state.versions();
    put_u64(&mut out, versions.len() as u64);
    for ((agent, file), version) in versions {
        put_str(&mut out, agent);
        put_str(&mut out, file);
        put_str(&mut out, version);
    }
    let vocabulary = state.vocabulary();
    put_u64(&mut out, vocabulary.len() as u64);
    for word in vocabulary {
        put_str(&mut out, word);
    }
    put_u64(&mut out, state.chunks() as u64);
    for chunk in state.each_chunk() {
        put_str(&mut out, chunk.id);
        put_str(&mut out, chunk.agent);
        put_str(&mut out, chunk.path);
        put_str(&mut out, chunk.kind);
        put_str(&mut out, chunk.day.unwrap_or(""));
        put_u64(&mut out, chunk.start_line as u64);
        put_u64(&mut out, chunk.end_line as u64);
        put_str(&mut out, chunk.heading);
        put_str(&mut out, chunk.text);
        match chunk.vector {
            Some(row) => {
                put_u64(&mut out, row.values.len() as u64);
                out.extend_from_slice(&row.scale.to_le_bytes());
                out.extend(row.values.iter().map(|q| q.to_le_bytes()[0]));
            }
            None => put_u64(&mut out, 0),
        }
        put_u64(&mut out, u64::from(chunk.terms.length));
        put_u64(&mut out, chunk.terms.terms.len() as u64);
        for &(word, frequency) in chunk.terms.terms.iter() {
            out.extend_from_slice(&word.to_le_bytes());
            out.extend_from_slice(&frequency.to_le_bytes());
        }
    }
    out.extend_from_slice(MAGIC);
    out
}

/// Writes an encoded snapshot to `path` (through a temporary file, synced,
/// then renamed into place).
pub fn write(encoded: &[u8], path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension("tmp");
    let mut file = fs::File::create(&temporary)?;
    file.write_all(encoded)?;
    file.sync_all()?;
    fs::rename(&temporary, path)
}

/// What a snapshot holds.
pub struct Snapshot {
    /// ((agent, path), version) per file.
    pub versions: Vec<((String, String), String)>,
    /// The saved index's words, by id.
    pub vocabulary: Vec<String>,
    /// Each chunk with its words as counted (ids into `vocabulary`).
    pub chunks: Vec<(ResidentChunk, DocTerms)>,
}

/// Reads a snapshot; `Ok(None)` when there is none.
pub fn read(path: &Path) -> io::Result<Option<Snapshot>> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let mut input = Reader { bytes: &bytes, at: 0 };
    if input.take(MAGIC.len())? != MAGIC || !bytes.ends_with(MAGIC) {
        return Err(invalid(
            "not a memory index snapshot of this format, or cut short",
        ));
    }
    if input.count()? as u64 != analyzer::VERSION {
        return Err(invalid("made by another version of the text analyser"));
    }
    let files = input.count()?;
    let mut versions = Vec::with_capacity(files);
    for _ in 0..files {
        let file = (input.string()?, input.string()?);
        versions.push((file, input.string()?));
    }
    let words = input.count()?;
    let mut vocabulary = Vec::with_capacity(words.min(bytes.len()));
    for _ in 0..words {
        vocabulary.push(input.string()?);
    }
    let count = input.count()?;
    let mut chunks = Vec::with_capacity(count.min(bytes.len()));
    for _ in 0..count {
        let id = input.string()?;
        let agent = input.string()?;
        let path = input.string()?;
        let kind = input.string()?;
        let day = Some(input.string()?).filter(|d| !d.is_empty());
        let start_line = input.count()?;
        let end_line = input.count()?;
        let heading = input.string()?;
        let text = input.string()?;
        let dimensions = input.count()?;
        let vector: Vec<f32> = if dimensions == 0 {
            Vec::new()
        } else {
            let scale = f32::from_le_bytes(input.u32()?.to_le_bytes());
            let values = input.take(dimensions)?;
            values
                .iter()
                .map(|q| f32::from(i8::from_le_bytes([*q])) * scale)
                .collect()
        };
        let length = u32::try_from(input.count()?).map_err(|_| invalid("word count too large"))?;
        let pairs = input.count()?;
        let mut terms = Vec::with_capacity(pairs.min(bytes.len()));
        for _ in 0..pairs {
            let (word, frequency) = (input.u32()?, input.u32()?);
            if word as usize >= vocabulary.len() {
                return Err(invalid("a word id outside the vocabulary"));
            }
            terms.push((word, frequency));
        }
        let terms = DocTerms {
            terms: terms.into_boxed_slice(),
            length,
        };
        let chunk = ResidentChunk {
            id,
            agent,
            path,
            kind,
            day,
            start_line,
            end_line,
            heading,
            text,
            embedding: (!vector.is_empty()).then_some(vector),
            // Not saved: the live feed only brings changes made after the
            // load, whose counts are higher than any the snapshot held.
            rev: 0,
        };
        chunks.push((chunk, terms));
    }
    if input.at + MAGIC.len() != bytes.len() {
        return Err(invalid("trailing bytes"));
    }
    Ok(Some(Snapshot {
        versions,
        vocabulary,
        chunks,
    }))
}

fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, value: &str) {
    put_u64(out, value.len() as u64);
    out.extend_from_slice(value.as_bytes());
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, length: usize) -> io::Result<&'a [u8]> {
        let end = self.at.checked_add(length).filter(|end| *end <= self.bytes.len());
        let end = end.ok_or_else(|| invalid("cut short"))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn count(&mut self) -> io::Result<usize> {
        let bytes = self.take(8)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        usize::try_from(u64::from_le_bytes(word)).map_err(|_| invalid("count too large"))
    }

    fn u32(&mut self) -> io::Result<u32> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn string(&mut self) -> io::Result<String> {
        let length = self.count()?;
        String::from_utf8(self.take(length)?.to_vec()).map_err(|_| invalid("text is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::resident::Change;

    fn chunk(id: &str, path: &str, text: &str, vector: Option<Vec<f32>>) -> ResidentChunk {
        ResidentChunk {
            id: id.into(),
            agent: "main".into(),
            path: path.into(),
            kind: if path.starts_with("memory/") {
                "daily"
            } else {
                "curated"
            }
            .into(),
            day: path.starts_with("memory/").then(|| "2026-11-20".to_string()),
            start_line: 3,
            end_line: 4,
            heading: "Projects".into(),
            text: text.into(),
            embedding: vector,
            rev: 0,
        }
    }

    #[test]
    fn a_snapshot_restores_chunks_vectors_and_versions() {
        let mut state = State::default();
        state.apply(Change::ReplaceFile {
            agent: "main".into(),
            path: "MEMORY.md".into(),
            chunks: vec![
                chunk("a", "MEMORY.md", "Onyx ships on Friday", Some(vec![3.0, 4.0])),
                chunk("b", "MEMORY.md", "no vector yet ✓", None),
            ],
            version: Some("v1".into()),
        });
        state.apply(Change::ReplaceFile {
            agent: "main".into(),
            path: "memory/2026-11-20.md".into(),
            chunks: vec![chunk("c", "memory/2026-11-20.md", "- 10:00 standup", None)],
            version: None,
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.snapshot");
        write(&encode(&state), &path).unwrap();
        let snapshot = read(&path).unwrap().unwrap();
        assert_eq!(
            snapshot.versions,
            vec![(("main".to_string(), "MEMORY.md".to_string()), "v1".to_string())],
            "a file without a known version is not vouched for"
        );
        let mut by_id: Vec<ResidentChunk> = snapshot.chunks.into_iter().map(|(chunk, _)| chunk).collect();
        by_id.sort_by(|x, y| x.id.cmp(&y.id));
        assert_eq!(by_id.len(), 3);
        let restored = by_id[0].embedding.clone().unwrap();
        assert_eq!(restored.len(), 2);
        for (got, want) in restored.iter().zip([0.6, 0.8]) {
            assert!(
                (got - want).abs() < 0.004,
                "unit length, within 8-bit rounding: {restored:?}"
            );
        }
        assert_eq!(by_id[1].text, "no vector yet ✓");
        assert_eq!(by_id[1].embedding, None);
        assert_eq!(by_id[2].day.as_deref(), Some("2026-11-20"));
        assert_eq!((by_id[2].start_line, by_id[2].end_line), (3, 4));
        assert_eq!(by_id[2].heading, "Projects");
    }

    #[test]
    fn a_row_saved_and_loaded_is_the_row_held_so_restarts_do_not_drift() {
        let mut state = State::default();
        let vectors = [
            vec![0.11, -0.73, 0.3, 0.2, 0.05],
            vec![-0.9, 0.01, 0.44, -0.02, 0.3],
        ];
        state.apply(Change::ReplaceFile {
            agent: "main".into(),
            path: "MEMORY.md".into(),
            chunks: vec![
                chunk("a", "MEMORY.md", "first", Some(vectors[0].clone())),
                chunk("b", "MEMORY.md", "second", Some(vectors[1].clone())),
            ],
            version: Some("v1".into()),
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.snapshot");
        let mut generations = Vec::new();
        for _ in 0..3 {
            write(&encode(&state), &path).unwrap();
            let snapshot = read(&path).unwrap().unwrap();
            let rows: Vec<Vec<f32>> = snapshot
                .chunks
                .iter()
                .map(|(chunk, _)| chunk.embedding.clone().unwrap())
                .collect();
            generations.push(rows);
            state = State::default();
            super::super::load::restore_chunks(&mut state, snapshot.vocabulary, snapshot.chunks.into_iter());
        }
        assert_eq!(
            generations[0], generations[1],
            "a second save holds the same rows"
        );
        assert_eq!(generations[1], generations[2]);
        assert_eq!(generations[0].len(), 2);
    }

    #[test]
    fn a_torn_or_foreign_file_is_refused_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.snapshot");
        assert!(read(&path).unwrap().is_none());
        let mut state = State::default();
        state.apply(Change::ReplaceFile {
            agent: "main".into(),
            path: "MEMORY.md".into(),
            chunks: vec![chunk("a", "MEMORY.md", "text", None)],
            version: Some("v1".into()),
        });
        write(&encode(&state), &path).unwrap();
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(read(&path).is_err());
        fs::write(&path, b"something else entirely").unwrap();
        assert!(read(&path).is_err());
    }

    #[test]
    fn saved_words_come_back_and_another_analyser_version_is_refused() {
        let mut state = State::default();
        state.apply(Change::ReplaceFile {
            agent: "main".into(),
            path: "MEMORY.md".into(),
            chunks: vec![chunk(
                "a",
                "MEMORY.md",
                "Running runners ran; running again",
                None,
            )],
            version: Some("v1".into()),
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.snapshot");
        write(&encode(&state), &path).unwrap();
        let snapshot = read(&path).unwrap().unwrap();
        let (_, terms) = &snapshot.chunks[0];
        let words: Vec<(&str, u32)> = terms
            .terms
            .iter()
            .map(|&(id, n)| (snapshot.vocabulary[id as usize].as_str(), n))
            .collect();
        assert!(words.contains(&("run", 2)), "{words:?}");
        assert_eq!(
            terms.length as usize,
            words.iter().map(|w| w.1 as usize).sum::<usize>()
        );

        let mut bytes = fs::read(&path).unwrap();
        bytes[MAGIC.len()..MAGIC.len() + 8].copy_from_slice(&(analyzer::VERSION + 1).to_le_bytes());
        fs::write(&path, &bytes).unwrap();
        let refused = read(&path).err().expect("another analyser's snapshot is refused");
        assert!(refused.to_string().contains("analyser"), "{refused}");
    }
}
