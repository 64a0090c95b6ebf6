//! `${VAR}` substitution over every string of a parsed config tree.
//!
//! Supported forms: `${VAR}` (an unset variable is an error naming the config
//! path), `${VAR:-fallback}` (fallback when unset or empty) and `$${` for a
//! literal `${`.

use serde_json::Value;

use super::ConfigError;

/// A `${…}` reference that cannot be expanded (the config path is added by the caller).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvError {
    #[error("unterminated `${{` in {0:?}")]
    Unterminated(String),
    #[error("`${{{0}}}` is not a valid environment variable reference")]
    BadReference(String),
    #[error("environment variable {0} is not set")]
    Unset(String),
}

/// Replaces `${…}` references in every string value, in place.
pub fn substitute(value: &mut Value, lookup: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
    walk(value, String::new(), lookup)
}

fn walk(value: &mut Value, path: String, lookup: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
    match value {
        Value::String(text) if text.contains('$') => {
            *text = expand(text, lookup).map_err(|err| ConfigError::Invalid {
                path,
                message: err.to_string(),
            })?;
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                walk(item, format!("{path}[{index}]"), lookup)?;
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(item, child, lookup)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, EnvError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        if let Some(stripped) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = stripped;
            continue;
        }
        let Some(body_start) = after.strip_prefix("${") else {
            out.push('$');
            rest = &after[1..];
            continue;
        };
        let Some(end) = body_start.find('}') else {
            return Err(EnvError::Unterminated(text.into()));
        };
        let body = &body_start[..end];
        let (name, fallback) = match body.split_once(":-") {
            Some((name, fallback)) => (name, Some(fallback)),
            None => (body, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(EnvError::BadReference(body.into()));
        }
        match (
            lookup(name).filter(|v| !v.is_empty() || fallback.is_none()),
            fallback,
        ) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(fallback)) => out.push_str(fallback),
            (None, None) => return Err(EnvError::Unset(name.into())),
        }
        rest = &body_start[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(name: &str) -> Option<String> {
        match name {
            "KEY" => Some("sk-123".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_set_variables_and_fallbacks() {
        assert_eq!(expand("Bearer ${KEY}", &env).unwrap(), "Bearer sk-123");
        assert_eq!(expand("${MISSING:-dflt}", &env).unwrap(), "dflt");
        assert_eq!(expand("${EMPTY:-dflt}", &env).unwrap(), "dflt");
        assert_eq!(expand("${EMPTY}", &env).unwrap(), "");
        assert_eq!(expand("cost $5 and $${KEY}", &env).unwrap(), "cost $5 and ${KEY}");
    }

    #[test]
    fn unset_variable_names_the_path() {
        let mut value = json!({"providers": {"openai": {"apiKey": "${NOPE}"}}});
        let err = substitute(&mut value, &env).unwrap_err().to_string();
        assert_eq!(
            err,
            "providers.openai.apiKey: environment variable NOPE is not set"
        );
    }

    #[test]
    fn rejects_malformed_references() {
        assert!(expand("${KEY", &env).is_err());
        assert!(expand("${A B}", &env).is_err());
    }
}
