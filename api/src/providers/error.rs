//! What can go wrong talking to a provider, and which failures are worth a retry.

use std::time::Duration;

use crate::error_chain::root_cause;

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The upstream answered with an error status; `message` is safe to show.
    #[error("{provider} returned {status}: {message}")]
    Upstream {
        provider: String,
        status: u16,
        message: String,
        kind: Option<String>,
        code: Option<String>,
        param: Option<String>,
    },
    #[error("cannot reach {provider}: {detail}")]
    Connect { provider: String, detail: String },
    #[error("{provider} did not answer within {after:?}")]
    Timeout { provider: String, after: Duration },
    #[error("{provider} sent a response Onyx could not read: {detail}")]
    BadResponse { provider: String, detail: String },
    #[error("{0}")]
    Unsupported(String),
    /// The request itself is wrong for this provider (caught before sending).
    #[error("{0}")]
    InvalidRequest(String),
    /// The provider's circuit is open: it was not called.
    #[error("{provider} is failing; its circuit is open and it will be tried again in {}s", retry_seconds(*.retry_after))]
    CircuitOpen { provider: String, retry_after: Duration },
    /// A budget or rate limit refused the call before it went out.
    #[error("{}", .0.message)]
    Refused(super::meter::Refusal),
}

impl ProviderError {
    /// An answer from `provider` that Onyx could not read or re-encode.
    pub fn bad_response(provider: &str, detail: impl ToString) -> Self {
        Self::BadResponse {
            provider: provider.to_string(),
            detail: detail.to_string(),
        }
    }

    /// 429, 5xx, connection failures and timeouts are transient; others are the caller's.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Upstream { status, .. } => *status == 429 || *status >= 500,
            Self::Connect { .. } | Self::Timeout { .. } => true,
            Self::BadResponse { .. }
            | Self::Unsupported(_)
            | Self::InvalidRequest(_)
            | Self::Refused(_)
            | Self::CircuitOpen { .. } => false,
        }
    }

    /// What a client may be told: the upstream's own error message, or what
    /// went wrong reaching it, never the connect or decode detail (logged).
    pub fn public_message(&self) -> String {
        match self {
            Self::Upstream {
                provider, message, ..
            } => format!("{provider}: {message}"),
            Self::Connect { provider, .. } => format!("{provider}: upstream unreachable"),
            Self::BadResponse { provider, .. } => {
                format!("{provider}: the upstream sent a response Onyx could not read")
            }
            // Onyx's own words: a duration, or what is wrong with the request.
            Self::Timeout { .. }
            | Self::Unsupported(_)
            | Self::InvalidRequest(_)
            | Self::Refused(_)
            | Self::CircuitOpen { .. } => self.to_string(),
        }
    }

    pub fn provider_label(&self) -> &str {
        match self {
            Self::Upstream { provider, .. }
            | Self::Connect { provider, .. }
            | Self::Timeout { provider, .. }
            | Self::BadResponse { provider, .. }
            | Self::CircuitOpen { provider, .. } => provider,
            Self::Unsupported(_) | Self::InvalidRequest(_) | Self::Refused(_) => "",
        }
    }

    /// Seconds until the call may be tried again, for `Retry-After`.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Self::Refused(refusal) => Some(refusal.retry_after),
            Self::CircuitOpen { retry_after, .. } => Some(retry_seconds(*retry_after)),
            _ => None,
        }
    }

    pub(crate) fn from_reqwest(provider: &str, err: reqwest::Error, timeout: Duration) -> Self {
        if err.is_timeout() {
            Self::Timeout {
                provider: provider.into(),
                after: timeout,
            }
        } else if err.is_connect() || err.is_request() {
            Self::Connect {
                provider: provider.into(),
                detail: root_cause(&err),
            }
        } else if err.is_decode() || err.is_body() {
            Self::BadResponse {
                provider: provider.into(),
                detail: root_cause(&err),
            }
        } else {
            Self::Connect {
                provider: provider.into(),
                detail: root_cause(&err),
            }
        }
    }
}

/// Whole seconds, rounded up (never 0: "retry now" would be a lie).
fn retry_seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}
