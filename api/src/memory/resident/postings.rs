//! One word's postings, compressed, in blocks that say how much their
//! documents can score: each (document, frequency) as the gap from the
//! previous document and the frequency, both LEB128 varints (2–3 bytes a
//! posting), and for every [`BLOCK`] postings where they start, the highest
//! frequency and the shortest document among them. A search reads the block
//! summaries first and decodes only the blocks that may hold a top hit
//! (block-max pruning), so a one-word query over a common word does not walk
//! every posting.

/// Postings a block summarises: a summary costs 16 bytes, an eighth of a
/// byte a posting.
pub(super) const BLOCK: usize = 128;

/// What the postings of one block can score at most.
#[derive(Clone, Copy, Debug)]
pub(super) struct BlockSummary {
    /// Byte offset of the block's first posting.
    start: u32,
    /// The document before the block's first (its first gap counts from it).
    base: u32,
    /// The highest frequency in the block.
    pub max_frequency: u32,
    /// The shortest document in the block, in words, as it was when added.
    pub min_length: u32,
}

#[derive(Default)]
pub(super) struct Postings {
    bytes: Vec<u8>,
    last: u32,
    count: u32,
    blocks: Vec<BlockSummary>,
}

impl Postings {
    /// Adds a document of `length` words in which the word occurs `frequency` times.
    pub fn push(&mut self, doc: u32, frequency: u32, length: u32) {
        if (self.count as usize).is_multiple_of(BLOCK) {
            self.blocks.push(BlockSummary {
                start: self.bytes.len() as u32,
                base: self.last,
                max_frequency: frequency,
                min_length: length,
            });
        } else if let Some(block) = self.blocks.last_mut() {
            block.max_frequency = block.max_frequency.max(frequency);
            block.min_length = block.min_length.min(length);
        }
        // Wrapping both ways: any order decodes exactly (out of order only costs bytes).
        put_varint(&mut self.bytes, doc.wrapping_sub(self.last));
        put_varint(&mut self.bytes, frequency);
        self.last = doc;
        self.count += 1;
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.blocks.clear();
        self.last = 0;
        self.count = 0;
    }

    /// The bytes held: the encoded postings and the block summaries.
    pub fn bytes(&self) -> usize {
        self.bytes.capacity()
            + self.blocks.capacity() * std::mem::size_of::<BlockSummary>()
            + std::mem::size_of::<Self>()
    }

    /// (document, frequency), in the order added.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        decode(&self.bytes, 0, 0)
    }

    /// Each block's summary, in order.
    pub fn blocks(&self) -> &[BlockSummary] {
        &self.blocks
    }

    /// The postings of block `number` (of [`Self::blocks`]).
    #[inline]
    pub fn block(&self, number: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let block = self.blocks[number];
        let end = self
            .blocks
            .get(number + 1)
            .map_or(self.bytes.len(), |next| next.start as usize);
        decode(&self.bytes[..end], block.start as usize, block.base)
    }
}

#[inline]
fn decode(bytes: &[u8], mut at: usize, mut doc: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
    std::iter::from_fn(move || {
        let gap = get_varint(bytes, &mut at)?;
        let frequency = get_varint(bytes, &mut at)?;
        doc = doc.wrapping_add(gap);
        Some((doc, frequency))
    })
}

fn put_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[inline]
fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u32::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_round_trip_in_a_few_bytes_each() {
        let mut postings = Postings::default();
        let added = [
            (0, 1),
            (1, 3),
            (2, 200),
            (130, 1),
            (20_000, 2),
            (u32::MAX, 70_000),
            (5, 1),
        ];
        for (doc, frequency) in added {
            postings.push(doc, frequency, 10);
        }
        assert_eq!(postings.iter().collect::<Vec<_>>(), added, "out of order too");
        let mut dense = Postings::default();
        for doc in 0..1_000 {
            dense.push(doc * 3, 1 + doc % 4, 10);
        }
        assert_eq!(
            dense.bytes.len(),
            2_000,
            "two bytes a posting for close documents"
        );
        assert_eq!(dense.iter().nth(999), Some((2_997, 4)));
        assert_eq!(
            get_varint(&[0x80, 0x80], &mut 0),
            None,
            "a torn varint ends the list"
        );
    }

    #[test]
    fn blocks_decode_alone_and_bound_what_they_hold() {
        let mut postings = Postings::default();
        let mut added = Vec::new();
        for doc in 0..(3 * BLOCK as u32 + 17) {
            // Gaps of one and of several bytes, frequencies and lengths that vary.
            let doc = doc * if doc % 5 == 0 { 300 } else { 7 };
            let (frequency, length) = (1 + doc % 9, 3 + doc % 40);
            postings.push(doc, frequency, length);
            added.push((doc, frequency, length));
        }
        assert_eq!(postings.blocks().len(), 4);
        let mut joined = Vec::new();
        for (number, summary) in postings.blocks().iter().enumerate() {
            let block: Vec<(u32, u32)> = postings.block(number).collect();
            let held = &added[number * BLOCK..(number * BLOCK + block.len())];
            assert_eq!(block, held.iter().map(|&(d, f, _)| (d, f)).collect::<Vec<_>>());
            assert_eq!(summary.max_frequency, held.iter().map(|p| p.1).max().unwrap());
            assert_eq!(summary.min_length, held.iter().map(|p| p.2).min().unwrap());
            joined.extend(block);
        }
        assert_eq!(
            joined,
            postings.iter().collect::<Vec<_>>(),
            "the blocks are the list"
        );
        postings.clear();
        assert!(postings.blocks().is_empty() && postings.iter().next().is_none());
    }
}
