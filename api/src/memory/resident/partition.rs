//! One agent's vector rows, kept in lists: a single list until the agent has
//! [`CLUSTER_FROM`] rows, then one list per cluster (an inverted file, IVF),
//! each list's rows back to back, so a search reads whole lists in memory
//! order: the nearest clusters' lists, about a sixteenth of the rows.
//! (Reading the same rows scattered over one array costs a cache miss each
//! and saves nothing: measured in `bench/README.md`.)
//!
//! The centres are found once per agent, by spherical k-means on an even
//! sample of the rows, when the agent reaches [`CLUSTER_FROM`] rows (also
//! while a snapshot loads); rows written after join their nearest centre.
//! They are not trained again: a later drift of topics makes some lists
//! longer, and the probe ([`Centres::probe`], lists until a share of the
//! rows is read) then reads fewer of them, so a search never reads more
//! than every row.
//!
//! A row keeps its number (what `Doc::vector_row` holds) while it moves
//! between and within lists: `home` says where each number is.

use super::quantized::{dot, quantize, unit};

/// An agent's rows are clustered once it has this many.
pub const CLUSTER_FROM: usize = 32_768;
/// How many clusters (about 128 rows each at the threshold).
const CLUSTERS: usize = 256;
/// k-means reads at most this many rows per cluster, evenly spaced.
const SAMPLE_PER_CLUSTER: usize = 32;
const ITERATIONS: usize = 8;
/// A search reads the nearest lists until it has read this share of the
/// agent's rows (and at least `MIN_PROBES` lists).
const PROBE_SHARE: usize = 16;
const MIN_PROBES: usize = 8;

/// Rows back to back, with what each belongs to.
#[derive(Default, Clone)]
pub struct List {
    /// Each entry's row number.
    numbers: Vec<u32>,
    /// Each entry's document.
    pub docs: Vec<u32>,
    /// `dimensions` integers an entry: a value is `q * scale`.
    pub values: Vec<i8>,
    /// Each entry's scale (one over the integers' length: rows are unit length).
    pub scales: Vec<f32>,
}

impl List {
    fn push(&mut self, number: u32, doc: u32, values: &[i8], scale: f32) -> u32 {
        self.numbers.push(number);
        self.docs.push(doc);
        self.values.extend_from_slice(values);
        self.scales.push(scale);
        self.numbers.len() as u32 - 1
    }

    /// Takes out entry `place`; the last entry moves into it, and its row
    /// number is returned.
    fn swap_remove(&mut self, place: usize, dimensions: usize) -> Option<u32> {
        let last = self.numbers.len() - 1;
        self.numbers.swap_remove(place);
        self.docs.swap_remove(place);
        self.scales.swap_remove(place);
        if place != last {
            let (head, tail) = self.values.split_at_mut(last * dimensions);
            head[place * dimensions..(place + 1) * dimensions].copy_from_slice(&tail[..dimensions]);
        }
        self.values.truncate(last * dimensions);
        (place != last).then(|| self.numbers[place])
    }

    pub fn values_of(&self, place: usize, dimensions: usize) -> &[i8] {
        &self.values[place * dimensions..(place + 1) * dimensions]
    }

    fn bytes(&self) -> usize {
        self.values.capacity() + (self.numbers.capacity() + self.docs.capacity() + self.scales.capacity()) * 4
    }
}

#[derive(Default)]
pub struct Partition {
    pub lists: Vec<List>,
    /// Where each row number is: (list, place in it).
    home: Vec<(u32, u32)>,
    centres: Option<Centres>,
}

impl Partition {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.home.len()
    }

    /// Adds a row; returns its number. Clusters the rows when there are
    /// `cluster_from` of them.
    pub fn insert(&mut self, doc: u32, values: &[i8], scale: f32, cluster_from: usize) -> u32 {
        let number = self.home.len() as u32;
        let list = self.centres.as_ref().map_or(0, |c| c.nearest(values));
        if self.lists.is_empty() {
            self.lists.push(List::default());
        }
        let place = self.lists[list].push(number, doc, values, scale);
        self.home.push((list as u32, place));
        if self.centres.is_none() && self.home.len() >= cluster_from {
            self.cluster(values.len());
        }
        number
    }

    /// Removes row `number`; the last row number moves to it, and that
    /// row's document is returned so the caller can record the move.
    pub fn remove(&mut self, number: u32, dimensions: usize) -> Option<u32> {
        let number = number as usize;
        let last = self.home.len().checked_sub(1)?;
        if number > last {
            return None;
        }
        let (list, place) = self.home[number];
        if let Some(moved) = self.lists[list as usize].swap_remove(place as usize, dimensions) {
            self.home[moved as usize].1 = place;
        }
        self.home.swap_remove(number);
        let &(list, place) = self.home.get(number)?;
        let list = &mut self.lists[list as usize];
        list.numbers[place as usize] = number as u32;
        Some(list.docs[place as usize])
    }

    /// Row `number`'s integers and scale.
    pub fn row(&self, number: u32, dimensions: usize) -> Option<(&[i8], f32)> {
        let &(list, place) = self.home.get(number as usize)?;
        let list = &self.lists[list as usize];
        Some((
            list.values_of(place as usize, dimensions),
            list.scales[place as usize],
        ))
    }

    /// The lists a search for the unit `query` reads: the nearest clusters'
    /// (every list when `all`, or before the rows are clustered).
    pub fn lists_for(&self, query: &[f32], all: bool) -> Vec<&List> {
        match &self.centres {
            Some(centres) if !all => centres
                .probe(query, &self.lists, self.home.len())
                .into_iter()
                .map(|list| &self.lists[list])
                .collect(),
            _ => self.lists.iter().collect(),
        }
    }

    /// Finds the centres and moves every row of the one list so far into
    /// its nearest centre's list.
    fn cluster(&mut self, dimensions: usize) {
        let Some(all) = std::mem::take(&mut self.lists).pop() else {
            return;
        };
        let centres = Centres::train(&all.values, dimensions);
        let mut lists = vec![List::default(); centres.count()];
        for (place, row) in all.values.chunks_exact(dimensions).enumerate() {
            let nearest = centres.nearest(row);
            let number = all.numbers[place];
            let at = lists[nearest].push(number, all.docs[place], row, all.scales[place]);
            self.home[number as usize] = (nearest as u32, at);
        }
        self.lists = lists;
        self.centres = Some(centres);
    }

    pub fn bytes(&self) -> usize {
        self.lists.iter().map(List::bytes).sum::<usize>()
            + self.lists.capacity() * std::mem::size_of::<List>()
            + self.home.capacity() * 8
            + self.centres.as_ref().map_or(0, Centres::bytes)
    }

    #[cfg(test)]
    pub fn is_clustered(&self) -> bool {
        self.centres.is_some()
    }

    /// Panics unless every row number is in exactly one list, where `home` says.
    #[cfg(test)]
    pub fn assert_consistent(&self, dimensions: usize) {
        let mut seen = vec![false; self.home.len()];
        for (l, list) in self.lists.iter().enumerate() {
            assert_eq!(list.values.len(), list.numbers.len() * dimensions);
            for (place, number) in list.numbers.iter().enumerate() {
                assert!(!seen[*number as usize], "row {number} twice");
                seen[*number as usize] = true;
                assert_eq!(self.home[*number as usize], (l as u32, place as u32));
            }
        }
        assert!(seen.iter().all(|s| *s), "a row in no list");
    }
}

/// The clusters' centres.
pub struct Centres {
    /// Unit-length centres, `dimensions` floats each.
    floats: Vec<f32>,
    /// The centres as integers (for the integer dot product with a row).
    quantized: Vec<i16>,
    /// Each integer centre's scale.
    scales: Vec<f32>,
}

impl Centres {
    /// Spherical k-means over `rows` (unit-length rows of `dimensions`
    /// integers; a row's scale does not change which centre is nearest).
    fn train(rows: &[i8], dimensions: usize) -> Self {
        let count = rows.len() / dimensions;
        let clusters = CLUSTERS.min(count.max(1));
        let step = (count / (clusters * SAMPLE_PER_CLUSTER)).max(1);
        let sample: Vec<&[i8]> = rows.chunks_exact(dimensions).step_by(step).collect();
        // Start from rows spread evenly over the sample.
        let spacing = sample.len() / clusters;
        let floats: Vec<f32> = (0..clusters)
            .flat_map(|c| {
                let row: Vec<f32> = sample[c * spacing].iter().map(|v| f32::from(*v)).collect();
                unit(&row).unwrap_or(row)
            })
            .collect();
        let mut centres = Self::from_floats(floats, dimensions);
        for _ in 0..ITERATIONS {
            let mut sums = vec![0f32; clusters * dimensions];
            for row in &sample {
                let nearest = centres.nearest(row);
                let sum = &mut sums[nearest * dimensions..(nearest + 1) * dimensions];
                sum.iter_mut()
                    .zip(row.iter())
                    .for_each(|(s, v)| *s += f32::from(*v));
            }
            // A cluster no sample row chose keeps its centre.
            let mut floats = centres.floats;
            for (centre, sum) in floats
                .chunks_exact_mut(dimensions)
                .zip(sums.chunks_exact(dimensions))
            {
                if let Some(mean) = unit(sum) {
                    centre.copy_from_slice(&mean);
                }
            }
            centres = Self::from_floats(floats, dimensions);
        }
        centres
    }

    fn from_floats(floats: Vec<f32>, dimensions: usize) -> Self {
        let mut quantized = Vec::with_capacity(floats.len());
        let mut scales = Vec::with_capacity(floats.len() / dimensions);
        for centre in floats.chunks_exact(dimensions) {
            let (values, scale) = quantize(centre);
            quantized.extend(values.iter().map(|v| i16::from(*v)));
            scales.push(scale);
        }
        Self {
            floats,
            quantized,
            scales,
        }
    }

    fn count(&self) -> usize {
        self.scales.len()
    }

    /// The centre nearest a row (by cosine: the row's own scale is common to all).
    fn nearest(&self, row: &[i8]) -> usize {
        nearest_centre(row, &self.quantized, &self.scales)
    }

    /// The nearest centres' lists, nearest first, until a share of all
    /// `rows` is in them.
    fn probe(&self, query: &[f32], lists: &[List], rows: usize) -> Vec<usize> {
        let mut order: Vec<(usize, f32)> = self
            .floats
            .chunks_exact(query.len())
            .map(|centre| centre.iter().zip(query).map(|(c, q)| c * q).sum::<f32>())
            .enumerate()
            .collect();
        order.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
        let enough = rows.div_ceil(PROBE_SHARE);
        let mut chosen = Vec::new();
        let mut read = 0;
        for (i, (list, _)) in order.iter().enumerate() {
            if read >= enough && i >= MIN_PROBES {
                break;
            }
            read += lists[*list].numbers.len();
            chosen.push(*list);
        }
        chosen
    }

    fn bytes(&self) -> usize {
        self.floats.capacity() * 4 + self.quantized.capacity() * 2 + self.scales.capacity() * 4
    }
}

#[multiversion::multiversion(targets("x86_64+avx2+fma", "x86_64+avx"))]
fn nearest_centre(row: &[i8], centres: &[i16], scales: &[f32]) -> usize {
    let mut best = (0, f32::NEG_INFINITY);
    for (cluster, centre) in centres.chunks_exact(row.len()).enumerate() {
        let score = dot(row, centre) as f32 * scales[cluster];
        if score > best.1 {
            best = (cluster, score);
        }
    }
    best.0
}
