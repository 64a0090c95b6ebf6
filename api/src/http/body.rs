//! Reading request bodies: a size limit answered with 413, a JSON body under
//! another content type answered with 415, JSON syntax errors and type errors
//! answered with 400 naming the line or the field.
//!
//! Why 415: a web page can send a cross-site `POST` without a CORS preflight
//! only as a form, `text/plain`, or a body with no content type at all. None
//! of those is JSON here, so no page can drive a JSON endpoint that way.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::ApiError;

/// A request body that is a JSON object (always `Value::Object`).
pub struct JsonObject(pub Value);

/// Reads the whole body within the configured limit (413 beyond it).
async fn read_limited<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    let limit = req
        .extensions()
        .get::<BodyLimit>()
        .map(|l| l.0)
        .unwrap_or(usize::MAX);
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge { limit }
        } else {
            ApiError::bad_request(
                format!("could not read the request body: {}", rejection.body_text()),
                None,
            )
        }
    })
}

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let JsonBytes(bytes) = JsonBytes::from_request(req, state).await?;
        parse_object(&bytes).map(Self)
    }
}

/// A request body meant to be a JSON object, not yet parsed (the handler
/// reads it its own way); it is not empty and was sent as JSON.
pub struct JsonBytes(pub Bytes);

/// Whether a `Content-Type` names JSON: `application/json` or `application/*+json`.
pub fn is_json(content_type: Option<&axum::http::HeaderValue>) -> bool {
    let Some(text) = content_type.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    // Compared without allocating: every chat request comes through here, twice.
    let essence = text.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    let suffix = subtype
        .len()
        .checked_sub("+json".len())
        .and_then(|at| subtype.get(at..));
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json") || suffix.is_some_and(|s| s.eq_ignore_ascii_case("+json")))
}

/// The 415 for a body that is not sent as JSON.
fn not_json(content_type: Option<&axum::http::HeaderValue>) -> ApiError {
    let given = match content_type.and_then(|v| v.to_str().ok()) {
        Some(text) => format!("Content-Type {text:?}"),
        None => "no Content-Type".to_string(),
    };
    ApiError::UnsupportedMediaType(format!(
        "this endpoint takes JSON: send the body with Content-Type: application/json (it came with {given})"
    ))
}

/// Every `POST` with a body sends it as JSON, whatever the route reads: a
/// `POST` is what a page sends across sites without a preflight, so no route
/// takes one in another type. (JSON routes refuse other types on every
/// method in their extractors; `TextDocument` takes raw text on `PUT`.)
/// `require_api_key` checks it on every route it guards; an open route that
/// reads no body takes [`SentAsJson`].
pub fn post_is_json(method: &axum::http::Method, headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
    if method != axum::http::Method::POST {
        return Ok(());
    }
    let has_body = headers.contains_key(axum::http::header::TRANSFER_ENCODING)
        || headers
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|length| length.trim() != "0");
    let content_type = headers.get(axum::http::header::CONTENT_TYPE);
    if has_body && !is_json(content_type) {
        return Err(not_json(content_type));
    }
    Ok(())
}

/// [`post_is_json`], for an open route that reads no body.
pub struct SentAsJson;

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for SentAsJson {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        post_is_json(&parts.method, &parts.headers).map(|()| Self)
    }
}

impl<S: Send + Sync> FromRequest<S> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req.headers().get(axum::http::header::CONTENT_TYPE).cloned();
        let bytes = read_limited(req, state).await?;
        if !bytes.is_empty() && !is_json(content_type.as_ref()) {
            return Err(not_json(content_type.as_ref()));
        }
        if bytes.is_empty() {
            return Err(ApiError::bad_request(
                "the request body is empty; send a JSON object",
                None,
            ));
        }
        Ok(Self(bytes))
    }
}

/// `bytes` as a JSON object (always `Value::Object`), or a 400 saying why not.
pub fn parse_object(bytes: &[u8]) -> Result<Value, ApiError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(ApiError::bad_request(
            "the request body must be a JSON object",
            None,
        )),
        Err(err) => Err(ApiError::BadRequest {
            message: format!("the request body is not valid JSON: {err}"),
            param: None,
            code: Some("invalid_json"),
        }),
    }
}

/// A text document sent as the body: raw UTF-8, or `{"content": "…"}` when
/// the content type is JSON. Only `PUT` routes take one, and a page cannot
/// send a `PUT` to another origin without a CORS preflight, which Onyx never
/// answers; so raw text is taken under any content type (`curl --data-binary`
/// sends a form's).
pub struct TextDocument(pub String);

impl<S: Send + Sync> FromRequest<S> for TextDocument {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if req.method() != axum::http::Method::PUT {
            return Err(ApiError::MethodNotAllowed);
        }
        let is_json = is_json(req.headers().get(axum::http::header::CONTENT_TYPE));
        let bytes = read_limited(req, state).await?;
        if is_json {
            let value = parse_object(&bytes)?;
            return match value.get("content") {
                Some(Value::String(text)) => Ok(Self(text.clone())),
                _ => Err(ApiError::BadRequest {
                    message: "content: expected the file's text as a string".into(),
                    param: Some("content".into()),
                    code: Some("invalid_type"),
                }),
            };
        }
        String::from_utf8(bytes.to_vec())
            .map(Self)
            .map_err(|_| ApiError::bad_request("the request body is not UTF-8 text", None))
    }
}

/// A whole-number query parameter within `0..=max`, or `default` when absent.
pub fn query_number(
    params: &std::collections::HashMap<String, String>,
    name: &str,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    match params.get(name) {
        None => Ok(default),
        Some(text) => match text.parse::<usize>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(ApiError::bad_request(
                format!("{name}: must be a whole number from 0 to {max}"),
                Some(name.into()),
            )),
        },
    }
}

/// The configured body limit, put in request extensions so 413s can state it.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

/// Splits a checked body into its map.
pub fn into_map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Deserializes a typed view of a JSON body without copying it; a mismatch names the field.
pub fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        // serde names a missing field in backticks; report it as the param.
        let param = if path == "." {
            inner.split('`').nth(1).map(String::from)
        } else {
            Some(path)
        };
        let message = match &param {
            Some(param) if !inner.contains(param.as_str()) => format!("{param}: {inner}"),
            _ => inner,
        };
        ApiError::BadRequest {
            message,
            param,
            code: Some("invalid_type"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Probe {
        model: String,
        messages: Vec<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        role: String,
    }

    fn param_of(value: Value) -> Option<String> {
        match typed::<Probe>(&value) {
            Err(ApiError::BadRequest { param, .. }) => param,
            other => panic!("expected a bad request, got {other:?}"),
        }
    }

    #[test]
    fn json_is_application_json_or_a_json_suffix() {
        let value = |text: &'static str| axum::http::HeaderValue::from_static(text);
        for json in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/vnd.api+json",
        ] {
            assert!(is_json(Some(&value(json))), "{json}");
        }
        for other in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/json",
            "application/jsonx",
        ] {
            assert!(!is_json(Some(&value(other))), "{other}");
        }
        assert!(!is_json(None));
        assert_eq!(not_json(None).status(), 415);
    }

    #[test]
    fn names_the_field_that_is_wrong() {
        assert_eq!(param_of(json!({"messages": []})).as_deref(), Some("model"));
        assert_eq!(
            param_of(json!({"model": 5, "messages": []})).as_deref(),
            Some("model")
        );
        assert_eq!(
            param_of(json!({"model": "m", "messages": [{"role": 1}]})).as_deref(),
            Some("messages[0].role")
        );
    }
}
