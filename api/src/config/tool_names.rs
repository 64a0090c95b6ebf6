//! The names `tools.allow` and `tools.deny` accept (globally and per agent):
//! every built-in tool, and groups of them (`group:fs`, `group:web`, …). An
//! unknown name stops startup: a typo in a deny list must not leave the tool on.

use super::ConfigError;

/// Every built-in tool (`web_search` is offered only with a SearXNG URL,
/// `menos_search` only with `knowledge.menos`).
pub const TOOLS: &[&str] = &[
    "memory_search",
    "memory_get",
    "memory_write",
    "sessions_list",
    "sessions_history",
    "web_fetch",
    "web_search",
    "menos_search",
    "fs_read",
    "fs_write",
    "fs_edit",
    "fs_list",
    "exec",
    "send_to_agent",
    "send_message",
    "schedule_task",
    "list_tasks",
    "pause_task",
    "resume_task",
    "cancel_task",
    "skill",
    "propose_mission",
    "list_missions",
    "report_step",
    "list_agents",
];

pub const GROUPS: &[(&str, &[&str])] = &[
    ("group:fs", &["fs_read", "fs_write", "fs_edit", "fs_list"]),
    ("group:web", &["web_fetch", "web_search"]),
    ("group:knowledge", &["menos_search"]),
    ("group:memory", &["memory_search", "memory_get", "memory_write"]),
    (
        "group:tasks",
        &[
            "schedule_task",
            "list_tasks",
            "pause_task",
            "resume_task",
            "cancel_task",
        ],
    ),
    ("group:agents", &["send_to_agent"]),
    ("group:exec", &["exec"]),
    ("group:sessions", &["sessions_list", "sessions_history"]),
    ("group:messaging", &["send_message"]),
    (
        "group:missions",
        &["propose_mission", "list_missions", "report_step", "list_agents"],
    ),
];

/// Every MCP server's tools (`mcp__{server}__{tool}`).
pub const MCP_GROUP: &str = "group:mcp";
pub const MCP_PREFIX: &str = "mcp__";

/// Whether an allow/deny entry names `tool`: the tool itself, a group, or
/// for MCP tools `group:mcp` and `mcp__{server}` (all of one server's tools).
pub fn covers(entry: &str, tool: &str) -> bool {
    entry == tool
        || GROUPS
            .iter()
            .any(|(group, tools)| *group == entry && tools.contains(&tool))
        || (tool.starts_with(MCP_PREFIX)
            && (entry == MCP_GROUP
                || (entry.starts_with(MCP_PREFIX)
                    && tool
                        .strip_prefix(entry)
                        .is_some_and(|rest| rest.starts_with("__")))))
}

/// Trims the names and refuses any that is neither a tool nor a group.
pub fn check(names: Vec<String>, path: &str) -> Result<Vec<String>, ConfigError> {
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let name = name.trim().to_string();
            let mcp = name == MCP_GROUP || name.strip_prefix(MCP_PREFIX).is_some_and(|rest| !rest.is_empty());
            if mcp || TOOLS.contains(&name.as_str()) || GROUPS.iter().any(|(g, _)| *g == name) {
                Ok(name)
            } else {
                let groups: Vec<&str> = GROUPS.iter().map(|(g, _)| *g).collect();
                Err(ConfigError::invalid(
                    format!("{path}[{i}]"),
                    format!(
                        "there is no tool or group named {name:?} (tools: {}; groups: {}, group:mcp; MCP tools: mcp__{{server}} or mcp__{{server}}__{{tool}})",
                        TOOLS.join(", "),
                        groups.join(", ")
                    ),
                ))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cover_their_tools_and_nothing_else() {
        assert!(covers("group:fs", "fs_write"));
        assert!(covers("exec", "exec"));
        assert!(!covers("group:fs", "exec"));
        assert!(covers("group:mcp", "mcp__time__get_current_time"));
        assert!(covers("mcp__time", "mcp__time__get_current_time"));
        assert!(covers(
            "mcp__time__get_current_time",
            "mcp__time__get_current_time"
        ));
        assert!(!covers("mcp__time", "mcp__timer__start"));
        assert!(!covers("mcp__ti", "mcp__time__get_current_time"));
        assert!(!covers("group:mcp", "exec"));
        for (_, tools) in GROUPS {
            assert!(tools.iter().all(|t| TOOLS.contains(t)));
        }
    }

    #[test]
    fn unknown_names_are_refused_with_their_path() {
        let err = check(vec!["exec".into(), "group:nope".into()], "tools.deny")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("tools.deny[1]:") && err.contains("\"group:nope\""),
            "{err}"
        );
        assert_eq!(
            check(vec![" group:web ".into()], "tools.allow").ok(),
            Some(vec!["group:web".to_string()])
        );
    }
}
