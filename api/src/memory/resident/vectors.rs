//! The resident vector index: unit-length vectors packed per agent as 8-bit
//! integers (one scale per row: a quarter of the memory of 32-bit floats),
//! searched in two passes: rows scored in integers against the query
//! quantized the same way, then the best few times `k` scored
//! again against the query's exact floats (what a 32-bit row would score,
//! within the row's rounding). Filtered by agent for free (only the agents
//! asked for are read), and removal is a swap. An agent's first pass reads
//! every row up to `partition::CLUSTER_FROM` rows; past it, only the lists
//! of the clusters nearest the query (`partition`).

use std::collections::HashMap;

use super::partition::{CLUSTER_FROM, List, Partition};
use super::quantized::{dot, quantize, unit};
use super::text::{TieBreak, top_k};

/// How many candidates per hit the integer pass keeps for the exact pass.
const OVERSAMPLE: usize = 4;
/// The integer pass keeps at least this many candidates.
const MIN_CANDIDATES: usize = 40;

/// A row as the index holds it: a value is `values[i] * scale`.
#[derive(Debug, Clone, Copy)]
pub struct QuantizedRow<'a> {
    pub values: &'a [i8],
    pub scale: f32,
}

impl QuantizedRow<'_> {
    pub fn to_floats(self) -> Vec<f32> {
        self.values.iter().map(|q| f32::from(*q) * self.scale).collect()
    }
}

pub struct VectorIndex {
    dimensions: Option<usize>,
    partitions: HashMap<u16, Partition>,
    /// An agent's rows are clustered once it has this many.
    cluster_from: usize,
}

impl Default for VectorIndex {
    fn default() -> Self {
        Self {
            dimensions: None,
            partitions: HashMap::new(),
            cluster_from: CLUSTER_FROM,
        }
    }
}

impl VectorIndex {
    /// An index that clusters an agent's rows from `rows` on (`usize::MAX`:
    /// never, every search exact).
    #[cfg(test)]
    pub fn clustered_from(rows: usize) -> Self {
        Self {
            cluster_from: rows,
            ..Self::default()
        }
    }

    /// Adds a document's vector under `agent`; returns its row, or `None`
    /// when the vector is empty or its dimension differs from the others.
    pub fn insert(&mut self, agent: u16, doc: u32, vector: &[f32]) -> Option<u32> {
        let unit = unit(vector)?;
        if *self.dimensions.get_or_insert(vector.len()) != vector.len() {
            return None;
        }
        let (row, _) = quantize(&unit);
        // The row's own length for its scale: the row held is exactly unit
        // length, so a row saved and loaded again is the same row and scale.
        let length = row.iter().map(|q| f32::from(*q).powi(2)).sum::<f32>().sqrt();
        let scale = if length > 0.0 { 1.0 / length } else { 0.0 };
        let partition = self.partitions.entry(agent).or_default();
        Some(partition.insert(doc, &row, scale, self.cluster_from))
    }

    /// Removes row `row` of `agent`; the last row moves into its place, and
    /// its document is returned so the caller can record the new row.
    pub fn remove(&mut self, agent: u16, row: u32) -> Option<u32> {
        let dimensions = self.dimensions?;
        self.partitions.get_mut(&agent)?.remove(row, dimensions)
    }

    /// Renames documents after the owner renumbered them (`new_ids[old]`).
    pub fn renumber(&mut self, new_ids: &[u32]) {
        for list in self.partitions.values_mut().flat_map(|p| p.lists.iter_mut()) {
            list.docs.iter_mut().for_each(|doc| *doc = new_ids[*doc as usize]);
        }
    }

    #[cfg(test)]
    fn partition(&self, agent: u16) -> &Partition {
        &self.partitions[&agent]
    }

    /// Row `row` of `agent` as floats (unit length, within rounding).
    #[cfg(test)]
    pub fn row(&self, agent: u16, row: u32) -> Option<Vec<f32>> {
        self.quantized_row(agent, row).map(QuantizedRow::to_floats)
    }

    /// Row `row` of `agent` as held: its integers and their scale.
    pub fn quantized_row(&self, agent: u16, row: u32) -> Option<QuantizedRow<'_>> {
        let (values, scale) = self.partitions.get(&agent)?.row(row, self.dimensions?)?;
        Some(QuantizedRow { values, scale })
    }

    /// The bytes the vectors take (rows, scales, document ids, lists, centres).
    pub fn bytes(&self) -> usize {
        self.partitions.values().map(Partition::bytes).sum()
    }

    pub fn clear(&mut self) {
        self.dimensions = None;
        self.partitions.clear();
    }

    /// The `k` documents of `agents` (those `keep` accepts, when given)
    /// closest to `query` by cosine, with their similarity, best first.
    pub fn search(
        &self,
        agents: &[u16],
        query: &[f32],
        k: usize,
        keep: Option<&dyn Fn(u32) -> bool>,
        tie: TieBreak<'_>,
    ) -> Vec<(u32, f32)> {
        if self.dimensions != Some(query.len()) {
            return Vec::new();
        }
        let Some(query) = unit(query).filter(|_| k > 0) else {
            return Vec::new();
        };
        let (quantized, query_scale) = quantize(&query);
        let widened: Vec<i16> = quantized.iter().map(|q| i16::from(*q)).collect();
        let wanted = (k * OVERSAMPLE).max(MIN_CANDIDATES);
        let mut kept = Kept::new(wanted, tie);
        let mut block: Vec<f32> = Vec::with_capacity(BLOCK_ROWS);
        for &agent in agents {
            let Some(partition) = self.partitions.get(&agent) else {
                continue;
            };
            let dimensions = query.len();
            // A filtered search reads every list: the nearest clusters could
            // hold too few rows the filter lets through.
            for list in partition.lists_for(&query, keep.is_some()) {
                for (number, values) in list.values.chunks(BLOCK_ROWS * dimensions).enumerate() {
                    let first = number * BLOCK_ROWS;
                    let scales = &list.scales[first..first + values.len() / dimensions];
                    block.clear();
                    score_rows(values, scales, &widened, &mut block);
                    for (offset, score) in block.iter().enumerate() {
                        let score = score * query_scale;
                        if score < kept.floor {
                            continue;
                        }
                        let place = first + offset;
                        let doc = list.docs[place];
                        if kept.admits(score, doc) && keep.is_none_or(|keep| keep(doc)) {
                            kept.push(Held {
                                doc,
                                list,
                                place,
                                score,
                            });
                        }
                    }
                }
            }
        }
        let held = kept.held;
        let scored = held
            .iter()
            .enumerate()
            .map(|(at, h)| (at as u32, h.score))
            .collect();
        let candidates = top_k(scored, wanted, &|a, b| {
            tie(held[a as usize].doc, held[b as usize].doc)
        });
        let rescored = candidates
            .into_iter()
            .map(|(at, _)| {
                let Held { doc, list, place, .. } = held[at as usize];
                let exact = list
                    .values_of(place, query.len())
                    .iter()
                    .zip(&query)
                    .map(|(q, x)| f32::from(*q) * x)
                    .sum::<f32>()
                    * list.scales[place];
                (doc, exact)
            })
            .collect();
        top_k(rescored, k, tie)
    }
}

/// A row the scan keeps, for now.
#[derive(Clone, Copy)]
struct Held<'l> {
    doc: u32,
    list: &'l List,
    place: usize,
    /// Its approximate (integer) score.
    score: f32,
}

/// The best `wanted` rows by approximate score and tie-break, as the scan
/// goes. Once four times `wanted` are held, the best `wanted` stay and the
/// worst of those becomes the bar: a later row must beat it by score, or
/// equal its score and win the tie-break. A scan through thousands of equal
/// scores (a busy day's repeated notes) so holds a bounded number of rows,
/// and the tie-break, not the scan's order, still decides among them.
struct Kept<'t, 'l> {
    wanted: usize,
    tie: TieBreak<'t>,
    /// The bar's score (below it nothing is admitted; `-inf` at first).
    floor: f32,
    /// The bar's document, which an equal score must precede.
    bar: Option<u32>,
    held: Vec<Held<'l>>,
}

impl<'t, 'l> Kept<'t, 'l> {
    fn new(wanted: usize, tie: TieBreak<'t>) -> Self {
        Self {
            wanted,
            tie,
            floor: f32::NEG_INFINITY,
            bar: None,
            held: Vec::with_capacity(4 * wanted),
        }
    }

    fn admits(&self, score: f32, doc: u32) -> bool {
        match self.bar {
            Some(bar) if score == self.floor => (self.tie)(doc, bar) == std::cmp::Ordering::Less,
            _ => score >= self.floor,
        }
    }

    fn push(&mut self, held: Held<'l>) {
        self.held.push(held);
        if self.held.len() >= 4 * self.wanted {
            self.prune();
        }
    }

    /// Keeps the best `wanted`; the worst of them becomes the bar.
    fn prune(&mut self) {
        let (wanted, tie) = (self.wanted, self.tie);
        self.held.select_nth_unstable_by(wanted - 1, |a, b| {
            b.score.total_cmp(&a.score).then_with(|| tie(a.doc, b.doc))
        });
        self.held.truncate(wanted);
        let worst = self.held[wanted - 1];
        self.floor = worst.score;
        self.bar = Some(worst.doc);
    }
}

/// Rows scored per pass of [`score_rows`] (a few KB of scores, reused).
const BLOCK_ROWS: usize = 1024;

/// Scores rows of a partition against the quantized `query`, in
/// integers (exact sums), scaled by each row's scale. Compiled for AVX2 as
/// well as baseline x86-64, the best this CPU has chosen at runtime.
#[multiversion::multiversion(targets("x86_64+avx2+fma", "x86_64+avx"))]
fn score_rows(rows: &[i8], scales: &[f32], query: &[i16], out: &mut Vec<f32>) {
    out.extend(
        rows.chunks_exact(query.len())
            .zip(scales)
            .map(|(row, scale)| dot(row, query) as f32 * scale),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_nearest_within_the_agents_asked_for() {
        let mut index = VectorIndex::default();
        index.insert(0, 10, &[1.0, 0.0, 0.0]);
        index.insert(0, 11, &[0.0, 1.0, 0.0]);
        index.insert(1, 12, &[1.0, 0.1, 0.0]);
        let hits = index.search(&[0], &[2.0, 0.0, 0.0], 5, None, &|a, b| a.cmp(&b));
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [10, 11]);
        assert!((hits[0].1 - 1.0).abs() < 1e-6);
        let hits = index.search(&[0, 1], &[1.0, 0.2, 0.0], 1, None, &|a, b| a.cmp(&b));
        assert_eq!(hits[0].0, 12);
    }

    #[test]
    fn removal_moves_the_last_row_into_the_gap() {
        let mut index = VectorIndex::default();
        index.insert(0, 1, &[1.0, 0.0]);
        index.insert(0, 2, &[0.0, 1.0]);
        index.insert(0, 3, &[-1.0, 0.0]);
        assert_eq!(index.remove(0, 0), Some(3));
        let hits = index.search(&[0], &[-1.0, 0.0], 1, None, &|a, b| a.cmp(&b));
        assert_eq!(hits[0].0, 3);
        assert_eq!(index.remove(0, 1), None);
        assert_eq!(index.insert(0, 4, &[1.0, 2.0, 3.0]), None, "wrong dimension");
    }

    #[test]
    fn integer_dot_products_are_exact_on_any_length() {
        for len in [1, 7, 16, 23, 32, 45, 384] {
            let a: Vec<i8> = (0..len)
                .map(|i: i32| (i * 37) % 255 - 127)
                .map(|v| v as i8)
                .collect();
            let b: Vec<i16> = (0..len).map(|i| ((i * 11) % 255) as i16 - 127).collect();
            let exact: i32 = a.iter().zip(&b).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
            assert_eq!(dot(&a, &b), exact, "{len}");
        }
    }

    /// Against exact 32-bit cosine over a few thousand random unit vectors:
    /// the same top 10 (order within rounding), and scores within 1%.
    #[test]
    fn eight_bit_rows_rank_as_floats_do() {
        let mut random = floats(7);
        let dimensions = 64;
        let vectors: Vec<Vec<f32>> = (0..3_000)
            .map(|_| (0..dimensions).map(|_| random()).collect())
            .collect();
        let mut index = VectorIndex::default();
        for (doc, vector) in vectors.iter().enumerate() {
            index.insert((doc % 3) as u16, doc as u32, vector);
        }
        let mut same = 0;
        for _ in 0..20 {
            let query: Vec<f32> = (0..dimensions).map(|_| random()).collect();
            let q = unit(&query).unwrap();
            let mut exact: Vec<(u32, f32)> = vectors
                .iter()
                .enumerate()
                .map(|(doc, v)| {
                    (
                        doc as u32,
                        unit(v).unwrap().iter().zip(&q).map(|(a, b)| a * b).sum(),
                    )
                })
                .collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1));
            let found = index.search(&[0, 1, 2], &query, 10, None, &|a, b| a.cmp(&b));
            for (doc, score) in &found {
                let truth = exact.iter().find(|e| e.0 == *doc).unwrap().1;
                assert!((score - truth).abs() < 0.01, "{score} vs {truth}");
            }
            let top: Vec<u32> = exact[..10].iter().map(|e| e.0).collect();
            same += found.iter().filter(|f| top.contains(&f.0)).count();
        }
        assert!(same >= 195, "{same} of 200 of the exact top 10 found");
    }

    #[test]
    fn a_row_reads_back_within_rounding_and_costs_a_byte_a_dimension() {
        let mut index = VectorIndex::default();
        index.insert(0, 1, &[3.0, 4.0, 0.0, 0.0]);
        let row = index.row(0, 0).unwrap();
        for (got, want) in row.iter().zip([0.6, 0.8, 0.0, 0.0]) {
            assert!((got - want).abs() < 0.004, "{row:?}");
        }
        // Re-inserting what was read back (a snapshot restored) gives the same integers.
        index.insert(0, 2, &row);
        let values = &index.partitions[&0].lists[0].values;
        assert_eq!(values.len(), 8, "a byte a dimension");
        assert_eq!(values[..4], values[4..]);
    }

    /// What the scan chose before it kept a running bar: every row's
    /// approximate score, the best `wanted` by score and tie-break.
    fn every_row_candidates(index: &VectorIndex, agents: &[u16], query: &[f32], wanted: usize) -> Vec<u32> {
        let (quantized, query_scale) = quantize(&unit(query).unwrap());
        let widened: Vec<i16> = quantized.iter().map(|q| i16::from(*q)).collect();
        let mut scored = Vec::new();
        for agent in agents {
            for list in &index.partitions[agent].lists {
                for (place, values) in list.values.chunks_exact(query.len()).enumerate() {
                    let score = dot(values, &widened) as f32 * list.scales[place] * query_scale;
                    scored.push((list.docs[place], score));
                }
            }
        }
        top_k(scored, wanted, &|a, b| a.cmp(&b))
            .into_iter()
            .map(|e| e.0)
            .collect()
    }

    /// A document's row against the query's unit floats, as the second pass scores it.
    fn exact_score(index: &VectorIndex, doc: u32, query: &[f32]) -> f32 {
        let query = unit(query).unwrap();
        let (list, place) = index
            .partitions
            .values()
            .flat_map(|p| p.lists.iter())
            .find_map(|list| Some((list, list.docs.iter().position(|d| *d == doc)?)))
            .unwrap();
        list.values_of(place, query.len())
            .iter()
            .zip(&query)
            .map(|(q, x)| f32::from(*q) * x)
            .sum::<f32>()
            * list.scales[place]
    }

    #[test]
    fn the_scan_keeps_what_scoring_every_row_would_however_many_tie() {
        let mut next = super::super::text::tests::numbers(11);
        for round in 0..30 {
            // Few distinct vectors in tie-heavy rounds (a soak's repeated notes).
            let distinct = if round % 2 == 0 { 3 } else { 10_000 };
            let mut index = VectorIndex::default();
            let mut doc = 0;
            for agent in 0..2u16 {
                for _ in 0..(1000 + next() % 3000) {
                    let pick = next() % distinct;
                    let vector: Vec<f32> = (0..16).map(|d| ((pick * 31 + d * 7) % 13) as f32 - 6.0).collect();
                    index.insert(agent, doc, &vector);
                    doc += 1;
                }
            }
            let query: Vec<f32> = (0..16).map(|_| (next() % 100) as f32 - 50.0).collect();
            for k in [1, 10, 40] {
                let wanted = (k * OVERSAMPLE).max(MIN_CANDIDATES);
                let chosen = every_row_candidates(&index, &[0, 1], &query, wanted);
                let found = index.search(&[0, 1], &query, k, None, &|a, b| a.cmp(&b));
                let mut rescored: Vec<(u32, f32)> = chosen
                    .iter()
                    .map(|doc| (*doc, exact_score(&index, *doc, &query)))
                    .collect();
                rescored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                rescored.truncate(k);
                assert_eq!(found, rescored, "round {round}, k {k}");
            }
        }
    }

    /// Repeatable floats in [-1, 1].
    fn floats(seed: u64) -> impl FnMut() -> f32 {
        let mut next = super::super::text::tests::numbers(seed);
        move || (next() % 20_001) as f32 / 10_000.0 - 1.0
    }

    /// Vectors around `blobs` random directions (as embeddings of a few
    /// topics are), from a fixed seed.
    fn blobs(count: usize, dimensions: usize, blobs: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut random = floats(seed);
        let centres: Vec<Vec<f32>> = (0..blobs)
            .map(|_| (0..dimensions).map(|_| random()).collect())
            .collect();
        (0..count)
            .map(|i| {
                let centre = &centres[(i * 7919) % blobs];
                centre.iter().map(|c| c + 0.35 * random()).collect()
            })
            .collect()
    }

    #[test]
    fn clustered_search_finds_the_exact_top_10_reading_a_fraction_of_the_rows() {
        let dimensions = 32;
        let vectors = blobs(12_000, dimensions, 60, 3);
        let mut exact = VectorIndex::clustered_from(usize::MAX);
        let mut clustered = VectorIndex::clustered_from(4_000);
        for (doc, vector) in vectors.iter().enumerate() {
            exact.insert(0, doc as u32, vector);
            clustered.insert(0, doc as u32, vector);
        }
        let partition = clustered.partition(0);
        assert!(partition.is_clustered());
        partition.assert_consistent(dimensions);
        let queries = blobs(100, dimensions, 60, 99);
        let (mut found, mut read) = (0, 0);
        for query in &queries {
            let probed = partition.lists_for(&unit(query).unwrap(), false);
            read += probed.iter().map(|list| list.docs.len()).sum::<usize>();
            let truth = exact.search(&[0], query, 10, None, &|a, b| a.cmp(&b));
            let got = clustered.search(&[0], query, 10, None, &|a, b| a.cmp(&b));
            found += got.iter().filter(|g| truth.iter().any(|t| t.0 == g.0)).count();
        }
        let share = read as f64 / (queries.len() * vectors.len()) as f64;
        assert!(found >= 970, "{found} of 1000 of the exact top 10 found");
        assert!(share < 0.15, "read {share:.3} of the rows");
        // A filtered search reads every list, so it is exact.
        let everything = |_: u32| true;
        for query in &queries[..10] {
            assert_eq!(
                clustered.search(&[0], query, 10, Some(&everything), &|a, b| a.cmp(&b)),
                exact.search(&[0], query, 10, None, &|a, b| a.cmp(&b))
            );
        }
    }

    #[test]
    fn rows_keep_their_numbers_through_clustering_removals_and_writes() {
        let vectors = blobs(3_000, 16, 20, 5);
        let mut index = VectorIndex::clustered_from(1_000);
        // What each row number holds, as the caller (`State`) tracks it.
        let mut docs_by_row: Vec<u32> = Vec::new();
        for (doc, vector) in vectors.iter().enumerate() {
            let row = index.insert(0, doc as u32, vector).unwrap();
            assert_eq!(row as usize, docs_by_row.len());
            docs_by_row.push(doc as u32);
            // Remove now and then: a middle row, the first, the last.
            if doc > 900 && doc % 3 == 0 {
                let rows = docs_by_row.len();
                let row = [rows / 2, 0, rows - 1][doc % 9 / 3];
                let last = docs_by_row.pop().unwrap();
                match index.remove(0, row as u32) {
                    Some(moved) => {
                        assert_eq!(moved, last, "the last row moves into the gap");
                        docs_by_row[row] = moved;
                    }
                    None => assert_eq!(row, rows - 1),
                }
            }
        }
        let partition = index.partition(0);
        assert!(partition.is_clustered());
        partition.assert_consistent(16);
        assert_eq!(partition.len(), docs_by_row.len());
        // Every row number still reads its document's vector.
        for (row, doc) in docs_by_row.iter().enumerate() {
            let held = index.row(0, row as u32).unwrap();
            let want = unit(&vectors[*doc as usize]).unwrap();
            let cosine: f32 = held.iter().zip(&want).map(|(a, b)| a * b).sum();
            assert!(cosine > 0.999, "row {row}: {cosine}");
        }
    }

    #[test]
    fn nothing_is_clustered_below_the_threshold() {
        let mut index = VectorIndex::clustered_from(100);
        for (doc, vector) in blobs(99, 8, 3, 1).iter().enumerate() {
            index.insert(0, doc as u32, vector);
        }
        assert!(!index.partition(0).is_clustered());
        assert_eq!(index.partition(0).lists.len(), 1);
        index.insert(0, 99, &[1.0; 8]);
        assert!(index.partition(0).is_clustered());
        index.partition(0).assert_consistent(8);
    }
}
