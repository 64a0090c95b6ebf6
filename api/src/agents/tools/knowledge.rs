//! `menos_search`: search menos, the content vault (notes, transcripts,
//! documents the owner keeps there), through Onyx's signed client. Offered
//! only with `knowledge.menos`; read-only, so `safe` mode has it too.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, number, text};
use crate::knowledge::menos::MAX_LIMIT;
use crate::knowledge::{KnowledgeError, SearchResults};

pub const MENOS_SEARCH: Tool = Tool {
    name: "menos_search",
    description: "Search the owner's menos content vault (saved videos' transcripts, notes, documents). Returns titles, ids, scores and snippets.",
    parameters: || {
        json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "what to look for, in words"},
            "limit": {"type": "integer", "description": format!("results, 1 to {MAX_LIMIT} (default 5)")}
        }, "required": ["query"]})
    },
    kind: ToolKind::Read,
    needs: Needs::Menos,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(call(ctx, args)),
};

pub const TOOLS: &[Tool] = &[MENOS_SEARCH];

async fn call(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let menos = ctx
        .menos
        .as_ref()
        .ok_or("menos is not configured (knowledge.menos)")?;
    let query = text(args, "query")?;
    let limit = number(args, "limit", 5, u64::from(MAX_LIMIT)).max(1) as u32;
    match menos.search(query, limit).await {
        Ok(results) => Ok(render(&results)),
        Err(KnowledgeError::Invalid(why)) => Err(fail!("{why}")),
        Err(err) => {
            tracing::warn!(agent = %ctx.agent.id, error = %err, "menos_search failed");
            Err(fail!("{err}"))
        }
    }
}

/// The hits as numbered lines the model can cite by id.
fn render(results: &SearchResults) -> String {
    if results.results.is_empty() {
        return format!("menos has nothing for {:?}.", results.query);
    }
    let mut out = String::new();
    for (i, hit) in results.results.iter().enumerate() {
        let title = hit.title.as_deref().unwrap_or("(untitled)");
        let kind = hit.content_type.as_deref().unwrap_or("content");
        let _ = write!(out, "{}. {title} [{kind}, id {}", i + 1, hit.id);
        if let Some(score) = hit.score {
            let _ = write!(out, ", score {score:.2}");
        }
        out.push_str("]\n");
        if let Some(snippet) = hit.snippet.as_deref().filter(|s| !s.trim().is_empty()) {
            let _ = writeln!(out, "   {}", crate::text::one_line(snippet, 300));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::SearchHit;

    #[test]
    fn hits_render_numbered_with_ids_and_snippets() {
        let results = SearchResults {
            query: "docker".into(),
            results: vec![SearchHit {
                id: "c1".into(),
                content_type: Some("youtube".into()),
                title: Some("Docker networking".into()),
                score: Some(0.912),
                snippet: Some("bridge\nnetworks".into()),
            }],
            total: Some(1),
        };
        assert_eq!(
            render(&results),
            "1. Docker networking [youtube, id c1, score 0.91]\n   bridge networks\n"
        );
        let none = SearchResults {
            query: "x".into(),
            results: Vec::new(),
            total: Some(0),
        };
        assert_eq!(render(&none), "menos has nothing for \"x\".");
    }
}
