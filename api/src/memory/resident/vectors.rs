//! The resident vector index: unit-length vectors packed per agent as 8-bit
//! integers (one scale per row: a quarter of the memory of 32-bit floats),
//! searched exhaustively in two passes: every row scored in integers against
//! the query quantized the same way, then the best few times `k` scored
//! again against the query's exact floats (what a 32-bit row would score,
//! within the row's rounding). Exact search (no graph walk), filtered by
//! agent for free (only the agents asked for are read), and removal is a swap.

use std::collections::HashMap;

use super::text::{TieBreak, top_k};

/// How many candidates per hit the integer pass keeps for the exact pass.
const OVERSAMPLE: usize = 4;
/// The integer pass keeps at least this many candidates.
const MIN_CANDIDATES: usize = 40;

#[derive(Default)]
struct Partition {
    /// The document each row belongs to.
    docs: Vec<u32>,
    /// Rows of `dimensions` integers, back to back: a value is `q * scale`.
    rows: Vec<i8>,
    /// Each row's scale (one over the integers' length: rows are unit length).
    scales: Vec<f32>,
}

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

#[derive(Default)]
pub struct VectorIndex {
    dimensions: Option<usize>,
    partitions: HashMap<u16, Partition>,
}

/// A vector as integers and the scale that maps them back.
fn quantize(vector: &[f32]) -> (Vec<i8>, f32) {
    let largest = vector.iter().fold(0f32, |m, x| m.max(x.abs()));
    if largest <= f32::EPSILON {
        return (vec![0; vector.len()], 0.0);
    }
    let scale = largest / 127.0;
    let rows = vector
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (rows, scale)
}

impl VectorIndex {
    /// Adds a document's vector under `agent`; returns its row, or `None`
    /// when the vector is empty or its dimension differs from the others.
    pub fn insert(&mut self, agent: u16, doc: u32, vector: &[f32]) -> Option<u32> {
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm <= f32::EPSILON || *self.dimensions.get_or_insert(vector.len()) != vector.len() {
            return None;
        }
        let unit: Vec<f32> = vector.iter().map(|x| x / norm).collect();
        let (row, _) = quantize(&unit);
        // The row's own length for its scale: the row held is exactly unit
        // length, so a row saved and loaded again is the same row and scale.
        let length = row.iter().map(|q| f32::from(*q).powi(2)).sum::<f32>().sqrt();
        let scale = if length > 0.0 { 1.0 / length } else { 0.0 };
        let partition = self.partitions.entry(agent).or_default();
        partition.rows.extend(row);
        partition.scales.push(scale);
        partition.docs.push(doc);
        Some(partition.docs.len() as u32 - 1)
    }

    /// Removes row `row` of `agent`; the last row moves into its place, and
    /// its document is returned so the caller can record the new row.
    pub fn remove(&mut self, agent: u16, row: u32) -> Option<u32> {
        let dimensions = self.dimensions?;
        let partition = self.partitions.get_mut(&agent)?;
        let row = row as usize;
        let last = partition.docs.len().checked_sub(1)?;
        partition.docs.swap_remove(row);
        partition.scales.swap_remove(row);
        if row != last {
            let (head, tail) = partition.rows.split_at_mut(last * dimensions);
            head[row * dimensions..(row + 1) * dimensions].copy_from_slice(&tail[..dimensions]);
        }
        partition.rows.truncate(last * dimensions);
        (row != last).then(|| partition.docs[row])
    }

    /// Renames documents after the owner renumbered them (`new_ids[old]`).
    pub fn renumber(&mut self, new_ids: &[u32]) {
        for partition in self.partitions.values_mut() {
            partition
                .docs
                .iter_mut()
                .for_each(|doc| *doc = new_ids[*doc as usize]);
        }
    }

    /// Row `row` of `agent` as floats (unit length, within rounding).
    #[cfg(test)]
    pub fn row(&self, agent: u16, row: u32) -> Option<Vec<f32>> {
        self.quantized_row(agent, row).map(QuantizedRow::to_floats)
    }

    /// Row `row` of `agent` as held: its integers and their scale.
    pub fn quantized_row(&self, agent: u16, row: u32) -> Option<QuantizedRow<'_>> {
        let dimensions = self.dimensions?;
        let partition = self.partitions.get(&agent)?;
        let start = row as usize * dimensions;
        let scale = *partition.scales.get(row as usize)?;
        let values = partition.rows.get(start..start + dimensions)?;
        Some(QuantizedRow { values, scale })
    }

    /// The bytes the vectors take (rows, scales, document ids).
    pub fn bytes(&self) -> usize {
        self.partitions
            .values()
            .map(|p| p.rows.capacity() + (p.scales.capacity() + p.docs.capacity()) * 4)
            .sum()
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
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm <= f32::EPSILON || k == 0 {
            return Vec::new();
        }
        let query: Vec<f32> = query.iter().map(|x| x / norm).collect();
        let (quantized, query_scale) = quantize(&query);
        let widened: Vec<i16> = quantized.iter().map(|q| i16::from(*q)).collect();
        let wanted = (k * OVERSAMPLE).max(MIN_CANDIDATES);
        let mut kept = Kept::new(wanted);
        let mut block: Vec<f32> = Vec::with_capacity(BLOCK_ROWS);
        for &agent in agents {
            let Some(partition) = self.partitions.get(&agent) else {
                continue;
            };
            let dimensions = query.len();
            for (number, rows) in partition.rows.chunks(BLOCK_ROWS * dimensions).enumerate() {
                let first = number * BLOCK_ROWS;
                let scales = &partition.scales[first..first + rows.len() / dimensions];
                block.clear();
                score_rows(rows, scales, &widened, &mut block);
                for (offset, score) in block.iter().enumerate() {
                    let score = score * query_scale;
                    let row = (first + offset) as u32;
                    if score >= kept.threshold && keep.is_none_or(|keep| keep(partition.docs[row as usize])) {
                        kept.push((agent, row), score);
                    }
                }
            }
        }
        let Kept { located, scored, .. } = kept;
        let doc_of = |at: u32| {
            let (agent, row) = located[at as usize];
            self.partitions[&agent].docs[row as usize]
        };
        let candidates = top_k(scored, wanted, &|a, b| tie(doc_of(a), doc_of(b)));
        let rescored = candidates
            .into_iter()
            .map(|(at, _)| {
                let (agent, row) = located[at as usize];
                let partition = &self.partitions[&agent];
                let start = row as usize * query.len();
                let values = &partition.rows[start..start + query.len()];
                let exact = values
                    .iter()
                    .zip(&query)
                    .map(|(q, x)| f32::from(*q) * x)
                    .sum::<f32>()
                    * partition.scales[row as usize];
                (partition.docs[row as usize], exact)
            })
            .collect();
        top_k(rescored, k, tie)
    }
}

/// The rows that may still be among the best `wanted` by their approximate
/// score, as the scan goes: a row scoring below the `wanted`-th best seen so
/// far never can be, so the scan keeps a few times `wanted` rows, not every
/// row of the agent. Rows equal to that score are kept: the tie-break, not
/// the scan's order, decides among them.
struct Kept {
    wanted: usize,
    /// Prune when this many are kept (grows when ties fill it).
    limit: usize,
    threshold: f32,
    located: Vec<(u16, u32)>,
    /// (index into `located`, approximate score).
    scored: Vec<(u32, f32)>,
}

impl Kept {
    fn new(wanted: usize) -> Self {
        Self {
            wanted,
            limit: 4 * wanted,
            threshold: f32::NEG_INFINITY,
            located: Vec::new(),
            scored: Vec::new(),
        }
    }

    fn push(&mut self, at: (u16, u32), score: f32) {
        self.scored.push((self.located.len() as u32, score));
        self.located.push(at);
        if self.scored.len() >= self.limit {
            self.prune();
        }
    }

    /// Drops the rows below the `wanted`-th best score, which becomes the bar.
    fn prune(&mut self) {
        let wanted = self.wanted;
        self.scored
            .select_nth_unstable_by(wanted - 1, |a, b| b.1.total_cmp(&a.1));
        self.threshold = self.scored[wanted - 1].1;
        let threshold = self.threshold;
        self.scored.retain(|entry| entry.1 >= threshold);
        let located = std::mem::take(&mut self.located);
        for entry in &mut self.scored {
            self.located.push(located[entry.0 as usize]);
            entry.0 = (self.located.len() - 1) as u32;
        }
        // Ties at the bar can keep more than `wanted`: prune again only once
        // as many again have come, so a tie-heavy scan stays linear.
        self.limit = (4 * wanted).max(2 * self.scored.len());
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

/// Sixteen independent integer sums, so the compiler can use SIMD lanes.
#[inline(always)]
fn dot(a: &[i8], b: &[i16]) -> i32 {
    let mut sums = [0i32; 16];
    let (a_blocks, b_blocks) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = a_blocks
        .remainder()
        .iter()
        .zip(b_blocks.remainder())
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    for (x, y) in a_blocks.zip(b_blocks) {
        for lane in 0..16 {
            sums[lane] += i32::from(x[lane]) * i32::from(y[lane]);
        }
    }
    sums.iter().sum::<i32>() + tail
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
        let mut seed = 7u64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 20_001) as f32 / 10_000.0 - 1.0
        };
        let dimensions = 64;
        let vectors: Vec<Vec<f32>> = (0..3_000)
            .map(|_| (0..dimensions).map(|_| random()).collect())
            .collect();
        let mut index = VectorIndex::default();
        for (doc, vector) in vectors.iter().enumerate() {
            index.insert((doc % 3) as u16, doc as u32, vector);
        }
        let unit = |v: &[f32]| {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        let mut same = 0;
        for _ in 0..20 {
            let query: Vec<f32> = (0..dimensions).map(|_| random()).collect();
            let q = unit(&query);
            let mut exact: Vec<(u32, f32)> = vectors
                .iter()
                .enumerate()
                .map(|(doc, v)| (doc as u32, unit(v).iter().zip(&q).map(|(a, b)| a * b).sum()))
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
        let partition = &index.partitions[&0];
        assert_eq!(partition.rows.len(), 8, "a byte a dimension");
        assert_eq!(partition.rows[..4], partition.rows[4..]);
    }

    /// What the scan chose before it kept a running bar: every row's
    /// approximate score, the best `wanted` by score and tie-break.
    fn every_row_candidates(index: &VectorIndex, agents: &[u16], query: &[f32], wanted: usize) -> Vec<u32> {
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let unit: Vec<f32> = query.iter().map(|x| x / norm).collect();
        let (quantized, query_scale) = quantize(&unit);
        let widened: Vec<i16> = quantized.iter().map(|q| i16::from(*q)).collect();
        let mut scored = Vec::new();
        for agent in agents {
            let partition = &index.partitions[agent];
            for (row, values) in partition.rows.chunks_exact(query.len()).enumerate() {
                let score = dot(values, &widened) as f32 * partition.scales[row] * query_scale;
                scored.push((partition.docs[row], score));
            }
        }
        top_k(scored, wanted, &|a, b| a.cmp(&b))
            .into_iter()
            .map(|e| e.0)
            .collect()
    }

    /// A document's row against the query's unit floats, as the second pass scores it.
    fn exact_score(index: &VectorIndex, doc: u32, query: &[f32]) -> f32 {
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let (agent, row) = index
            .partitions
            .iter()
            .find_map(|(agent, p)| {
                p.docs
                    .iter()
                    .position(|d| *d == doc)
                    .map(|row| (*agent, row as u32))
            })
            .unwrap();
        let held = index.quantized_row(agent, row).unwrap();
        held.values
            .iter()
            .zip(query)
            .map(|(q, x)| f32::from(*q) * (x / norm))
            .sum::<f32>()
            * held.scale
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
}
