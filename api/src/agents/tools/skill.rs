//! `skill`: loads one of the agent's skills (its own, else a shared one):
//! the instructions of its `SKILL.md` and the list of its other files, or one
//! of those files with `file`. Reading is all it does: a script a skill
//! mentions runs only through `exec`, under the agent's permission mode.

use serde_json::{Value, json};

use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, text};
use crate::skills::{SKILL_FILE, SkillError};

pub const SKILL: Tool = Tool {
    name: "skill",
    description: "Load one of your skills (listed under Skills in your instructions): its instructions and the files it comes with. With file, read one of those files.",
    parameters: || {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The skill's name"},
                "file": {"type": "string", "description": "A file of the skill, relative to its folder (optional)"}
            },
            "required": ["name"],
            "additionalProperties": false
        })
    },
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(call(ctx, args)),
};

pub const TOOLS: &[Tool] = &[SKILL];

fn for_model(err: SkillError) -> ToolError {
    match err {
        SkillError::Store(err) => fail!("the skill could not be read: {err}"),
        other => fail!("{other}"),
    }
}

async fn call(ctx: &ToolContext, arguments: &Value) -> Result<String, ToolError> {
    let name = text(arguments, "name")?;
    let skill = ctx
        .skills
        .resolve(&ctx.agent.id, name)
        .await
        .map_err(|err| match err {
            SkillError::NotFound { .. } => {
                fail!("you have no skill {name:?}; the Skills section of your instructions lists them")
            }
            other => for_model(other),
        })?;
    let summary = &skill.summary;
    if let Some(file) = arguments["file"].as_str().filter(|f| *f != SKILL_FILE) {
        return ctx
            .skills
            .read_file(&summary.scope, &summary.name, file)
            .await
            .map_err(for_model);
    }
    let body = match crate::skills::parse_skill_md(&skill.content) {
        Ok((_, body)) => body.to_string(),
        Err(_) => skill.content.clone(),
    };
    let files = if summary.files.is_empty() {
        String::new()
    } else {
        format!(
            "\n\nFiles of this skill (read one with skill {{\"name\": {:?}, \"file\": …}}): {}",
            summary.name,
            summary.files.join(", ")
        )
    };
    Ok(format!("# Skill {}\n\n{}{files}", summary.name, body.trim_end()))
}
