//! A call on its way to a provider: the client's body (what an
//! OpenAI-compatible upstream receives), its typed view (what translating
//! providers read) and who it is made for; and what translators share when
//! they build another protocol's request from it.

use serde_json::{Map, Value};

use super::ChatBody;
use super::meter::Attribution;
use crate::chat::{ChatRequest, EmbeddingsRequest};

/// A chat request: the body (source of truth), its validated typed view,
/// and who it is made for (for usage records, budgets and limits).
#[derive(Debug)]
pub struct ChatCall {
    pub body: ChatBody,
    pub request: ChatRequest,
    pub who: Attribution,
    /// For a subscription model's CLI in an agent run: the run token its
    /// MCP client calls Onyx's `/mcp` with (the run's tools).
    pub tool_token: Option<secrecy::SecretString>,
}

/// An embeddings request: the body as sent, and its typed view.
#[derive(Debug)]
pub struct EmbeddingsCall {
    pub body: Map<String, Value>,
    pub request: EmbeddingsRequest,
}

/// Adds a turn of `role`, merged into the last one when that has the same
/// role (upstreams that want strictly alternating roles).
pub fn push_turn<R: PartialEq, B>(turns: &mut Vec<(R, Vec<B>)>, role: R, blocks: Vec<B>) {
    match turns.last_mut() {
        Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
        _ => turns.push((role, blocks)),
    }
}
