//! The one error type of the HTTP API and its OpenAI-shaped body:
//! `{"error":{"message","type","param","code"}}`. Every domain error converts
//! into `ApiError` with `#[from]`, and `ApiError::entry` is the one table that
//! decides each one's status, type, code, param and the message a client
//! sees. Internal details (database errors, connect errors, hosts, paths)
//! never reach that message: the whole chain goes to the log instead.

use std::sync::Arc;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::agents::{AgentError, TurnError};
use crate::auth::KeyError;
use crate::error_chain;
use crate::memory::paths::PathError;
use crate::memory::{EmbedError, MemoryError};
use crate::providers::{ProviderError, RouteError};
use crate::responses::ResponseError;
use crate::sessions::SessionError;
use crate::storage::{DbError, StoreError};
use crate::tasks::TaskError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request itself is wrong (decided by the HTTP layer: body, query, headers).
    #[error("{message}")]
    BadRequest {
        message: String,
        param: Option<String>,
        code: Option<&'static str>,
    },
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(&'static str),
    /// Refused for what the request is, not who sent it (a key-less
    /// gateway's Host or Origin rule): 403 with its own code.
    #[error("{message}")]
    Refused { message: String, code: &'static str },
    /// A body in a content type the endpoint does not take.
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{message}")]
    NotFound { message: String, code: &'static str },
    #[error("the request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("{0}")]
    Conflict(String),
    /// Another server Onyx asked (an OAuth authorization server) refused or failed: 502.
    #[error("{0}")]
    BadGateway(String),
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error(transparent)]
    Task(#[from] TaskError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Responses(#[from] ResponseError),
    /// Shared: a run's failure goes to every client attached to it.
    #[error(transparent)]
    Agent(#[from] Arc<AgentError>),
    /// Boxed: provider errors carry the upstream's whole error object.
    #[error(transparent)]
    Provider(Box<ProviderError>),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The UI's cookie-session store failed.
    #[error(transparent)]
    LoginSession(#[from] tower_sessions::session::Error),
}

impl From<ProviderError> for ApiError {
    fn from(err: ProviderError) -> Self {
        Self::Provider(Box::new(err))
    }
}

impl From<TurnError> for ApiError {
    fn from(err: TurnError) -> Self {
        match err {
            TurnError::AgentGone(id) | TurnError::AgentDisabled(id) => ApiError::NotFound {
                message: format!("no enabled agent {id:?}; GET /v1/agents lists them"),
                code: "model_not_found",
            },
            TurnError::Workspace(err) => err.into(),
            TurnError::Session(err) => err.into(),
            TurnError::Storage(err) => err.into(),
        }
    }
}

impl From<AgentError> for ApiError {
    fn from(err: AgentError) -> Self {
        Self::Agent(Arc::new(err))
    }
}

/// The body of every error outside the Anthropic routes: OpenAI's `{"error": {…}}`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "OpenAiError")]
pub struct ErrorBody {
    pub error: ErrorObject,
}

/// What went wrong: a message for people, a `type` and `code` for programs,
/// and the request field at fault (`param`) when there is one.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct ErrorObject {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub param: Option<String>,
    pub code: Option<String>,
}

/// One row of the table: everything a client is told about an error.
#[derive(Debug)]
struct Entry {
    status: StatusCode,
    /// The OpenAI `type`; `None` derives it from the status.
    kind: Option<String>,
    code: Option<String>,
    param: Option<String>,
    message: String,
}

fn entry(status: StatusCode, code: Option<&str>, param: Option<&str>, message: impl Into<String>) -> Entry {
    Entry {
        status,
        kind: None,
        code: code.map(String::from),
        param: param.map(String::from),
        message: message.into(),
    }
}

/// A dependency failed: 503, `storage_unavailable`, and no detail.
fn unavailable(what: &str) -> Entry {
    entry(
        StatusCode::SERVICE_UNAVAILABLE,
        Some("storage_unavailable"),
        None,
        format!("{what} is unavailable"),
    )
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>, param: Option<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
            param,
            code: None,
        }
    }

    pub fn status(&self) -> StatusCode {
        self.entry().status
    }

    /// The table: status, type, code, param and public message of every error.
    fn entry(&self) -> Entry {
        use StatusCode as S;
        match self {
            Self::BadRequest { message, param, code } => {
                entry(S::BAD_REQUEST, *code, param.as_deref(), message.clone())
            }
            Self::Unauthorized(message) => entry(S::UNAUTHORIZED, Some("invalid_api_key"), None, *message),
            Self::Forbidden(message) => entry(S::FORBIDDEN, Some("insufficient_scope"), None, *message),
            Self::Refused { message, code } => entry(S::FORBIDDEN, Some(code), None, message.clone()),
            Self::UnsupportedMediaType(message) => entry(
                S::UNSUPPORTED_MEDIA_TYPE,
                Some("unsupported_media_type"),
                Some("content-type"),
                message.clone(),
            ),
            Self::NotFound { message, code } => entry(S::NOT_FOUND, Some(code), None, message.clone()),
            Self::PayloadTooLarge { .. } => entry(
                S::PAYLOAD_TOO_LARGE,
                Some("request_too_large"),
                None,
                self.to_string(),
            ),
            Self::MethodNotAllowed => entry(
                S::METHOD_NOT_ALLOWED,
                Some("method_not_allowed"),
                None,
                self.to_string(),
            ),
            Self::Conflict(message) => entry(S::CONFLICT, Some("conflict"), None, message.clone()),
            Self::BadGateway(message) => entry(S::BAD_GATEWAY, Some("upstream_error"), None, message.clone()),
            Self::Route(err) => entry(
                S::NOT_FOUND,
                Some("model_not_found"),
                Some("model"),
                err.to_string(),
            ),
            Self::Session(err) => match err {
                SessionError::NotFound(_) => {
                    entry(S::NOT_FOUND, Some("session_not_found"), None, err.to_string())
                }
                SessionError::BadId(_) => entry(
                    S::BAD_REQUEST,
                    Some("invalid_session_id"),
                    Some("x-onyx-session-id"),
                    err.to_string(),
                ),
                SessionError::Db(_) | SessionError::Store(_) => unavailable("session storage"),
            },
            Self::Memory(err) => memory_entry(err),
            Self::Task(err) => match err {
                TaskError::Invalid { message, param } => {
                    entry(S::BAD_REQUEST, None, Some(param), message.clone())
                }
                TaskError::NotFound(_) => entry(S::NOT_FOUND, Some("task_not_found"), None, err.to_string()),
                TaskError::Conflict(message) => entry(S::CONFLICT, Some("conflict"), None, message.clone()),
                TaskError::Db(_) => unavailable("storage"),
            },
            Self::Key(err) => match err {
                KeyError::BadName => entry(S::BAD_REQUEST, None, Some("name"), err.to_string()),
                KeyError::BadScope(_) => entry(S::BAD_REQUEST, None, Some("scope"), err.to_string()),
                KeyError::BadLimits { param, message } => entry(
                    S::BAD_REQUEST,
                    None,
                    Some(&format!("limits.{param}")),
                    message.clone(),
                ),
                KeyError::NotFound(_) => entry(S::NOT_FOUND, Some("key_not_found"), None, err.to_string()),
                KeyError::BadAgents(_) => entry(S::BAD_REQUEST, None, Some("agents"), err.to_string()),
                KeyError::BadExpiry(_) => entry(S::BAD_REQUEST, None, Some("expiresAt"), err.to_string()),
                KeyError::Expired(_) => {
                    entry(S::UNAUTHORIZED, Some("invalid_api_key"), None, err.to_string())
                }
                KeyError::OutOfScope(_) => {
                    entry(S::FORBIDDEN, Some("insufficient_scope"), None, err.to_string())
                }
                KeyError::Db(_) => unavailable("storage"),
            },
            Self::Responses(err) => match err {
                ResponseError::NotFound(_) => entry(S::NOT_FOUND, None, None, err.to_string()),
                ResponseError::PreviousNotFound(_) => entry(
                    S::NOT_FOUND,
                    Some("previous_response_not_found"),
                    Some("previous_response_id"),
                    err.to_string(),
                ),
                ResponseError::Db(_) => unavailable("storage"),
            },
            Self::Agent(err) => match err.as_ref() {
                AgentError::NoModel { .. } => entry(
                    S::BAD_REQUEST,
                    Some("agent_has_no_model"),
                    Some("model"),
                    err.to_string(),
                ),
                AgentError::Route { .. } => entry(
                    S::NOT_FOUND,
                    Some("model_not_found"),
                    Some("model"),
                    err.to_string(),
                ),
                AgentError::Provider(err) => provider_entry(err),
                AgentError::NoAnswer => entry(
                    S::INTERNAL_SERVER_ERROR,
                    Some("agent_failed"),
                    None,
                    err.to_string(),
                ),
                AgentError::Cancelled => entry(S::CONFLICT, Some("run_cancelled"), None, err.to_string()),
                AgentError::Storage(_) | AgentError::Session(_) => unavailable("storage"),
                AgentError::UnknownAgent(_) => {
                    entry(S::NOT_FOUND, Some("agent_not_found"), None, err.to_string())
                }
            },
            Self::Provider(err) => provider_entry(err),
            Self::Db(_) | Self::LoginSession(_) => unavailable("storage"),
            Self::Store(err) => store_entry(err, None),
        }
    }

    /// The OpenAI error object, as the table says.
    fn body(&self) -> Value {
        let Entry {
            status,
            kind,
            code,
            param,
            message,
        } = self.entry();
        let kind = kind.unwrap_or_else(|| default_type(status).into());
        let body = ErrorBody {
            error: ErrorObject {
                message,
                kind,
                param,
                code,
            },
        };
        serde_json::to_value(body).unwrap_or_else(|_| json!({"error": {"message": "request failed"}}))
    }

    /// Logs the whole chain: server errors as warnings, the client's as debug.
    fn log(&self) {
        let status = self.status();
        let chain = error_chain::chain(self);
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), error = %chain, "request failed");
        } else {
            tracing::debug!(status = status.as_u16(), error = %chain, "request rejected");
        }
    }

    /// The body of an error that ends a stream whose headers are already sent
    /// (the shape OpenAI uses for mid-stream errors); logged like a response.
    pub fn into_stream_event(self) -> Value {
        self.log();
        self.body()
    }
}

fn default_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        429 => "rate_limit_error",
        500.. => "server_error",
        _ => "invalid_request_error",
    }
}

/// Object-store errors; `param` names the field a bad key came from.
fn store_entry(err: &StoreError, param: Option<&str>) -> Entry {
    match err {
        StoreError::InvalidKey(_) => entry(
            StatusCode::BAD_REQUEST,
            Some("invalid_path"),
            param,
            err.to_string(),
        ),
        StoreError::PreconditionFailed => entry(
            StatusCode::PRECONDITION_FAILED,
            Some("etag_mismatch"),
            Some("If-Match"),
            err.to_string(),
        ),
        StoreError::Unavailable(_) => unavailable("storage"),
    }
}

fn memory_entry(err: &MemoryError) -> Entry {
    use StatusCode as S;
    let message = err.to_string();
    match err {
        MemoryError::Path(PathError::Agent(_)) => {
            entry(S::BAD_REQUEST, Some("invalid_agent"), Some("agent"), message)
        }
        MemoryError::Path(PathError::Path { .. }) => {
            entry(S::BAD_REQUEST, Some("invalid_path"), Some("path"), message)
        }
        MemoryError::Invalid { param, .. } => {
            entry(S::BAD_REQUEST, Some("invalid_request"), Some(param), message)
        }
        MemoryError::NotFound { .. } => entry(S::NOT_FOUND, Some("file_not_found"), None, message),
        MemoryError::Conflict { .. } => entry(
            S::PRECONDITION_FAILED,
            Some("etag_mismatch"),
            Some("If-Match"),
            message,
        ),
        MemoryError::EmbedderUnavailable(EmbedError::NotConfigured) => entry(
            S::SERVICE_UNAVAILABLE,
            Some("embedder_not_configured"),
            None,
            "no embedder is configured (memory.embedder)",
        ),
        MemoryError::EmbedderUnavailable(_) => entry(
            S::SERVICE_UNAVAILABLE,
            Some("embedder_unavailable"),
            None,
            "the embedder is unavailable",
        ),
        MemoryError::EmbedderTimeout(_) => entry(
            S::GATEWAY_TIMEOUT,
            Some("embedder_timeout"),
            None,
            "the embedder did not answer in time",
        ),
        MemoryError::IndexLoading => entry(S::SERVICE_UNAVAILABLE, Some("index_loading"), None, message),
        MemoryError::Store(StoreError::Unavailable(_)) | MemoryError::Db(_) => unavailable("memory storage"),
        MemoryError::Store(store) => store_entry(store, Some("path")),
    }
}

/// Upstream errors keep their status and public message (the upstream's own
/// JSON error, which OpenAI clients rely on); Onyx's own failures to reach or
/// read the upstream say what happened, never the connect or decode detail.
fn provider_entry(err: &ProviderError) -> Entry {
    use StatusCode as S;
    match err {
        ProviderError::Upstream {
            status,
            kind,
            code,
            param,
            ..
        } => {
            let status = S::from_u16(*status).unwrap_or(S::BAD_GATEWAY);
            let code = code
                .clone()
                .or_else(|| (status == S::NOT_FOUND).then(|| "model_not_found".to_string()));
            Entry {
                status,
                kind: kind.clone().filter(|k| k != "not_found_error"),
                code,
                param: param.clone(),
                message: err.public_message(),
            }
        }
        ProviderError::Connect { .. } => entry(
            S::BAD_GATEWAY,
            Some("upstream_unreachable"),
            None,
            err.public_message(),
        ),
        ProviderError::Timeout { .. } => entry(
            S::GATEWAY_TIMEOUT,
            Some("upstream_timeout"),
            None,
            err.public_message(),
        ),
        ProviderError::BadResponse { .. } => entry(
            S::BAD_GATEWAY,
            Some("upstream_bad_response"),
            None,
            err.public_message(),
        ),
        ProviderError::Unsupported(_) | ProviderError::InvalidRequest(_) => {
            entry(S::BAD_REQUEST, None, None, err.public_message())
        }
        ProviderError::CircuitOpen { .. } => entry(
            S::SERVICE_UNAVAILABLE,
            Some("circuit_open"),
            None,
            err.public_message(),
        ),
        ProviderError::Refused(refusal) => entry(
            S::TOO_MANY_REQUESTS,
            Some(refusal.code),
            None,
            refusal.message.clone(),
        ),
    }
}

impl ApiError {
    /// Seconds until a refused call may be tried again (budgets, rate limits,
    /// an open circuit).
    fn retry_after(&self) -> Option<u64> {
        let provider = match self {
            Self::Provider(err) => err.as_ref(),
            Self::Agent(err) => match err.as_ref() {
                AgentError::Provider(err) => err,
                _ => return None,
            },
            _ => return None,
        };
        provider.retry_after()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        let mut response = (self.status(), Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after() {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

#[cfg(test)]
mod tests;
