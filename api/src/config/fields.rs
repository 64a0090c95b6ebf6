//! Field parsers shared by the config's sections: names, URLs, `~/` paths,
//! and the environment lookup they are given.

use std::path::PathBuf;

use url::Url;

use super::ConfigError;

/// A provider or agent name: letters, digits, `-`, `_` and `.`.
pub(super) fn check_name(name: &str, path: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            path,
            "names may use only letters, digits, '-', '_' and '.'",
        ))
    }
}

pub(super) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

pub(super) fn parse_url(text: &str, path: &str) -> Result<Url, ConfigError> {
    let url =
        Url::parse(text).map_err(|err| ConfigError::invalid(path, format!("not a URL ({err}): {text:?}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::invalid(
            path,
            format!("not an http(s) URL: {text:?}"),
        ));
    }
    Ok(url)
}

pub(super) fn expand_home(path: &str, env: Env) -> PathBuf {
    match (path.strip_prefix("~/"), env("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}
