//! The one list of built-in tools. Each group's file declares its tools once,
//! as [`Tool`] constants (name, description, schema, kind, call; see
//! [`super::tool`]) and this list names them by group; everything
//! else reads this list: the names `tools.allow` / `tools.deny` accept and
//! the groups they expand to ([`check_config`], [`covers`]), what an agent is
//! offered ([`super::offered`]), dispatch ([`super::call`]) and what Onyx's
//! own `/mcp` endpoint serves ([`Tool::over_mcp`]).

use super::tool::Tool;
use super::{
    agents, exec, fs, fs_search, knowledge, memory, messages, missions, process, sessions, skill, tasks, web,
};
use crate::config::{Config, ConfigError};
use crate::config::{MCP_GROUP, MCP_PREFIX};

/// A named set of tools (`group:fs`), as the allow and deny lists name it.
pub struct Group {
    pub name: &'static str,
    /// The tools, as their files declare them.
    pub tools: &'static [&'static [Tool]],
}

impl Group {
    fn tools(&self) -> impl Iterator<Item = &'static Tool> {
        self.tools.iter().flat_map(|part| part.iter())
    }
}

/// Every built-in tool, by group, in the order agents are offered them.
pub const GROUPS: &[Group] = &[
    Group {
        name: "group:memory",
        tools: &[memory::TOOLS],
    },
    Group {
        name: "group:sessions",
        tools: &[sessions::TOOLS],
    },
    Group {
        name: "group:web",
        tools: &[web::TOOLS],
    },
    Group {
        name: "group:knowledge",
        tools: &[knowledge::TOOLS],
    },
    Group {
        name: "group:fs",
        tools: &[fs::TOOLS, fs_search::TOOLS],
    },
    Group {
        name: "group:exec",
        tools: &[exec::TOOLS, process::TOOLS],
    },
    Group {
        name: "group:agents",
        tools: &[agents::TOOLS],
    },
    Group {
        name: "group:tasks",
        tools: &[tasks::TOOLS],
    },
    Group {
        name: "group:messaging",
        tools: &[messages::TOOLS],
    },
    Group {
        name: "group:skills",
        tools: &[skill::TOOLS],
    },
    Group {
        name: "group:missions",
        tools: &[missions::TOOLS],
    },
];

/// Every built-in tool, whatever is configured.
pub fn every() -> impl Iterator<Item = &'static Tool> {
    GROUPS.iter().flat_map(Group::tools)
}

/// The built-in tool named `name`.
pub fn find(name: &str) -> Option<&'static Tool> {
    every().find(|t| t.name == name)
}

/// Whether an allow/deny entry names `tool`: the tool itself, a group, or
/// for MCP tools `group:mcp` and `mcp__{server}` (all of one server's tools).
pub fn covers(entry: &str, tool: &str) -> bool {
    entry == tool
        || GROUPS
            .iter()
            .any(|g| g.name == entry && g.tools().any(|t| t.name == tool))
        || (tool.starts_with(MCP_PREFIX)
            && (entry == MCP_GROUP
                || (entry.starts_with(MCP_PREFIX)
                    && tool
                        .strip_prefix(entry)
                        .is_some_and(|rest| rest.starts_with("__")))))
}

/// Refuses an allow/deny entry that is neither a built-in tool, a group nor
/// an MCP name, with its config path: a typo in a deny list must not leave
/// the tool on.
fn check_names(names: &[String], path: &str) -> Result<(), ConfigError> {
    for (i, name) in names.iter().enumerate() {
        let mcp = name == MCP_GROUP || name.strip_prefix(MCP_PREFIX).is_some_and(|rest| !rest.is_empty());
        if mcp || find(name).is_some() || GROUPS.iter().any(|g| g.name == name) {
            continue;
        }
        let tools: Vec<&str> = every().map(|t| t.name).collect();
        let groups: Vec<&str> = GROUPS.iter().map(|g| g.name).collect();
        return Err(ConfigError::invalid(
            format!("{path}[{i}]"),
            format!(
                "there is no tool or group named {name:?} (tools: {}; groups: {}, {MCP_GROUP}; MCP tools: mcp__{{server}} or mcp__{{server}}__{{tool}})",
                tools.join(", "),
                groups.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Checks every tool name the config's allow and deny lists use (globally
/// and per agent). Startup stops on an unknown one.
pub fn check_config(config: &Config) -> Result<(), ConfigError> {
    check_names(&config.tools.allow, "tools.allow")?;
    check_names(&config.tools.deny, "tools.deny")?;
    for (i, agent) in config.agents.list.iter().enumerate() {
        check_names(&agent.tools_allow, &format!("agents.list[{i}].tools.allow"))?;
        check_names(&agent.tools_deny, &format!("agents.list[{i}].tools.deny"))?;
    }
    Ok(())
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
    }

    #[test]
    fn every_tool_has_one_name_and_one_group() {
        let mut names: Vec<&str> = every().map(|t| t.name).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a tool name is declared twice");
        for group in GROUPS {
            assert!(
                group.name.starts_with("group:") && group.tools().next().is_some(),
                "{}",
                group.name
            );
        }
    }

    #[test]
    fn unknown_names_are_refused_with_their_config_path() {
        let parse = |text: &str| crate::config::parse(Some(text), None, &|_| None).unwrap();
        let config = parse(r#"{ tools: { deny: ["exec", "group:shell"] } }"#);
        let err = check_config(&config).unwrap_err().to_string();
        assert!(
            err.starts_with("tools.deny[1]:")
                && err.contains("there is no tool or group named \"group:shell\""),
            "{err}"
        );
        let config = parse(r#"{ agents: { list: [{ id: "a", tools: { allow: ["fs_reed"] } }] } }"#);
        let err = check_config(&config).unwrap_err().to_string();
        assert!(err.starts_with("agents.list[0].tools.allow[0]:"), "{err}");
        let config = parse(r#"{ tools: { allow: [" group:web ", "fs_read", "group:mcp"] } }"#);
        assert!(check_config(&config).is_ok());
        assert_eq!(config.tools.allow[0], "group:web");
    }
}
