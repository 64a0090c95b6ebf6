//! `gateway.cors`: the web origins whose pages may call the API from a
//! browser (`{ origins: ["https://app.example"] }`), off by default. Each
//! origin is named exactly: a wildcard, `null` or an origin with a path is
//! refused, and no origin is ever allowed credentials (cookies); a page sends
//! its API key in `Authorization`. On a key-less gateway the edge's Origin
//! rules still come first (`http::edge`), so a configured origin is answered
//! only once the gateway has a key.

use http::HeaderValue;
use serde::Deserialize;

use super::ConfigError;

/// `gateway.cors` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCors {
    #[serde(default)]
    pub origins: Vec<String>,
}

/// The origins whose cross-origin requests are answered with CORS headers
/// (never empty: no origins means no CORS at all).
#[derive(Debug, Clone)]
pub struct Cors {
    /// As browsers send them in `Origin`: lower case, without a default port.
    pub origins: Vec<HeaderValue>,
}

/// The checked section; `None` when it names no origin.
pub fn cors(raw: Option<RawCors>) -> Result<Option<Cors>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let mut origins = Vec::new();
    for (index, origin) in raw.origins.iter().enumerate() {
        let path = format!("gateway.cors.origins[{index}]");
        let origin = normalised(origin).map_err(|why| ConfigError::invalid(path.clone(), why))?;
        let value = HeaderValue::from_str(&origin)
            .map_err(|_| ConfigError::invalid(path, "not a valid header value"))?;
        if !origins.contains(&value) {
            origins.push(value);
        }
    }
    Ok((!origins.is_empty()).then_some(Cors { origins }))
}

/// `scheme://host[:port]` as a browser serialises it in `Origin`.
fn normalised(origin: &str) -> Result<String, String> {
    let origin = origin.trim();
    if origin.contains('*') {
        return Err(format!(
            "{origin:?}: wildcards are refused; name each origin, like \"https://app.example\""
        ));
    }
    let lower = origin.to_ascii_lowercase();
    let (scheme, rest) = lower
        .split_once("://")
        .filter(|(scheme, _)| matches!(*scheme, "http" | "https"))
        .ok_or_else(|| format!("{origin:?} is not an origin like \"https://app.example\" (http or https)"))?;
    let valid_authority = !rest.is_empty()
        && !rest.starts_with(':')
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    if !valid_authority {
        return Err(format!(
            "{origin:?} is not an origin: only scheme://host[:port], no path, user or trailing slash"
        ));
    }
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    let rest = rest.strip_suffix(default_port).unwrap_or(rest);
    Ok(format!("{scheme}://{rest}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins(list: &[&str]) -> Result<Option<Vec<String>>, ConfigError> {
        let raw = RawCors {
            origins: list.iter().map(|o| o.to_string()).collect(),
        };
        cors(Some(raw)).map(|c| {
            c.map(|c| {
                c.origins
                    .iter()
                    .map(|o| o.to_str().unwrap_or_default().to_string())
                    .collect()
            })
        })
    }

    #[test]
    fn origins_are_kept_as_browsers_send_them() {
        assert_eq!(
            origins(&[
                "https://App.Example:443",
                "http://127.0.0.1:5173",
                "http://app.example:80"
            ])
            .unwrap()
            .unwrap(),
            [
                "https://app.example",
                "http://127.0.0.1:5173",
                "http://app.example"
            ]
        );
        assert_eq!(
            origins(&["https://a.example", "https://A.example"])
                .unwrap()
                .unwrap()
                .len(),
            1
        );
        assert!(origins(&[]).unwrap().is_none(), "no origins: no CORS");
        assert!(cors(None).unwrap().is_none(), "off by default");
    }

    #[test]
    fn wildcards_and_what_is_not_an_origin_are_refused_naming_the_entry() {
        for bad in [
            "*",
            "https://*.example",
            "null",
            "app.example",
            "ftp://app.example",
            "https://app.example/",
            "https://app.example/path",
            "https://user@app.example",
            "https://",
            "https://app.example?x=1",
            "https://app example",
        ] {
            let err = origins(&["https://ok.example", bad]).unwrap_err().to_string();
            assert!(err.contains("gateway.cors.origins[1]"), "{bad}: {err}");
        }
    }
}
