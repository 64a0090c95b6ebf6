//! `fs_read`, `fs_write`, `fs_edit`, `fs_list`: files in the agent's local
//! work dir, and nowhere else. Paths must be relative, without `..`, and no
//! part of them may be a symlink: every one is opened through a handle on the
//! work dir ([`sandbox::Beneath`], openat2), so a link swapped in by a
//! background process is refused at the open, not only at a check before it.
//! `fs_read` of `skills/{name}/{file}` missing from the work dir reads that
//! skill's file.

use std::path::{Component, Path};

use serde_json::{Value, json};

use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, text};
use crate::sandbox::{self, Beneath, Kind};

const MAX_READ: usize = 256 * 1024;

fn path() -> Value {
    json!({"type": "string", "description": "Path relative to your work directory"})
}

pub const READ: Tool = Tool {
    name: "fs_read",
    description: "Read a text file from your work directory.",
    parameters: || json!({"type": "object", "properties": {"path": path()}, "required": ["path"]}),
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(read(ctx, args)),
};

pub const LIST: Tool = Tool {
    name: "fs_list",
    description: "List a folder of your work directory (default: its top level).",
    parameters: || json!({"type": "object", "properties": {"path": path()}}),
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(list(ctx, args)),
};

pub const WRITE: Tool = Tool {
    name: "fs_write",
    description: "Create or overwrite a text file in your work directory (folders are created).",
    parameters: || json!({"type": "object", "properties": {"path": path(), "content": {"type": "string"}}, "required": ["path", "content"]}),
    kind: ToolKind::Dangerous,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(write(ctx, args)),
};

pub const EDIT: Tool = Tool {
    name: "fs_edit",
    description: "Replace one exact occurrence of old_text with new_text in a file of your work directory.",
    parameters: || json!({"type": "object", "properties": {"path": path(), "old_text": {"type": "string"}, "new_text": {"type": "string"}}, "required": ["path", "old_text", "new_text"]}),
    kind: ToolKind::Dangerous,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(edit(ctx, args)),
};

pub const TOOLS: &[Tool] = &[READ, LIST, WRITE, EDIT];

/// Checks `relative` names something inside the work dir (no absolute path,
/// no `..`), with the message the model sees; links are refused when the
/// path is opened (see [`sandbox::Beneath`]).
pub fn check(relative: &str) -> Result<(), ToolError> {
    if relative.is_empty() || relative.contains('\0') {
        return Err("the path is empty".into());
    }
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                return Err(fail!("{relative:?} contains \"..\", which is not allowed"));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(fail!(
                    "{relative:?} is absolute; use a path relative to your work directory"
                ));
            }
        }
    }
    Ok(())
}

/// The error the model sees for a failed file operation on `relative`.
fn io_failure(relative: &str, err: &std::io::Error) -> ToolError {
    if sandbox::is_link_refusal(err) {
        fail!("{relative:?} goes through a symbolic link, which is not allowed")
    } else {
        fail!("{relative}: {err}")
    }
}

/// Runs `op` on the work dir's handle off the async threads.
pub(super) async fn in_work_dir<T: Send + 'static>(
    root: &Path,
    relative: &str,
    op: impl FnOnce(&Beneath, &str) -> std::io::Result<T> + Send + 'static,
) -> Result<T, ToolError> {
    let (root, relative) = (root.to_path_buf(), relative.to_string());
    tokio::task::spawn_blocking(move || {
        let dir = Beneath::create(&root).map_err(|e| fail!("cannot open the work directory: {e}"))?;
        op(&dir, &relative).map_err(|err| io_failure(&relative, &err))
    })
    .await
    .map_err(|e| fail!("the file operation failed: {e}"))?
}

async fn list(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let relative = args["path"].as_str().filter(|p| !p.is_empty()).unwrap_or(".");
    check(relative)?;
    let entries = in_work_dir(&ctx.agent.work_dir, relative, |dir, path| dir.list(path)).await?;
    let mut names: Vec<String> = entries
        .into_iter()
        .map(|e| format!("{}{}", e.name, if e.kind == Kind::Dir { "/" } else { "" }))
        .collect();
    names.sort();
    Ok(if names.is_empty() {
        "(empty)".into()
    } else {
        names.join("\n")
    })
}

async fn read(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let root = ctx.agent.work_dir.as_path();
    let relative = text(args, "path")?;
    check(relative)?;
    let kind = in_work_dir(root, relative, |dir, path| dir.kind(path)).await?;
    if kind.is_none()
        && let Some(content) = skill_file(ctx, relative).await?
    {
        return Ok(content);
    }
    let (bytes, size) =
        in_work_dir(root, relative, |dir, path| dir.read_prefix(path, MAX_READ as u64)).await?;
    let mut content = String::from_utf8_lossy(&bytes).into_owned();
    if size > MAX_READ as u64 {
        content.push_str(&format!("\n[… truncated: the file has {size} bytes]"));
    }
    Ok(content)
}

async fn write(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let relative = text(args, "path")?;
    check(relative)?;
    let content = text(args, "content")?.to_string();
    let len = content.len();
    in_work_dir(&ctx.agent.work_dir, relative, move |dir, path| {
        dir.write(path, content.as_bytes())
    })
    .await?;
    Ok(format!("wrote {len} bytes to {relative}"))
}

async fn edit(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let root = ctx.agent.work_dir.as_path();
    let relative = text(args, "path")?;
    check(relative)?;
    let (old, new) = (text(args, "old_text")?, text(args, "new_text")?);
    let bytes = in_work_dir(root, relative, |dir, path| dir.read(path)).await?;
    let current = String::from_utf8(bytes).map_err(|_| fail!("{relative} is not UTF-8 text"))?;
    match current.matches(old).count() {
        0 => Err(fail!("old_text was not found in {relative}")),
        1 => {
            let edited = current.replacen(old, new, 1);
            in_work_dir(root, relative, move |dir, path| {
                dir.write(path, edited.as_bytes())
            })
            .await?;
            Ok(format!("edited {relative}"))
        }
        n => Err(fail!(
            "old_text occurs {n} times in {relative}; include more context"
        )),
    }
}

/// `skills/{name}/{file}` not in the work directory: the file of one of the
/// agent's skills (the `skill` tool lists them), so a skill's instructions
/// can point at its files by that path.
async fn skill_file(ctx: &ToolContext, relative: &str) -> Result<Option<String>, ToolError> {
    let Some((name, file)) = relative
        .strip_prefix("skills/")
        .and_then(|rest| rest.split_once('/'))
    else {
        return Ok(None);
    };
    match ctx.skills.resolve(&ctx.agent.id, name).await {
        Ok(skill) => ctx
            .skills
            .read_file(&skill.summary.scope, name, file)
            .await
            .map(Some)
            .map_err(|err| fail!("{err}")),
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside_the_work_dir() {
        for good in ["notes/a.md", "./a.md", "a//b"] {
            assert!(check(good).is_ok(), "{good}");
        }
        for bad in ["../x", "a/../../x", "/etc/passwd", "", "a\0b"] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }
}
