//! `plugins`: which plugins start, and each one's own settings, passed on
//! unread: a plugin validates its block when it starts.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// `plugins.enabled` names the plugins to start; every other key is one
/// plugin's own settings, validated by that plugin when it starts.
#[derive(Debug, Default, Deserialize)]
pub struct RawPlugins {
    #[serde(default)]
    pub enabled: Vec<String>,
    #[serde(flatten)]
    pub settings: BTreeMap<String, Value>,
}

#[derive(Debug, Default)]
pub struct PluginsConfig {
    pub enabled: Vec<String>,
    pub settings: BTreeMap<String, Value>,
}

pub(super) fn plugins(raw: RawPlugins) -> PluginsConfig {
    PluginsConfig {
        enabled: raw.enabled,
        settings: raw.settings,
    }
}
