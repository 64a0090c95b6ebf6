//! `onyx skills import DIR [--agent ID]`: brings in a folder of skills in
//! the format other assistants use (each sub-folder with a `SKILL.md`, plus
//! its files) as shared skills, or one agent's. Needs only the object store,
//! so it runs beside `onyx serve`. Hidden files and folders are skipped.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bytes::Bytes;
use clap::Subcommand;

use super::error::CliError;
use crate::config;
use crate::skills::{MAX_FILE_BYTES, SKILL_FILE, Skills};

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Import every sub-folder of DIR that holds a SKILL.md (or DIR itself if it does).
    Import {
        dir: PathBuf,
        /// Import for this agent only (default: shared by every agent).
        #[arg(long)]
        agent: Option<String>,
    },
}

pub async fn run(config_path: Option<PathBuf>, command: SkillsCommand) -> ExitCode {
    let SkillsCommand::Import { dir, agent } = command;
    match import(config_path, &dir, agent.as_deref()).await {
        Ok((imported, failed)) => {
            eprintln!(
                "imported {imported} skill(s){}",
                if failed > 0 {
                    format!(", {failed} refused")
                } else {
                    String::new()
                }
            );
            if failed > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(err) => {
            eprintln!("onyx skills: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Every file under `dir` (relative paths), hidden ones skipped.
fn files_of(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                stack.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir) {
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    Ok(out)
}

async fn import(
    config_path: Option<PathBuf>,
    dir: &Path,
    agent: Option<&str>,
) -> Result<(usize, usize), CliError> {
    let path = config::locate(config_path.as_deref());
    let config = config::load(path.as_deref())?;
    let objects = crate::storage::open_object_store(&config.storage).await?;
    let skills = Skills::new(objects);
    let scope = agent.unwrap_or(crate::memory::paths::SHARED);
    let io = |err: std::io::Error| CliError::Io(format!("{}: {err}", dir.display()));
    let folders: Vec<PathBuf> = if dir.join(SKILL_FILE).is_file() {
        vec![dir.to_path_buf()]
    } else {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join(SKILL_FILE).is_file())
            .collect();
        found.sort();
        found
    };
    if folders.is_empty() {
        return Err(CliError::Io(format!(
            "{}: no SKILL.md in it or in its folders",
            dir.display()
        )));
    }
    let (mut imported, mut failed) = (0, 0);
    for (index, folder) in folders.iter().enumerate() {
        let name = folder
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let result = import_one(&skills, scope, &name, folder).await;
        match result {
            Ok(files) => {
                imported += 1;
                eprintln!("[{}/{}] {name}: {files} file(s)", index + 1, folders.len());
            }
            Err(err) => {
                failed += 1;
                eprintln!("[{}/{}] {name}: refused: {err}", index + 1, folders.len());
            }
        }
    }
    Ok((imported, failed))
}

/// Uploads one skill folder, `SKILL.md` first (it is what checks the name).
async fn import_one(skills: &Skills, scope: &str, name: &str, folder: &Path) -> Result<usize, String> {
    let mut files = files_of(folder).map_err(|err| err.to_string())?;
    files.retain(|f| f != SKILL_FILE);
    files.insert(0, SKILL_FILE.to_string());
    for file in &files {
        let bytes = std::fs::read(folder.join(file)).map_err(|err| format!("{file}: {err}"))?;
        if bytes.len() > MAX_FILE_BYTES {
            return Err(format!("{file}: over {MAX_FILE_BYTES} bytes"));
        }
        skills
            .write_file(scope, name, file, Bytes::from(bytes))
            .await
            .map_err(|err| format!("{file}: {err}"))?;
    }
    Ok(files.len())
}
