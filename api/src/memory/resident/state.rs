//! The loaded resident index: one document per chunk (slots are never reused
//! until a compaction renumbers them), lookups by record id and by file, and
//! the text and vector indexes over them.

use std::collections::HashMap;
use std::sync::Arc;

use super::analyzer;
use super::text::{DocTerms, TextIndex};
use super::vectors::{QuantizedRow, VectorIndex};
use super::{Change, FilePatch, LegResults, Query, ResidentChunk, Shown, StoredVector};
use crate::clock::day_number;
use crate::memory::chunker::indexed_text;
use crate::memory::paths::SHARED;

/// Compact once this many removed documents are still in the postings and
/// they outnumber a quarter of the live ones.
const COMPACT_AFTER: usize = 1024;
/// The owner of a removed slot: no agent's id (ids count agents from 0).
const REMOVED: u16 = u16::MAX;

/// A chunk a leg found, with what ranking needs.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub id: String,
    /// (agent, path) of the chunk's file.
    pub file: Arc<(String, String)>,
    pub start_line: usize,
    pub end_line: usize,
    /// Days since 1970 of a daily log (which decays with age); `None` otherwise.
    pub daily: Option<i64>,
    /// Cosine similarity (vector leg), or BM25 as the share of the query
    /// matched (text leg: 1 for every query word once in a chunk of average
    /// length; a little more for repeats or short chunks).
    pub score: f64,
}

struct Doc {
    id: String,
    agent: u16,
    file: Arc<(String, String)>,
    start_line: usize,
    end_line: usize,
    heading: Box<str>,
    text: Box<str>,
    kind: Box<str>,
    day: Option<Box<str>>,
    daily: Option<i64>,
    terms: DocTerms,
    vector_row: Option<u32>,
    /// The row's `rev` as last applied (see [`ResidentChunk::rev`]).
    rev: u64,
    alive: bool,
}

impl Doc {
    /// Whether this is the chunk as written (vector aside).
    fn holds(&self, chunk: &ResidentChunk) -> bool {
        *self.text == chunk.text
            && *self.heading == chunk.heading
            && (self.start_line, self.end_line) == (chunk.start_line, chunk.end_line)
            && (self.file.0.as_str(), self.file.1.as_str()) == (chunk.agent.as_str(), chunk.path.as_str())
    }
}

/// A chunk as held, borrowed (see `State::each_chunk`).
pub struct ChunkView<'a> {
    pub id: &'a str,
    pub agent: &'a str,
    pub path: &'a str,
    pub kind: &'a str,
    pub day: Option<&'a str>,
    pub start_line: usize,
    pub end_line: usize,
    pub heading: &'a str,
    pub text: &'a str,
    /// The index's 8-bit row (unit length, within rounding).
    pub vector: Option<QuantizedRow<'a>>,
    /// The chunk's words as this index counted them (ids into [`State::vocabulary`]).
    pub terms: &'a DocTerms,
}

#[derive(Default)]
pub struct State {
    docs: Vec<Doc>,
    /// Each slot's agent ([`REMOVED`] once removed), apart from `docs`: the
    /// text leg asks it once per posting.
    owners: Vec<u16>,
    /// Each slot's [`id_key`], apart from `docs`: ties between equal scores
    /// are broken by chunk id, and a tie-heavy query compares thousands.
    id_keys: Vec<u64>,
    by_id: HashMap<String, u32>,
    by_file: HashMap<Arc<(String, String)>, Vec<u32>>,
    agent_ids: HashMap<String, u16>,
    agent_names: Vec<String>,
    text: TextIndex,
    vectors: VectorIndex,
    dead: usize,
    /// Each file's `memory_file.version` as held here; a file missing has
    /// changed in ways this replica cannot vouch for (its snapshot must not
    /// claim it is current).
    versions: HashMap<(String, String), String>,
}

/// What the resident index takes in memory, by part (bytes, capacities
/// counted: what the allocator holds for it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ResidentBytes {
    /// The chunks' vectors (8-bit rows and their scales).
    pub vectors: usize,
    /// The postings, the vocabulary and each chunk's word list.
    pub postings: usize,
    /// The text a hit shows, and its heading.
    pub text: usize,
    /// Ids, files, lines, kinds, days and the lookups by id and file.
    pub metadata: usize,
}

impl ResidentBytes {
    pub fn total(&self) -> usize {
        self.vectors + self.postings + self.text + self.metadata
    }
}

impl State {
    /// The memory this index holds, by part (one pass over the chunks).
    pub fn bytes(&self) -> ResidentBytes {
        let mut bytes = ResidentBytes {
            vectors: self.vectors.bytes(),
            postings: self.text.bytes(),
            text: 0,
            metadata: self.docs.capacity() * std::mem::size_of::<Doc>()
                + self.owners.capacity() * 2
                + self.id_keys.capacity() * 8,
        };
        let entry = std::mem::size_of::<(String, u32)>() + 8;
        for doc in &self.docs {
            bytes.postings += std::mem::size_of_val(&*doc.terms.terms);
            bytes.text += doc.text.len() + doc.heading.len();
            bytes.metadata += doc.id.capacity() + doc.kind.len() + doc.day.as_ref().map_or(0, |d| d.len());
        }
        bytes.metadata += self.by_id.keys().map(|id| id.capacity() + entry).sum::<usize>();
        bytes.metadata += self
            .by_file
            .iter()
            .map(|(file, slots)| file.0.capacity() + file.1.capacity() + 64 + slots.capacity() * 4)
            .sum::<usize>();
        bytes
    }

    pub fn chunks(&self) -> usize {
        self.by_id.len()
    }

    /// Whether the chunk with this id is held.
    pub fn holds(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    pub fn apply(&mut self, change: Change) {
        match change {
            Change::ReplaceFile {
                agent,
                path,
                chunks,
                version,
            } => {
                self.remove_file(&agent, &path);
                for chunk in chunks {
                    self.upsert(chunk);
                }
                self.set_version(agent, path, version);
            }
            Change::PatchFile(patch) => self.patch_file(patch),
            Change::RemoveFile { agent, path } => {
                self.remove_file(&agent, &path);
                self.versions.remove(&(agent, path));
            }
            Change::SetVectors { vectors, version } => {
                for StoredVector { id, vector, rev } in vectors {
                    if let Some(&slot) = self.by_id.get(&id) {
                        self.set_vector(slot, Some(&vector));
                        self.docs[slot as usize].rev = rev;
                        let file = &self.docs[slot as usize].file;
                        self.versions
                            .insert((file.0.clone(), file.1.clone()), version.clone());
                    }
                }
            }
            Change::DropVectors { version } => {
                self.vectors.clear();
                for doc in &mut self.docs {
                    doc.vector_row = None;
                    doc.rev += 1;
                }
                self.versions.values_mut().for_each(|v| v.clone_from(&version));
            }
            Change::Clear => *self = Self::default(),
            Change::Upsert(chunk) => match self.by_id.get(&chunk.id).copied() {
                // An echo of this replica's own write from before a vector it
                // already applied: taking it would drop (or bring back) that
                // vector until the later echo arrives.
                Some(slot) if chunk.rev < self.docs[slot as usize].rev => {}
                // The live feed echoes this replica's own writes, and chunk
                // ids change whenever text changes: at most the vector did.
                Some(slot) if self.docs[slot as usize].holds(&chunk) => {
                    self.docs[slot as usize].rev = chunk.rev;
                    if self.docs[slot as usize].vector_row.is_none() != chunk.embedding.is_none() {
                        self.set_vector(slot, chunk.embedding.as_deref());
                        self.forget_version(slot);
                    }
                }
                _ => {
                    self.versions.remove(&(chunk.agent.clone(), chunk.path.clone()));
                    self.upsert(chunk);
                }
            },
            Change::Delete(id) => {
                if let Some(slot) = self.by_id.get(&id).copied() {
                    self.forget_version(slot);
                    self.remove(slot);
                }
            }
        }
        if self.dead >= COMPACT_AFTER && self.dead * 4 > self.by_id.len() {
            self.compact();
        }
    }

    fn patch_file(&mut self, patch: FilePatch) {
        let file = (patch.agent, patch.path);
        for id in &patch.removed {
            if let Some(slot) = self.by_id.get(id).copied()
                && *self.docs[slot as usize].file == file
            {
                self.remove(slot);
            }
        }
        for (id, start, end) in patch.moved {
            if let Some(&slot) = self.by_id.get(&id) {
                let doc = &mut self.docs[slot as usize];
                (doc.start_line, doc.end_line) = (start, end);
            }
        }
        for chunk in patch.added {
            self.upsert(chunk);
        }
        self.set_version(file.0, file.1, Some(patch.version));
    }

    pub(super) fn set_version(&mut self, agent: String, path: String, version: Option<String>) {
        match version {
            Some(version) => self.versions.insert((agent, path), version),
            None => self.versions.remove(&(agent, path)),
        };
    }

    fn forget_version(&mut self, slot: u32) {
        let file = &self.docs[slot as usize].file;
        self.versions.remove(&(file.0.clone(), file.1.clone()));
    }

    /// Every chunk held, as written (vectors at unit length), for a snapshot.
    pub fn each_chunk(&self) -> impl Iterator<Item = ChunkView<'_>> {
        self.docs.iter().filter(|doc| doc.alive).map(|doc| ChunkView {
            id: &doc.id,
            agent: &doc.file.0,
            path: &doc.file.1,
            kind: &doc.kind,
            day: doc.day.as_deref(),
            start_line: doc.start_line,
            end_line: doc.end_line,
            heading: &doc.heading,
            text: &doc.text,
            vector: doc
                .vector_row
                .and_then(|row| self.vectors.quantized_row(doc.agent, row)),
            terms: &doc.terms,
        })
    }

    /// The text index's words by id, for a snapshot.
    pub fn vocabulary(&self) -> Vec<&str> {
        self.text.vocabulary()
    }

    /// Takes in a snapshot's vocabulary; returns each of its words' id here.
    pub fn intern_vocabulary(&mut self, words: Vec<String>) -> Vec<u32> {
        words.into_iter().map(|word| self.text.intern(word)).collect()
    }

    /// Each file's version as held (see `versions`).
    pub fn versions(&self) -> &HashMap<(String, String), String> {
        &self.versions
    }

    /// Adds a chunk, replacing the one with the same id.
    pub fn upsert(&mut self, chunk: ResidentChunk) {
        let words = analysed_words(&chunk);
        self.upsert_analysed(chunk, words);
    }

    /// [`upsert`](Self::upsert) with the chunk's words already analysed
    /// ([`analysed_words`]), so a load can analyse on every core first.
    pub fn upsert_analysed(&mut self, chunk: ResidentChunk, words: Vec<String>) {
        self.upsert_with(chunk, |text, slot| text.add(slot, words));
    }

    /// [`upsert`](Self::upsert) with the chunk's words already counted, in
    /// this index's word ids (a snapshot's, mapped by
    /// [`intern_vocabulary`](Self::intern_vocabulary)).
    pub fn upsert_counted(&mut self, chunk: ResidentChunk, terms: DocTerms) {
        self.upsert_with(chunk, |text, slot| text.add_counted(slot, terms));
    }

    fn upsert_with(&mut self, chunk: ResidentChunk, count: impl FnOnce(&mut TextIndex, u32) -> DocTerms) {
        if let Some(slot) = self.by_id.get(&chunk.id).copied() {
            self.remove(slot);
        }
        let slot = self.docs.len() as u32;
        let agent = self.agent_id(&chunk.agent);
        let key = (chunk.agent, chunk.path);
        let file = match self.by_file.get_key_value(&key) {
            Some((file, _)) => file.clone(),
            None => Arc::new(key),
        };
        let daily = (chunk.kind == "daily")
            .then(|| chunk.day.as_deref().and_then(day_number))
            .flatten();
        let terms = count(&mut self.text, slot);
        self.owners.push(agent);
        self.id_keys.push(id_key(&chunk.id));
        self.docs.push(Doc {
            id: chunk.id.clone(),
            agent,
            file: file.clone(),
            start_line: chunk.start_line,
            end_line: chunk.end_line,
            heading: chunk.heading.into_boxed_str(),
            text: chunk.text.into_boxed_str(),
            kind: chunk.kind.into_boxed_str(),
            day: chunk.day.map(String::into_boxed_str),
            daily,
            terms,
            vector_row: None,
            rev: chunk.rev,
            alive: true,
        });
        self.by_id.insert(chunk.id, slot);
        self.by_file.entry(file).or_default().push(slot);
        self.set_vector(slot, chunk.embedding.as_deref());
    }

    fn set_vector(&mut self, slot: u32, vector: Option<&[f32]>) {
        let doc = &mut self.docs[slot as usize];
        let agent = doc.agent;
        if let Some(row) = doc.vector_row.take()
            && let Some(moved) = self.vectors.remove(agent, row)
        {
            self.docs[moved as usize].vector_row = Some(row);
        }
        if let Some(vector) = vector {
            self.docs[slot as usize].vector_row = self.vectors.insert(agent, slot, vector);
        }
    }

    fn remove_file(&mut self, agent: &str, path: &str) {
        let key = (agent.to_string(), path.to_string());
        for slot in self.by_file.remove(&key).unwrap_or_default() {
            self.remove(slot);
        }
    }

    fn remove(&mut self, slot: u32) {
        self.set_vector(slot, None);
        let doc = &mut self.docs[slot as usize];
        if !doc.alive {
            return;
        }
        doc.alive = false;
        self.owners[slot as usize] = REMOVED;
        self.text.remove(slot, &doc.terms);
        self.by_id.remove(&doc.id);
        // The file's slot list keeps the dead slot until the next compaction:
        // taking it out here would cost the whole list per chunk, so
        // replacing a file of n chunks would cost n².
        self.dead += 1;
    }

    /// Renumbers the live documents densely and rebuilds the postings.
    fn compact(&mut self) {
        let mut new_ids = vec![u32::MAX; self.docs.len()];
        let mut kept = Vec::with_capacity(self.by_id.len());
        for (old, doc) in std::mem::take(&mut self.docs).into_iter().enumerate() {
            if doc.alive {
                new_ids[old] = kept.len() as u32;
                kept.push(doc);
            }
        }
        self.docs = kept;
        self.owners = self.docs.iter().map(|doc| doc.agent).collect();
        self.id_keys = self.docs.iter().map(|doc| id_key(&doc.id)).collect();
        self.vectors.renumber(&new_ids);
        self.text.rebuild(
            self.docs
                .iter()
                .enumerate()
                .map(|(slot, doc)| (slot as u32, &doc.terms)),
        );
        self.by_id
            .values_mut()
            .for_each(|slot| *slot = new_ids[*slot as usize]);
        self.by_file.retain(|_, slots| {
            slots.retain(|slot| new_ids[*slot as usize] != u32::MAX);
            slots.iter_mut().for_each(|slot| *slot = new_ids[*slot as usize]);
            !slots.is_empty()
        });
        self.dead = 0;
    }

    fn agent_id(&mut self, agent: &str) -> u16 {
        if let Some(&id) = self.agent_ids.get(agent) {
            return id;
        }
        let id = self.agent_names.len() as u16;
        self.agent_ids.insert(agent.to_string(), id);
        self.agent_names.push(agent.to_string());
        id
    }

    pub fn search(&self, query: &Query<'_>) -> LegResults {
        let agents: Vec<u16> = query
            .agents
            .iter()
            .filter_map(|a| self.agent_ids.get(*a).copied())
            .collect();
        let mut results = LegResults::default();
        if agents.is_empty() {
            return results;
        }
        let by_id = |a: u32, b: u32| {
            let (a, b) = (a as usize, b as usize);
            self.id_keys[a]
                .cmp(&self.id_keys[b])
                .then_with(|| self.docs[a].id.cmp(&self.docs[b].id))
        };
        let shared = self.agent_ids.get(SHARED).copied();
        let visible = |slot: u32| {
            let doc = &self.docs[slot as usize];
            Some(doc.agent) != shared
                || !query
                    .hidden
                    .iter()
                    .any(|folder| doc.file.1.starts_with(folder.as_str()))
        };
        if let Some(vector) = query.vector {
            results.vector = self
                .vectors
                .search(
                    &agents,
                    vector,
                    query.k,
                    (!query.hidden.is_empty()).then_some(&visible),
                    &by_id,
                )
                .into_iter()
                .map(|(slot, similarity)| self.candidate(slot, f64::from(similarity)))
                .collect();
        }
        if let Some(words) = query.words {
            let accept = |slot: u32| {
                let owner = self.owners[slot as usize];
                agents.contains(&owner) && (Some(owner) != shared || visible(slot))
            };
            let terms_of = |slot: u32| &self.docs[slot as usize].terms;
            // Scores as the share of the query matched (see `TextIndex::full_match`).
            let full = f64::from(self.text.full_match(words)).max(f64::EPSILON);
            results.text = self
                .text
                .search(words, query.k, accept, terms_of, &by_id)
                .into_iter()
                .map(|(slot, score)| self.candidate(slot, f64::from(score) / full))
                .collect();
        }
        results
    }

    pub fn shown(&self, id: &str) -> Option<Shown> {
        let doc = &self.docs[*self.by_id.get(id)? as usize];
        Some(Shown {
            id: doc.id.clone(),
            agent: self.agent_names[doc.agent as usize].clone(),
            path: doc.file.1.clone(),
            start_line: doc.start_line,
            end_line: doc.end_line,
            heading: doc.heading.to_string(),
            text: doc.text.to_string(),
        })
    }

    fn candidate(&self, slot: u32, score: f64) -> Candidate {
        let doc = &self.docs[slot as usize];
        Candidate {
            id: doc.id.clone(),
            file: Arc::clone(&doc.file),
            start_line: doc.start_line,
            end_line: doc.end_line,
            daily: doc.daily,
            score,
        }
    }
}

/// A chunk id's first eight bytes as a big-endian number (zero-padded):
/// ordering keys orders ids the same way, except that equal keys need the
/// ids themselves.
fn id_key(id: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let head = &id.as_bytes()[..id.len().min(8)];
    bytes[..head.len()].copy_from_slice(head);
    u64::from_be_bytes(bytes)
}

/// The words a chunk is indexed under (its heading and text, analysed).
pub fn analysed_words(chunk: &ResidentChunk) -> Vec<String> {
    let body = indexed_text(&chunk.heading, &chunk.text);
    analyzer::tokens(&body).into_iter().map(|t| t.term).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: &str, agent: &str, path: &str, body: &str, vector: Option<Vec<f32>>) -> ResidentChunk {
        ResidentChunk {
            id: id.into(),
            agent: agent.into(),
            path: path.into(),
            kind: "note".into(),
            day: None,
            start_line: 1,
            end_line: 2,
            heading: String::new(),
            text: body.into(),
            embedding: vector,
            rev: 0,
        }
    }

    fn ids(found: &[Candidate]) -> Vec<&str> {
        found.iter().map(|c| c.id.as_str()).collect()
    }

    fn search<'a>(
        state: &State,
        agents: &'a [&'a str],
        words: &'a [String],
        vector: Option<&'a [f32]>,
    ) -> LegResults {
        state.search(&Query {
            agents,
            hidden: &[],
            vector,
            words: Some(words),
            k: 10,
        })
    }

    #[test]
    fn id_keys_order_ids_as_the_ids_do_or_call_them_equal() {
        let ids = [
            "",
            "a",
            "ab",
            "ab\0",
            "abcdefgh",
            "abcdefgh0",
            "abcdefgi",
            "b",
            "0f3e",
            "ff",
            "é",
        ];
        for a in ids {
            for b in ids {
                let by_key = id_key(a).cmp(&id_key(b));
                assert!(by_key.is_eq() || by_key == a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn replicas_that_loaded_in_another_order_break_ties_the_same_way() {
        // 30 chunks that score exactly alike in both legs, fewer places than chunks.
        let chunks: Vec<ResidentChunk> = (0..30)
            .map(|i| {
                chunk(
                    &format!("id{i:02}"),
                    "main",
                    "MEMORY.md",
                    "same words",
                    Some(vec![1.0, 0.0]),
                )
            })
            .collect();
        let mut forward = State::default();
        chunks.iter().cloned().for_each(|c| forward.upsert(c));
        let mut backward = State::default();
        chunks.iter().rev().cloned().for_each(|c| backward.upsert(c));
        let words = analyzer::query_terms("same");
        let (a, b) = (
            search(&forward, &["main"], &words, Some(&[1.0, 0.0])),
            search(&backward, &["main"], &words, Some(&[1.0, 0.0])),
        );
        assert_eq!(ids(&a.text), ids(&b.text));
        assert_eq!(ids(&a.vector), ids(&b.vector));
        assert_eq!(ids(&a.text)[0], "id00");
    }

    #[test]
    fn hidden_shared_folders_are_left_out_of_both_legs() {
        let mut state = State::default();
        for (id, agent, path) in [
            ("own", "main", "projects/secret/CONTEXT.md"),
            ("open", "_shared", "projects/open/CONTEXT.md"),
            ("secret", "_shared", "projects/secret/CONTEXT.md"),
        ] {
            state.upsert(chunk(id, agent, path, "launch plan", Some(vec![1.0, 0.0])));
        }
        let words = analyzer::query_terms("launch");
        let hidden = ["projects/secret/".to_string()];
        let found = state.search(&Query {
            agents: &["main", "_shared"],
            hidden: &hidden,
            vector: Some(&[1.0, 0.0]),
            words: Some(&words),
            k: 10,
        });
        // The agent's own folder is never hidden, only `_shared`'s.
        let mut text = ids(&found.text);
        let mut vector = ids(&found.vector);
        text.sort();
        vector.sort();
        assert_eq!(text, ["open", "own"]);
        assert_eq!(vector, ["open", "own"]);
        let all = search(&state, &["main", "_shared"], &words, Some(&[1.0, 0.0]));
        assert_eq!(all.text.len(), 3);
        assert_eq!(all.vector.len(), 3);
    }

    #[test]
    fn replacing_a_file_replaces_its_chunks_in_both_legs() {
        let mut state = State::default();
        state.apply(Change::ReplaceFile {
            agent: "main".into(),
            path: "MEMORY.md".into(),
            chunks: vec![
                chunk("a", "main", "MEMORY.md", "the deploy key", Some(vec![1.0, 0.0])),
                chunk("b", "main", "MEMORY.md", "lunch plans", None),
            ],
            version: None,
        });
        state.apply(Change::Upsert(chunk(
            "c",
            "other",
            "MEMORY.md",
            "deploy elsewhere",
            Some(vec![1.0, 0.0]),
        )));
        let words = analyzer::query_terms("deploying");
        let found = search(&state, &["main"], &words, Some(&[1.0, 0.1]));
        assert_eq!(ids(&found.text), ["a"]);
        assert_eq!(ids(&found.vector), ["a"]);

        state.apply(Change::ReplaceFile {
            agent: "main".into(),
            path: "MEMORY.md".into(),
            chunks: vec![chunk("d", "main", "MEMORY.md", "nothing relevant", None)],
            version: None,
        });
        let found = search(&state, &["main"], &words, Some(&[1.0, 0.1]));
        assert!(found.text.is_empty() && found.vector.is_empty());
        state.apply(Change::SetVectors {
            vectors: vec![StoredVector {
                id: "d".into(),
                vector: vec![0.0, 1.0],
                rev: 1,
            }],
            version: "v2".into(),
        });
        let found = search(&state, &["main", "other"], &words, Some(&[1.0, 0.1]));
        assert_eq!(ids(&found.vector), ["c", "d"]);
        assert_eq!(state.chunks(), 2);
    }

    /// A distinct unit vector per `i` (a quarter circle in 800 steps).
    /// A direction of its own per `i` (8 pseudo-random dimensions: far
    /// apart from each other even as 8-bit rows).
    fn direction(i: usize) -> Vec<f32> {
        (0..8)
            .map(|d| ((i * 2_654_435_761 + d * 40_503) % 1_000) as f32 / 1_000.0 - 0.5)
            .collect()
    }

    #[test]
    fn compaction_keeps_every_live_chunk_findable() {
        let mut state = State::default();
        for round in 0..3 {
            let chunks = (0..800)
                .map(|i| {
                    chunk(
                        &format!("r{round}-{i}"),
                        "main",
                        &format!("f{}.md", i % 10),
                        &format!("word{i} {}", ["alpha", "beta", "gamma"][round]),
                        Some(direction(i)),
                    )
                })
                .collect::<Vec<_>>();
            for file in 0..10 {
                state.apply(Change::ReplaceFile {
                    agent: "main".into(),
                    path: format!("f{file}.md"),
                    chunks: chunks
                        .iter()
                        .filter(|c| c.path == format!("f{file}.md"))
                        .cloned()
                        .collect(),
                    version: None,
                });
            }
        }
        assert_eq!(state.chunks(), 800);
        assert!(state.dead < COMPACT_AFTER, "compacted: {} dead", state.dead);
        let words = analyzer::query_terms("word799 gamma");
        let found = search(&state, &["main"], &words, Some(&direction(799)));
        assert_eq!(found.text[0].id, "r2-799");
        assert_eq!(found.vector[0].id, "r2-799");
        let old = analyzer::query_terms("alpha");
        assert!(search(&state, &["main"], &old, None).text.is_empty());
    }

    #[test]
    fn deletes_and_drops_follow_the_live_feed() {
        let mut state = State::default();
        state.apply(Change::Upsert(chunk(
            "a",
            "main",
            "x.md",
            "alpha",
            Some(vec![1.0]),
        )));
        state.apply(Change::Upsert(chunk(
            "a",
            "main",
            "x.md",
            "beta",
            Some(vec![1.0]),
        )));
        let alpha = analyzer::query_terms("alpha");
        assert!(search(&state, &["main"], &alpha, None).text.is_empty());
        state.apply(Change::DropVectors { version: "v3".into() });
        assert!(search(&state, &["main"], &alpha, Some(&[1.0])).vector.is_empty());
        state.apply(Change::Delete("a".into()));
        assert_eq!(state.chunks(), 0);
    }

    #[test]
    fn an_echo_of_a_chunk_already_held_only_moves_its_vector() {
        let mut state = State::default();
        let written = chunk("a", "main", "x.md", "alpha", None);
        state.apply(Change::ReplaceFile {
            agent: "main".into(),
            path: "x.md".into(),
            chunks: vec![written.clone()],
            version: None,
        });
        // The live feed brings the same row back, now with its vector.
        state.apply(Change::Upsert(ResidentChunk {
            embedding: Some(vec![1.0]),
            ..written
        }));
        assert_eq!(state.dead, 0, "re-analysed instead of kept");
        let alpha = analyzer::query_terms("alpha");
        let found = search(&state, &["main"], &alpha, Some(&[1.0]));
        assert_eq!((found.text.len(), found.vector.len()), (1, 1));
        assert_eq!(state.chunks(), 1);
    }
}
