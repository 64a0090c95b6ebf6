//! The resident vector index: unit-length vectors packed per agent, searched
//! exhaustively. Exact (no recall lost to a graph walk), filtered by agent for
//! free (only the agents asked for are read), and removal is a swap.

use std::collections::HashMap;

use super::text::{TieBreak, top_k};

#[derive(Default)]
struct Partition {
    /// The document each row belongs to.
    docs: Vec<u32>,
    /// Rows of `dimensions` floats, back to back.
    rows: Vec<f32>,
}

#[derive(Default)]
pub struct VectorIndex {
    dimensions: Option<usize>,
    partitions: HashMap<u16, Partition>,
}

impl VectorIndex {
    /// Adds a document's vector under `agent`; returns its row, or `None`
    /// when the vector is empty or its dimension differs from the others.
    pub fn insert(&mut self, agent: u16, doc: u32, vector: &[f32]) -> Option<u32> {
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm <= f32::EPSILON || *self.dimensions.get_or_insert(vector.len()) != vector.len() {
            return None;
        }
        let partition = self.partitions.entry(agent).or_default();
        partition.rows.extend(vector.iter().map(|x| x / norm));
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

    /// Row `row` of `agent` (unit length).
    pub fn row(&self, agent: u16, row: u32) -> Option<&[f32]> {
        let dimensions = self.dimensions?;
        let start = row as usize * dimensions;
        self.partitions.get(&agent)?.rows.get(start..start + dimensions)
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
        let mut scored = Vec::new();
        for agent in agents {
            if let Some(partition) = self.partitions.get(agent) {
                score_rows(&partition.rows, &partition.docs, &query, &mut scored);
            }
        }
        if let Some(keep) = keep {
            scored.retain(|(doc, _)| keep(*doc));
        }
        top_k(scored, k, tie)
    }
}

/// Scores every row of a partition against `query` (unit length). Compiled
/// for AVX2 and AVX as well as baseline x86-64 (SSE2), and the best this CPU
/// has is chosen at runtime: memory-bound, so wider loads matter.
#[multiversion::multiversion(targets("x86_64+avx2+fma", "x86_64+avx"))]
fn score_rows(rows: &[f32], docs: &[u32], query: &[f32], out: &mut Vec<(u32, f32)>) {
    out.extend(
        rows.chunks_exact(query.len())
            .zip(docs)
            .map(|(row, doc)| (*doc, dot(row, query))),
    );
}

/// Eight independent sums, so the compiler can use SIMD lanes.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0f32; 8];
    let (a_blocks, b_blocks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_blocks
        .remainder()
        .iter()
        .zip(b_blocks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_blocks.zip(b_blocks) {
        for lane in 0..8 {
            sums[lane] += x[lane] * y[lane];
        }
    }
    sums.iter().sum::<f32>() + tail
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
    fn dot_products_are_exact_on_any_length() {
        for len in [1, 7, 8, 13, 32, 45, 384] {
            // Small integers: every sum is exact, whatever the order.
            let a: Vec<f32> = (0..len).map(|i| (i % 17) as f32 - 8.0).collect();
            let b: Vec<f32> = (0..len).map(|i| (i % 5) as f32 * 0.5).collect();
            let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert_eq!(dot(&a, &b), exact, "{len}");
            let mut scored = Vec::new();
            score_rows(&[a.clone(), a.clone()].concat(), &[4, 5], &b, &mut scored);
            assert_eq!(scored, vec![(4, exact), (5, exact)], "{len}");
        }
    }
}
