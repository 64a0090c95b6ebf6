//! The shape of `tools.allow` / `tools.deny` entries (globally and per
//! agent): names are trimmed here; which built-in tools and groups exist is
//! the agents' tool registry's to say (`agents::tools::registry::check_config`
//! refuses unknown names at startup, with their config path). MCP tools are
//! named `mcp__{server}__{tool}`; `group:mcp` names them all.

/// Every MCP server's tools (`mcp__{server}__{tool}`).
pub const MCP_GROUP: &str = "group:mcp";
pub const MCP_PREFIX: &str = "mcp__";

/// The entries without surrounding white space.
pub fn trimmed(names: Vec<String>) -> Vec<String> {
    names.into_iter().map(|name| name.trim().to_string()).collect()
}
