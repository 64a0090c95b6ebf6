//! An agent's workspace files in the object store (`onyx-memory/{agent}/…`),
//! seeded from the templates in `config/workspace/` (compiled in) the first
//! time an agent is used. Seeding fills in only missing files, adds
//! BOOTSTRAP.md only to an agent with no persona yet, and leaves a marker
//! (`{agent}/.onyx/seeded`, hidden from listings) so it happens once: a
//! deleted BOOTSTRAP.md stays deleted.

use bytes::Bytes;

use crate::memory::paths;
use crate::storage::{Bucket, ObjectKey, ObjectStore, PutCondition, StoreError};

/// The workspace files, in the order the system prompt reads them.
pub const TEMPLATES: &[(&str, &str)] = &[
    (
        "IDENTITY.md",
        include_str!("../../../config/workspace/IDENTITY.md"),
    ),
    ("SOUL.md", include_str!("../../../config/workspace/SOUL.md")),
    ("USER.md", include_str!("../../../config/workspace/USER.md")),
    ("AGENTS.md", include_str!("../../../config/workspace/AGENTS.md")),
    ("TOOLS.md", include_str!("../../../config/workspace/TOOLS.md")),
    (
        "HEARTBEAT.md",
        include_str!("../../../config/workspace/HEARTBEAT.md"),
    ),
    (
        "BOOTSTRAP.md",
        include_str!("../../../config/workspace/BOOTSTRAP.md"),
    ),
    ("MEMORY.md", include_str!("../../../config/workspace/MEMORY.md")),
];

/// Whether `name` is one of the workspace files.
pub fn is_workspace_file(name: &str) -> bool {
    TEMPLATES.iter().any(|(file, _)| *file == name)
}

const MARKER: &str = ".onyx/seeded";
const PERSONA: [&str; 4] = ["IDENTITY.md", "SOUL.md", "AGENTS.md", "TOOLS.md"];

/// Seeds an agent's workspace once; returns whether it did now.
pub async fn seed_if_new(objects: &dyn ObjectStore, agent: &str) -> Result<bool, StoreError> {
    let marker = ObjectKey::new(format!("{agent}/{MARKER}"))?;
    if objects.get(Bucket::Memory, &marker).await?.is_some() {
        return Ok(false);
    }
    let existing: Vec<String> = objects
        .list(Bucket::Memory, &format!("{agent}/"))
        .await?
        .into_iter()
        .map(|o| o.key)
        .collect();
    let has_persona = PERSONA
        .iter()
        .any(|name| existing.iter().any(|k| k == &format!("{agent}/{name}")));
    for (name, template) in TEMPLATES {
        if *name == "BOOTSTRAP.md" && has_persona {
            continue;
        }
        let Ok(key) = paths::object_key(agent, name) else {
            continue;
        };
        match objects
            .put(
                Bucket::Memory,
                &key,
                Bytes::from_static(template.as_bytes()),
                PutCondition::IfAbsent,
            )
            .await
        {
            // Already there (the user's own, or another replica seeded it first).
            Ok(_) | Err(StoreError::PreconditionFailed) => {}
            Err(err) => return Err(err),
        }
    }
    match objects
        .put(
            Bucket::Memory,
            &marker,
            Bytes::from_static(b"seeded\n"),
            PutCondition::IfAbsent,
        )
        .await
    {
        Ok(_) | Err(StoreError::PreconditionFailed) => {}
        Err(err) => return Err(err),
    }
    tracing::info!(agent, "seeded the agent's workspace from the templates");
    Ok(true)
}
