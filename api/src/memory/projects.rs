//! Shared projects in memory (`_shared/projects/{name}/`): reading a
//! project's `ACCESS.md` to decide what an agent may do (the rules are
//! `access`), which projects an agent's searches leave out, and the
//! "Last updated by" header agents' writes keep at the top of `CONTEXT.md`.
//! Only agents are held to the rules: the memory API is the admin's.

use chrono::{DateTime, Utc};

use super::access::{self, Op, PROJECTS};
use super::paths::{self, SHARED};
use super::service::{Memory, MemoryError};
use crate::storage::Bucket;

/// How `CONTEXT.md`'s header line starts.
const HEADER: &str = "Last updated by ";

#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// `ACCESS.md` does not allow it; the text names the project and the file.
    #[error("{0}")]
    Denied(String),
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

impl Memory {
    /// Whether `agent` may `op` the `_shared` file `shared_path` (anything
    /// outside a project folder is not this module's to refuse).
    pub async fn check_project(&self, agent: &str, shared_path: &str, op: Op) -> Result<(), ProjectError> {
        let Some(project) = access::project_of(shared_path) else {
            return Ok(());
        };
        let rules = self.access_md(project).await?;
        access::decide(rules.as_deref(), project, agent, op).map_err(ProjectError::Denied)
    }

    /// A project's `ACCESS.md`, `None` when it has none.
    async fn access_md(&self, project: &str) -> Result<Option<String>, MemoryError> {
        match self.read_file(SHARED, &access::access_path(project)).await {
            Ok(file) => Ok(Some(file.content)),
            Err(MemoryError::NotFound { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The `_shared` folders (`projects/{name}/`) of the projects `agent` may
    /// not read, which its searches leave out. `_shared` itself (the admin's
    /// view) is denied nothing.
    pub(super) async fn hidden_projects(&self, agent: &str) -> Result<Vec<String>, MemoryError> {
        if agent == SHARED {
            return Ok(Vec::new());
        }
        let listed = self
            .objects
            .list(Bucket::Memory, &format!("{SHARED}/{PROJECTS}"))
            .await?;
        let mut hidden = Vec::new();
        for object in &listed {
            let Some((_, path)) = paths::split_key(&object.key) else {
                continue;
            };
            let Some(project) = access::project_of(path).filter(|_| access::is_access_file(path)) else {
                continue;
            };
            let rules = self.access_md(project).await?;
            if access::decide(rules.as_deref(), project, agent, Op::Read).is_err() {
                hidden.push(format!("{PROJECTS}{project}/"));
            }
        }
        Ok(hidden)
    }
}

/// Whether a `_shared` path is a project's `CONTEXT.md`.
pub fn is_context_file(shared_path: &str) -> bool {
    access::project_of(shared_path)
        .is_some_and(|name| shared_path == format!("{PROJECTS}{name}/{}", access::CONTEXT))
}

/// `CONTEXT.md` as an agent leaves it: one "Last updated by {agent} at
/// {time}" line, a blank line, then the body (any old header dropped).
pub fn stamped_context(body: &str, agent: &str, at: DateTime<Utc>) -> String {
    format!(
        "{HEADER}{agent} at {}\n\n{}",
        at.format("%Y-%m-%dT%H:%M:%SZ"),
        without_header(body)
    )
}

/// A `CONTEXT.md` without its header lines (and the blank lines after them).
pub fn without_header(text: &str) -> &str {
    let mut rest = text;
    let mut stripped = false;
    while rest.starts_with(HEADER) {
        rest = rest.split_once('\n').map_or("", |(_, after)| after);
        stripped = true;
    }
    if stripped {
        rest.trim_start_matches(['\r', '\n'])
    } else {
        rest
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::TimeZone;

    use super::*;
    use crate::memory::{Mode, Settings};
    use crate::storage::{Db, LocalStore, ObjectStore};

    #[test]
    fn context_header_is_kept_single_and_on_top() {
        let at = Utc.with_ymd_and_hms(2026, 11, 24, 19, 30, 5).unwrap();
        let first = stamped_context("# Launch\nShip on Friday.\n", "alice", at);
        assert_eq!(
            first,
            "Last updated by alice at 2026-11-24T19:30:05Z\n\n# Launch\nShip on Friday.\n"
        );
        // An agent that copies the old header into its new text gets one header.
        let again = stamped_context(&format!("{first}More.\n"), "bob", at);
        assert_eq!(again.matches(HEADER).count(), 1, "{again}");
        assert!(again.starts_with("Last updated by bob at "), "{again}");
        assert!(
            again.ends_with("\n\n# Launch\nShip on Friday.\nMore.\n"),
            "{again}"
        );
        assert_eq!(without_header("no header\n"), "no header\n");
        assert!(is_context_file("projects/launch/CONTEXT.md"));
        assert!(!is_context_file("projects/launch/notes/CONTEXT.md"));
    }

    #[tokio::test]
    async fn checks_and_hidden_projects_follow_access_md() {
        let dir = tempfile::tempdir().unwrap();
        let objects: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(dir.path()));
        objects.ensure_buckets().await.unwrap();
        let memory = Memory::new(objects, Db::scratch().await, None, Settings::default());
        let write = |path: &'static str, text: &'static str| {
            let memory = memory.clone();
            async move { memory.write_file(SHARED, path, text.into(), None).await.unwrap() }
        };
        write("projects/secret/ACCESS.md", "read: bob\nwrite: alice\n").await;
        write("projects/secret/CONTEXT.md", "the plan\n").await;
        write("projects/open/CONTEXT.md", "anyone\n").await;

        let check = |agent: &'static str, path: &'static str, op| {
            let memory = memory.clone();
            async move { memory.check_project(agent, path, op).await }
        };
        assert!(
            check("alice", "projects/secret/CONTEXT.md", Op::Write)
                .await
                .is_ok()
        );
        assert!(check("bob", "projects/secret/CONTEXT.md", Op::Read).await.is_ok());
        let denied = check("bob", "projects/secret/CONTEXT.md", Op::Write).await;
        assert!(
            matches!(&denied, Err(ProjectError::Denied(m)) if m.contains("ACCESS.md")),
            "{denied:?}"
        );
        assert!(check("carol", "projects/secret/x.md", Op::Read).await.is_err());
        assert!(
            check("carol", "projects/open/CONTEXT.md", Op::Write)
                .await
                .is_ok()
        );
        assert!(check("carol", "handbook.md", Op::Read).await.is_ok());

        assert_eq!(
            memory.hidden_projects("carol").await.unwrap(),
            ["projects/secret/"]
        );
        assert!(memory.hidden_projects("bob").await.unwrap().is_empty());
        assert!(memory.hidden_projects(SHARED).await.unwrap().is_empty());
        let listed = |agent: &'static str| {
            let memory = memory.clone();
            async move {
                let files = memory.list_files(agent).await.unwrap();
                files.into_iter().map(|f| f.path).collect::<Vec<_>>()
            }
        };
        assert_eq!(listed("carol").await, ["projects/open/CONTEXT.md"]);
        assert_eq!(listed("bob").await.len(), 3);

        // Searches leave out what the agent may not read, in both legs' filter.
        memory.load_search_index().await.unwrap();
        let paths_found = |agent: &'static str| {
            let memory = memory.clone();
            async move {
                let found = memory.search(agent, "plan anyone", 10, Mode::Text).await.unwrap();
                found.data.into_iter().map(|h| h.path).collect::<Vec<_>>()
            }
        };
        let carol = paths_found("carol").await;
        assert_eq!(carol, ["projects/open/CONTEXT.md"]);
        let bob = paths_found("bob").await;
        assert!(bob.contains(&"projects/secret/CONTEXT.md".to_string()), "{bob:?}");
        assert_eq!(paths_found(SHARED).await.len(), 2);
    }
}
