//! What a built-in tool declares, once, in its group's file: name,
//! description, JSON schema, kind (which decides what `safe` and `ask`
//! modes allow), what it needs configured, and the call.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::{ToolContext, ToolError, ToolKind};
use crate::config::ToolsConfig;

/// What a tool call gives back, later.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<String, ToolError>> + Send + 'a>>;

/// Runs one call of a tool with its arguments.
pub type Call = for<'a> fn(&'a ToolContext, &'a Value) -> ToolFuture<'a>;

/// Whether a call waits for a person in `ask` mode although its kind alone
/// would not say so (`send_message` to a chat the owner did not set up).
pub type AsksFirst =
    for<'a> fn(&'a ToolContext, &'a Value) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// One built-in tool.
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    /// Its JSON schema (OpenAI's `parameters`, MCP's `inputSchema`).
    pub parameters: fn() -> Value,
    /// Decides what `safe` and `ask` modes allow.
    pub kind: ToolKind,
    /// What must be configured for the tool to be offered.
    pub needs: Needs,
    /// Served by Onyx's own `/mcp` endpoint as well.
    pub over_mcp: bool,
    pub asks_first: Option<AsksFirst>,
    pub call: Call,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// What a tool needs before it is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// `tools.webSearch.searxngUrl`.
    Searxng,
    /// `knowledge.menos`.
    Menos,
    /// The orchestration loop.
    Missions,
}

impl Needs {
    pub fn met(self, settings: &ToolsConfig, missions: bool) -> bool {
        match self {
            Self::Nothing => true,
            Self::Searxng => settings.searxng_url.is_some(),
            Self::Menos => settings.menos_search,
            Self::Missions => missions,
        }
    }
}
