//! The resident BM25 index: postings per analysed word, live document
//! frequencies and lengths. Removing a document only updates the counts; its
//! postings stay until the owner rebuilds (`Resident` compacts when dead
//! postings pile up), and scoring skips documents the owner says are gone.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::postings::Postings;

/// BM25 parameters, as the SurrealDB index uses them (`BM25(1.2,0.75)`).
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// A document's words as the index counted them: (word id, frequency).
#[derive(Debug, Default, Clone)]
pub struct DocTerms {
    pub terms: Box<[(u32, u32)]>,
    pub length: u32,
}

#[derive(Default)]
pub struct TextIndex {
    words: HashMap<String, u32>,
    postings: Vec<Postings>,
    document_frequency: Vec<u32>,
    /// Each document's length in words, by id; 0 once removed (a document
    /// without words has no postings). Read per posting, so kept apart from
    /// the documents themselves: a walk over a common word's postings then
    /// reads 4 bytes a document, in order.
    lengths: Vec<u32>,
    live_documents: u32,
    live_length: u64,
    /// One past the highest document id with postings.
    doc_bound: u32,
}

impl TextIndex {
    /// The bytes the postings, word list and counts take.
    pub fn bytes(&self) -> usize {
        let postings: usize = self.postings.iter().map(Postings::bytes).sum();
        let words: usize = self.words.keys().map(|w| w.capacity() + 8 + 24).sum();
        postings + words + (self.document_frequency.capacity() + self.lengths.capacity()) * 4
    }

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

    /// Adds the postings of a document whose words were counted before (by
    /// this index, or by a snapshot of it whose vocabulary went through
    /// [`intern`](Self::intern)).
    pub fn add_counted(&mut self, doc: u32, terms: DocTerms) -> DocTerms {
        self.insert_postings(doc, &terms.terms, terms.length);
        terms
    }

    /// The id of `word`, added if new.
    pub fn intern(&mut self, word: String) -> u32 {
        self.word_id(word)
    }

    /// Every word the index has seen, by id.
    pub fn vocabulary(&self) -> Vec<&str> {
        let mut words = vec![""; self.postings.len()];
        for (word, &id) in &self.words {
            words[id as usize] = word;
        }
        words
    }

    fn insert_postings(&mut self, doc: u32, terms: &[(u32, u32)], length: u32) {
        for &(word, frequency) in terms {
            self.postings[word as usize].push(doc, frequency, length);
            self.document_frequency[word as usize] += 1;
        }
        if self.lengths.len() <= doc as usize {
            self.lengths.resize(doc as usize + 1, 0);
        }
        self.lengths[doc as usize] = length;
        self.live_documents += 1;
        self.live_length += u64::from(length);
        self.doc_bound = self.doc_bound.max(doc + 1);
    }

    /// Forgets a document's counts (its postings are skipped from now on).
    pub fn remove(&mut self, doc: u32, terms: &DocTerms) {
        if let Some(length) = self.lengths.get_mut(doc as usize) {
            *length = 0;
        }
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
        self.lengths.clear();
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
        self.postings.push(Postings::default());
        self.document_frequency.push(0);
        id
    }

    /// What a document matching every one of `words` once, at the average
    /// length, scores: the sum of their IDFs. BM25 divided by it says how much
    /// of the query a document matches (about 0 to 1), comparable across queries.
    pub fn full_match(&self, words: &[String]) -> f32 {
        if self.live_documents == 0 {
            return 0.0;
        }
        let n = self.live_documents as f32;
        let mut seen: Vec<u32> = Vec::new();
        let mut total = 0.0;
        for word in words {
            let Some(&id) = self.words.get(word) else {
                continue;
            };
            let df = self.document_frequency[id as usize] as f32;
            if df > 0.0 && !seen.contains(&id) {
                seen.push(id);
                total += (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            }
        }
        total
    }

    /// BM25 scores of the documents matching any of `words` that `accept`
    /// keeps (it returns the document's words, or `None` to skip it), best
    /// first, at most `k`.
    ///
    /// MaxScore, term at a time: words are taken rarest first (highest
    /// possible contribution), and once the words left could not lift an
    /// unseen document into the top `k`, their postings are not walked; they
    /// only add to the documents already found, looked up in each one's word
    /// list. The result is exact; a word in most documents (`the`, or every
    /// chunk's heading word) costs almost nothing.
    ///
    /// `accept` says whether a live document may be a hit (its owner, its
    /// folder); `terms_of` gives an accepted document's words.
    pub fn search<'a>(
        &self,
        words: &[String],
        k: usize,
        accept: impl Fn(u32) -> bool,
        terms_of: impl Fn(u32) -> &'a DocTerms,
        tie: TieBreak<'_>,
    ) -> Vec<(u32, f32)> {
        if self.live_documents == 0 || k == 0 {
            return Vec::new();
        }
        let n = self.live_documents as f32;
        let average_length = (self.live_length as f32 / n).max(1.0);
        let mut terms: Vec<(u32, f32)> = Vec::new();
        for word in words {
            let Some(&id) = self.words.get(word) else {
                continue;
            };
            let df = self.document_frequency[id as usize] as f32;
            if df > 0.0 && !terms.iter().any(|t| t.0 == id) {
                // Lucene's IDF: never negative, so a word in most documents still counts a little.
                terms.push((id, (1.0 + (n - df + 0.5) / (df + 0.5)).ln()));
            }
        }
        // A word's contribution is below idf * (K1 + 1) whatever its frequency.
        terms.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut left: Vec<f32> = terms
            .iter()
            .rev()
            .scan(0.0, |sum, t| {
                *sum += t.1 * (K1 + 1.0);
                Some(*sum)
            })
            .collect();
        left.reverse();
        let contribution = |idf: f32, tf: u32, length: u32| {
            let tf = tf as f32;
            idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length as f32 / average_length))
        };
        // Dense accumulators: a common word touches most documents, and a
        // hash map per posting costs several times a plain array. Kept per
        // thread and zeroed where touched, not allocated zeroed per search:
        // a fresh zeroed array is a page fault every 4 KB of the index.
        let mut scores = SCRATCH.with(|scratch| std::mem::take(&mut *scratch.borrow_mut()));
        if scores.len() < self.doc_bound as usize {
            scores.resize(self.doc_bound as usize, 0.0);
        }
        let mut touched: Vec<u32> = Vec::new();
        let mut next = 0;
        while next < terms.len() {
            if touched.len() >= k && left[next] < kth_best(&touched, &scores, k) {
                break;
            }
            let (id, idf) = terms[next];
            let rest = left.get(next + 1).copied().unwrap_or(0.0);
            // Blocks of the first word only (no document has a score yet),
            // and only when the other words add less than its most: otherwise
            // no block could be skipped and the bookkeeping is wasted.
            let skip = (next == 0 && rest < idf * (K1 + 1.0)).then_some(rest);
            let word = Walked { id, idf, skip };
            self.walk(word, k, &accept, &contribution, &mut scores, &mut touched);
            next += 1;
        }
        if next < terms.len()
            && self.walk_is_cheaper(
                &terms[next..],
                &touched,
                &scores,
                kth_best(&touched, &scores, k) - left[next],
            )
        {
            // Most documents found are still in the running (a query of
            // common words only): walking the words left, adding to the
            // documents found, reads postings in order; looking each
            // document's words up would miss the cache once a document.
            for &(id, idf) in &terms[next..] {
                for (posted, frequency) in self.postings[id as usize].iter() {
                    let length = self.lengths[posted as usize];
                    let score = &mut scores[posted as usize];
                    // Not found (or not accepted) by the words walked: cannot be in the top `k`.
                    if length == 0 || *score == 0.0 {
                        continue;
                    }
                    *score += contribution(idf, frequency, length);
                }
            }
        } else if next < terms.len() {
            let threshold = kth_best(&touched, &scores, k);
            for &doc in &touched {
                let score = &mut scores[doc as usize];
                if *score + left[next] < threshold {
                    continue;
                }
                let found = terms_of(doc);
                for &(id, idf) in &terms[next..] {
                    if let Ok(at) = found.terms.binary_search_by_key(&id, |t| t.0) {
                        *score += contribution(idf, found.terms[at].1, found.length);
                    }
                }
            }
        }
        // Only what may be among the best `k` goes on to the exact top `k`:
        // a common word touches most documents, and selecting among all of
        // them costs more than walking its postings did.
        let floor = kth_best(&touched, &scores, k);
        let scored = touched
            .into_iter()
            .filter_map(|doc| {
                let score = std::mem::take(&mut scores[doc as usize]);
                (score >= floor).then_some((doc, score))
            })
            .collect();
        // Every touched entry is zero again; a search that panicked left its
        // array behind, and the next one starts a new one.
        SCRATCH.with(|scratch| *scratch.borrow_mut() = scores);
        top_k(scored, k, tie)
    }
}

thread_local! {
    /// [`TextIndex::search`]'s score accumulators, all zero between searches.
    /// Searches run on the runtime's worker threads, so this holds 4 bytes a
    /// slot per worker (1.5 MB each at 367,000 chunks), outside `State::bytes`.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A word whose postings a search walks.
struct Walked {
    id: u32,
    idf: f32,
    /// When blocks may be skipped: the most the words after it can add to
    /// any document.
    skip: Option<f32>,
}

impl TextIndex {
    /// Adds a word's contributions to the documents `accept` keeps, block by
    /// block. With `skip` (block-max pruning of the first word), a block is
    /// skipped when even its best possible posting (its highest frequency in
    /// its shortest document), plus the most the other words can add, stays
    /// below the `k`-th best score found so far. Scores only grow, so that
    /// is below the final `k`-th best too: no document of the block can be a
    /// hit. A later word may still touch such a document; its score then
    /// lacks this word, stays below the bar, and is never returned.
    fn walk(
        &self,
        word: Walked,
        k: usize,
        accept: &impl Fn(u32) -> bool,
        contribution: &impl Fn(f32, u32, u32) -> f32,
        scores: &mut [f32],
        touched: &mut Vec<u32>,
    ) {
        // A margin for rounding: a sum of rounded contributions must never
        // pass the bound it is compared with.
        const SLACK: f32 = 1.0 + 1e-4;
        let postings = &self.postings[word.id as usize];
        // The best `k` scores so far (a min-heap: the k-th on top).
        let mut best: BinaryHeap<Reverse<Score>> = BinaryHeap::new();
        for (number, block) in postings.blocks().iter().enumerate() {
            if let Some(rest) = word.skip
                && best.len() == k
                && let Some(kth) = best.peek()
                && (contribution(word.idf, block.max_frequency, block.min_length) + rest) * SLACK < kth.0.0
            {
                continue;
            }
            for (posted, frequency) in postings.block(number) {
                let length = self.lengths[posted as usize];
                if length == 0 || !accept(posted) {
                    continue;
                }
                let value = contribution(word.idf, frequency, length);
                let score = accumulate(scores, touched, posted, value);
                if word.skip.is_none() {
                    continue;
                }
                if best.len() < k {
                    best.push(Reverse(Score(score)));
                } else if best.peek().is_some_and(|kth| kth.0.0 < score) {
                    best.pop();
                    best.push(Reverse(Score(score)));
                }
            }
        }
    }
}

/// Adds `value` to `doc`'s score, noting the document when it is first
/// touched; returns the new score.
#[inline(always)]
fn accumulate(scores: &mut [f32], touched: &mut Vec<u32>, doc: u32, value: f32) -> f32 {
    let score = &mut scores[doc as usize];
    if *score == 0.0 {
        touched.push(doc);
    }
    *score += value;
    *score
}

/// A score ordered by `total_cmp`, for a heap.
#[derive(PartialEq)]
struct Score(f32);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl TextIndex {
    /// Whether adding `words` to the documents found is cheaper by walking
    /// their postings (in order, a few nanoseconds each) than by looking up
    /// the words of each document still in the running (those whose score is
    /// at least `bar`): a cache miss or two apiece, so worth it only when few
    /// documents are left, as when the words left are common and the query
    /// also has rare ones.
    fn walk_is_cheaper(&self, words: &[(u32, f32)], found: &[u32], scores: &[f32], bar: f32) -> bool {
        const LOOKUP_COST_IN_POSTINGS: usize = 8;
        let postings: usize = words
            .iter()
            .map(|(id, _)| self.document_frequency[*id as usize] as usize)
            .sum();
        let running = found.iter().filter(|doc| scores[**doc as usize] >= bar).count();
        postings <= LOOKUP_COST_IN_POSTINGS * running
    }
}

/// Documents [`kth_best`] reads at most: a bounded cost per call, however
/// many documents a common word touched.
const KTH_SAMPLE: usize = 4096;

/// A lower bound on the `k`-th best score among `docs`: the `k`-th best of an
/// evenly spread sample of at most [`KTH_SAMPLE`] of them (the `k`-th best of
/// some can only be lower than of all), or minus infinity when fewer than
/// `k`. Scores only grow as words are added, so it also bounds the final
/// `k`-th best from below: pruning by it never drops a document that could
/// be in the top `k`.
fn kth_best(docs: &[u32], scores: &[f32], k: usize) -> f32 {
    let step = docs.len().div_ceil(KTH_SAMPLE).max(1);
    let mut found: Vec<f32> = docs.iter().step_by(step).map(|d| scores[*d as usize]).collect();
    if k == 0 || found.len() < k {
        return f32::NEG_INFINITY;
    }
    let (_, kth, _) = found.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    *kth
}

/// How two documents with the same score are ordered: by something every
/// replica agrees on (the chunk id), since slots differ between replicas.
pub type TieBreak<'a> = &'a dyn Fn(u32, u32) -> std::cmp::Ordering;

/// The `k` highest-scoring entries, best first (ties as `tie` says, so every
/// replica returns the same).
///
/// Scores are compared first, alone: the tie-break reads each chunk's id, a
/// cache miss or two apiece, so it only decides among the entries whose score
/// equals the k-th best (a one-word query over short notes ties thousands).
pub fn top_k(mut scored: Vec<(u32, f32)>, k: usize, tie: TieBreak<'_>) -> Vec<(u32, f32)> {
    if k == 0 {
        return Vec::new();
    }
    let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1);
    if scored.len() > k {
        scored.select_nth_unstable_by(k - 1, by_score);
        let kth = scored[k - 1].1;
        // At most k - 1 score above the k-th; the rest of the k come from
        // those equal to it, wherever the selection left them.
        let (mut kept, mut tied): (Vec<_>, Vec<_>) = scored
            .into_iter()
            .filter(|entry| entry.1.total_cmp(&kth).is_ge())
            .partition(|entry| entry.1.total_cmp(&kth).is_gt());
        let wanted = k - kept.len();
        if tied.len() > wanted {
            tied.select_nth_unstable_by(wanted, |a, b| tie(a.0, b.0));
            tied.truncate(wanted);
        }
        kept.append(&mut tied);
        scored = kept;
    }
    scored.sort_unstable_by(|a, b| by_score(a, b).then_with(|| tie(a.0, b.0)));
    scored
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::memory::resident::postings::BLOCK;

    /// Repeatable pseudo-random numbers (a linear congruential generator).
    pub(in crate::memory::resident) fn numbers(mut seed: u64) -> impl FnMut() -> u32 {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        }
    }

    fn words(text: &str) -> Vec<String> {
        text.split(' ').map(String::from).collect()
    }

    #[test]
    fn the_top_k_are_those_a_full_sort_puts_first_however_many_tie() {
        let tie = |a: u32, b: u32| a.cmp(&b);
        let mut next = numbers(7);
        for round in 0..400 {
            let n = (next() % 60) as usize;
            // Few distinct scores, so most entries tie (as one-word queries do).
            let distinct = 1 + next() % if round % 2 == 0 { 3 } else { 50 };
            let mut scored: Vec<(u32, f32)> = (0..n as u32)
                .map(|slot| (slot * 7 % 61, (next() % distinct) as f32 / 4.0))
                .collect();
            scored.sort_unstable_by_key(|e| e.0);
            scored.dedup_by_key(|e| e.0);
            let mut full = scored.clone();
            full.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| tie(a.0, b.0)));
            for k in [0, 1, 2, 5, 10, 70] {
                let want: Vec<_> = full.iter().copied().take(k).collect();
                assert_eq!(
                    top_k(scored.clone(), k, &tie),
                    want,
                    "n={n} k={k} distinct={distinct}"
                );
            }
        }
    }

    #[test]
    fn rare_words_outscore_common_ones_and_removed_documents_vanish() {
        let mut index = TextIndex::default();
        let docs = [
            index.add(0, words("deploy the server")),
            index.add(1, words("the server the server")),
            index.add(2, words("the cat")),
        ];
        let terms_of = |doc: u32| &docs[doc as usize];
        let hits = index.search(&words("deploy server"), 10, |_| true, terms_of, &|a, b| a.cmp(&b));
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1]);
        let hits = index.search(&words("deploy server"), 10, |doc| doc != 1, terms_of, &|a, b| {
            a.cmp(&b)
        });
        assert_eq!(
            hits.iter().map(|h| h.0).collect::<Vec<_>>(),
            [0],
            "a document not accepted is no hit"
        );
        index.remove(0, &docs[0]);
        let hits = index.search(&words("deploy server"), 10, |_| true, terms_of, &|a, b| a.cmp(&b));
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1]);
    }

    /// Pruning must not change the answer: `index.search` against scoring
    /// every word of every document (a word asked twice counts once), for
    /// each query and k.
    fn assert_pruning_is_exact(index: &TextIndex, docs: &[DocTerms], queries: &[&[&str]]) {
        assert_pruning_is_exact_for(index, docs, queries, &|_| false, &|_| true);
    }

    /// [`assert_pruning_is_exact`] when some documents were removed (`gone`)
    /// and the search keeps only those `accept` says.
    fn assert_pruning_is_exact_for(
        index: &TextIndex,
        docs: &[DocTerms],
        queries: &[&[&str]],
        gone: &dyn Fn(u32) -> bool,
        accept: &dyn Fn(u32) -> bool,
    ) {
        let live = || (0..docs.len() as u32).filter(|doc| !gone(*doc));
        let n = live().count() as f32;
        let average = live().map(|doc| docs[doc as usize].length as f32).sum::<f32>() / n;
        let exhaustive = |query: &[String], k: usize| {
            let mut scored: Vec<(u32, f32)> = Vec::new();
            let mut unique = query.to_vec();
            unique.sort();
            unique.dedup();
            for (doc, terms) in docs.iter().enumerate() {
                if gone(doc as u32) || !accept(doc as u32) {
                    continue;
                }
                let mut score = 0.0;
                for word in &unique {
                    let Some(&id) = index.words.get(word) else {
                        continue;
                    };
                    let df = index.document_frequency[id as usize] as f32;
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    if let Some(&(_, tf)) = terms.terms.iter().find(|t| t.0 == id) {
                        let tf = tf as f32;
                        score +=
                            idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * terms.length as f32 / average));
                    }
                }
                if score > 0.0 {
                    scored.push((doc as u32, score));
                }
            }
            top_k(scored, k, &|a, b| a.cmp(&b))
        };
        for query in queries {
            let query: Vec<String> = query.iter().map(|w| w.to_string()).collect();
            for k in [1, 10, 30] {
                let pruned = index.search(&query, k, accept, |doc| &docs[doc as usize], &|a, b| a.cmp(&b));
                let expected = exhaustive(&query, k);
                let ids = |v: &[(u32, f32)]| v.iter().map(|h| h.0).collect::<Vec<_>>();
                assert_eq!(ids(&pruned), ids(&expected), "{query:?} k={k}");
                for (a, b) in pruned.iter().zip(&expected) {
                    assert!((a.1 - b.1).abs() < 1e-4, "{query:?}: {a:?} vs {b:?}");
                }
            }
        }
    }

    /// Rare words first, common ones looked up in the few documents left.
    #[test]
    fn maxscore_pruning_gives_the_exhaustive_top_k() {
        let mut index = TextIndex::default();
        let mut seed = 7u64;
        // More documents than `kth_best` samples, so its bound comes from a sample.
        let docs: Vec<DocTerms> = (0..3 * KTH_SAMPLE as u32)
            .map(|doc| {
                let text: Vec<String> = (0..12)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        // Skewed: low word numbers are common, high ones rare.
                        let rank = ((seed >> 33) % 1000) * ((seed >> 13) % 1000) / 1000;
                        format!("w{rank}")
                    })
                    .chain(["every".to_string()])
                    .collect();
                index.add(doc, text)
            })
            .collect();
        let queries: &[&[&str]] = &[
            &["w3", "w950", "every"],
            &["every", "w1"],
            &["w990", "w991", "w2"],
            &["every"],
        ];
        assert_pruning_is_exact(&index, &docs, queries);
    }

    /// The soak's notes (eight words drawn from ten): every word is common,
    /// most documents stay in the running, and the words left are walked.
    #[test]
    fn pruning_is_exact_when_every_word_is_common() {
        const WORDS: [&str; 10] = ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"];
        let mut index = TextIndex::default();
        let mut next = numbers(11);
        let docs: Vec<DocTerms> = (0..2 * KTH_SAMPLE as u32)
            .map(|doc| index.add(doc, (0..8).map(|_| WORDS[next() as usize % 10].to_string())))
            .collect();
        let queries: &[&[&str]] = &[
            &["a0", "a1", "a2", "a3", "a4", "a5"],
            &["a9", "a9", "a3", "a7"],
            &["a2"],
            &["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"],
        ];
        assert_pruning_is_exact(&index, &docs, queries);
    }

    /// Block-max pruning of the first word: documents of many lengths and
    /// frequencies (so blocks bound differently), some removed, some not
    /// accepted, and queries of one word and of several.
    #[test]
    fn skipped_blocks_never_hold_a_hit() {
        let mut index = TextIndex::default();
        let mut next = numbers(23);
        let docs: Vec<DocTerms> = (0..12 * BLOCK as u32)
            .map(|doc| {
                let length = 2 + next() % 40;
                let words = (0..length).map(|_| {
                    // "hot" is common and repeats; "cold" is rare; the rest fill.
                    match next() % 20 {
                        0..=5 => "hot".to_string(),
                        6 if next().is_multiple_of(8) => "cold".to_string(),
                        pick => format!("f{}", pick % 6),
                    }
                });
                index.add(doc, words.collect::<Vec<_>>())
            })
            .collect();
        let queries: &[&[&str]] = &[
            &["hot"],
            &["cold"],
            &["hot", "f1"],
            &["cold", "hot", "f2", "f3"],
            &["f4"],
        ];
        assert_pruning_is_exact(&index, &docs, queries);
        let gone = |doc: u32| doc % 7 == 3;
        for doc in (0..docs.len() as u32).filter(|d| gone(*d)) {
            index.remove(doc, &docs[doc as usize]);
        }
        assert_pruning_is_exact_for(&index, &docs, queries, &gone, &|doc| doc % 3 != 0);
    }

    #[test]
    fn top_k_keeps_the_best_in_order() {
        let scored = vec![(1, 0.5), (2, 2.0), (3, 1.0), (4, 2.0)];
        assert_eq!(
            top_k(scored, 3, &|a, b| a.cmp(&b)),
            vec![(2, 2.0), (4, 2.0), (3, 1.0)]
        );
    }
}
