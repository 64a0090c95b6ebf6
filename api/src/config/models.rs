//! `models`: aliases (a name for one model reference or an ordered fallback
//! list) and the context windows the config sets, by model and by provider.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::ConfigError;
use super::providers::ProviderConfig;
use crate::model_ref::ModelRef;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawModels {
    #[serde(default)]
    pub aliases: BTreeMap<String, OneOrMany>,
    /// Context windows in tokens by model (`"ollama/llama3.2": 8192`), over
    /// the shipped table and the provider's `contextWindow`.
    #[serde(default)]
    pub context_window: BTreeMap<String, u32>,
}

/// An alias target: one model reference or an ordered fallback list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// Context windows the config sets: by model reference (`provider/model`)
/// and by provider; the shipped table covers the rest.
#[derive(Debug, Clone, Default)]
pub struct ContextWindows {
    pub models: BTreeMap<String, u32>,
    pub providers: BTreeMap<String, u32>,
}

/// A window below this cannot hold a system prompt and a turn.
const MIN_CONTEXT_WINDOW: u32 = 1024;

pub(super) fn aliases(
    raw: BTreeMap<String, OneOrMany>,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<BTreeMap<String, Vec<ModelRef>>, ConfigError> {
    let mut out = BTreeMap::new();
    for (alias, targets) in raw {
        let path = format!("models.aliases.{alias}");
        if alias.contains('/') || alias.starts_with("onyx:") {
            return Err(ConfigError::invalid(
                path,
                "an alias may not contain '/' or start with 'onyx:'",
            ));
        }
        let targets = match targets {
            OneOrMany::One(target) => vec![target],
            OneOrMany::Many(targets) => targets,
        };
        if targets.is_empty() {
            return Err(ConfigError::invalid(path, "needs at least one model"));
        }
        let mut refs = Vec::with_capacity(targets.len());
        for (index, target) in targets.iter().enumerate() {
            let entry_path = format!("{path}[{index}]");
            let model_ref =
                ModelRef::parse(target).map_err(|err| ConfigError::invalid(&entry_path, err.to_string()))?;
            if !providers.contains_key(&model_ref.provider) {
                let known: Vec<&str> = providers.keys().map(String::as_str).collect();
                return Err(ConfigError::invalid(
                    entry_path,
                    format!(
                        "unknown provider {:?} (configured: {})",
                        model_ref.provider,
                        known.join(", ")
                    ),
                ));
            }
            refs.push(model_ref);
        }
        out.insert(alias, refs);
    }
    Ok(out)
}

pub(super) fn context_windows(
    models: BTreeMap<String, u32>,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<ContextWindows, ConfigError> {
    let check = |tokens: u32, path: String| {
        if tokens < MIN_CONTEXT_WINDOW {
            return Err(ConfigError::invalid(
                path,
                format!("{tokens} tokens is too small a context window (at least {MIN_CONTEXT_WINDOW})"),
            ));
        }
        Ok(tokens)
    };
    let mut windows = ContextWindows::default();
    for (model, tokens) in models {
        let tokens = check(tokens, format!("models.contextWindow.{model}"))?;
        windows.models.insert(model, tokens);
    }
    for provider in providers.values() {
        if let Some(tokens) = provider.context_window {
            let tokens = check(tokens, format!("providers.{}.contextWindow", provider.name))?;
            windows.providers.insert(provider.name.clone(), tokens);
        }
    }
    Ok(windows)
}
