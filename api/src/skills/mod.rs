//! Skills: folders with a `SKILL.md` (front matter `name` and `description`,
//! then instructions in markdown) and any files it refers to, kept in the
//! memory bucket: `_shared/skills/{name}/` for every agent and
//! `{agent}/skills/{name}/` for one (an agent's skill hides a shared one of
//! the same name). The prompt lists each skill's name and description; the
//! `skill` tool loads one's body and files on demand. A skill is text: a
//! script it mentions runs only through `exec`, under the agent's permissions.

mod front_matter;

use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;

pub use front_matter::{FrontMatter, parse as parse_skill_md};

use crate::memory::paths;
use crate::storage::{Bucket, ObjectKey, ObjectStore, PutCondition, StoreError};

pub const SKILL_FILE: &str = "SKILL.md";
/// The largest file a skill may hold.
pub const MAX_FILE_BYTES: usize = 256 * 1024;
const MAX_FILES: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("{0}")]
    Invalid(String),
    #[error("no skill {name:?} for {scope:?}")]
    NotFound { scope: String, name: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A skill as listed: what the prompt shows, where it lives, its files.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SkillSummary {
    pub name: String,
    pub description: String,
    /// `_shared` (every agent) or an agent's id.
    pub scope: String,
    /// Its files other than SKILL.md, relative to its folder.
    pub files: Vec<String>,
}

/// A skill with its `SKILL.md` as written.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    #[serde(flatten)]
    pub summary: SkillSummary,
    pub content: String,
}

/// Checks a skill name: 1-64 of a-z, 0-9, '-' and '_'.
pub fn check_name(name: &str) -> Result<&str, SkillError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    ok.then_some(name).ok_or_else(|| {
        SkillError::Invalid(format!(
            "{name:?} is not a skill name (1-64 of a-z, 0-9, '-' and '_')"
        ))
    })
}

/// Checks a file path inside a skill folder: relative, no hidden or `..` parts.
pub fn check_file(path: &str) -> Result<&str, SkillError> {
    let bad = path.is_empty()
        || path.len() > 256
        || path.starts_with('/')
        || path.contains('\\')
        || path.chars().any(char::is_control)
        || path
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == ".." || s.starts_with('.'));
    if bad {
        Err(SkillError::Invalid(format!(
            "{:?} is not a file path inside a skill (relative, '/' between folders, no hidden or '..' parts)",
            path.chars().take(80).collect::<String>()
        )))
    } else {
        Ok(path)
    }
}

fn check_scope(scope: &str) -> Result<&str, SkillError> {
    paths::agent(scope).map_err(|err| SkillError::Invalid(err.to_string()))
}

fn key(scope: &str, name: &str, file: &str) -> Result<ObjectKey, SkillError> {
    ObjectKey::new(format!("{scope}/skills/{name}/{file}"))
        .map_err(|_| SkillError::Invalid(format!("{file:?} is not a valid storage key")))
}

pub struct Skills {
    objects: Arc<dyn ObjectStore>,
}

impl Skills {
    pub fn new(objects: Arc<dyn ObjectStore>) -> Self {
        Self { objects }
    }

    /// The skills of one scope, by name.
    pub async fn list_scope(&self, scope: &str) -> Result<Vec<SkillSummary>, SkillError> {
        let scope = check_scope(scope)?;
        let prefix = format!("{scope}/skills/");
        let objects = self.objects.list(Bucket::Memory, &prefix).await?;
        let mut folders: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for object in &objects {
            if let Some((name, file)) = object.key[prefix.len()..].split_once('/') {
                folders.entry(name).or_default().push(file);
            }
        }
        let mut out = Vec::new();
        for (name, files) in folders {
            if let Some(skill) = self.load(scope, name, files).await? {
                out.push(skill.summary);
            }
        }
        Ok(out)
    }

    /// A skill folder's `SKILL.md` read and parsed, with its other files;
    /// `None` without a readable `SKILL.md` (a broken one is logged).
    async fn load(&self, scope: &str, name: &str, files: Vec<&str>) -> Result<Option<Skill>, SkillError> {
        if !files.contains(&SKILL_FILE) {
            return Ok(None);
        }
        let Some(content) = self.read(scope, name, SKILL_FILE).await? else {
            return Ok(None);
        };
        let description = match front_matter::parse(&content) {
            Ok((meta, _)) => meta.description,
            Err(err) => {
                tracing::warn!(scope, skill = name, error = %err, "a skill's SKILL.md cannot be read; left out");
                return Ok(None);
            }
        };
        let summary = SkillSummary {
            name: name.to_string(),
            description,
            scope: scope.to_string(),
            files: files
                .into_iter()
                .filter(|f| *f != SKILL_FILE)
                .map(String::from)
                .collect(),
        };
        Ok(Some(Skill { summary, content }))
    }

    /// What `agent` can use: its own skills and the shared ones it does not override.
    pub async fn for_agent(&self, agent: &str) -> Result<Vec<SkillSummary>, SkillError> {
        let mut own = self.list_scope(agent).await?;
        let shared = self.list_scope(paths::SHARED).await?;
        let hidden: std::collections::HashSet<String> = own.iter().map(|s| s.name.clone()).collect();
        own.extend(shared.into_iter().filter(|s| !hidden.contains(&s.name)));
        own.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(own)
    }

    async fn read(&self, scope: &str, name: &str, file: &str) -> Result<Option<String>, SkillError> {
        let object = self.objects.get(Bucket::Memory, &key(scope, name, file)?).await?;
        Ok(object.map(|o| String::from_utf8_lossy(&o.body).into_owned()))
    }

    /// One skill of one scope.
    pub async fn get(&self, scope: &str, name: &str) -> Result<Skill, SkillError> {
        let (scope, name) = (check_scope(scope)?, check_name(name)?);
        let prefix = format!("{scope}/skills/{name}/");
        let objects = self.objects.list(Bucket::Memory, &prefix).await?;
        let files = objects.iter().map(|o| &o.key[prefix.len()..]).collect();
        self.load(scope, name, files)
            .await?
            .ok_or_else(|| SkillError::NotFound {
                scope: scope.into(),
                name: name.into(),
            })
    }

    /// The skill `agent` sees under `name` (its own, else the shared one).
    pub async fn resolve(&self, agent: &str, name: &str) -> Result<Skill, SkillError> {
        match self.get(agent, name).await {
            Err(SkillError::NotFound { .. }) => self.get(paths::SHARED, name).await,
            other => other,
        }
    }

    /// A file of a skill (`SKILL.md` or another).
    pub async fn read_file(&self, scope: &str, name: &str, file: &str) -> Result<String, SkillError> {
        let (scope, name, file) = (check_scope(scope)?, check_name(name)?, check_file(file)?);
        self.read(scope, name, file)
            .await?
            .ok_or_else(|| SkillError::Invalid(format!("skill {name:?} has no file {file:?}")))
    }

    /// Writes a file of a skill; `SKILL.md` must parse and name the skill.
    pub async fn write_file(
        &self,
        scope: &str,
        name: &str,
        file: &str,
        content: Bytes,
    ) -> Result<(), SkillError> {
        let (scope, name, file) = (check_scope(scope)?, check_name(name)?, check_file(file)?);
        if content.len() > MAX_FILE_BYTES {
            return Err(SkillError::Invalid(format!(
                "{file}: {} bytes is over the {MAX_FILE_BYTES}-byte limit for a skill file",
                content.len()
            )));
        }
        if file == SKILL_FILE {
            let text = std::str::from_utf8(&content)
                .map_err(|_| SkillError::Invalid("SKILL.md must be UTF-8 text".into()))?;
            let (meta, _) = front_matter::parse(text).map_err(SkillError::Invalid)?;
            if meta.name != name {
                return Err(SkillError::Invalid(format!(
                    "SKILL.md names the skill {:?} but it is being saved as {name:?}",
                    meta.name
                )));
            }
        } else {
            let prefix = format!("{scope}/skills/{name}/");
            let existing = self.objects.list(Bucket::Memory, &prefix).await?;
            if !existing.iter().any(|o| o.key[prefix.len()..] == *SKILL_FILE) {
                return Err(SkillError::Invalid(format!(
                    "write the skill's SKILL.md first (PUT /v1/skills/{scope}/{name})"
                )));
            }
            if existing.len() >= MAX_FILES {
                return Err(SkillError::Invalid(format!(
                    "a skill holds at most {MAX_FILES} files"
                )));
            }
        }
        let key = key(scope, name, file)?;
        self.objects
            .put(Bucket::Memory, &key, content, PutCondition::Overwrite)
            .await?;
        Ok(())
    }

    /// Deletes a skill and all its files; `false` when there was none.
    pub async fn delete(&self, scope: &str, name: &str) -> Result<bool, SkillError> {
        let (scope, name) = (check_scope(scope)?, check_name(name)?);
        let objects = self
            .objects
            .list(Bucket::Memory, &format!("{scope}/skills/{name}/"))
            .await?;
        for object in &objects {
            let key = ObjectKey::new(object.key.clone()).map_err(StoreError::from)?;
            self.objects.delete(Bucket::Memory, &key).await?;
        }
        Ok(!objects.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn skills() -> (tempfile::TempDir, Skills) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::storage::LocalStore::new(dir.path().to_path_buf());
        store.ensure_buckets().await.unwrap();
        (dir, Skills::new(Arc::new(store)))
    }

    fn skill_md(name: &str, description: &str) -> Bytes {
        Bytes::from(format!(
            "---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nSteps.\n"
        ))
    }

    #[tokio::test]
    async fn an_agents_skill_hides_the_shared_one_and_files_are_listed() {
        let (_dir, skills) = skills().await;
        skills
            .write_file("_shared", "pdf", SKILL_FILE, skill_md("pdf", "shared PDF help"))
            .await
            .unwrap();
        skills
            .write_file("_shared", "pdf", "scripts/fill.py", Bytes::from("print(1)"))
            .await
            .unwrap();
        skills
            .write_file("_shared", "mail", SKILL_FILE, skill_md("mail", "mail help"))
            .await
            .unwrap();
        skills
            .write_file("main", "pdf", SKILL_FILE, skill_md("pdf", "main's own PDF help"))
            .await
            .unwrap();
        let seen = skills.for_agent("main").await.unwrap();
        let names: Vec<(&str, &str)> = seen.iter().map(|s| (s.name.as_str(), s.scope.as_str())).collect();
        assert_eq!(names, [("mail", "_shared"), ("pdf", "main")]);
        let other = skills.for_agent("other").await.unwrap();
        assert_eq!(other[1].files, ["scripts/fill.py"]);
        assert_eq!(
            skills.resolve("other", "pdf").await.unwrap().summary.description,
            "shared PDF help"
        );
        assert!(skills.delete("main", "pdf").await.unwrap());
        assert_eq!(
            skills.resolve("main", "pdf").await.unwrap().summary.scope,
            "_shared"
        );
        assert!(!skills.delete("main", "pdf").await.unwrap());
    }

    #[tokio::test]
    async fn bad_names_paths_and_skill_files_are_refused() {
        let (_dir, skills) = skills().await;
        for (name, file) in [
            ("Bad Name", SKILL_FILE),
            ("ok", "../x"),
            ("ok", ".hidden"),
            ("ok", "/abs"),
        ] {
            let err = skills
                .write_file("main", name, file, skill_md("ok", "d"))
                .await
                .unwrap_err();
            assert!(matches!(err, SkillError::Invalid(_)), "{name} {file}: {err}");
        }
        let err = skills
            .write_file("main", "ok", SKILL_FILE, skill_md("other", "d"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("names the skill \"other\""), "{err}");
        let err = skills
            .write_file("main", "ok", SKILL_FILE, Bytes::from("no front matter"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("front matter"), "{err}");
        assert!(matches!(
            skills.get("main", "ok").await,
            Err(SkillError::NotFound { .. })
        ));
        let err = skills
            .write_file("main", "ok", "notes.md", Bytes::from("x"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("SKILL.md first"), "{err}");
    }
}
