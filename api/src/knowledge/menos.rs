//! The menos client: signed `GET /api/v1/content/search?q=&limit=` (seed 003
//! D2) for the `menos_search` tool, and a signed `GET /api/v1/auth/whoami`
//! that says whether menos is up and accepts Onyx's key, for `/health`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use url::Url;

use super::KnowledgeError;
use super::signing::Signer;
use crate::config::MenosConfig;

const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer read: a search answer is a page of snippets.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
pub const MAX_LIMIT: u32 = 20;
const MAX_QUERY_CHARS: usize = 500;
/// `/health` asks menos at most this often.
const PROBE_EVERY: Duration = Duration::from_secs(10);

/// One search hit, as menos answers it (fields it adds are ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub id: String,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(default)]
    pub snippet: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    #[serde(default)]
    pub query: String,
    pub results: Vec<SearchHit>,
    #[serde(default)]
    pub total: Option<u64>,
}

/// What the last look at menos found.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MenosProbe")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "MenosProbe"))]
pub struct Probe {
    pub up: bool,
    /// In words, without menos's address (the open `/health` shows it).
    pub summary: String,
    /// What menos or the connection said (the authenticated view only).
    pub error: Option<String>,
    pub latency_ms: u64,
    /// RFC 3339.
    pub checked_at: String,
}

pub struct Menos {
    base: Url,
    signer: Signer,
    http: reqwest::Client,
    last: Mutex<Option<(Instant, Probe)>>,
}

impl Menos {
    /// Reads the key and prepares the client (a startup error when the key cannot sign).
    pub fn new(config: &MenosConfig) -> Result<Self, KnowledgeError> {
        let signer = Signer::from_file(&config.key_file)?;
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            // A redirect would carry a signature meant for menos elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("onyx/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| KnowledgeError::Client(err.to_string()))?;
        Ok(Self {
            base: config.url.clone(),
            signer,
            http,
            last: Mutex::new(None),
        })
    }

    pub fn url(&self) -> &Url {
        &self.base
    }

    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// Searches menos's content. `limit` is 1 to [`MAX_LIMIT`].
    pub async fn search(&self, query: &str, limit: u32) -> Result<SearchResults, KnowledgeError> {
        let query = query.trim();
        if query.is_empty() {
            return Err(KnowledgeError::Invalid("the query is empty".into()));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(KnowledgeError::Invalid(format!(
                "the query is longer than {MAX_QUERY_CHARS} characters"
            )));
        }
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(KnowledgeError::Invalid(format!("limit must be 1 to {MAX_LIMIT}")));
        }
        let mut url = self.endpoint("api/v1/content/search");
        url.query_pairs_mut()
            .append_pair("q", query)
            .append_pair("limit", &limit.to_string());
        let body = self.get(url).await?;
        let mut results: SearchResults = serde_json::from_slice(&body)
            .map_err(|err| KnowledgeError::BadAnswer(format!("not a search answer: {err}")))?;
        results.results.truncate(limit as usize);
        Ok(results)
    }

    /// Whether menos answers and accepts Onyx's signature (asked at most every
    /// few seconds, however often `/health` is polled).
    pub async fn probe(&self) -> Probe {
        if let Some((at, probe)) = crate::locks::lock(&self.last).as_ref()
            && at.elapsed() < PROBE_EVERY
        {
            return probe.clone();
        }
        let started = Instant::now();
        let outcome = self.get(self.endpoint("api/v1/auth/whoami")).await;
        let latency_ms = started.elapsed().as_millis() as u64;
        let (up, summary, error) = match outcome {
            Ok(_) => (true, "signed requests accepted".to_string(), None),
            Err(KnowledgeError::Refused { status, detail }) if status == 401 || status == 403 => (
                false,
                format!(
                    "menos refused Onyx's signature ({status}): add key {} to menos's authorized keys",
                    self.signer.key_id()
                ),
                Some(detail),
            ),
            Err(err @ KnowledgeError::Unreachable(_)) => (false, "unreachable".into(), Some(err.to_string())),
            Err(err) => (false, "answered with an error".into(), Some(err.to_string())),
        };
        let probe = Probe {
            up,
            summary,
            error,
            latency_ms,
            checked_at: crate::clock::stamp(crate::clock::now()),
        };
        *crate::locks::lock(&self.last) = Some((Instant::now(), probe.clone()));
        probe
    }

    /// `path` under the base URL (whose own path, if any, is kept).
    fn endpoint(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        let joined = format!("{}/{path}", self.base.path().trim_end_matches('/'));
        url.set_path(&joined);
        url
    }

    /// A signed GET; the body of a 2xx answer.
    async fn get(&self, url: Url) -> Result<Vec<u8>, KnowledgeError> {
        let authority = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            (None, _) => return Err(KnowledgeError::Invalid("menos's URL has no host".into())),
        };
        let created = crate::clock::now().timestamp();
        let headers = self.signer.sign("GET", url.path(), &authority, None, created);
        let response = self
            .http
            .get(url)
            .header("signature-input", headers.signature_input)
            .header("signature", headers.signature)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|err| KnowledgeError::Unreachable(crate::error_chain::chain(&err)))?;
        let status = response.status();
        let body = read_capped(response).await?;
        if !status.is_success() {
            return Err(KnowledgeError::Refused {
                status: status.as_u16(),
                detail: detail_of(&body),
            });
        }
        Ok(body)
    }
}

/// The body, up to [`MAX_ANSWER_BYTES`].
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, KnowledgeError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| KnowledgeError::Unreachable(crate::error_chain::chain(&err)))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(KnowledgeError::BadAnswer(format!(
                "the answer is larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// menos (FastAPI) says why in `detail`; otherwise the start of the body.
fn detail_of(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(json) => match &json["detail"] {
            serde_json::Value::String(detail) => detail.clone(),
            serde_json::Value::Null => crate::text::one_line(&text, 200),
            other => crate::text::one_line(&other.to_string(), 200),
        },
        Err(_) => crate::text::one_line(&text, 200),
    }
}
