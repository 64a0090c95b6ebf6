//! Reading a plugin's settings block (`plugins.<name>` in onyx.json5): the
//! keys the core handles are set aside, and the bot token may come from the
//! environment.

use serde::de::DeserializeOwned;

use crate::PluginError;

/// Keys under `plugins.<name>` that the core reads, not the plugin.
const CORE_KEYS: &[&str] = &["allowFrom"];

/// The plugin's own settings, typed; unknown keys are the plugin's to refuse.
pub fn own_settings<T: DeserializeOwned>(name: &str, settings: &serde_json::Value) -> Result<T, PluginError> {
    let mut own = settings.clone();
    if let Some(map) = own.as_object_mut() {
        for key in CORE_KEYS {
            map.remove(*key);
        }
    }
    serde_json::from_value(own).map_err(|e| PluginError::Config(format!("plugins.{name}: {e}")))
}

/// The bot token: the setting, else `$env_var`; `hint` says where to get one.
pub fn token(
    name: &str,
    configured: Option<String>,
    env_var: &str,
    env: impl Fn(&str) -> Option<String>,
    hint: &str,
) -> Result<String, PluginError> {
    configured
        .filter(|t| !t.trim().is_empty())
        .or_else(|| env(env_var).filter(|t| !t.trim().is_empty()))
        .map(|t| t.trim().to_string())
        .ok_or_else(|| PluginError::Config(format!("plugins.{name}.token is empty: set {env_var} to {hint}")))
}
