//! `fs_read`, `fs_write`, `fs_edit`, `fs_list`: files in the agent's local
//! work dir, and nowhere else. Paths must be relative, without `..`, and no
//! part of them may be a symlink (so a link cannot lead outside). `fs_read` of
//! `skills/{name}/{file}` missing from the work dir reads that skill's file.

use std::borrow::Cow;

use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use super::{ToolContext, ToolError, ToolKind, ToolSpec, fail, text};

const MAX_READ: usize = 256 * 1024;

pub fn specs() -> Vec<ToolSpec> {
    let path = json!({"type": "string", "description": "Path relative to your work directory"});
    vec![
        ToolSpec {
            name: Cow::Borrowed("fs_read"),
            description: Cow::Borrowed("Read a text file from your work directory."),
            parameters: json!({"type": "object", "properties": {"path": path}, "required": ["path"]}),
            kind: ToolKind::Read,
        },
        ToolSpec {
            name: Cow::Borrowed("fs_list"),
            description: Cow::Borrowed("List a folder of your work directory (default: its top level)."),
            parameters: json!({"type": "object", "properties": {"path": path}}),
            kind: ToolKind::Read,
        },
        ToolSpec {
            name: Cow::Borrowed("fs_write"),
            description: Cow::Borrowed(
                "Create or overwrite a text file in your work directory (folders are created).",
            ),
            parameters: json!({"type": "object", "properties": {"path": path, "content": {"type": "string"}}, "required": ["path", "content"]}),
            kind: ToolKind::Dangerous,
        },
        ToolSpec {
            name: Cow::Borrowed("fs_edit"),
            description: Cow::Borrowed(
                "Replace one exact occurrence of old_text with new_text in a file of your work directory.",
            ),
            parameters: json!({"type": "object", "properties": {"path": path, "old_text": {"type": "string"}, "new_text": {"type": "string"}}, "required": ["path", "old_text", "new_text"]}),
            kind: ToolKind::Dangerous,
        },
    ]
}

/// Resolves `relative` inside `root`, refusing anything that could escape it.
pub fn confine(root: &Path, relative: &str) -> Result<PathBuf, ToolError> {
    let candidate = Path::new(relative);
    if relative.is_empty() || relative.contains('\0') {
        return Err("the path is empty".into());
    }
    let mut out = root.to_path_buf();
    for component in candidate.components() {
        match component {
            Component::Normal(part) => {
                out.push(part);
                // Refuse symlinks anywhere along the way, existing ones included.
                if let Ok(meta) = std::fs::symlink_metadata(&out)
                    && meta.file_type().is_symlink()
                {
                    return Err(fail!(
                        "{relative:?} goes through a symbolic link, which is not allowed"
                    ));
                }
            }
            Component::CurDir => {}
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
    Ok(out)
}

pub async fn call(ctx: &ToolContext, name: &str, args: &Value) -> Result<String, ToolError> {
    let root = &ctx.agent.work_dir;
    tokio::fs::create_dir_all(root)
        .await
        .map_err(|e| format!("cannot create the work directory: {e}"))?;
    match name {
        "fs_list" => {
            let dir = match args["path"].as_str().filter(|p| !p.is_empty() && *p != ".") {
                Some(path) => confine(root, path)?,
                None => root.clone(),
            };
            let mut entries = tokio::fs::read_dir(&dir).await.map_err(|e| e.to_string())?;
            let mut names = Vec::new();
            while let Ok(Some(entry)) = entries.next_entry().await {
                let kind = match entry.file_type().await {
                    Ok(t) if t.is_dir() => "/",
                    _ => "",
                };
                names.push(format!("{}{kind}", entry.file_name().to_string_lossy()));
            }
            names.sort();
            Ok(if names.is_empty() {
                "(empty)".into()
            } else {
                names.join("\n")
            })
        }
        "fs_read" => {
            let relative = text(args, "path")?;
            let path = confine(root, relative)?;
            if !path.exists()
                && let Some(content) = skill_file(ctx, relative).await?
            {
                return Ok(content);
            }
            let bytes = tokio::fs::read(&path).await.map_err(|e| e.to_string())?;
            let mut content = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_READ)]).into_owned();
            if bytes.len() > MAX_READ {
                content.push_str(&format!("\n[… truncated: the file has {} bytes]", bytes.len()));
            }
            Ok(content)
        }
        "fs_write" => {
            let relative = text(args, "path")?;
            let path = confine(root, relative)?;
            let content = text(args, "content")?;
            if let Some(parent) = path.parent() {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            // Checked again after the folders exist: one could have been a link made meanwhile.
            let path = confine(root, relative)?;
            tokio::fs::write(&path, content)
                .await
                .map_err(|e| e.to_string())?;
            Ok(format!("wrote {} bytes to {relative}", content.len()))
        }
        _ => {
            let relative = text(args, "path")?;
            let path = confine(root, relative)?;
            let (old, new) = (text(args, "old_text")?, text(args, "new_text")?);
            let current = tokio::fs::read_to_string(&path)
                .await
                .map_err(|e| e.to_string())?;
            match current.matches(old).count() {
                0 => Err(fail!("old_text was not found in {relative}")),
                1 => {
                    tokio::fs::write(&path, current.replacen(old, new, 1))
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(format!("edited {relative}"))
                }
                n => Err(fail!(
                    "old_text occurs {n} times in {relative}; include more context"
                )),
            }
        }
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
    fn paths_stay_inside_the_work_dir() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(confine(root, "notes/a.md").unwrap(), root.join("notes/a.md"));
        assert_eq!(confine(root, "./a.md").unwrap(), root.join("a.md"));
        for bad in ["../x", "a/../../x", "/etc/passwd", ""] {
            assert!(confine(root, bad).is_err(), "{bad}");
        }
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        assert!(
            confine(root, "link/passwd")
                .unwrap_err()
                .to_string()
                .contains("symbolic link")
        );
        assert!(confine(root, "link").is_err());
    }
}
