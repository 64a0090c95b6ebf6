//! Fusing the two legs' candidates into one ranking: weighted linear
//! combination of calibrated scores, reciprocal rank fusion with fixed
//! weights, or (the default, `adaptive`) reciprocal rank fusion in which each
//! leg weighs, per query, its own calibrated score of its best candidate: the
//! vector leg its best cosine similarity, the text leg the share of the
//! query's weight (its words' IDF) its best hit matches. A query whose words
//! the memory holds (names, places, dates, identifiers) leans lexical; one
//! whose words it lacks (a paraphrase) leans on the vectors; no constant
//! depends on a dataset. Daily logs decay by age. Measured in `bench/README.md`.

use std::collections::HashMap;

use super::resident::Candidate;
use crate::clock::day_number;
use crate::config::Fusion;

/// Reciprocal rank fusion's k: small, so rank 1 in a leg counts much more
/// than rank 5 (k = 60, the usual value, flattened the legs' ranks and lost
/// 14 points of recall@5 on the memory-recall dataset; see bench/README.md).
const RRF_K: f64 = 1.0;

/// How hits are scored; from `memory` config.
#[derive(Debug, Clone, Copy)]
pub struct Ranking {
    pub fusion: Fusion,
    pub vector_weight: f64,
    pub text_weight: f64,
    pub min_score: f64,
    pub half_life_days: f64,
}

/// A fused result before its text is read.
#[derive(Debug)]
pub(super) struct Ranked {
    pub id: String,
    pub score: f64,
    pub legs: Vec<&'static str>,
}

struct Scored {
    candidate: Candidate,
    vector: Option<(usize, f64)>,
    text: Option<(usize, f64)>,
}

/// Fuses the legs' candidates (best first) into the best `limit`.
pub(super) fn fuse(
    vector_hits: Vec<Candidate>,
    text_hits: Vec<Candidate>,
    ranking: Ranking,
    limit: usize,
    today: &str,
) -> Vec<Ranked> {
    let both = !vector_hits.is_empty() && !text_hits.is_empty();
    // A chunk a leg did not return scores there as the leg's weakest
    // candidate, not zero: being outside one leg's list must not sink what the
    // other leg is sure of (zero let weak matches of one leg reorder the
    // other's confident hits). At most half the leg's best, so a leg that found
    // only a few strong matches still lifts them.
    let weakest = |hits: &[Candidate]| {
        let scores = hits.iter().map(|c| c.score.clamp(0.0, 1.0));
        let (low, high) = scores.fold((1.0, 0.0), |(lo, hi): (f64, f64), s| (lo.min(s), hi.max(s)));
        if hits.is_empty() { 0.0 } else { low.min(high / 2.0) }
    };
    let (vector_floor, text_floor) = (weakest(&vector_hits), weakest(&text_hits));
    // Each leg's calibrated score of its best candidate: how sure it is.
    let confidence = |hits: &[Candidate]| hits.first().map_or(0.0, |best| best.score.clamp(0.0, 1.0));
    let (vector_confidence, text_confidence) = (confidence(&vector_hits), confidence(&text_hits));
    let mut by_id: HashMap<String, Scored> = HashMap::new();
    for (rank, candidate) in vector_hits.into_iter().enumerate() {
        let similarity = candidate.score.clamp(0.0, 1.0);
        by_id.insert(
            candidate.id.clone(),
            Scored {
                candidate,
                vector: Some((rank, similarity)),
                text: None,
            },
        );
    }
    for (rank, candidate) in text_hits.into_iter().enumerate() {
        // The share of the query matched (see `Candidate::score`).
        let normalised = candidate.score.clamp(0.0, 1.0);
        by_id
            .entry(candidate.id.clone())
            .or_insert(Scored {
                candidate,
                vector: None,
                text: None,
            })
            .text = Some((rank, normalised));
    }
    let today = day_number(today);
    let mut scored: Vec<(Candidate, Ranked, Option<usize>)> = by_id
        .into_values()
        .map(|s| {
            let fused = match ranking.fusion {
                // One leg: its own calibrated score (similarity, share of the
                // query matched), so a weak match looks weak.
                _ if !both => s.vector.or(s.text).map_or(0.0, |l| l.1),
                Fusion::Linear => {
                    let total = (ranking.vector_weight + ranking.text_weight).max(f64::EPSILON);
                    (ranking.vector_weight * s.vector.map_or(vector_floor, |v| v.1)
                        + ranking.text_weight * s.text.map_or(text_floor, |t| t.1))
                        / total
                }
                // Weighted by the legs' weights (ties go to the stronger leg).
                Fusion::Rrf => weighted_rrf(ranking.vector_weight, ranking.text_weight, &s),
                // Each leg weighted per query by its own best score.
                Fusion::Adaptive => weighted_rrf(vector_confidence, text_confidence, &s),
            };
            let score = fused * decay(s.candidate.daily, ranking.half_life_days, today);
            let mut legs = Vec::new();
            if s.vector.is_some() {
                legs.push("vector");
            }
            if s.text.is_some() {
                legs.push("text");
            }
            let ranked = Ranked {
                id: s.candidate.id.clone(),
                score: (score * 10_000.0).round() / 10_000.0,
                legs,
            };
            // On equal scores the legs' own order decides (a clamped text
            // score ties a full match with a partial one).
            // A candidate with no similarity at all (orthogonal) is not a
            // match in any leg, whatever its rank.
            let best_rank = [s.vector, s.text]
                .into_iter()
                .flatten()
                .filter(|l| l.1 > 0.0)
                .map(|l| l.0)
                .min();
            (s.candidate, ranked, best_rank)
        })
        .filter(|(_, r, best_rank)| r.score >= ranking.min_score && (r.score > 0.0 || best_rank.is_some()))
        .collect();
    scored.sort_by(|(a, ra, a_rank), (b, rb, b_rank)| {
        rb.score
            .total_cmp(&ra.score)
            .then_with(|| a_rank.cmp(b_rank))
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| a.start_line.cmp(&b.start_line))
    });
    scored.truncate(limit);
    scored.into_iter().map(|(_, ranked, _)| ranked).collect()
}

/// Reciprocal rank fusion with these weights, scaled so that rank 1 in both
/// legs scores 1.0; a candidate with no similarity at all (orthogonal) counts
/// nothing in its leg, whatever its rank.
fn weighted_rrf(vector_weight: f64, text_weight: f64, s: &Scored) -> f64 {
    let rrf = |leg: Option<(usize, f64)>| {
        leg.filter(|(_, score)| *score > 0.0)
            .map_or(0.0, |(rank, _)| 1.0 / (RRF_K + rank as f64 + 1.0))
    };
    let total = (vector_weight + text_weight).max(f64::EPSILON);
    (vector_weight * rrf(s.vector) + text_weight * rrf(s.text)) * (RRF_K + 1.0) / total
}

/// Daily logs lose half their weight every `half_life_days`; other files keep it.
fn decay(daily: Option<i64>, half_life_days: f64, today: Option<i64>) -> f64 {
    let (Some(day), Some(today)) = (daily, today) else {
        return 1.0;
    };
    let age = (today - day).max(0) as f64;
    0.5_f64.powf(age / half_life_days)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, kind: &str, day: Option<&str>, distance: Option<f64>, ft: Option<f64>) -> Candidate {
        Candidate {
            id: id.into(),
            path: format!("{id}.md"),
            start_line: 1,
            daily: (kind == "daily").then(|| day.and_then(day_number)).flatten(),
            score: distance.map_or_else(|| ft.unwrap_or(0.0), |d| 1.0 - d),
        }
    }

    const LINEAR: Ranking = Ranking {
        fusion: Fusion::Linear,
        vector_weight: 0.7,
        text_weight: 0.3,
        min_score: 0.0,
        half_life_days: 30.0,
    };

    #[test]
    fn linear_fusion_weighs_legs_and_records_them() {
        let hits = fuse(
            vec![
                row("a", "curated", None, Some(0.1), None),
                row("b", "curated", None, Some(0.5), None),
            ],
            vec![
                row("b", "curated", None, None, Some(4.0)),
                row("c", "curated", None, None, Some(2.0)),
            ],
            LINEAR,
            10,
            "2026-11-22",
        );
        let summary: Vec<_> = hits
            .iter()
            .map(|h| (h.id.as_str(), h.score, h.legs.clone()))
            .collect();
        assert_eq!(
            summary,
            // Text scores are shares of the query matched (clamped to 1); a
            // chunk one leg missed gets its weakest score there, at most half
            // its best: a's text 0.5, c's similarity 0.45.
            vec![
                ("a", 0.78, vec!["vector"]),
                ("b", 0.65, vec!["vector", "text"]),
                ("c", 0.615, vec!["text"]),
            ]
        );
    }

    #[test]
    fn a_chunk_outside_a_leg_gets_its_weakest_score() {
        let hits = fuse(
            vec![
                row("a", "note", None, Some(0.2), None),
                row("b", "note", None, Some(0.6), None),
            ],
            vec![
                row("c", "note", None, None, Some(1.0)),
                row("b", "note", None, None, Some(0.5)),
            ],
            LINEAR,
            10,
            "2026-11-22",
        );
        let summary: Vec<_> = hits.iter().map(|h| (h.id.as_str(), h.score)).collect();
        // a: 0.7 * 0.8 + 0.3 * 0.5 (the text leg's weakest); c: 0.7 * 0.4
        // (the vector leg's weakest, under half its best) + 0.3.
        assert_eq!(summary, vec![("a", 0.71), ("c", 0.58), ("b", 0.43)]);
    }

    #[test]
    fn daily_logs_decay_and_curated_memory_does_not() {
        let ranking = Ranking {
            half_life_days: 30.0,
            ..LINEAR
        };
        let hits = fuse(
            vec![
                row("old", "daily", Some("2026-10-23"), Some(0.0), None),
                row("kept", "curated", None, Some(0.0), None),
            ],
            Vec::new(),
            ranking,
            10,
            "2026-11-22",
        );
        let score = |id: &str| hits.iter().find(|h| h.id == id).unwrap().score;
        assert_eq!(score("kept"), 1.0);
        assert_eq!(score("old"), 0.5);
    }

    #[test]
    fn rrf_scores_rank_one_in_both_legs_as_one() {
        let ranking = Ranking {
            fusion: Fusion::Rrf,
            ..LINEAR
        };
        let hits = fuse(
            vec![row("a", "note", None, Some(0.2), None)],
            vec![row("a", "note", None, None, Some(1.0))],
            ranking,
            10,
            "2026-11-22",
        );
        assert_eq!(hits[0].score, 1.0);
    }

    #[test]
    fn adaptive_fusion_trusts_the_leg_whose_best_candidate_scores_higher() {
        let adaptive = Ranking {
            fusion: Fusion::Adaptive,
            ..LINEAR
        };
        // Every query word in the text leg's best hit (share 1.0), a weak best
        // cosine (0.3): the text leg's order leads, the vector leg's first hit
        // (which text did not find) after its two.
        let lexical = fuse(
            vec![
                row("v1", "note", None, Some(0.7), None),
                row("t1", "note", None, Some(0.75), None),
            ],
            vec![
                row("t1", "note", None, None, Some(1.0)),
                row("t2", "note", None, None, Some(0.9)),
            ],
            adaptive,
            10,
            "2026-11-22",
        );
        let order: Vec<&str> = lexical.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(order, vec!["t1", "t2", "v1"]);
        // A fifth of the query matched, a close vector match (0.9): the vector
        // leg's first hit comes first, though the text leg ranks another first.
        let semantic = fuse(
            vec![
                row("v1", "note", None, Some(0.1), None),
                row("v2", "note", None, Some(0.5), None),
            ],
            vec![
                row("t1", "note", None, None, Some(0.2)),
                row("v2", "note", None, None, Some(0.1)),
            ],
            adaptive,
            10,
            "2026-11-22",
        );
        let order: Vec<&str> = semantic.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(order, vec!["v1", "v2", "t1"]);
        // Rank 1 in both legs still scores 1.0.
        let both = fuse(
            vec![row("a", "note", None, Some(0.4), None)],
            vec![row("a", "note", None, None, Some(0.6))],
            adaptive,
            10,
            "2026-11-22",
        );
        assert_eq!(both[0].score, 1.0);
    }

    #[test]
    fn min_score_drops_weak_hits() {
        let ranking = Ranking {
            min_score: 0.5,
            ..LINEAR
        };
        let hits = fuse(
            vec![
                row("near", "note", None, Some(0.1), None),
                row("far", "note", None, Some(0.9), None),
            ],
            Vec::new(),
            ranking,
            10,
            "2026-11-22",
        );
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].id, "near");
    }
}
