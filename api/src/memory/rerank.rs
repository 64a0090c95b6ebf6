//! An optional reranking stage after fusion (`memory.reranker`): the fused
//! hits' text goes to an endpoint that scores each (query, document) pair,
//! in the shape Cohere, Jina, TEI, vLLM and llama.cpp's server speak
//! (`POST {"model", "query", "documents", "top_n"}` → `{"results": [{"index",
//! "relevance_score"}]}`), and the hits are shown in its order. A reranker
//! that fails or is slow leaves the fused order, with a note.

use std::time::Duration;

use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use super::chunker::indexed_text;
use super::search::Hit;
use crate::config::RerankerConfig;

#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    #[error("the reranker at {url}: {message}")]
    Call { url: String, message: String },
    #[error("the reranker answered {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the reranker's answer is not usable: {0}")]
    Shape(String),
    #[error("the reranker did not answer within {0:?}")]
    Timeout(Duration),
}

pub struct Reranker {
    client: reqwest::Client,
    config: RerankerConfig,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
    top_n: usize,
    return_documents: bool,
}

#[derive(Deserialize)]
struct Response {
    results: Vec<Scored>,
}

#[derive(Deserialize)]
struct Scored {
    index: usize,
    relevance_score: f64,
}

/// The most characters of one hit sent to the reranker (cross-encoders read
/// 512 word pieces at most; longer text only costs transfer).
const MAX_DOCUMENT_CHARS: usize = 4_000;

impl Reranker {
    pub fn new(config: RerankerConfig) -> Self {
        Self {
            client: reqwest::Client::builder()
                .connect_timeout(config.timeout)
                .build()
                .unwrap_or_default(),
            config,
        }
    }

    /// How many fused hits a search hands it.
    pub fn candidates(&self) -> usize {
        self.config.candidates
    }

    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// The documents' indexes, most relevant first, with their scores; a
    /// document the answer leaves out is not returned.
    pub async fn rerank(&self, query: &str, documents: &[String]) -> Result<Vec<(usize, f64)>, RerankError> {
        match tokio::time::timeout(self.config.timeout, self.call(query, documents)).await {
            Ok(result) => result,
            Err(_) => Err(RerankError::Timeout(self.config.timeout)),
        }
    }

    async fn call(&self, query: &str, documents: &[String]) -> Result<Vec<(usize, f64)>, RerankError> {
        let clipped: Vec<String> = documents
            .iter()
            .map(|d| d.chars().take(MAX_DOCUMENT_CHARS).collect())
            .collect();
        let body = Request {
            model: &self.config.model,
            query,
            documents: &clipped,
            top_n: clipped.len(),
            return_documents: false,
        };
        let mut request = self.client.post(self.config.url.clone()).json(&body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let failed = |e: reqwest::Error| RerankError::Call {
            url: self.config.url.to_string(),
            message: crate::error_chain::chain(&e),
        };
        let response = request.send().await.map_err(failed)?;
        let status = response.status();
        if !status.is_success() {
            let body: String = response
                .text()
                .await
                .unwrap_or_default()
                .chars()
                .take(300)
                .collect();
            return Err(RerankError::Status {
                status: status.as_u16(),
                body,
            });
        }
        let parsed: Response = response
            .json()
            .await
            .map_err(|e| RerankError::Shape(crate::error_chain::chain(&e)))?;
        order(parsed.results, documents.len())
    }
}

/// Puts `hits` in the reranker's order, each scored by it; hits its answer
/// left out follow in their fused order. On failure `hits` is unchanged.
pub async fn reorder(reranker: &Reranker, query: &str, hits: &mut Vec<Hit>) -> Result<(), RerankError> {
    if hits.len() < 2 {
        return Ok(());
    }
    let documents: Vec<String> = hits.iter().map(|h| indexed_text(&h.heading, &h.text)).collect();
    let ranked = reranker.rerank(query, &documents).await?;
    let mut slots: Vec<Option<Hit>> = std::mem::take(hits).into_iter().map(Some).collect();
    for (index, score) in ranked {
        if let Some(mut hit) = slots.get_mut(index).and_then(Option::take) {
            hit.score = (score * 10_000.0).round() / 10_000.0;
            hits.push(hit);
        }
    }
    hits.extend(slots.into_iter().flatten());
    Ok(())
}

/// The answer's scores, best first, each document once and in range.
fn order(results: Vec<Scored>, documents: usize) -> Result<Vec<(usize, f64)>, RerankError> {
    let mut seen = vec![false; documents];
    let mut out = Vec::with_capacity(results.len());
    for scored in results {
        let Some(slot) = seen.get_mut(scored.index) else {
            return Err(RerankError::Shape(format!(
                "index {} for {documents} documents",
                scored.index
            )));
        };
        if std::mem::replace(slot, true) {
            return Err(RerankError::Shape(format!("index {} twice", scored.index)));
        }
        if !scored.relevance_score.is_finite() {
            return Err(RerankError::Shape(format!(
                "a score that is not a number for index {}",
                scored.index
            )));
        }
        out.push((scored.index, scored.relevance_score));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(index: usize, relevance_score: f64) -> Scored {
        Scored {
            index,
            relevance_score,
        }
    }

    #[test]
    fn answers_are_ordered_by_score_and_checked() {
        let ordered = order(vec![scored(0, 0.1), scored(2, 0.9), scored(1, 0.5)], 3).unwrap();
        assert_eq!(ordered, vec![(2, 0.9), (1, 0.5), (0, 0.1)]);
        let err = order(vec![scored(3, 0.1)], 3).unwrap_err().to_string();
        assert!(err.contains("index 3 for 3 documents"), "{err}");
        let err = order(vec![scored(1, 0.1), scored(1, 0.2)], 3)
            .unwrap_err()
            .to_string();
        assert!(err.contains("twice"), "{err}");
        assert!(order(vec![scored(0, f64::NAN)], 1).is_err());
    }
}
