//! `memory_search`, `memory_get`, `memory_write`: the agent's memory files.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::{ToolContext, ToolError, ToolKind, ToolSpec, fail, number, text};
use crate::memory::{Mode, NoteTarget};

pub fn specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: Cow::Borrowed("memory_search"),
            description: Cow::Borrowed(
                "Search your memory files (MEMORY.md, USER.md, daily logs, shared documents). Returns matching passages with their file and line numbers.",
            ),
            parameters: json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "What to look for, in words"},
                "limit": {"type": "integer", "description": "Most results to return (default 5)"}
            }, "required": ["query"]}),
            kind: ToolKind::Read,
        },
        ToolSpec {
            name: Cow::Borrowed("memory_get"),
            description: Cow::Borrowed(
                "Read one of your memory or workspace files, whole or some lines (e.g. after memory_search).",
            ),
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "File path, e.g. MEMORY.md or memory/2026-01-31.md"},
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"}
            }, "required": ["path"]}),
            kind: ToolKind::Read,
        },
        ToolSpec {
            name: Cow::Borrowed("memory_write"),
            description: Cow::Borrowed(
                "Write to your memory. Without a path, appends a note to today's daily log. With path \"MEMORY.md\" and mode \"append\", adds a line to long-term memory. With a path and mode \"replace\", replaces that file (IDENTITY.md, USER.md, SOUL.md, …). With delete: true, deletes the file (e.g. BOOTSTRAP.md when setup is done).",
            ),
            parameters: json!({"type": "object", "properties": {
                "content": {"type": "string"},
                "path": {"type": "string"},
                "mode": {"type": "string", "enum": ["append", "replace"]},
                "delete": {"type": "boolean"}
            }}),
            kind: ToolKind::Write,
        },
    ]
}

pub async fn call(ctx: &ToolContext, name: &str, args: &Value) -> Result<String, ToolError> {
    let agent = ctx.agent.id.as_str();
    match name {
        "memory_search" => {
            let query = text(args, "query")?;
            let limit = number(args, "limit", 5, 20).max(1) as usize;
            let results = ctx.memory.search(agent, query, limit, Mode::Hybrid).await?;
            if results.data.is_empty() {
                return Ok(format!("no memory matches {query:?}"));
            }
            let lines: Vec<String> = results
                .data
                .iter()
                .map(|h| {
                    let owner = if h.agent == agent {
                        String::new()
                    } else {
                        format!("{}/", h.agent)
                    };
                    format!(
                        "{owner}{}:{}-{} (score {:.2}) {}",
                        h.path, h.start_line, h.end_line, h.score, h.snippet
                    )
                })
                .collect();
            Ok(lines.join("\n"))
        }
        "memory_get" => {
            let path = text(args, "path")?;
            let (owner, path) = match path.strip_prefix("_shared/") {
                Some(rest) => ("_shared", rest),
                None => (agent, path),
            };
            let file = ctx.memory.read_file(owner, path).await?;
            let lines: Vec<&str> = file.content.lines().collect();
            let start = number(args, "start_line", 1, lines.len().max(1) as u64).max(1) as usize;
            let end = number(args, "end_line", lines.len() as u64, lines.len() as u64) as usize;
            Ok(lines
                .get(start - 1..end.max(start - 1))
                .map(|l| l.join("\n"))
                .unwrap_or_default())
        }
        _ => write(ctx, args).await,
    }
}

async fn write(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let agent = ctx.agent.id.as_str();
    let path = args["path"].as_str();
    if args["delete"].as_bool() == Some(true) {
        let path = path.ok_or("delete needs a path")?;
        ctx.memory.delete_file(agent, path).await?;
        return Ok(format!("deleted {path}"));
    }
    let content = text(args, "content")?;
    let mode = args["mode"].as_str().unwrap_or("append");
    let outcome = match (path, mode) {
        (None, _) => {
            ctx.memory
                .append_note(agent, NoteTarget::Daily(ctx.agent.timezone), content)
                .await
        }
        (Some("MEMORY.md"), "append") => ctx.memory.append_note(agent, NoteTarget::Curated, content).await,
        (Some(path), "replace") => {
            ctx.memory
                .write_file(agent, path, content.to_string(), None)
                .await
        }
        (Some(path), "append") => {
            let current = ctx
                .memory
                .read_file(agent, path)
                .await
                .map(|f| f.content)
                .unwrap_or_default();
            let separator = if current.is_empty() || current.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            ctx.memory
                .write_file(agent, path, format!("{current}{separator}{content}\n"), None)
                .await
        }
        (Some(_), other) => return Err(fail!("mode {other:?} is not \"append\" or \"replace\"")),
    }?;
    Ok(format!("wrote {} ({} bytes)", outcome.path, outcome.size))
}
