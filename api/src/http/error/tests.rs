//! The error table, row by row, and what never reaches a client.

use std::time::Duration;

use super::*;

/// Internal text planted in the errors below; no body may carry any of it.
const SECRETS: [&str; 4] = ["ws://db.internal:8000", "10.0.0.7:11434", "/srv/onyx/data", "IAM"];

fn connect() -> ProviderError {
    ProviderError::Connect {
        provider: "openai".into(),
        detail: "tcp connect error: 10.0.0.7:11434: connection refused".into(),
    }
}

fn db() -> DbError {
    DbError::Surreal("There was a problem with the database: ws://db.internal:8000 closed".into())
}

fn store() -> StoreError {
    StoreError::Unavailable("/srv/onyx/data/objects: permission denied (IAM)".into())
}

fn embed(err: EmbedError) -> ApiError {
    MemoryError::from(err).into()
}

/// Every row of the table: (error, status, code, param).
fn rows() -> Vec<(ApiError, u16, Option<&'static str>, Option<&'static str>)> {
    vec![
        (
            ApiError::bad_request("x: bad", Some("x".into())),
            400,
            None,
            Some("x"),
        ),
        (ApiError::Unauthorized("no"), 401, Some("invalid_api_key"), None),
        (ApiError::Forbidden("no"), 403, Some("insufficient_scope"), None),
        (
            ApiError::Refused {
                message: "no".into(),
                code: "host_not_allowed",
            },
            403,
            Some("host_not_allowed"),
            None,
        ),
        (
            ApiError::UnsupportedMediaType("json only".into()),
            415,
            Some("unsupported_media_type"),
            Some("content-type"),
        ),
        (
            ApiError::NotFound {
                message: "no agent".into(),
                code: "agent_not_found",
            },
            404,
            Some("agent_not_found"),
            None,
        ),
        (
            ApiError::PayloadTooLarge { limit: 10 },
            413,
            Some("request_too_large"),
            None,
        ),
        (ApiError::MethodNotAllowed, 405, Some("method_not_allowed"), None),
        (ApiError::Conflict("exists".into()), 409, Some("conflict"), None),
        (
            RouteError::UnknownProvider {
                provider: "nope".into(),
                model: "nope/x".into(),
                known: "openai".into(),
            }
            .into(),
            404,
            Some("model_not_found"),
            Some("model"),
        ),
        (
            SessionError::NotFound("s".into()).into(),
            404,
            Some("session_not_found"),
            None,
        ),
        (
            SessionError::BadId("s".into()).into(),
            400,
            Some("invalid_session_id"),
            Some("x-onyx-session-id"),
        ),
        (
            SessionError::Db(db()).into(),
            503,
            Some("storage_unavailable"),
            None,
        ),
        (
            SessionError::Store(store()).into(),
            503,
            Some("storage_unavailable"),
            None,
        ),
        (
            MemoryError::Path(PathError::Agent("A".into())).into(),
            400,
            Some("invalid_agent"),
            Some("agent"),
        ),
        (
            MemoryError::Path(PathError::Path {
                path: "x".into(),
                reason: "no",
            })
            .into(),
            400,
            Some("invalid_path"),
            Some("path"),
        ),
        (
            MemoryError::Invalid {
                param: "q",
                message: "the query is empty".into(),
            }
            .into(),
            400,
            Some("invalid_request"),
            Some("q"),
        ),
        (
            MemoryError::NotFound {
                agent: "main".into(),
                path: "x.md".into(),
            }
            .into(),
            404,
            Some("file_not_found"),
            None,
        ),
        (
            MemoryError::Conflict {
                agent: "main".into(),
                path: "x.md".into(),
            }
            .into(),
            412,
            Some("etag_mismatch"),
            Some("If-Match"),
        ),
        (
            MemoryError::Store(StoreError::PreconditionFailed).into(),
            412,
            Some("etag_mismatch"),
            Some("If-Match"),
        ),
        (
            MemoryError::Store(store()).into(),
            503,
            Some("storage_unavailable"),
            None,
        ),
        (
            MemoryError::Db(db()).into(),
            503,
            Some("storage_unavailable"),
            None,
        ),
        (
            embed(EmbedError::from(connect())),
            503,
            Some("embedder_unavailable"),
            None,
        ),
        (
            embed(EmbedError::NotConfigured),
            503,
            Some("embedder_not_configured"),
            None,
        ),
        (
            embed(EmbedError::Timeout(Duration::from_secs(20))),
            504,
            Some("embedder_timeout"),
            None,
        ),
        (
            TaskError::Invalid {
                message: "prompt: missing".into(),
                param: "prompt",
            }
            .into(),
            400,
            None,
            Some("prompt"),
        ),
        (
            TaskError::NotFound("t".into()).into(),
            404,
            Some("task_not_found"),
            None,
        ),
        (
            TaskError::Conflict("running".into()).into(),
            409,
            Some("conflict"),
            None,
        ),
        (TaskError::Db(db()).into(), 503, Some("storage_unavailable"), None),
        (KeyError::BadName.into(), 400, None, Some("name")),
        (KeyError::BadScope("root".into()).into(), 400, None, Some("scope")),
        (
            KeyError::NotFound("k".into()).into(),
            404,
            Some("key_not_found"),
            None,
        ),
        (KeyError::Db(db()).into(), 503, Some("storage_unavailable"), None),
        (
            AgentError::NoModel { agent: "main".into() }.into(),
            400,
            Some("agent_has_no_model"),
            Some("model"),
        ),
        (
            AgentError::from(connect()).into(),
            502,
            Some("upstream_unreachable"),
            None,
        ),
        (AgentError::NoAnswer.into(), 500, Some("agent_failed"), None),
        (connect().into(), 502, Some("upstream_unreachable"), None),
        (
            ProviderError::Timeout {
                provider: "local".into(),
                after: Duration::from_secs(1),
            }
            .into(),
            504,
            Some("upstream_timeout"),
            None,
        ),
        (
            ProviderError::BadResponse {
                provider: "local".into(),
                detail: "expected value at /srv/onyx/data line 1".into(),
            }
            .into(),
            502,
            Some("upstream_bad_response"),
            None,
        ),
        (
            ProviderError::InvalidRequest("tools: no".into()).into(),
            400,
            None,
            None,
        ),
        (db().into(), 503, Some("storage_unavailable"), None),
        (store().into(), 503, Some("storage_unavailable"), None),
        (
            tower_sessions::session::Error::Store(tower_sessions::session_store::Error::Backend(
                "ws://db.internal:8000 refused".into(),
            ))
            .into(),
            503,
            Some("storage_unavailable"),
            None,
        ),
    ]
}

#[test]
fn each_error_has_its_status_code_and_param() {
    for (err, status, code, param) in rows() {
        let body = err.body();
        let what = format!("{err:?}");
        assert_eq!(err.status().as_u16(), status, "{what}");
        assert_eq!(body["error"]["code"].as_str(), code, "{what}");
        assert_eq!(body["error"]["param"].as_str(), param, "{what}");
        assert!(
            body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}"
        );
        let kind = body["error"]["type"].as_str().unwrap_or_default().to_string();
        assert_eq!(kind, default_type(err.status()), "{what}");
    }
}

#[test]
fn internal_text_stays_in_the_log() {
    for (err, ..) in rows() {
        let body = err.body().to_string();
        for secret in SECRETS {
            assert!(!body.contains(secret), "{body} leaks {secret:?}");
        }
    }
    // The log keeps it.
    let chain = error_chain::chain(&ApiError::from(AgentError::from(connect())));
    assert!(chain.contains("10.0.0.7:11434"), "{chain}");
    let chain = error_chain::chain(&embed(EmbedError::from(connect())));
    assert!(chain.contains("10.0.0.7:11434"), "{chain}");
}

#[test]
fn upstream_errors_keep_their_status_and_name_the_provider() {
    let err = ApiError::from(ProviderError::Upstream {
        provider: "openai".into(),
        status: 429,
        message: "slow down".into(),
        kind: Some("rate_limit_error".into()),
        code: None,
        param: None,
    });
    assert_eq!(err.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = err.body();
    assert_eq!(body["error"]["message"], "openai: slow down");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let missing = ApiError::from(ProviderError::Upstream {
        provider: "openai".into(),
        status: 404,
        message: "no such model".into(),
        kind: Some("not_found_error".into()),
        code: None,
        param: Some("model".into()),
    });
    let body = missing.body();
    assert_eq!(body["error"]["code"], "model_not_found");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["param"], "model");
}

#[test]
fn unreachable_upstreams_say_so_without_the_detail() {
    let body = ApiError::from(connect()).body();
    assert_eq!(body["error"]["message"], "openai: upstream unreachable");
    assert_eq!(body["error"]["type"], "server_error");
}
