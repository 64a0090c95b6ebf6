//! `knowledge`: outside knowledge sources agents can search. Today one,
//! menos (`knowledge.menos { url, keyFile }`), whose requests Onyx signs
//! with the ed25519 key in `keyFile`. Reading the key is the knowledge
//! module's job at startup; here the values are only checked.

use std::path::PathBuf;

use serde::Deserialize;
use url::Url;

use super::ConfigError;
use super::fields::{Env, expand_home, parse_url};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawKnowledge {
    pub menos: Option<RawMenos>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMenos {
    pub url: String,
    pub key_file: String,
}

#[derive(Debug, Clone, Default)]
pub struct KnowledgeConfig {
    pub menos: Option<MenosConfig>,
}

/// menos, the content vault (seed 003 D2).
#[derive(Debug, Clone)]
pub struct MenosConfig {
    /// Its base URL (`http://menos:8000`; a path prefix is kept).
    pub url: Url,
    /// The OpenSSH ed25519 private key Onyx signs requests with (its public
    /// key is one of menos's authorized keys).
    pub key_file: PathBuf,
}

pub(super) fn knowledge(raw: RawKnowledge, env: Env) -> Result<KnowledgeConfig, ConfigError> {
    let Some(menos) = raw.menos else {
        return Ok(KnowledgeConfig::default());
    };
    let url = parse_url(menos.url.trim(), "knowledge.menos.url")?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::invalid(
            "knowledge.menos.url",
            "menos's base URL takes no query or fragment",
        ));
    }
    if menos.key_file.trim().is_empty() {
        return Err(ConfigError::invalid(
            "knowledge.menos.keyFile",
            "the path of the ed25519 private key (OpenSSH format) Onyx signs menos requests with",
        ));
    }
    Ok(KnowledgeConfig {
        menos: Some(MenosConfig {
            url,
            key_file: expand_home(menos.key_file.trim(), env),
        }),
    })
}
