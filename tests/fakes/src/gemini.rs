//! A fake Google Gemini upstream, both ways in:
//!
//! - the Gemini API: `POST /v1beta/models/{model}:generateContent` and
//!   `:streamGenerateContent?alt=sse`, `GET /v1beta/models`, the key in
//!   `x-goog-api-key` (a key in the URL query is refused);
//! - Vertex AI: `POST /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:…`
//!   with `Authorization: Bearer` — the fake's key (a static token) or a
//!   token from `POST /token`, the OAuth2 JWT-bearer grant: the assertion's
//!   RS256 signature is checked against the service account key set in
//!   [`FakeState::service_account_pem`], and its `iss`, `aud`, `scope`, `exp`.
//!
//! Answers follow [`crate::script`]; function calls carry a
//! `thoughtSignature` that must come back with the call in the next request
//! (as Gemini 3 requires). Recorded bodies get the model as `model`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::script::{self, Plan, Turn};
use crate::{FakeServer, FakeState, StreamGuard};

type Params = Query<HashMap<String, String>>;

pub async fn start(key: Option<String>, port: u16) -> std::io::Result<FakeServer> {
    let state = FakeState::new(key);
    let routes = Router::new()
        .route("/v1beta/models", get(models))
        .route("/v1beta/models/{call}", post(gemini_call))
        .route(
            "/v1/projects/{project}/locations/{location}/publishers/google/models/{call}",
            post(vertex_call),
        )
        .route("/token", post(token));
    crate::serve(routes, state, port).await
}

fn google_error(code: u16, status: &str, message: &str) -> Response {
    let http = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        http,
        axum::Json(json!({"error": {"code": code, "message": message, "status": status}})),
    )
        .into_response()
}

fn gemini_auth(state: &FakeState, headers: &HeaderMap, query: &HashMap<String, String>) -> Option<Response> {
    if query.contains_key("key") {
        return Some(google_error(
            400,
            "INVALID_ARGUMENT",
            "this fake refuses API keys in the URL",
        ));
    }
    let key = headers.get("x-goog-api-key").and_then(|v| v.to_str().ok());
    (!crate::authorized(state, key)).then(|| {
        google_error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
        )
    })
}

fn vertex_auth(state: &FakeState, headers: &HeaderMap) -> Option<Response> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let issued = bearer.is_some_and(|b| state.issued_tokens.lock().is_ok_and(|t| t.iter().any(|t| t == b)));
    (!issued && (bearer.is_none() || !crate::authorized(state, bearer))).then(|| {
        google_error(
            401,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token.",
        )
    })
}

async fn gemini_call(
    State(state): State<Arc<FakeState>>,
    Path(call): Path<String>,
    Query(query): Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match gemini_auth(&state, &headers, &query) {
        Some(denied) => denied,
        None => answer(state, &call, &query, &body),
    }
}

async fn vertex_call(
    State(state): State<Arc<FakeState>>,
    Path((_project, _location, call)): Path<(String, String, String)>,
    Query(query): Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match vertex_auth(&state, &headers) {
        Some(denied) => denied,
        None => answer(state, &call, &query, &body),
    }
}

async fn models(State(state): State<Arc<FakeState>>, Query(query): Params, headers: HeaderMap) -> Response {
    if let Some(denied) = gemini_auth(&state, &headers, &query) {
        return denied;
    }
    let models: Vec<Value> = script::MODELS
        .iter()
        .map(|m| json!({"name": format!("models/{m}"), "supportedGenerationMethods": ["generateContent", "countTokens"]}))
        .chain(script::EMBEDDING_MODELS.iter().map(
            |(m, _)| json!({"name": format!("models/{m}"), "supportedGenerationMethods": ["embedContent"]}),
        ))
        .collect();
    axum::Json(json!({"models": models})).into_response()
}

fn part_text(part: &Value) -> Option<String> {
    if let Some(text) = part["text"].as_str() {
        return Some(text.to_string());
    }
    let response = &part["functionResponse"]["response"];
    (!response.is_null()).then(|| {
        response["content"]
            .as_str()
            .map_or_else(|| response.to_string(), String::from)
    })
}

fn content_text(content: &Value) -> (String, &'static str) {
    let parts = content["parts"].as_array().cloned().unwrap_or_default();
    let text: Vec<String> = parts.iter().filter_map(part_text).collect();
    let role = if parts.iter().any(|p| p.get("functionResponse").is_some()) {
        "tool"
    } else if content["role"] == "model" {
        "assistant"
    } else {
        "user"
    };
    (text.join(" "), role)
}

fn turn(model: &str, body: &Value) -> Turn {
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    let (last_text, last_role) = contents.last().map(content_text).unwrap_or_default();
    let system_words = body["systemInstruction"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .map(script::words)
        .sum::<u64>();
    Turn {
        model: model.to_string(),
        last_role: last_role.to_string(),
        last_text: script::without_context(&last_text),
        tool_names: body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| t["functionDeclarations"].as_array().cloned().unwrap_or_default())
            .filter_map(|d| d["name"].as_str().map(String::from))
            .collect(),
        prompt_words: contents
            .iter()
            .map(|c| script::words(&content_text(c).0))
            .sum::<u64>()
            + system_words,
        history: contents
            .iter()
            .map(|c| {
                let (text, role) = content_text(c);
                (role.to_string(), script::without_context(&text))
            })
            .collect(),
    }
}

/// Gemini 3 refuses a function call sent back without the signature it came with.
fn unsigned_call(body: &Value) -> bool {
    body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["role"] == "model")
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .any(|p| {
            p.get("functionCall").is_some()
                && !p["thoughtSignature"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("fake-signature-"))
        })
}

fn answer(state: Arc<FakeState>, call: &str, query: &HashMap<String, String>, body: &[u8]) -> Response {
    let Some((model, method)) = call.split_once(':') else {
        return google_error(404, "NOT_FOUND", "no such method");
    };
    let Ok(mut body) = serde_json::from_slice::<Value>(body) else {
        return google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.");
    };
    body["model"] = json!(model);
    state.record(&body);
    if body["contents"].as_array().is_none_or(Vec::is_empty) {
        return google_error(
            400,
            "INVALID_ARGUMENT",
            "* GenerateContentRequest.contents: contents is not specified",
        );
    }
    if unsigned_call(&body) {
        return google_error(
            400,
            "INVALID_ARGUMENT",
            "Function call is missing a thought_signature in functionCall parts.",
        );
    }
    let turn = turn(model, &body);
    let plan = script::plan(&state, &turn);
    match &plan {
        Plan::NotFound => {
            let message = format!(
                "models/{model} is not found for API version v1beta, or is not supported for generateContent."
            );
            return google_error(404, "NOT_FOUND", &message);
        }
        Plan::Fail { status: 429, message } => return google_error(429, "RESOURCE_EXHAUSTED", message),
        Plan::Fail { status: 503, message } => return google_error(503, "UNAVAILABLE", message),
        Plan::Fail { status, message } => return google_error(*status, "INTERNAL", message),
        Plan::Reply(_) | Plan::CallTools(_) => {}
    }
    let completion_words = plan.completion_words();
    let usage = json!({
        "promptTokenCount": turn.prompt_words, "candidatesTokenCount": completion_words,
        "totalTokenCount": turn.prompt_words + completion_words,
    });
    let parts: Vec<Value> = match plan {
        Plan::CallTools(calls) => calls
            .iter()
            .map(|c| json!({"functionCall": {"name": c.name, "args": c.arguments}, "thoughtSignature": format!("fake-signature-{}", c.id)}))
            .collect(),
        Plan::Reply(text) if method == "streamGenerateContent" => {
            script::pieces(&text).into_iter().map(|p| json!({"text": p})).collect()
        }
        Plan::Reply(text) => vec![json!({"text": text})],
        Plan::Fail { .. } | Plan::NotFound => Vec::new(),
    };
    match method {
        "generateContent" => axum::Json(json!({
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage, "modelVersion": model, "responseId": "fake-response",
        }))
        .into_response(),
        "streamGenerateContent" if query.get("alt").map(String::as_str) == Some("sse") => {
            stream(state, model, parts, usage)
        }
        "streamGenerateContent" => google_error(400, "INVALID_ARGUMENT", "this fake streams only with alt=sse"),
        _ => google_error(404, "NOT_FOUND", "no such method"),
    }
}

fn stream(state: Arc<FakeState>, model: &str, parts: Vec<Value>, usage: Value) -> Response {
    let slow = script::is_slow(model);
    let mut events: Vec<Value> = parts
        .into_iter()
        .map(|part| {
            json!({"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
            "usageMetadata": {"promptTokenCount": usage["promptTokenCount"]}, "modelVersion": model})
        })
        .collect();
    events.push(json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage, "modelVersion": model}));
    let body = async_stream::stream! {
        let mut guard = StreamGuard::new(state);
        for event in events {
            if slow {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            yield Ok::<_, std::convert::Infallible>(Bytes::from(format!("data: {event}\r\n\r\n")));
        }
        guard.complete();
    };
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

/// The OAuth2 JWT-bearer grant, as Google's token endpoint answers it.
async fn token(State(state): State<Arc<FakeState>>, headers: HeaderMap, body: String) -> Response {
    let refuse = |detail: &str| {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant", "error_description": detail})),
        )
            .into_response()
    };
    let form: HashMap<String, String> = body
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.replace("%3A", ":")))
        .collect();
    if form.get("grant_type").map(String::as_str) != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
        return refuse("unsupported grant_type");
    }
    let Some(assertion) = form.get("assertion") else {
        return refuse("no assertion");
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if let Err(detail) = check_assertion(&state, assertion, &format!("http://{host}/token")) {
        return refuse(&detail);
    }
    let token = format!("ya29.fake-{}", state.attempt("vertex-tokens"));
    if let Ok(mut issued) = state.issued_tokens.lock() {
        issued.push(token.clone());
    }
    axum::Json(json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})).into_response()
}

fn check_assertion(state: &FakeState, assertion: &str, audience: &str) -> Result<(), String> {
    let pieces: Vec<&str> = assertion.split('.').collect();
    let [header, claims, signature] = pieces[..] else {
        return Err("the assertion is not a JWT".into());
    };
    let decode = |piece: &str| {
        URL_SAFE_NO_PAD
            .decode(piece)
            .map_err(|e| format!("not base64url: {e}"))
    };
    let header: Value = serde_json::from_slice(&decode(header)?).map_err(|e| e.to_string())?;
    let claims: Value = serde_json::from_slice(&decode(claims)?).map_err(|e| e.to_string())?;
    if header["alg"] != "RS256" {
        return Err(format!("alg {} is not RS256", header["alg"]));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if claims["aud"] != audience
        || claims["scope"] != "https://www.googleapis.com/auth/cloud-platform"
        || claims["exp"].as_u64().is_none_or(|exp| exp <= now)
        || !claims["iss"]
            .as_str()
            .is_some_and(|iss| iss.ends_with(".iam.gserviceaccount.com"))
    {
        return Err(format!("bad claims {claims} (audience {audience})"));
    }
    let pem = state
        .service_account_pem
        .lock()
        .ok()
        .and_then(|p| p.clone())
        .ok_or("no service account key is registered with the fake")?;
    let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(der)
        .map_err(|e| e.to_string())?;
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&der).map_err(|e| e.to_string())?;
    let public = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        ring::signature::KeyPair::public_key(&pair).as_ref().to_vec(),
    );
    let signed = &assertion[..assertion.len() - signature.len() - 1];
    public
        .verify(signed.as_bytes(), &decode(signature)?)
        .map_err(|_| "the assertion's signature does not verify".to_string())
}
