//! Which of the data dir's files a backup keeps: everything Onyx wrote there
//! (subscription sign-ins, agents' work folders, files a later version adds)
//! except what is carried another way (the embedded database, which goes as
//! a dump; local objects, which go object by object; the master key, only
//! when asked) or rebuilds by itself (downloaded embedding models, the memory
//! search snapshot). Unknown files are kept: a backup errs on the side of more.

use std::path::{Path, PathBuf};

use crate::config::{Config, ObjectStoreConfig};

/// Key files: carried only with `--include-master-key`, under `secrets/`.
pub const KEY_FILES: [&str; 2] = ["master.key", "master.key.next"];
/// Caches that rebuild: the local embedder's downloads and the search snapshot.
const CACHES: [&str; 3] = ["models", "memory-index.snapshot", "memory-index.tmp"];
/// Left by an `onyx restore` that was stopped mid-way.
pub const RESTORE_STAGING: &str = ".onyx-restore";

/// A data-dir file: its path relative to the data dir (`/`-separated) and on disk.
pub struct DataFile {
    pub relative: String,
    pub path: PathBuf,
}

/// A place Onyx writes to, named for people (the README's deployment section,
/// the deployment test that checks each is on a container volume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenPath {
    pub what: &'static str,
    pub path: PathBuf,
}

/// Every place `onyx serve` with `config` writes to on disk, from the same
/// functions that decide them, in the environment `env` (`HOME`, `TMPDIR`).
/// Everything but the temporary directory is kept by `onyx backup`.
pub fn written_paths(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Vec<WrittenPath> {
    let dir = &config.storage.data_dir;
    let mut paths = vec![
        WrittenPath {
            what: "data dir",
            path: dir.clone(),
        },
        WrittenPath {
            what: "master key (unless ONYX_MASTER_KEY is set)",
            path: crate::secrets::MasterKeyFiles::in_dir(dir).current,
        },
        WrittenPath {
            what: "agents' work folders",
            path: dir.join("workspaces"),
        },
        WrittenPath {
            what: "downloaded embedding models",
            path: dir.join(CACHES[0]),
        },
        WrittenPath {
            what: "memory search snapshot",
            path: dir.join(CACHES[1]),
        },
        WrittenPath {
            what: "temporary files",
            path: PathBuf::from(env("TMPDIR").unwrap_or_else(|| "/tmp".into())),
        },
    ];
    for cli in ["claude", "codex", "copilot"] {
        paths.push(WrittenPath {
            what: "subscription sign-ins",
            path: crate::providers::subscription::cli_home(dir, cli),
        });
    }
    if let Some(db) = embedded_db_dir(config) {
        paths.push(WrittenPath {
            what: "embedded database",
            path: db,
        });
    }
    if matches!(config.storage.objects, ObjectStoreConfig::Local) {
        paths.push(WrittenPath {
            what: "objects (memory, sessions, skills)",
            path: dir.join("objects"),
        });
    }
    for agent in &config.agents.list {
        if let Some(workspace) = &agent.workspace {
            let home = env("HOME").map(PathBuf::from);
            let path = match (workspace.strip_prefix("~/"), home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => PathBuf::from(workspace),
            };
            paths.push(WrittenPath {
                what: "an agent's workspace",
                path,
            });
        }
    }
    paths
}

/// The paths under the data dir that are not its own files for a backup.
pub fn carried_elsewhere(config: &Config) -> Vec<PathBuf> {
    let dir = &config.storage.data_dir;
    let mut skip: Vec<PathBuf> = CACHES
        .iter()
        .chain(KEY_FILES.iter())
        .chain(std::iter::once(&RESTORE_STAGING))
        .map(|name| dir.join(name))
        .collect();
    if let Some(db) = embedded_db_dir(config) {
        skip.push(db);
    }
    if matches!(config.storage.objects, ObjectStoreConfig::Local) {
        skip.push(dir.join("objects"));
    }
    skip
}

/// Where embedded SurrealKV keeps the database, if it is embedded.
pub fn embedded_db_dir(config: &Config) -> Option<PathBuf> {
    let path = config.storage.surrealdb.url.strip_prefix("surrealkv://")?;
    let path = path.split_once('?').map_or(path, |(dir, _)| dir);
    Some(PathBuf::from(path))
}

/// Every regular file the data dir keeps for a backup, sorted; symbolic
/// links are not followed (named in `skipped_links`).
pub fn list(config: &Config) -> std::io::Result<(Vec<DataFile>, Vec<PathBuf>)> {
    let root = &config.storage.data_dir;
    let skip = carried_elsewhere(config);
    let mut files = Vec::new();
    let mut links = Vec::new();
    if root.exists() {
        walk(root, root, &skip, &mut files, &mut links)?;
    }
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok((files, links))
}

fn walk(
    root: &Path,
    dir: &Path,
    skip: &[PathBuf],
    files: &mut Vec<DataFile>,
    links: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if skip.iter().any(|s| s == &path) {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            links.push(path);
        } else if kind.is_dir() {
            walk(root, &path, skip, files, links)?;
        } else if kind.is_file() {
            let Ok(relative) = path.strip_prefix(root) else {
                continue;
            };
            let relative: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            files.push(DataFile {
                relative: relative.join("/"),
                path,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_sign_ins_and_work_folders_but_not_caches_keys_or_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let text = format!("{{ storage: {{ dataDir: {:?} }} }}", data.display().to_string());
        let file = dir.path().join("onyx.json5");
        std::fs::write(&file, text).unwrap();
        let config = crate::config::load(Some(file.as_path())).unwrap();
        for path in [
            "db/000001.sst",
            "objects/onyx-memory/main/MEMORY.md",
            "models/all-MiniLM-L6-v2/model.safetensors",
            "memory-index.snapshot",
            "master.key",
            "master.key.next",
            "subscriptions/claude/.credentials.json.sealed",
            "workspaces/main/notes/todo.txt",
            "something-new.json",
        ] {
            let full = data.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, "x").unwrap();
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc", data.join("workspaces/main/etc")).unwrap();
        let (files, links) = list(&config).unwrap();
        let kept: Vec<&str> = files.iter().map(|f| f.relative.as_str()).collect();
        assert_eq!(
            kept,
            [
                "something-new.json",
                "subscriptions/claude/.credentials.json.sealed",
                "workspaces/main/notes/todo.txt"
            ]
        );
        #[cfg(unix)]
        assert_eq!(links, [data.join("workspaces/main/etc")]);
    }
}
