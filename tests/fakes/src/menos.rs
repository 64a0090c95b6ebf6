//! A stand-in for menos, the content vault of seed 003 (D2), built from the
//! seed's description and menos's published auth scheme:
//!
//! - `GET /api/v1/content/search?q=&limit=` (signed): a fixed corpus of notes
//!   and transcripts searched by word, answering `{query, results: [{id,
//!   content_type, title, score, snippet}], total}`;
//! - `GET /api/v1/auth/whoami` (signed): `{key_id}`;
//! - `GET /health` (open): `{status: "ok"}`.
//!
//! Signed means HTTP Message Signatures (RFC 9421) with ed25519, verified as
//! menos verifies them and no more loosely: `signature-input` names
//! `("@method" "@path" "@authority" …)` with `keyid`, `alg="ed25519"` and a
//! `created` within 300 s; the key id (`SHA256:` and 16 hex digits of the
//! public key blob's SHA-256) must be one of the authorized keys (OpenSSH
//! `authorized_keys` lines), and the signature must verify over the base
//! rebuilt from this request. Anything else is a 401 with FastAPI's
//! `{"detail": …}`. Every request is recorded with whether it was accepted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::Router;
use axum::extract::Query;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::digest::{SHA256, digest};
use ring::signature::{ED25519, UnparsedPublicKey};
use serde_json::{Value, json};

use crate::{FakeServer, FakeState};

const MAX_AGE_SECONDS: i64 = 300;

/// What the vault holds: (id, content type, title, text).
const CORPUS: &[(&str, &str, &str, &str)] = &[
    (
        "c1",
        "youtube",
        "Docker networking explained",
        "Bridge networks give each container its own address; user-defined bridges resolve containers by name. Host networking skips the bridge.",
    ),
    (
        "c2",
        "markdown",
        "Terraform modules notes",
        "A module is a folder of .tf files with inputs and outputs. Pin module versions and keep state remote.",
    ),
    (
        "c3",
        "youtube",
        "Weekly review, transcript",
        "This week: migrated the homelab to Docker compose, wrote Terraform for the DNS records, and read about SurrealDB indexes.",
    ),
];

struct Menos {
    /// Key id → raw ed25519 public key.
    keys: HashMap<String, Vec<u8>>,
    state: Arc<FakeState>,
}

/// The key id menos gives a public key blob (SSH wire encoding).
pub fn key_id(blob: &[u8]) -> String {
    let hash = digest(&SHA256, blob);
    let hex: String = hash.as_ref().iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("SHA256:{hex}")
}

/// The ed25519 keys of `authorized_keys` text, by key id (other lines are skipped).
pub fn authorized_keys(text: &str) -> HashMap<String, Vec<u8>> {
    let mut keys = HashMap::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        if fields.next() != Some("ssh-ed25519") {
            continue;
        }
        let Some(blob) = fields.next().and_then(|b| BASE64.decode(b).ok()) else {
            continue;
        };
        // string "ssh-ed25519", string key (32 bytes)
        if blob.len() == 4 + 11 + 4 + 32 && &blob[4..15] == b"ssh-ed25519" {
            keys.insert(key_id(&blob), blob[19..].to_vec());
        }
    }
    keys
}

/// Serves the stand-in on 127.0.0.1:`port`, trusting the keys in `authorized` (authorized_keys text).
pub async fn start(authorized: &str, port: u16) -> std::io::Result<FakeServer> {
    let state = FakeState::new(None);
    let menos = Arc::new(Menos {
        keys: authorized_keys(authorized),
        state: state.clone(),
    });
    let routes = Router::new()
        .route(
            "/health",
            get(|| async { Json(json!({"status": "ok", "git_sha": "stand-in"})) }),
        )
        .route(
            "/api/v1/auth/whoami",
            get({
                let menos = menos.clone();
                move |method: Method, uri: Uri, headers: HeaderMap| async move {
                    match menos.verify(&method, &uri, &headers) {
                        Ok(key) => Json(json!({"key_id": key})).into_response(),
                        Err(detail) => unauthorized(&detail),
                    }
                }
            }),
        )
        .route(
            "/api/v1/content/search",
            get(
                move |method: Method,
                      uri: Uri,
                      headers: HeaderMap,
                      Query(query): Query<HashMap<String, String>>| async move {
                    if let Err(detail) = menos.verify(&method, &uri, &headers) {
                        return unauthorized(&detail);
                    }
                    search(&query)
                },
            ),
        );
    crate::serve(routes, state, port).await
}

/// menos's refusal: 401 with FastAPI's `{"detail": …}`.
fn unauthorized(detail: &str) -> Response {
    (StatusCode::UNAUTHORIZED, Json(json!({"detail": detail}))).into_response()
}

impl Menos {
    /// The key id of a valid signature, or why menos refuses it (recorded either way).
    fn verify(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<String, String> {
        let outcome = self.check(method, uri, headers);
        self.state.record(&json!({
            "path": uri.path(), "query": uri.query(),
            "accepted": outcome.is_ok(),
            "refusal": outcome.as_ref().err(),
            "signatureInput": header(headers, "signature-input"),
        }));
        outcome
    }

    fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<String, String> {
        let (Some(input), Some(signature)) =
            (header(headers, "signature-input"), header(headers, "signature"))
        else {
            return Err("Missing signature headers".into());
        };
        let (label, params) = input.split_once('=').ok_or("Invalid signature-input format")?;
        let components_end = params.find(')').ok_or("Invalid signature-input format")?;
        let components: Vec<&str> = params
            .get(1..components_end)
            .ok_or("Invalid signature-input format")?
            .split_whitespace()
            .map(|c| c.trim_matches('"'))
            .collect();
        for needed in ["@method", "@path", "@authority"] {
            if !components.contains(&needed) {
                return Err(format!("the signature does not cover {needed}"));
            }
        }
        let param = |name: &str| {
            params[components_end..]
                .split(';')
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.trim_matches('"').to_string())
        };
        let key_id = param("keyid").ok_or("Missing keyid in signature-input")?;
        if param("alg").as_deref().unwrap_or("ed25519") != "ed25519" {
            return Err("Unsupported algorithm".into());
        }
        let created: i64 = param("created")
            .and_then(|c| c.parse().ok())
            .ok_or("Missing created in signature-input")?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if (now - created).abs() > MAX_AGE_SECONDS {
            return Err("Signature expired or from future".into());
        }
        let public = self
            .keys
            .get(&key_id)
            .ok_or_else(|| format!("Unknown key: {key_id}"))?;
        let mut base = String::new();
        for component in &components {
            let value = match *component {
                "@method" => method.as_str().to_string(),
                "@path" => uri.path().to_string(),
                "@authority" => header(headers, "host").unwrap_or_default(),
                other => header(headers, other).unwrap_or_default(),
            };
            base.push_str(&format!("\"{component}\": {value}\n"));
        }
        base.push_str(&format!("\"@signature-params\": {params}"));
        let encoded = signature
            .strip_prefix(&format!("{label}=:"))
            .and_then(|s| s.strip_suffix(':'))
            .ok_or("Invalid signature format")?;
        let bytes = BASE64.decode(encoded).map_err(|_| "Invalid signature format")?;
        UnparsedPublicKey::new(&ED25519, public)
            .verify(base.as_bytes(), &bytes)
            .map_err(|_| "Invalid signature".to_string())?;
        Ok(key_id)
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Word matches over title and text, best first.
fn search(query: &HashMap<String, String>) -> Response {
    let q = query
        .get("q")
        .map(|q| q.trim().to_lowercase())
        .unwrap_or_default();
    if q.is_empty() {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"detail": "q is required"})),
        )
            .into_response();
    }
    let Some(limit) = query
        .get("limit")
        .map_or(Some(20), |l| l.parse::<usize>().ok())
        .filter(|l| (1..=100).contains(l))
    else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"detail": "limit must be 1 to 100"})),
        )
            .into_response();
    };
    let words: Vec<&str> = q.split_whitespace().collect();
    let mut hits: Vec<(f64, Value)> = CORPUS
        .iter()
        .filter_map(|(id, kind, title, text)| {
            let haystack = format!("{title} {text}").to_lowercase();
            let found = words.iter().filter(|w| haystack.contains(**w)).count();
            (found > 0).then(|| {
                let score = found as f64 / words.len() as f64;
                (
                    score,
                    json!({"id": id, "content_type": kind, "title": title, "score": score, "snippet": text}),
                )
            })
        })
        .collect();
    hits.sort_by(|a, b| b.0.total_cmp(&a.0));
    let results: Vec<Value> = hits.into_iter().take(limit).map(|(_, hit)| hit).collect();
    Json(json!({"query": q, "total": results.len(), "results": results})).into_response()
}
