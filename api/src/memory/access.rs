//! Shared projects' access rules: which `_shared` paths belong to a project
//! (`projects/{name}/…`), the `ACCESS.md` format, and the decision whether an
//! agent may read or write a project. Pure: reading the file is `projects`.
//!
//! `ACCESS.md` format, one rule a line (anywhere in the file, other lines are
//! prose and ignored; a leading `- ` is allowed):
//!
//! ```text
//! read: alice, bob
//! write: alice
//! ```
//!
//! Names are agent ids separated by commas or spaces; `*` means every agent;
//! nothing after the colon means no agent. Writers may also read. Several
//! lines of one kind add up. Once `ACCESS.md` exists it is a closed list: no
//! `read:` line means only the writers read, no `write:` line means no agent
//! writes. Without `ACCESS.md` every agent may read and write the project.

use std::collections::BTreeSet;
use std::fmt;

use super::paths;

/// The folder of `_shared` that holds projects.
pub const PROJECTS: &str = "projects/";
/// A project's access rules.
pub const ACCESS: &str = "ACCESS.md";
/// A project's living summary.
pub const CONTEXT: &str = "CONTEXT.md";

/// The project a `_shared` path belongs to (`projects/launch/notes.md` →
/// `launch`); `None` outside a project folder.
pub fn project_of(shared_path: &str) -> Option<&str> {
    let (name, rest) = shared_path.strip_prefix(PROJECTS)?.split_once('/')?;
    (!name.is_empty() && !rest.is_empty()).then_some(name)
}

/// Whether a `_shared` path is a project's `ACCESS.md`.
pub fn is_access_file(shared_path: &str) -> bool {
    project_of(shared_path).is_some_and(|name| shared_path == access_path(name))
}

/// The `_shared` path of a project's `ACCESS.md`.
pub fn access_path(project: &str) -> String {
    format!("{PROJECTS}{project}/{ACCESS}")
}

/// What an agent wants to do with a project's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

impl Op {
    fn verb(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// Who a rule lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    Everyone,
    Agents(BTreeSet<String>),
}

impl Who {
    fn includes(&self, agent: &str) -> bool {
        match self {
            Self::Everyone => true,
            Self::Agents(ids) => ids.contains(agent),
        }
    }

    fn add(&mut self, names: &str) -> Result<(), String> {
        for name in names.split([',', ' ', '\t']).filter(|n| !n.is_empty()) {
            if name == "*" {
                *self = Self::Everyone;
            } else if paths::agent(name).is_err() || name == paths::SHARED {
                return Err(format!("{name:?} is not an agent id (or * for every agent)"));
            } else if let Self::Agents(ids) = self {
                ids.insert(name.to_string());
            }
        }
        Ok(())
    }
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Everyone => f.write_str("*"),
            Self::Agents(ids) if ids.is_empty() => f.write_str("no agent"),
            Self::Agents(ids) => f.write_str(&ids.iter().cloned().collect::<Vec<_>>().join(", ")),
        }
    }
}

/// A project's rules, as its `ACCESS.md` says (or the open default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub read: Who,
    pub write: Who,
}

impl Access {
    /// No `ACCESS.md`: every agent reads and writes.
    pub fn open() -> Self {
        Self {
            read: Who::Everyone,
            write: Who::Everyone,
        }
    }

    /// Parses `ACCESS.md`; the error says which line is wrong and why.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut access = Self {
            read: Who::Agents(BTreeSet::new()),
            write: Who::Agents(BTreeSet::new()),
        };
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            let line = line.strip_prefix("- ").unwrap_or(line).trim_start();
            let Some((key, names)) = line.split_once(':') else {
                continue;
            };
            let who = match key.trim().to_ascii_lowercase().as_str() {
                "read" => &mut access.read,
                "write" => &mut access.write,
                _ => continue,
            };
            who.add(names.trim())
                .map_err(|reason| format!("ACCESS.md line {}: {reason}", number + 1))?;
        }
        Ok(access)
    }

    pub fn allows(&self, agent: &str, op: Op) -> bool {
        match op {
            Op::Read => self.read.includes(agent) || self.write.includes(agent),
            Op::Write => self.write.includes(agent),
        }
    }

    /// Whether `agent` may do `op` in `project`; the refusal names the
    /// project, its `ACCESS.md` and what the file allows.
    pub fn decide(&self, project: &str, agent: &str, op: Op) -> Result<(), String> {
        if self.allows(agent, op) {
            return Ok(());
        }
        let rule = match op {
            Op::Read => format!("read: {}; write: {}", self.read, self.write),
            Op::Write => format!("write: {}", self.write),
        };
        Err(format!(
            "agent {agent:?} may not {} project {project:?}: _shared/{} allows {rule}",
            op.verb(),
            access_path(project)
        ))
    }
}

/// The decision for a project whose `ACCESS.md` is this (`None`: absent).
/// A malformed file lets no agent in.
pub fn decide(access_md: Option<&str>, project: &str, agent: &str, op: Op) -> Result<(), String> {
    match access_md.map(Access::parse) {
        None => Ok(()),
        Some(Ok(access)) => access.decide(project, agent, op),
        Some(Err(reason)) => Err(format!(
            "project {project:?} is closed to agents until an admin fixes _shared/{} ({reason})",
            access_path(project)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Who {
        Who::Agents(names.iter().map(|n| n.to_string()).collect())
    }

    #[test]
    fn project_paths() {
        assert_eq!(project_of("projects/launch/CONTEXT.md"), Some("launch"));
        assert_eq!(project_of("projects/launch/research/a.md"), Some("launch"));
        assert_eq!(project_of("projects/readme.md"), None);
        assert_eq!(project_of("handbook.md"), None);
        assert_eq!(project_of("skills/x/SKILL.md"), None);
        assert!(is_access_file("projects/launch/ACCESS.md"));
        assert!(!is_access_file("projects/launch/research/ACCESS.md"));
        assert!(!is_access_file("projects/launch/CONTEXT.md"));
    }

    #[test]
    fn parses_rules_prose_bullets_and_wildcards() {
        let access = Access::parse(
            "# Launch\n\nWho works on the launch.\n\n- read: bob,carol  dave\nWrite: alice\nread: erin\nnote: not a rule\n",
        )
        .unwrap();
        assert_eq!(access.read, ids(&["bob", "carol", "dave", "erin"]));
        assert_eq!(access.write, ids(&["alice"]));
        let everyone = Access::parse("read: *\nwrite:\n").unwrap();
        assert_eq!(everyone.read, Who::Everyone);
        assert_eq!(everyone.write, ids(&[]));
    }

    #[test]
    fn bad_names_are_errors_naming_the_line() {
        let err = Access::parse("# x\nread: alice, Bob\n").unwrap_err();
        assert!(err.contains("line 2") && err.contains("\"Bob\""), "{err}");
        assert!(Access::parse("write: _shared").is_err());
        assert!(Access::parse("write: ../x").is_err());
    }

    #[test]
    fn decisions() {
        let access = Access::parse("read: bob\nwrite: alice").unwrap();
        assert!(access.allows("alice", Op::Write));
        assert!(access.allows("alice", Op::Read), "writers read");
        assert!(access.allows("bob", Op::Read));
        assert!(!access.allows("bob", Op::Write));
        assert!(!access.allows("carol", Op::Read));
        let err = access.decide("launch", "bob", Op::Write).unwrap_err();
        assert!(
            err.contains("\"launch\"")
                && err.contains("_shared/projects/launch/ACCESS.md")
                && err.contains("write: alice"),
            "{err}"
        );
        // No `read:` line: only writers read; no `write:` line: nobody writes.
        let writers_only = Access::parse("write: alice").unwrap();
        assert!(!writers_only.allows("bob", Op::Read));
        assert!(!Access::parse("read: *").unwrap().allows("bob", Op::Write));
        assert!(Access::parse("read: *").unwrap().allows("bob", Op::Read));
    }

    #[test]
    fn absent_is_open_and_malformed_is_closed() {
        assert_eq!(decide(None, "p", "anyone", Op::Write), Ok(()));
        let err = decide(Some("read: Not An Id"), "p", "alice", Op::Read).unwrap_err();
        assert!(
            err.contains("closed to agents") && err.contains("ACCESS.md line 1"),
            "{err}"
        );
        assert!(decide(Some("write: *"), "p", "anyone", Op::Write).is_ok());
    }
}
