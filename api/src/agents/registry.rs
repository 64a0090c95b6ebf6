//! Which agents exist and how each is set up: the `agents.list` of the config
//! (OpenClaw's format), plus agents created through the API and changes made
//! through it (enable/disable, model, permission mode), kept in SurrealDB.
//! A `main` agent always exists.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::clock::now_stamp;
use crate::config::{AgentsConfig, Config, PermissionMode, ProviderKind};
use crate::storage::{Db, DbError};

/// The agent that always exists (added when the config lists none by this id)
/// and answers whatever names no agent: plain chat sessions, memory and tasks.
pub const MAIN: &str = "main";

#[derive(Debug, Clone)]
pub struct AgentDef {
    pub id: String,
    pub name: String,
    pub default: bool,
    pub enabled: bool,
    /// `provider/model` or an alias; `None` when nothing is configured.
    pub model: Option<String>,
    pub permission_mode: PermissionMode,
    pub tools_allow: Vec<String>,
    pub tools_deny: Vec<String>,
    /// The MCP servers whose tools it is offered; `None`: all.
    pub mcp: Option<Vec<String>>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// Local directory for the file tools and `exec`.
    pub work_dir: PathBuf,
    /// Decides the agent's "today": daily-log names, the prompt's date and time.
    pub timezone: chrono_tz::Tz,
    /// `config` or `api`.
    pub source: &'static str,
}

/// What the API stored about an agent: a whole agent (`source: api`) or
/// overrides of a configured one.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Stored {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    permission_mode: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
    /// Absent (read back as null) on configured agents changed through the API.
    #[serde(default)]
    created: Option<bool>,
    #[serde(default)]
    created_at: Option<String>,
}

/// A change requested through `PATCH /v1/agents/{id}`.
#[derive(Debug, Default)]
pub struct AgentPatch {
    pub enabled: Option<bool>,
    pub model: Option<String>,
    pub permission_mode: Option<PermissionMode>,
    pub name: Option<String>,
}

pub struct Registry {
    configured: Vec<AgentDef>,
    default_model: Option<String>,
    default_mode: PermissionMode,
    default_timezone: chrono_tz::Tz,
    workspaces: PathBuf,
    db: Db,
}

impl Registry {
    pub fn new(config: &Config, db: Db) -> Self {
        let agents: &AgentsConfig = &config.agents;
        let default_model = agents.default_model.clone().or_else(|| fallback_model(config));
        let workspaces = config.storage.data_dir.join("workspaces");
        let mut configured: Vec<AgentDef> = agents
            .list
            .iter()
            .map(|a| AgentDef {
                id: a.id.clone(),
                name: a.name.clone().unwrap_or_else(|| a.id.clone()),
                default: a.default,
                enabled: true,
                model: a.model.clone().or_else(|| default_model.clone()),
                permission_mode: a.permission_mode.unwrap_or(agents.default_permission_mode),
                tools_allow: a.tools_allow.clone(),
                tools_deny: a.tools_deny.clone(),
                mcp: a.mcp.clone(),
                temperature: a.temperature,
                max_tokens: a.max_tokens,
                work_dir: a
                    .workspace
                    .as_deref()
                    .map(expand_home)
                    .unwrap_or_else(|| workspaces.join(&a.id)),
                timezone: a.timezone,
                source: "config",
            })
            .collect();
        if !configured.iter().any(|a| a.id == MAIN) {
            let is_default = !configured.iter().any(|a| a.default);
            configured.insert(
                0,
                AgentDef {
                    id: MAIN.into(),
                    name: "Onyx".into(),
                    default: is_default,
                    enabled: true,
                    model: default_model.clone(),
                    permission_mode: agents.default_permission_mode,
                    tools_allow: Vec::new(),
                    tools_deny: Vec::new(),
                    mcp: None,
                    temperature: None,
                    max_tokens: None,
                    work_dir: workspaces.join(MAIN),
                    timezone: agents.timezone,
                    source: "config",
                },
            );
        }
        Self {
            configured,
            default_model,
            default_mode: agents.default_permission_mode,
            default_timezone: agents.timezone,
            workspaces,
            db,
        }
    }

    async fn stored(&self) -> Result<Vec<Stored>, DbError> {
        self.db
            .rows(
                "SELECT id, name, model, permission_mode, enabled, created, created_at FROM agent ORDER BY created_at",
                json!({}),
                0,
            )
            .await
            .map(|rows: Vec<Stored>| rows.into_iter().map(strip_table).collect())
    }

    /// Every agent: configured ones first (with API changes applied), then created ones.
    pub async fn list(&self) -> Result<Vec<AgentDef>, DbError> {
        let stored = self.stored().await?;
        let mut out: Vec<AgentDef> = self.configured.clone();
        for row in stored {
            match out.iter_mut().find(|a| a.id == row.id) {
                Some(existing) => apply(existing, &row),
                None if row.created == Some(true) => {
                    let mut agent = AgentDef {
                        id: row.id.clone(),
                        name: row.id.clone(),
                        default: false,
                        enabled: true,
                        model: self.default_model.clone(),
                        permission_mode: self.default_mode,
                        tools_allow: Vec::new(),
                        tools_deny: Vec::new(),
                        mcp: None,
                        temperature: None,
                        max_tokens: None,
                        work_dir: self.workspaces.join(&row.id),
                        timezone: self.default_timezone,
                        source: "api",
                    };
                    apply(&mut agent, &row);
                    out.push(agent);
                }
                None => {}
            }
        }
        Ok(out)
    }

    pub async fn get(&self, id: &str) -> Result<Option<AgentDef>, DbError> {
        Ok(self.list().await?.into_iter().find(|a| a.id == id))
    }

    /// The timezone of agent `id` (the default one for an unknown agent).
    pub async fn timezone_of(&self, id: &str) -> chrono_tz::Tz {
        match self.get(id).await {
            Ok(Some(agent)) => agent.timezone,
            _ => self.default_timezone,
        }
    }

    /// The agent that answers when none is named.
    pub async fn default_agent(&self) -> Result<AgentDef, DbError> {
        let all = self.list().await?;
        let chosen = all
            .iter()
            .find(|a| a.default && a.enabled)
            .or_else(|| all.iter().find(|a| a.id == MAIN))
            .cloned();
        Ok(chosen.unwrap_or_else(|| self.configured[0].clone()))
    }

    /// Records a new agent (the caller seeds its workspace).
    pub async fn create(
        &self,
        id: &str,
        name: Option<&str>,
        model: Option<&str>,
        mode: Option<PermissionMode>,
    ) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "CREATE type::record('agent', $id) CONTENT { name: $name, model: $model, permission_mode: $mode, enabled: true, created: true, created_at: $now }",
                json!({
                    "id": id,
                    "name": name,
                    "model": model,
                    "mode": mode.map(mode_name),
                    "now": now_stamp(),
                }),
            )
            .await?;
        Ok(())
    }

    pub async fn patch(&self, id: &str, patch: &AgentPatch) -> Result<(), DbError> {
        let mut set = serde_json::Map::new();
        if let Some(enabled) = patch.enabled {
            set.insert("enabled".into(), json!(enabled));
        }
        if let Some(model) = &patch.model {
            set.insert("model".into(), json!(model));
        }
        if let Some(mode) = patch.permission_mode {
            set.insert("permission_mode".into(), json!(mode_name(mode)));
        }
        if let Some(name) = &patch.name {
            set.insert("name".into(), json!(name));
        }
        self.db
            .execute_retrying(
                "UPSERT type::record('agent', $id) MERGE $set",
                json!({"id": id, "set": set}),
            )
            .await?;
        Ok(())
    }
}

/// SurrealDB returns `agent:⟨id⟩`; the API wants the bare id.
fn strip_table(mut row: Stored) -> Stored {
    if let Some(rest) = row.id.strip_prefix("agent:") {
        row.id = rest
            .trim_start_matches('⟨')
            .trim_end_matches('⟩')
            .trim_matches('`')
            .to_string();
    }
    row
}

fn apply(agent: &mut AgentDef, row: &Stored) {
    if let Some(name) = &row.name {
        agent.name = name.clone();
    }
    if let Some(model) = &row.model {
        agent.model = Some(model.clone());
    }
    if let Some(mode) = row.permission_mode.as_deref().and_then(parse_mode) {
        agent.permission_mode = mode;
    }
    if let Some(enabled) = row.enabled {
        agent.enabled = enabled;
    }
}

pub fn mode_name(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::Safe => "safe",
        PermissionMode::Ask => "ask",
        PermissionMode::AllowAll => "allow-all",
    }
}

pub fn parse_mode(text: &str) -> Option<PermissionMode> {
    match text {
        "safe" => Some(PermissionMode::Safe),
        "ask" => Some(PermissionMode::Ask),
        "allow-all" | "allowAll" => Some(PermissionMode::AllowAll),
        _ => None,
    }
}

/// With no model configured, a sensible one from the first provider there is.
fn fallback_model(config: &Config) -> Option<String> {
    let provider = config.providers.values().next()?;
    let model = match provider.kind {
        ProviderKind::OpenAi | ProviderKind::Azure => "gpt-4o-mini",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Ollama => "llama3.2",
        ProviderKind::Gemini | ProviderKind::Vertex => "gemini-2.5-flash",
        ProviderKind::Bedrock => "anthropic.claude-3-5-haiku-20241022-v1:0",
        ProviderKind::ClaudeSubscription => "sonnet",
        ProviderKind::Codex => "gpt-5.1-codex",
        ProviderKind::Copilot => "gpt-5",
    };
    Some(format!("{}/{model}", provider.name))
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_patched_configured_agent_still_lists() {
        // Found by the fuzzer: a PATCH of a configured agent stored a row
        // without `created`, which read back as null and made every agent
        // lookup (and so every agent chat) fail with 503 from then on.
        let text = r#"{ agents: { list: [{ id: "main", default: true }] }, storage: { dataDir: "/tmp/onyx-unused" } }"#;
        let config = crate::config::parse(Some(text), None, &|_| None).unwrap();
        let registry = Registry::new(&config, Db::scratch().await);
        let rename = AgentPatch {
            name: Some("Renamed".into()),
            ..AgentPatch::default()
        };
        registry.patch(MAIN, &rename).await.unwrap();
        registry.patch(MAIN, &AgentPatch::default()).await.unwrap();
        let main = registry.get(MAIN).await.unwrap().unwrap();
        assert_eq!(main.name, "Renamed");
        assert_eq!(registry.list().await.unwrap().len(), 1);
    }
}
