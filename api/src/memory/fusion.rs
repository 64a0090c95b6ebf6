//! Fusing the two legs' candidates into one ranking: weighted linear
//! combination of calibrated scores, reciprocal rank fusion with fixed
//! weights, or (the default, `adaptive`) a per-query weighted sum of the legs'
//! calibrated scores (cosine similarity, share of the query's word weight
//! matched), each leg weighted by how far its best candidate stands out of
//! its others (`standout`). A leg that finds one clear match (a name, a date,
//! an identifier the memory holds; or a close paraphrase) leads; a leg whose
//! scores are flat (common words, a vague question) barely counts. No
//! constant depends on a dataset; daily logs decay by age. Adaptive hybrid
//! search then lifts each chunk a little by its best touching candidate
//! (`neighbours`). Measured in `bench/README.md` (LoCoMo and memory-recall).

use std::collections::HashMap;

use super::neighbours::{Span, with_neighbours};
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

/// How many of a leg's best candidates its standout is measured against:
/// those a search for 10 hits fetches, so a larger `limit` does not change
/// the weights.
const STANDOUT_DEPTH: usize = 30;

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
    // Adaptive: each leg's weight is how sure it is; a chunk a leg did not
    // return takes that leg's lowest returned score (it ranked below them all),
    // or 0 beside a lone candidate (which would otherwise lift every chunk as
    // much as itself, and a single match is the clearest signal a leg gives).
    // (0 for every chunk the text leg missed lost 7 points of recall@5 on
    // memory-recall: paraphrases matching one word somewhere then outrank
    // the vectors' best.)
    let (vector_standout, text_standout) = (standout(&vector_hits), standout(&text_hits));
    let lowest = |hits: &[Candidate]| match hits {
        [_, _, ..] => hits.iter().map(|c| c.score).fold(f64::INFINITY, f64::min),
        _ => 0.0,
    };
    let (vector_lowest, text_lowest) = (lowest(&vector_hits), lowest(&text_hits));
    let mut by_id: HashMap<String, Scored> = HashMap::new();
    for (rank, candidate) in vector_hits.into_iter().enumerate() {
        let similarity = candidate.score;
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
        let share = candidate.score;
        by_id
            .entry(candidate.id.clone())
            .or_insert(Scored {
                candidate,
                vector: None,
                text: None,
            })
            .text = Some((rank, share));
    }
    let today = day_number(today);
    let candidates: Vec<Scored> = by_id.into_values().collect();
    let fused: Vec<f64> = candidates
        .iter()
        .map(|s| match ranking.fusion {
            // One leg: its own calibrated score (similarity, share of the
            // query matched), so a weak match looks weak.
            _ if !both => s.vector.or(s.text).map_or(0.0, |l| l.1.clamp(0.0, 1.0)),
            Fusion::Linear => {
                let total = (ranking.vector_weight + ranking.text_weight).max(f64::EPSILON);
                (ranking.vector_weight * s.vector.map_or(vector_floor, |v| v.1.clamp(0.0, 1.0))
                    + ranking.text_weight * s.text.map_or(text_floor, |t| t.1.clamp(0.0, 1.0)))
                    / total
            }
            // Weighted by the legs' weights (ties go to the stronger leg).
            Fusion::Rrf => weighted_rrf(ranking.vector_weight, ranking.text_weight, s),
            // Each leg weighted per query by how far its best stands out.
            Fusion::Adaptive => {
                let total = vector_standout + text_standout;
                let (vector_weight, text_weight) = if total > 0.0 {
                    (vector_standout / total, text_standout / total)
                } else {
                    (0.5, 0.5)
                };
                vector_weight * s.vector.map_or(vector_lowest, |v| v.1)
                    + text_weight * s.text.map_or(text_lowest, |t| t.1)
            }
        })
        .collect();
    // Adaptive hybrid search also reads each chunk's context (`neighbours`).
    let fused = if both && matches!(ranking.fusion, Fusion::Adaptive) {
        let spans: Vec<Span<'_>> = candidates
            .iter()
            .map(|s| Span {
                agent: &s.candidate.file.0,
                path: &s.candidate.file.1,
                start_line: s.candidate.start_line,
                end_line: s.candidate.end_line,
            })
            .collect();
        with_neighbours(&spans, &fused)
    } else {
        fused
    };
    let mut scored: Vec<(Candidate, Ranked, Option<usize>)> = candidates
        .into_iter()
        .zip(fused)
        .map(|(s, fused)| {
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
            .then_with(|| a.file.cmp(&b.file))
            .then_with(|| a.start_line.cmp(&b.start_line))
    });
    scored.truncate(limit);
    scored.into_iter().map(|(_, ranked, _)| ranked).collect()
}

/// How far a leg's best candidate stands out of its first [`STANDOUT_DEPTH`]:
/// its score's distance above their mean, in standard deviations (0 when they
/// all tie; 1 for a lone candidate, as for two). Unlike the best score itself
/// it needs no calibration across legs: a cosine of 0.5 may be a clear match
/// or noise depending on the model, a share of 0.6 a strong or a weak one
/// depending on the query, but a best far above the rest is a confident leg.
/// (Weighting by the best score itself lost 1.7 points of recall@1 to BM25 on
/// LoCoMo and 5 to vectors on memory-recall; bench/README.md.)
fn standout(hits: &[Candidate]) -> f64 {
    let scores: Vec<f64> = hits.iter().take(STANDOUT_DEPTH).map(|c| c.score).collect();
    let Some(best) = scores.first() else {
        return 0.0;
    };
    if scores.len() == 1 {
        return 1.0;
    }
    let n = scores.len() as f64;
    let mean = scores.iter().sum::<f64>() / n;
    let deviation = (scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n).sqrt();
    if deviation > 0.0 {
        ((best - mean) / deviation).max(0.0)
    } else {
        0.0
    }
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
            file: std::sync::Arc::new(("main".into(), format!("{id}.md"))),
            start_line: 1,
            end_line: 1,
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
    fn standout_is_the_best_score_in_standard_deviations_above_the_mean() {
        let leg = |scores: &[f64]| -> Vec<Candidate> {
            scores
                .iter()
                .enumerate()
                .map(|(i, s)| row(&format!("c{i}"), "note", None, None, Some(*s)))
                .collect()
        };
        // Mean 1.5, deviation sqrt(0.75): (3 - 1.5) / 0.866.
        assert!((standout(&leg(&[3.0, 1.0, 1.0, 1.0])) - 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(standout(&leg(&[0.4, 0.4, 0.4])), 0.0, "all tie: no confidence");
        assert_eq!(standout(&leg(&[0.7])), 1.0, "a lone candidate counts as two");
        assert_eq!(standout(&[]), 0.0);
        // Only the first STANDOUT_DEPTH count: a long flat tail does not
        // inflate a leg's confidence.
        let mut long = vec![2.0, 1.0];
        long.resize(STANDOUT_DEPTH + 500, 0.0);
        let mut short = vec![2.0, 1.0];
        short.resize(STANDOUT_DEPTH, 0.0);
        assert_eq!(standout(&leg(&long)), standout(&leg(&short)));
    }

    #[test]
    fn adaptive_fusion_follows_the_leg_whose_best_stands_out() {
        let adaptive = Ranking {
            fusion: Fusion::Adaptive,
            ..LINEAR
        };
        // One chunk matches every query word and the rest a little (a
        // name the memory holds); the vector leg's scores are flat: the
        // text leg's best comes first though the vector leg ranks it second.
        let lexical = fuse(
            vec![
                row("v1", "note", None, Some(0.50), None),
                row("t1", "note", None, Some(0.51), None),
                row("v2", "note", None, Some(0.52), None),
            ],
            vec![
                row("t1", "note", None, None, Some(1.0)),
                row("t2", "note", None, None, Some(0.2)),
                row("t3", "note", None, None, Some(0.15)),
            ],
            adaptive,
            10,
            "2026-11-22",
        );
        assert_eq!(lexical[0].id, "t1", "{lexical:?}");
        assert_eq!(lexical[0].legs, vec!["vector", "text"]);
        // A close paraphrase: one chunk's cosine far above the rest, and the
        // text leg matching one common word everywhere (all tie: no
        // standout): the vector leg's order decides.
        let semantic = fuse(
            vec![
                row("v1", "note", None, Some(0.2), None),
                row("v2", "note", None, Some(0.7), None),
                row("v3", "note", None, Some(0.75), None),
            ],
            vec![
                row("t1", "note", None, None, Some(0.3)),
                row("v3", "note", None, None, Some(0.3)),
                row("t2", "note", None, None, Some(0.3)),
            ],
            adaptive,
            10,
            "2026-11-22",
        );
        let order: Vec<&str> = semantic.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(&order[..2], &["v1", "v2"], "{semantic:?}");
        // Neither leg sure (both flat): equal weights, no division by zero.
        let flat = fuse(
            vec![
                row("a", "note", None, Some(0.5), None),
                row("b", "note", None, Some(0.5), None),
            ],
            vec![
                row("b", "note", None, None, Some(0.4)),
                row("a", "note", None, None, Some(0.4)),
            ],
            adaptive,
            10,
            "2026-11-22",
        );
        assert!(flat.iter().all(|h| h.score == 0.45), "{flat:?}");
    }

    #[test]
    fn a_lone_match_in_one_leg_lifts_only_itself() {
        let adaptive = Ranking {
            fusion: Fusion::Adaptive,
            ..LINEAR
        };
        // "OX-4711 canine immunization": one chunk holds the identifier (the
        // text leg's only candidate), another is a close paraphrase of the
        // rest. Both come first, the paraphrase's cosine standing out more.
        let hits = fuse(
            vec![
                row("rex", "note", None, Some(0.1), None),
                row("travel", "note", None, Some(0.6), None),
                row("recipe", "note", None, Some(0.65), None),
                row("ticket", "note", None, Some(0.7), None),
            ],
            vec![row("ticket", "note", None, None, Some(0.5))],
            adaptive,
            10,
            "2026-11-22",
        );
        let order: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(&order[..2], &["rex", "ticket"], "{hits:?}");
    }

    #[test]
    fn adaptive_hybrid_search_prefers_the_chunk_that_continues_a_strong_hit() {
        // "near" and "far" score alike in both legs and "far" ranks above it
        // in each; "near" holds the lines right after the best hit's.
        let chunk = |id: &str, path: &str, lines: (usize, usize), score: f64| Candidate {
            id: id.into(),
            file: std::sync::Arc::new(("main".into(), path.into())),
            start_line: lines.0,
            end_line: lines.1,
            daily: None,
            score,
        };
        let legs = || {
            (
                vec![
                    chunk("best", "memory/s.md", (3, 6), 0.8),
                    chunk("far", "memory/a.md", (10, 12), 0.5),
                    chunk("near", "memory/s.md", (7, 9), 0.5),
                    chunk("other", "memory/b.md", (1, 2), 0.4),
                ],
                vec![
                    chunk("best", "memory/s.md", (3, 6), 1.0),
                    chunk("far", "memory/a.md", (10, 12), 0.3),
                    chunk("near", "memory/s.md", (7, 9), 0.3),
                    chunk("other", "memory/b.md", (1, 2), 0.1),
                ],
            )
        };
        let order = |ranking: Ranking| {
            let (vector, text) = legs();
            fuse(vector, text, ranking, 10, "2026-11-22")
                .into_iter()
                .map(|h| h.id)
                .collect::<Vec<_>>()
        };
        let adaptive = Ranking {
            fusion: Fusion::Adaptive,
            ..LINEAR
        };
        assert_eq!(order(adaptive), ["best", "near", "far", "other"]);
        // The other fusions keep their documented formulas.
        assert_eq!(order(LINEAR), ["best", "far", "near", "other"]);
        // One leg alone keeps its own order.
        let (vector, _) = legs();
        let alone: Vec<String> = fuse(vector, Vec::new(), adaptive, 10, "2026-11-22")
            .into_iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(alone, ["best", "far", "near", "other"]);
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
