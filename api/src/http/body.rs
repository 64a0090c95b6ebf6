//! Reading request bodies: a size limit answered with 413, JSON syntax errors
//! and type errors answered with 400 naming the line or the field.

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
/// reads it its own way); it is not empty.
pub struct JsonBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_limited(req, state).await?;
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
/// the content type is JSON.
pub struct TextDocument(pub String);

impl<S: Send + Sync> FromRequest<S> for TextDocument {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
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
