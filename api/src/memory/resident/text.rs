//! The resident BM25 index: postings per analysed word, live document
//! frequencies and lengths. Removing a document only updates the counts; its
//! postings stay until the owner rebuilds (`Resident` compacts when dead
//! postings pile up), and scoring skips documents the owner says are gone.

use std::collections::HashMap;

/// BM25 parameters, as the SurrealDB index uses them (`BM25(1.2,0.75)`).
const K1: f32 = 1.2;
const B: f32 = 0.75;

#[derive(Clone, Copy)]
struct Posting {
    doc: u32,
    frequency: u32,
}

/// A document's words as the index counted them: (word id, frequency).
#[derive(Debug, Default, Clone)]
pub struct DocTerms {
    pub terms: Box<[(u32, u32)]>,
    pub length: u32,
}

#[derive(Default)]
pub struct TextIndex {
    words: HashMap<String, u32>,
    postings: Vec<Vec<Posting>>,
    document_frequency: Vec<u32>,
    live_documents: u32,
    live_length: u64,
    /// One past the highest document id with postings.
    doc_bound: u32,
}

impl TextIndex {
    /// Counts a document's analysed words and adds its postings.
    pub fn add(&mut self, doc: u32, words: impl IntoIterator<Item = String>) -> DocTerms {
        let mut counts: HashMap<u32, u32> = HashMap::new();
        let mut length = 0;
        for word in words {
            let id = self.word_id(word);
            *counts.entry(id).or_default() += 1;
            length += 1;
        }
        let mut terms: Vec<(u32, u32)> = counts.into_iter().collect();
        terms.sort_unstable();
        self.insert_postings(doc, &terms, length);
        DocTerms {
            terms: terms.into_boxed_slice(),
            length,
        }
    }

    fn insert_postings(&mut self, doc: u32, terms: &[(u32, u32)], length: u32) {
        for &(word, frequency) in terms {
            self.postings[word as usize].push(Posting { doc, frequency });
            self.document_frequency[word as usize] += 1;
        }
        self.live_documents += 1;
        self.live_length += u64::from(length);
        self.doc_bound = self.doc_bound.max(doc + 1);
    }

    /// Forgets a document's counts (its postings are skipped from now on).
    pub fn remove(&mut self, terms: &DocTerms) {
        for &(word, _) in terms.terms.iter() {
            let df = &mut self.document_frequency[word as usize];
            *df = df.saturating_sub(1);
        }
        self.live_documents = self.live_documents.saturating_sub(1);
        self.live_length = self.live_length.saturating_sub(u64::from(terms.length));
    }

    /// Drops every posting and re-adds the given live documents (new ids).
    pub fn rebuild<'a>(&mut self, documents: impl Iterator<Item = (u32, &'a DocTerms)>) {
        for list in &mut self.postings {
            list.clear();
        }
        self.document_frequency.iter_mut().for_each(|df| *df = 0);
        self.live_documents = 0;
        self.live_length = 0;
        self.doc_bound = 0;
        for (doc, terms) in documents {
            self.insert_postings(doc, &terms.terms, terms.length);
        }
    }

    fn word_id(&mut self, word: String) -> u32 {
        if let Some(&id) = self.words.get(&word) {
            return id;
        }
        let id = self.postings.len() as u32;
        self.words.insert(word, id);
        self.postings.push(Vec::new());
        self.document_frequency.push(0);
        id
    }

    /// BM25 scores of the documents matching any of `words` that `accept`
    /// keeps (it returns the document's length, or `None` to skip it), best
    /// first, at most `k`.
    pub fn search(&self, words: &[String], k: usize, accept: impl Fn(u32) -> Option<u32>) -> Vec<(u32, f32)> {
        if self.live_documents == 0 || k == 0 {
            return Vec::new();
        }
        let n = self.live_documents as f32;
        let average_length = (self.live_length as f32 / n).max(1.0);
        // Dense accumulators: a common word touches most documents, and a
        // hash map per posting costs several times a plain array.
        let mut scores = vec![0f32; self.doc_bound as usize];
        let mut touched: Vec<u32> = Vec::new();
        for word in words {
            let Some(&id) = self.words.get(word) else {
                continue;
            };
            let df = self.document_frequency[id as usize] as f32;
            if df == 0.0 {
                continue;
            }
            // Lucene's IDF: never negative, so a word in most documents still counts a little.
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for posting in &self.postings[id as usize] {
                let Some(length) = accept(posting.doc) else {
                    continue;
                };
                let tf = posting.frequency as f32;
                let norm = K1 * (1.0 - B + B * length as f32 / average_length);
                let score = &mut scores[posting.doc as usize];
                if *score == 0.0 {
                    touched.push(posting.doc);
                }
                *score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let scored = touched
            .into_iter()
            .map(|doc| (doc, scores[doc as usize]))
            .collect();
        top_k(scored, k)
    }
}

/// The `k` highest-scoring entries, best first (ties by document id, so
/// results are stable).
pub fn top_k(mut scored: Vec<(u32, f32)>, k: usize) -> Vec<(u32, f32)> {
    let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > k {
        scored.select_nth_unstable_by(k, order);
        scored.truncate(k);
    }
    scored.sort_unstable_by(order);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split(' ').map(String::from).collect()
    }

    #[test]
    fn rare_words_outscore_common_ones_and_removed_documents_vanish() {
        let mut index = TextIndex::default();
        let a = index.add(0, words("deploy the server"));
        index.add(1, words("the server the server"));
        index.add(2, words("the cat"));
        let hits = index.search(&words("deploy server"), 10, |_| Some(3));
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1]);
        index.remove(&a);
        let hits = index.search(&words("deploy server"), 10, |doc| (doc != 0).then_some(3));
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn top_k_keeps_the_best_in_order() {
        let scored = vec![(1, 0.5), (2, 2.0), (3, 1.0), (4, 2.0)];
        assert_eq!(top_k(scored, 3), vec![(2, 2.0), (4, 2.0), (3, 1.0)]);
    }
}
