//! Errors in the Anthropic Messages API's shape:
//! `{"type":"error","error":{"type":…,"message":…}}`. Onyx's errors are built
//! in OpenAI's shape everywhere (auth middleware, body limits, JSON rejections,
//! handlers); `to_anthropic` rewrites any such body on the `/v1/messages*`
//! routes, keeping the status and every header (`Retry-After` among them).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::http::ApiError;
use crate::providers::anthropic::error_type_for_status;

/// Error bodies are small; anything bigger is not one of ours.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The Anthropic error body for a status and an OpenAI-shaped `{"error":{…}}`.
pub fn from_openai(status: StatusCode, body: &Value) -> Value {
    let error = &body["error"];
    let message = error["message"].as_str().unwrap_or("request failed");
    // By status, as Anthropic's SDKs classify errors (an OpenAI `type` says less).
    let kind = error_type_for_status(status.as_u16());
    let body = AnthropicError {
        kind: "error",
        error: AnthropicErrorObject {
            kind: kind.to_string(),
            message: message.to_string(),
        },
    };
    serde_json::to_value(body).unwrap_or_else(|_| json!({"type": "error"}))
}

/// The body of every error on the `/v1/messages*` routes.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct AnthropicError {
    /// Always `error`.
    #[serde(rename = "type")]
    #[schemars(extend("const" = "error"))]
    pub kind: &'static str,
    pub error: AnthropicErrorObject,
}

/// Anthropic's error `type` (`invalid_request_error`, `authentication_error`, …) and message.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct AnthropicErrorObject {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

/// An error that ends a stream whose headers are sent (`event: error`'s data).
pub fn stream_event(err: ApiError) -> Value {
    let status = err.status();
    from_openai(status, &err.into_stream_event())
}

/// A 400 `invalid_request_error` naming the field path (`messages.1.content.0.type`).
pub fn invalid(path: impl AsRef<str>, message: impl AsRef<str>) -> ApiError {
    let path = path.as_ref();
    ApiError::bad_request(format!("{path}: {}", message.as_ref()), Some(path.to_string()))
}

/// Rewrites an OpenAI-shaped JSON error response into Anthropic's shape.
pub async fn to_anthropic(response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(response.status().is_client_error() || response.status().is_server_error()) || !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(parts, Body::empty());
    };
    let rewritten = match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) if value["type"] != "error" && value["error"].is_object() => {
            from_openai(parts.status, &value).to_string().into_bytes()
        }
        _ => bytes.to_vec(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, Body::from(rewritten))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;

    async fn rewritten(response: Response) -> (StatusCode, Value, axum::http::HeaderMap) {
        let response = to_anthropic(response).await;
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        (
            parts.status,
            serde_json::from_slice(&bytes).unwrap(),
            parts.headers,
        )
    }

    #[tokio::test]
    async fn openai_errors_become_anthropic_errors_with_their_headers() {
        let mut response = ApiError::Unauthorized("invalid API key").into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("3"));
        let (status, body, headers) = rewritten(response).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            body,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid API key"}})
        );
        assert_eq!(headers[header::RETRY_AFTER], "3");
        let (status, body, _) = rewritten(ApiError::PayloadTooLarge { limit: 10 }.into_response()).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(body["error"]["type"], "request_too_large");
    }

    #[test]
    fn the_type_follows_the_status() {
        let overloaded = json!({"error": {"message": "busy", "type": "overloaded_error"}});
        assert_eq!(
            from_openai(StatusCode::from_u16(529).unwrap(), &overloaded)["error"]["type"],
            "overloaded_error"
        );
        let server = json!({"error": {"message": "x", "type": "server_error"}});
        assert_eq!(
            from_openai(StatusCode::BAD_GATEWAY, &server)["error"]["type"],
            "api_error"
        );
        let missing =
            json!({"error": {"message": "no", "type": "invalid_request_error", "code": "model_not_found"}});
        assert_eq!(
            from_openai(StatusCode::NOT_FOUND, &missing)["error"]["type"],
            "not_found_error"
        );
    }

    #[tokio::test]
    async fn successes_and_streams_pass_untouched() {
        let ok = (
            StatusCode::OK,
            axum::Json(json!({"error": {"message": "not an error"}})),
        )
            .into_response();
        let (status, body, _) = rewritten(ok).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["error"]["message"], "not an error");
    }
}
