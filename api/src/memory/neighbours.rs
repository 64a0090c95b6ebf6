//! Neighbour context for hybrid search: a chunk whose lines touch another
//! candidate's in the same file (the turn before or after, the paragraph
//! that continues it) gains a small share of that candidate's fused score.
//! A passage often runs across chunk boundaries, and the chunk next to a
//! confident hit is likelier about the same thing than a lone chunk
//! elsewhere that scores the same: among near-equal candidates this decides
//! for the one with context. Only candidates either leg returned count; the
//! share is small, so it reorders near-ties and never lifts a weak chunk over
//! a clearly better one. Measured in `bench/README.md` (issue 42, fourth take).

/// The share of its best touching neighbour's score a chunk gains. Chosen
/// offline on LoCoMo's dev half and memory-recall (0.025 to 0.1 all helped
/// recall@5 on LoCoMo; above 0.05 recall@1 fell); see `bench/README.md`.
pub(super) const NEIGHBOUR_SHARE: f64 = 0.05;

/// Where a candidate's lines are.
pub(super) struct Span<'a> {
    pub agent: &'a str,
    pub path: &'a str,
    pub start_line: usize,
    pub end_line: usize,
}

/// `scores` (one per span, fused, before the bonus) with each raised by
/// [`NEIGHBOUR_SHARE`] of the best score among the spans that touch or
/// overlap it in the same file.
pub(super) fn with_neighbours(spans: &[Span<'_>], scores: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..spans.len().min(scores.len())).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&spans[a], &spans[b]);
        (a.agent, a.path, a.start_line).cmp(&(b.agent, b.path, b.start_line))
    });
    let mut best = vec![0.0_f64; scores.len()];
    for (at, &i) in order.iter().enumerate() {
        // Sorted by start: every later span of the file that starts by the
        // line after this one ends touches it, and no span after the first
        // that starts later does.
        for &j in &order[at + 1..] {
            let (a, b) = (&spans[i], &spans[j]);
            if (a.agent, a.path) != (b.agent, b.path) || b.start_line > a.end_line + 1 {
                break;
            }
            best[i] = best[i].max(scores[j]);
            best[j] = best[j].max(scores[i]);
        }
    }
    scores
        .iter()
        .zip(&best)
        .map(|(score, neighbour)| score + NEIGHBOUR_SHARE * neighbour.max(0.0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition the sorted walk must agree with.
    fn touching(a: &Span<'_>, b: &Span<'_>) -> bool {
        (a.agent, a.path) == (b.agent, b.path)
            && a.start_line <= b.end_line + 1
            && b.start_line <= a.end_line + 1
    }

    fn span<'a>(agent: &'a str, path: &'a str, start_line: usize, end_line: usize) -> Span<'a> {
        Span {
            agent,
            path,
            start_line,
            end_line,
        }
    }

    #[test]
    fn a_chunk_gains_a_share_of_its_best_touching_neighbour() {
        let spans = [
            span("a", "s.md", 3, 6),
            span("a", "s.md", 6, 9),   // overlaps the first
            span("a", "s.md", 10, 12), // the line after the second
            span("a", "s.md", 14, 15), // a line apart: no neighbour
            span("b", "s.md", 13, 13), // another agent's file
            span("a", "t.md", 13, 13), // another file
        ];
        let scores = [0.8, 0.2, 0.6, 0.9, 1.0, 1.0];
        let lifted = with_neighbours(&spans, &scores);
        let expected = [
            0.8 + NEIGHBOUR_SHARE * 0.2,
            0.2 + NEIGHBOUR_SHARE * 0.8, // the better of its two neighbours
            0.6 + NEIGHBOUR_SHARE * 0.2,
            0.9,
            1.0,
            1.0,
        ];
        for (got, want) in lifted.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12, "{lifted:?}");
        }
    }

    #[test]
    fn spans_given_in_any_order_find_the_same_neighbours() {
        let spans = [
            span("a", "s.md", 20, 22),
            span("a", "s.md", 1, 30), // spans all the others
            span("a", "s.md", 5, 5),
            span("a", "s.md", 23, 24),
        ];
        let scores = [0.1, 0.5, 0.3, 0.7];
        let lifted = with_neighbours(&spans, &scores);
        for (i, a) in spans.iter().enumerate() {
            let best = spans
                .iter()
                .enumerate()
                .filter(|(j, b)| *j != i && touching(a, b))
                .map(|(j, _)| scores[j])
                .fold(0.0, f64::max);
            assert!(
                (lifted[i] - (scores[i] + NEIGHBOUR_SHARE * best)).abs() < 1e-12,
                "{i}: {lifted:?}"
            );
        }
        // The long chunk holds the others: each gains from it, it from the best of them.
        assert!((lifted[1] - (0.5 + NEIGHBOUR_SHARE * 0.7)).abs() < 1e-12);
    }

    #[test]
    fn a_negative_neighbour_takes_nothing_away() {
        let spans = [span("a", "s.md", 1, 1), span("a", "s.md", 2, 2)];
        assert_eq!(
            with_neighbours(&spans, &[0.4, -0.2]),
            vec![0.4, -0.2 + NEIGHBOUR_SHARE * 0.4]
        );
    }
}
