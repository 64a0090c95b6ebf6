//! The exact `tools` array an upstream receives, per agent (allow/deny lists)
//! and per permission mode, against a fixture captured before the tools moved
//! into one registry: a schema or description that changes by accident shows
//! here. `ONYX_UPDATE_TOOL_SNAPSHOT=1` rewrites the fixture after a change
//! made on purpose (review its diff).

use std::path::PathBuf;

use serde_json::{Value, json};

use super::offered;
use crate::agents::registry::AgentDef;
use crate::config::{McpConfig, PermissionMode, ToolsConfig};
use crate::mcp_client::McpClients;

fn agent(id: &str, allow: &[&str], deny: &[&str]) -> AgentDef {
    AgentDef {
        id: id.into(),
        name: id.into(),
        default: false,
        enabled: true,
        model: None,
        permission_mode: PermissionMode::Ask,
        tools_allow: allow.iter().map(|s| s.to_string()).collect(),
        tools_deny: deny.iter().map(|s| s.to_string()).collect(),
        mcp: None,
        temperature: None,
        max_tokens: None,
        work_dir: PathBuf::from("/nonexistent"),
        timezone: chrono_tz::UTC,
        source: "config",
    }
}

fn snapshot() -> Value {
    let full = ToolsConfig {
        searxng_url: url::Url::parse("http://127.0.0.1:8888").ok(),
        menos_search: true,
        ..ToolsConfig::default()
    };
    let plain = ToolsConfig::default();
    let mcp = McpClients::new(&McpConfig::default());
    let agents = [
        agent("plain", &[], &[]),
        agent("memory_only", &["group:memory", "skill"], &[]),
        agent("no_exec_or_web", &[], &["exec", "group:web"]),
    ];
    let mut out = serde_json::Map::new();
    for (settings_name, settings, missions) in [("full", &full, true), ("default", &plain, false)] {
        for agent in &agents {
            for mode in [
                PermissionMode::Safe,
                PermissionMode::Ask,
                PermissionMode::AllowAll,
            ] {
                let tools: Vec<Value> = offered(agent, mode, settings, &mcp, missions)
                    .iter()
                    .map(|t| json!(t.function()))
                    .collect();
                out.insert(
                    format!("{settings_name}/{}/{mode:?}", agent.id),
                    Value::Array(tools),
                );
            }
        }
    }
    Value::Object(out)
}

#[test]
fn the_tools_an_upstream_receives_match_the_fixture() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/agents/tools/offered_snapshot.json");
    let now = snapshot();
    let text = serde_json::to_string_pretty(&now).unwrap() + "\n";
    if std::env::var_os("ONYX_UPDATE_TOOL_SNAPSHOT").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let fixture = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        text,
        fixture,
        "the offered tools changed; see the diff against {}",
        path.display()
    );
}
