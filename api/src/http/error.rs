//! The one error type of the HTTP API and its OpenAI-shaped body:
//! `{"error":{"message","type","param","code"}}`. Every status code is decided
//! here; internal details are logged, never sent.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::memory::MemoryError;
use crate::providers::{ProviderError, RouteError};
use crate::sessions::SessionError;
use crate::storage::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
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
    #[error("{message}")]
    NotFound { message: String, code: &'static str },
    #[error("the request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    Session(#[from] crate::sessions::SessionError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// A dependency (database, object store) failed; details are logged only.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Conflict(String),
    /// An agent run failed with this status.
    #[error("{message}")]
    Agent { message: String, status: u16 },
    /// Boxed: provider errors carry the upstream's whole error object.
    #[error(transparent)]
    Provider(Box<ProviderError>),
}

impl From<ProviderError> for ApiError {
    fn from(err: ProviderError) -> Self {
        Self::Provider(Box::new(err))
    }
}

impl ApiError {
    /// A dependency (database, object store) failed: 503 naming what it said.
    pub fn unavailable(err: impl std::fmt::Display) -> Self {
        Self::Unavailable(err.to_string())
    }

    pub fn bad_request(message: impl Into<String>, param: Option<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
            param,
            code: None,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound { .. } | Self::Route(_) => StatusCode::NOT_FOUND,
            Self::Session(err) => match err {
                SessionError::NotFound(_) => StatusCode::NOT_FOUND,
                SessionError::BadId(_) => StatusCode::BAD_REQUEST,
                SessionError::Db(_) | SessionError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            },
            Self::Memory(err) => match err {
                MemoryError::Path(_) | MemoryError::Invalid(_) => StatusCode::BAD_REQUEST,
                MemoryError::Store(StoreError::InvalidKey(_)) => StatusCode::BAD_REQUEST,
                MemoryError::NotFound { .. } => StatusCode::NOT_FOUND,
                MemoryError::Conflict { .. } | MemoryError::Store(StoreError::PreconditionFailed) => {
                    StatusCode::PRECONDITION_FAILED
                }
                MemoryError::Store(StoreError::Unavailable(_)) | MemoryError::Db(_) => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
            },
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Agent { status, .. } => StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY),
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Provider(err) => match err.as_ref() {
                ProviderError::Upstream { status, .. } => {
                    StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY)
                }
                ProviderError::Connect { .. } | ProviderError::BadResponse { .. } => StatusCode::BAD_GATEWAY,
                ProviderError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
                ProviderError::Unsupported(_) | ProviderError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            },
        }
    }

    /// The OpenAI error object: (message, type, param, code).
    fn body(&self) -> (String, String, Option<String>, Option<String>) {
        let status = self.status();
        let default_type = match status.as_u16() {
            401 => "authentication_error",
            429 => "rate_limit_error",
            500.. => "server_error",
            _ => "invalid_request_error",
        };
        match self {
            Self::BadRequest { message, param, code } => (
                message.clone(),
                default_type.into(),
                param.clone(),
                code.map(String::from),
            ),
            Self::Unauthorized(message) => (
                message.to_string(),
                default_type.into(),
                None,
                Some("invalid_api_key".into()),
            ),
            Self::Forbidden(message) => (
                message.to_string(),
                default_type.into(),
                None,
                Some("insufficient_scope".into()),
            ),
            Self::NotFound { message, code } => {
                (message.clone(), default_type.into(), None, Some(code.to_string()))
            }
            Self::Route(err) => (
                err.to_string(),
                default_type.into(),
                Some("model".into()),
                Some("model_not_found".into()),
            ),
            Self::PayloadTooLarge { .. } => (
                self.to_string(),
                default_type.into(),
                None,
                Some("request_too_large".into()),
            ),
            Self::MethodNotAllowed => (
                self.to_string(),
                default_type.into(),
                None,
                Some("method_not_allowed".into()),
            ),
            Self::Provider(err) => provider_body(err, default_type),
            Self::Memory(err) => memory_body(err, default_type),
            Self::Unavailable(_) => (
                "storage is unavailable".into(),
                default_type.into(),
                None,
                Some("storage_unavailable".into()),
            ),
            Self::Conflict(message) => (
                message.clone(),
                default_type.into(),
                None,
                Some("conflict".into()),
            ),
            Self::Agent { message, .. } => (
                message.clone(),
                default_type.into(),
                None,
                Some("agent_failed".into()),
            ),
            Self::Session(err) => match err {
                SessionError::NotFound(_) => (
                    err.to_string(),
                    default_type.into(),
                    None,
                    Some("session_not_found".into()),
                ),
                SessionError::BadId(_) => (
                    err.to_string(),
                    default_type.into(),
                    Some("x-onyx-session-id".into()),
                    Some("invalid_session_id".into()),
                ),
                // Internal details are logged, not sent.
                SessionError::Db(_) | SessionError::Store(_) => (
                    "session storage is unavailable".into(),
                    default_type.into(),
                    None,
                    Some("storage_unavailable".into()),
                ),
            },
        }
    }
}

fn memory_body(err: &MemoryError, default_type: &str) -> (String, String, Option<String>, Option<String>) {
    let (param, code) = match err {
        MemoryError::Path(crate::memory::paths::PathError::Agent(_)) => (Some("agent"), "invalid_agent"),
        MemoryError::Path(_) | MemoryError::Store(StoreError::InvalidKey(_)) => {
            (Some("path"), "invalid_path")
        }
        MemoryError::Invalid(message) => (message.split(':').next(), "invalid_request"),
        MemoryError::NotFound { .. } => (None, "file_not_found"),
        MemoryError::Conflict { .. } | MemoryError::Store(StoreError::PreconditionFailed) => {
            (Some("If-Match"), "etag_mismatch")
        }
        MemoryError::Store(StoreError::Unavailable(_)) | MemoryError::Db(_) => {
            // Internal details are logged, not sent.
            return (
                "memory storage is unavailable".into(),
                default_type.into(),
                None,
                Some("storage_unavailable".into()),
            );
        }
    };
    (
        err.to_string(),
        default_type.into(),
        param.map(String::from),
        Some(code.into()),
    )
}

fn provider_body(
    err: &ProviderError,
    default_type: &str,
) -> (String, String, Option<String>, Option<String>) {
    match err {
        ProviderError::Upstream {
            provider,
            status,
            message,
            kind,
            code,
            param,
        } => {
            let code = code
                .clone()
                .or_else(|| (*status == 404).then(|| "model_not_found".to_string()));
            let kind = match kind.as_deref() {
                Some("not_found_error") | None => default_type.to_string(),
                Some(kind) => kind.to_string(),
            };
            (format!("{provider}: {message}"), kind, param.clone(), code)
        }
        other => {
            let code = match other {
                ProviderError::Connect { .. } => Some("upstream_unreachable"),
                ProviderError::Timeout { .. } => Some("upstream_timeout"),
                ProviderError::BadResponse { .. } => Some("upstream_bad_response"),
                _ => None,
            };
            (
                other.to_string(),
                default_type.into(),
                None,
                code.map(String::from),
            )
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), error = %self, "request failed");
        } else {
            tracing::debug!(status = status.as_u16(), error = %self, "request rejected");
        }
        let (message, kind, param, code) = self.body();
        let body = json!({"error": {"message": message, "type": kind, "param": param, "code": code}});
        (status, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (message, kind, _, _) = err.body();
        assert_eq!(message, "openai: slow down");
        assert_eq!(kind, "rate_limit_error");
    }

    #[test]
    fn unreachable_upstreams_are_502_with_a_code() {
        let err = ApiError::from(ProviderError::Connect {
            provider: "local".into(),
            detail: "refused".into(),
        });
        assert_eq!(err.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(err.body().3.as_deref(), Some("upstream_unreachable"));
    }
}
