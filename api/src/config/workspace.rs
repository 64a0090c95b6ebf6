//! Where an agent's `workspace` (the folder its file tools and `exec` work
//! in) may be. Not where it would hand the agent the gateway itself: a
//! workspace may neither hold nor lie inside the data dir (the master key,
//! the database, other agents' files) or the config's folder (the config
//! and the secrets it names), nor hold the gateway's home (which holds
//! both by default). Inside the home is fine: that is where projects live.
//! The data dir's own `workspaces/` folder, where workspaces are kept by
//! default, is the one place inside it allowed.
//!
//! The path is compared as the file system resolves it (`~` expanded,
//! relative paths against the working dir, `..` and links followed as far
//! as the folders exist), and kept expanded so the agent works in the folder
//! that was checked.

use std::path::{Component, Path, PathBuf};

use super::ConfigError;
use super::agents::AgentsConfig;
use super::fields::Env;

/// What a workspace must keep out of, resolved.
struct Guarded {
    data_dir: PathBuf,
    workspaces: PathBuf,
    config_dir: Option<PathBuf>,
    home: Option<PathBuf>,
}

/// Checks (and expands) every configured workspace.
pub(super) fn check_workspaces(
    agents: &mut AgentsConfig,
    data_dir: &Path,
    config: Option<&Path>,
    env: Env,
) -> Result<(), ConfigError> {
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let guarded = Guarded {
        data_dir: resolve(data_dir),
        workspaces: resolve(&data_dir.join("workspaces")),
        // `onyx.json5` alone: its folder is the working dir.
        config_dir: config
            .and_then(Path::parent)
            .map(|dir| {
                if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                }
            })
            .map(resolve),
        home: home.as_deref().map(resolve),
    };
    for (index, agent) in agents.list.iter_mut().enumerate() {
        let Some(text) = agent.workspace.as_deref() else {
            continue;
        };
        let path = format!("agents.list[{index}].workspace");
        if text.trim().is_empty() {
            return Err(ConfigError::invalid(
                path,
                "is empty; leave it out for the default",
            ));
        }
        let expanded = expand(text, home.as_deref());
        refuse_if_guarded(&resolve(&expanded), &guarded).map_err(|why| {
            ConfigError::invalid(
                &path,
                format!("{text:?} {why}: an agent working there could read or change the gateway itself"),
            )
        })?;
        agent.workspace = Some(expanded.to_string_lossy().into_owned());
    }
    Ok(())
}

/// Why `workspace` may not be one, if it may not.
fn refuse_if_guarded(workspace: &Path, guarded: &Guarded) -> Result<(), String> {
    let holds = |other: &Path| other.starts_with(workspace);
    if holds(&guarded.data_dir) {
        return Err(format!("holds the data dir {}", guarded.data_dir.display()));
    }
    if workspace.starts_with(&guarded.data_dir)
        && !(workspace.starts_with(&guarded.workspaces) && workspace != guarded.workspaces)
    {
        return Err(format!(
            "lies inside the data dir {} (only its workspaces/ folder may hold workspaces)",
            guarded.data_dir.display()
        ));
    }
    if let Some(config_dir) = &guarded.config_dir {
        if holds(config_dir) {
            return Err(format!("holds the config's folder {}", config_dir.display()));
        }
        if workspace.starts_with(config_dir) {
            return Err(format!(
                "lies inside the config's folder {}",
                config_dir.display()
            ));
        }
    }
    if let Some(home) = &guarded.home
        && holds(home)
    {
        return Err(format!("holds the gateway's home {}", home.display()));
    }
    Ok(())
}

/// `~` and `~/…` against the home; anything else as written.
fn expand(text: &str, home: Option<&Path>) -> PathBuf {
    let text = text.trim();
    match (text, text.strip_prefix("~/"), home) {
        ("~", _, Some(home)) => home.to_path_buf(),
        (_, Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(text),
    }
}

/// The path as the file system would resolve it: absolute, `.` and `..`
/// folded, links followed through the part that exists.
fn resolve(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut lexical = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    // The deepest folder that exists, resolved, then the rest as written.
    let mut existing = lexical.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |path, part| path.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return lexical,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guarded(root: &Path) -> Guarded {
        Guarded {
            data_dir: resolve(&root.join("home/.local/share/onyx")),
            workspaces: resolve(&root.join("home/.local/share/onyx/workspaces")),
            config_dir: Some(resolve(&root.join("home/.config/onyx"))),
            home: Some(resolve(&root.join("home"))),
        }
    }

    #[test]
    fn a_workspace_keeps_out_of_the_gateway() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        std::fs::create_dir_all(root.join("home/.local/share/onyx/workspaces/main")).unwrap();
        std::fs::create_dir_all(root.join("home/.config/onyx")).unwrap();
        std::fs::create_dir_all(root.join("home/code")).unwrap();
        let guarded = guarded(root);
        let check = |relative: &str| refuse_if_guarded(&resolve(&root.join(relative)), &guarded);
        for fine in [
            "home/code/project",
            "home/code",
            "home/.local/share/onyx/workspaces/main",
            "home/.local/share/onyx/workspaces/new-one",
            "srv/agents/ops",
        ] {
            assert!(check(fine).is_ok(), "{fine}: {:?}", check(fine));
        }
        for (refused, why) in [
            ("home", "holds the data dir"),
            ("home/.local", "holds the data dir"),
            ("home/.local/share/onyx", "holds the data dir"),
            ("home/.local/share/onyx/db", "lies inside the data dir"),
            ("home/.local/share/onyx/workspaces", "lies inside the data dir"),
            (
                "home/.local/share/onyx/workspaces/../secrets",
                "lies inside the data dir",
            ),
            ("home/.config", "holds the config's folder"),
            ("home/.config/onyx/agent", "lies inside the config's folder"),
            ("", "holds the data dir"),
        ] {
            let err = check(refused).unwrap_err();
            assert!(err.starts_with(why), "{refused}: {err}");
        }
        // A link into the data dir is the data dir.
        std::os::unix::fs::symlink(root.join("home/.local/share/onyx"), root.join("home/code/sneaky"))
            .unwrap();
        assert!(
            check("home/code/sneaky/agent")
                .unwrap_err()
                .starts_with("lies inside the data dir")
        );
    }

    #[test]
    fn the_home_itself_is_refused_however_it_is_written() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let guarded = Guarded {
            data_dir: resolve(&root.path().join("data")),
            workspaces: resolve(&root.path().join("data/workspaces")),
            config_dir: None,
            home: Some(resolve(&home)),
        };
        for text in ["~", "~/", "~/code/.."] {
            let workspace = resolve(&expand(text, Some(&home)));
            let err = refuse_if_guarded(&workspace, &guarded).unwrap_err();
            assert!(err.starts_with("holds the gateway's home"), "{text}: {err}");
        }
        assert_eq!(expand("~/code", Some(&home)), home.join("code"));
        assert_eq!(expand("/srv/x", Some(&home)), PathBuf::from("/srv/x"));
    }
}
