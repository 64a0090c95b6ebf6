//! The names MCP tools get in an agent's tool list: `mcp__{server}__{tool}`,
//! within what models accept for a function name (`[a-zA-Z0-9_-]`, 64
//! characters at most).

use sha2::{Digest, Sha256};

use crate::config::MCP_PREFIX;

const MAX_NAME: usize = 64;

/// The name the model calls `tool` of `server` by. Characters models refuse
/// become `_`; a name too long keeps its start and gets a short hash of the
/// original, so two long names stay apart.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("{MCP_PREFIX}{server}__{clean}");
    if name.len() <= MAX_NAME && clean == tool {
        return name;
    }
    let digest = Sha256::digest(tool.as_bytes());
    let suffix: String = digest.iter().take(3).map(|b| format!("{b:02x}")).collect();
    let keep = name.len().min(MAX_NAME - suffix.len() - 1);
    format!("{}_{suffix}", &name[..keep])
}

/// The server part of an exposed name.
pub fn server_of(exposed: &str) -> Option<&str> {
    exposed.strip_prefix(MCP_PREFIX)?.split("__").next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_through_and_others_are_made_valid_and_distinct() {
        assert_eq!(
            exposed_name("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
        assert_eq!(exposed_name("everything", "get-sum"), "mcp__everything__get-sum");
        let dotted = exposed_name("gh", "issues.list");
        assert!(dotted.starts_with("mcp__gh__issues_list_"), "{dotted}");
        assert_ne!(dotted, exposed_name("gh", "issues/list"));
        let long = "a".repeat(100);
        let exposed = exposed_name("srv", &long);
        assert!(exposed.len() <= 64, "{exposed}");
        assert_ne!(exposed, exposed_name("srv", &format!("{long}b")));
        assert!(
            exposed
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
        assert_eq!(server_of("mcp__time__get_current_time"), Some("time"));
        assert_eq!(server_of("exec"), None);
    }
}
