//! `memory_search`, `memory_get`, `memory_write`: the agent's memory files,
//! the shared ones (read-only) and shared projects (as their `ACCESS.md` says).

use serde_json::{Value, json};

use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, number, text};
use crate::memory::access::{self, Op};
use crate::memory::paths::SHARED;
use crate::memory::{MemoryError, Mode, NoteTarget, ProjectError, WriteOutcome, projects};

pub const SEARCH: Tool = Tool {
    name: "memory_search",
    description: "Search your memory files (MEMORY.md, USER.md, daily logs, shared documents). Returns matching passages with their file and line numbers.",
    parameters: || {
        json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for, in words"},
            "limit": {"type": "integer", "description": "Most results to return (default 5)"}
        }, "required": ["query"]})
    },
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: true,
    asks_first: None,
    call: |ctx, args| Box::pin(search(ctx, args)),
};

pub const GET: Tool = Tool {
    name: "memory_get",
    description: "Read one of your memory or workspace files, or a shared one (_shared/…, e.g. _shared/projects/{name}/CONTEXT.md, a shared project's summary), whole or some lines (e.g. after memory_search).",
    parameters: || {
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "File path, e.g. MEMORY.md or memory/2026-01-31.md"},
            "start_line": {"type": "integer"},
            "end_line": {"type": "integer"}
        }, "required": ["path"]})
    },
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: true,
    asks_first: None,
    call: |ctx, args| Box::pin(get(ctx, args)),
};

pub const WRITE: Tool = Tool {
    name: "memory_write",
    description: "Write to your memory. Without a path, appends a note to today's daily log. With path \"MEMORY.md\" and mode \"append\", adds a line to long-term memory. With a path and mode \"replace\", replaces that file (IDENTITY.md, USER.md, SOUL.md, …). With delete: true, deletes the file (e.g. BOOTSTRAP.md when setup is done). Shared projects live in _shared/projects/{name}/ (write there as the project's ACCESS.md allows); keep the project's CONTEXT.md current when you learn something the others need.",
    parameters: || {
        json!({"type": "object", "properties": {
            "content": {"type": "string"},
            "path": {"type": "string"},
            "mode": {"type": "string", "enum": ["append", "replace"]},
            "delete": {"type": "boolean"}
        }})
    },
    kind: ToolKind::Write,
    needs: Needs::Nothing,
    over_mcp: true,
    asks_first: None,
    call: |ctx, args| Box::pin(write(ctx, args)),
};

pub const TOOLS: &[Tool] = &[SEARCH, GET, WRITE];

async fn search(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let agent = ctx.agent.id.as_str();
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

async fn get(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let agent = ctx.agent.id.as_str();
    let (owner, path) = owner_of(agent, text(args, "path")?);
    if owner == SHARED {
        ctx.memory.check_project(agent, path, Op::Read).await?;
    }
    let file = ctx.memory.read_file(owner, path).await?;
    let lines: Vec<&str> = file.content.lines().collect();
    let start = number(args, "start_line", 1, lines.len().max(1) as u64).max(1) as usize;
    let end = number(args, "end_line", lines.len() as u64, lines.len() as u64) as usize;
    Ok(lines
        .get(start - 1..end.max(start - 1))
        .map(|l| l.join("\n"))
        .unwrap_or_default())
}

/// Whose file a tool's path names: `_shared/…` is the shared folder, the
/// rest the agent's own.
fn owner_of<'a>(agent: &'a str, path: &'a str) -> (&'a str, &'a str) {
    match path.strip_prefix("_shared/") {
        Some(rest) => (SHARED, rest),
        None => (agent, path),
    }
}

/// Agents write `_shared` only inside projects their `ACCESS.md` lets them
/// write, and never `ACCESS.md` itself.
async fn check_shared_write(ctx: &ToolContext, path: &str) -> Result<(), ToolError> {
    let Some(project) = access::project_of(path) else {
        return Err(fail!(
            "_shared/{path} is read-only: agents write shared memory only in project folders (_shared/projects/{{name}}/…)"
        ));
    };
    if access::is_access_file(path) {
        return Err(fail!(
            "_shared/{path} decides who may use project {project:?}; only an admin can change it (the memory API or the UI's memory editor)"
        ));
    }
    Ok(ctx.memory.check_project(&ctx.agent.id, path, Op::Write).await?)
}

async fn write(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let agent = ctx.agent.id.as_str();
    let target = args["path"].as_str().map(|path| owner_of(agent, path));
    if let Some((SHARED, path)) = target {
        check_shared_write(ctx, path).await?;
    }
    let shown = |path: &str| match target {
        Some((SHARED, _)) => format!("_shared/{path}"),
        _ => path.to_string(),
    };
    if args["delete"].as_bool() == Some(true) {
        let (owner, path) = target.ok_or("delete needs a path")?;
        ctx.memory.delete_file(owner, path).await?;
        return Ok(format!("deleted {}", shown(path)));
    }
    let content = text(args, "content")?;
    let mode = args["mode"].as_str().unwrap_or("append");
    let outcome = match (target, mode) {
        (None, _) => {
            ctx.memory
                .append_note(agent, NoteTarget::Daily(ctx.agent.timezone), content)
                .await
        }
        (Some((owner, "MEMORY.md")), "append") if owner == agent => {
            let written = ctx.memory.append_note(agent, NoteTarget::Curated, content).await;
            if written.is_ok()
                && let Some(coordination) = &ctx.coordination
            {
                // A note promoted to long-term memory: the built-in insight trigger's event.
                let payload = json!({"note": crate::text::ellipsize(content, 1000), "path": "MEMORY.md"});
                coordination
                    .observe(agent, "memory.insight_promoted", payload)
                    .await;
            }
            written
        }
        (Some((owner, path)), "replace" | "append") => {
            write_file(ctx, owner, path, content, mode == "append").await
        }
        (Some(_), other) => return Err(fail!("mode {other:?} is not \"append\" or \"replace\"")),
    }?;
    Ok(format!("wrote {} ({} bytes)", shown(&outcome.path), outcome.size))
}

/// Replaces or appends to a file; a project's `CONTEXT.md` gets its "Last
/// updated by" header. An append retries when another writer got in
/// between its read and its write.
async fn write_file(
    ctx: &ToolContext,
    owner: &str,
    path: &str,
    content: &str,
    append: bool,
) -> Result<WriteOutcome, MemoryError> {
    let stamp = owner == SHARED && projects::is_context_file(path);
    let mut attempts = 0;
    loop {
        let (current, etag) = match append {
            false => (String::new(), None),
            true => match ctx.memory.read_file(owner, path).await {
                Ok(file) => (file.content, Some(file.etag)),
                Err(MemoryError::NotFound { .. }) => (String::new(), None),
                Err(err) => return Err(err),
            },
        };
        let current = if stamp {
            projects::without_header(&current)
        } else {
            &current
        };
        let separator = if current.is_empty() || current.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        let body = match append {
            true => format!("{current}{separator}{content}\n"),
            false => content.to_string(),
        };
        let body = match stamp {
            true => projects::stamped_context(&body, &ctx.agent.id, crate::clock::now()),
            false => body,
        };
        attempts += 1;
        match ctx.memory.write_file(owner, path, body, etag).await {
            Err(MemoryError::Conflict { .. }) if attempts < 3 => continue,
            outcome => return outcome,
        }
    }
}

impl From<ProjectError> for ToolError {
    fn from(err: ProjectError) -> Self {
        match err {
            ProjectError::Denied(reason) => Self::Message(reason),
            ProjectError::Memory(err) => Self::Memory(err),
        }
    }
}
