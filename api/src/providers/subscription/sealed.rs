//! The subscription CLIs' credential files, sealed at rest. The CLIs read
//! plain files, so a credential file (Claude Code's `.credentials.json`,
//! Codex's `auth.json`, the Copilot CLI's `config.json`) is kept as
//! `{file}.sealed`: the file's text sealed with the [`Vault`] for the place
//! `subscription:{cli}:{file}`, the plaintext removed. It is unsealed into
//! the CLI's config dir (mode 0600) while at least one process of that CLI
//! runs ([`lease`]) and sealed again when the last one ends, so a token the
//! CLI refreshed during a run is the one kept. `onyx serve` seals whatever
//! plaintext it finds when it starts and stops, `onyx login` right after the
//! sign-in, and `onyx keys rotate-master` re-seals the sealed files.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use secrecy::ExposeSecret;

use crate::secrets::{SecretError, Vault};

/// The CLIs and the files in their config dirs that hold credentials.
pub const CREDENTIAL_FILES: &[(&str, &str)] = &[
    ("claude", ".credentials.json"),
    ("codex", "auth.json"),
    ("copilot", "config.json"),
];

const SUFFIX: &str = ".sealed";

static VAULT: OnceLock<Arc<Vault>> = OnceLock::new();
/// How many processes of each CLI hold its credentials unsealed.
static LEASES: Mutex<Option<HashMap<&'static str, usize>>> = Mutex::new(None);

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Secret {
        path: std::path::PathBuf,
        source: SecretError,
    },
}

/// The vault credential files are sealed with: set once at startup.
pub fn set_vault(vault: Arc<Vault>) {
    let _ = VAULT.set(vault);
}

pub(super) fn vault() -> Option<Arc<Vault>> {
    VAULT.get().cloned()
}

fn files(cli: &str) -> impl Iterator<Item = &'static str> + '_ {
    CREDENTIAL_FILES
        .iter()
        .filter(move |(c, _)| *c == cli)
        .map(|(_, file)| *file)
}

fn context(cli: &str, file: &str) -> String {
    format!("subscription:{cli}:{file}")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SealError + '_ {
    move |source| SealError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `text` to `path` through a private temporary file (mode 0600).
fn write_private(path: &Path, text: &str) -> Result<(), SealError> {
    let tmp = path.with_extension("onyx-tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp).map_err(io(&tmp))?;
    file.write_all(text.as_bytes()).map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// Seals the plaintext credential files of `cli` in `home`; how many it sealed.
pub fn seal(vault: &Vault, cli: &str, home: &Path) -> Result<usize, SealError> {
    let mut sealed = 0;
    for file in files(cli) {
        let plain = home.join(file);
        let text = match std::fs::read_to_string(&plain) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(io(&plain)(err)),
        };
        let target = home.join(format!("{file}{SUFFIX}"));
        let boxed = vault
            .seal(&text, &context(cli, file))
            .map_err(|source| SealError::Secret {
                path: target.clone(),
                source,
            })?;
        write_private(&target, &boxed)?;
        std::fs::remove_file(&plain).map_err(io(&plain))?;
        sealed += 1;
    }
    Ok(sealed)
}

/// Writes the plaintext of each sealed credential file of `cli` that has none.
pub fn unseal(vault: &Vault, cli: &str, home: &Path) -> Result<(), SealError> {
    for file in files(cli) {
        let plain = home.join(file);
        if plain.exists() {
            continue;
        }
        if let Some(text) = open(vault, cli, home, file)? {
            write_private(&plain, &text)?;
        }
    }
    Ok(())
}

/// The text of a sealed credential file, if there is one.
fn open(vault: &Vault, cli: &str, home: &Path, file: &str) -> Result<Option<String>, SealError> {
    let path = home.join(format!("{file}{SUFFIX}"));
    let boxed = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(io(&path)(err)),
    };
    let text = vault
        .open(boxed.trim(), &context(cli, file))
        .map_err(|source| SealError::Secret { path, source })?;
    Ok(Some(text.expose_secret().to_string()))
}

/// A credential file's text: the plaintext while a CLI runs, else the sealed
/// form opened with the startup vault.
pub fn read(cli: &str, home: &Path, file: &str) -> Option<String> {
    if let Ok(text) = std::fs::read_to_string(home.join(file)) {
        return Some(text);
    }
    let vault = VAULT.get()?;
    match open(vault, cli, home, file) {
        Ok(text) => text,
        Err(err) => {
            tracing::warn!(%err, "a sealed subscription credential file cannot be opened");
            None
        }
    }
}

/// Seals every CLI's plaintext credentials under `data_dir` (start and stop).
pub fn seal_all(vault: &Vault, data_dir: &Path) -> usize {
    let mut sealed = 0;
    for (cli, _) in CREDENTIAL_FILES {
        match seal(vault, cli, &super::cli_home(data_dir, cli)) {
            Ok(n) => sealed += n,
            Err(err) => tracing::warn!(%err, "cannot seal a subscription credential file"),
        }
    }
    sealed
}

/// Re-seals every sealed credential file under `data_dir` with the vault's
/// current key (`onyx keys rotate-master`); how many it re-sealed.
pub fn reseal_all(vault: &Vault, data_dir: &Path) -> Result<usize, SealError> {
    let mut resealed = 0;
    for (cli, file) in CREDENTIAL_FILES {
        let home = super::cli_home(data_dir, cli);
        let path = home.join(format!("{file}{SUFFIX}"));
        let Ok(boxed) = std::fs::read_to_string(&path) else {
            continue;
        };
        if vault.is_current(boxed.trim()) {
            continue;
        }
        if let Some(text) = open(vault, cli, &home, file)? {
            let again = vault
                .seal(&text, &context(cli, file))
                .map_err(|source| SealError::Secret {
                    path: path.clone(),
                    source,
                })?;
            write_private(&path, &again)?;
            resealed += 1;
        }
    }
    Ok(resealed)
}

/// Holds a CLI's credentials unsealed; the last lease dropped seals them again.
pub struct Lease {
    cli: &'static str,
}

/// Unseals `cli`'s credentials into its config dir for a process about to start.
pub fn lease(cli: &'static str) -> Lease {
    let mut leases = crate::locks::lock(&LEASES);
    let count = leases.get_or_insert_with(HashMap::new).entry(cli).or_insert(0);
    if *count == 0
        && let Some(vault) = VAULT.get()
        && let Err(err) = unseal(vault, cli, &super::home(cli))
    {
        tracing::warn!(%err, "cannot unseal a subscription credential file");
    }
    *count += 1;
    Lease { cli }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut leases = crate::locks::lock(&LEASES);
        let Some(count) = leases.get_or_insert_with(HashMap::new).get_mut(self.cli) else {
            return;
        };
        *count = count.saturating_sub(1);
        if *count == 0
            && let Some(vault) = VAULT.get()
            && let Err(err) = seal(vault, self.cli, &super::home(self.cli))
        {
            tracing::warn!(%err, "cannot seal a subscription credential file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_file_is_sealed_unsealed_and_resealed_under_a_new_key() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let vault = Vault::ephemeral().unwrap();
        let token = r#"{"tokens":{"refresh_token":"rt-secret-0123456789"}}"#;
        std::fs::write(home.join("auth.json"), token).unwrap();
        assert_eq!(seal(&vault, "codex", home).unwrap(), 1);
        assert!(!home.join("auth.json").exists());
        let boxed = std::fs::read_to_string(home.join("auth.json.sealed")).unwrap();
        assert!(boxed.starts_with("onyx-sealed:v1:") && !boxed.contains("rt-secret"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(home.join("auth.json.sealed"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Bound to its place: the same box does not open as another CLI's file.
        std::fs::write(home.join("config.json.sealed"), &boxed).unwrap();
        assert!(open(&vault, "copilot", home, "config.json").is_err());
        std::fs::remove_file(home.join("config.json.sealed")).unwrap();

        unseal(&vault, "codex", home).unwrap();
        assert_eq!(std::fs::read_to_string(home.join("auth.json")).unwrap(), token);
        std::fs::remove_file(home.join("auth.json")).unwrap();

        let rotated = vault.rotated(crate::secrets::MasterKey::generate().unwrap());
        let data = tempfile::tempdir().unwrap();
        let codex = super::super::cli_home(data.path(), "codex");
        std::fs::create_dir_all(&codex).unwrap();
        std::fs::copy(home.join("auth.json.sealed"), codex.join("auth.json.sealed")).unwrap();
        assert_eq!(reseal_all(&rotated, data.path()).unwrap(), 1);
        let again = std::fs::read_to_string(codex.join("auth.json.sealed")).unwrap();
        assert!(rotated.is_current(&again));
        assert_eq!(reseal_all(&rotated, data.path()).unwrap(), 0);
        assert_eq!(
            open(&rotated, "codex", &codex, "auth.json").unwrap().as_deref(),
            Some(token)
        );
    }
}
