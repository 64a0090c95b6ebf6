//! Where the master key comes from: `ONYX_MASTER_KEY` (base64 or hex; every
//! replica sharing a database must be given the same one), or else
//! `{dataDir}/master.key`, created with mode 0600 at first start. During
//! `onyx keys rotate-master` the new key waits in `master.key.next` until every
//! secret is sealed under it; a replica that starts in between holds both.

use std::io::Write;
use std::path::{Path, PathBuf};

use secrecy::ExposeSecret;

use super::{MasterKey, SecretError, Vault};

/// Where the current master key was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `ONYX_MASTER_KEY`.
    Environment,
    /// `{dataDir}/master.key`.
    File(PathBuf),
    /// Made up for this process only.
    Generated,
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Environment => f.write_str("ONYX_MASTER_KEY"),
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Generated => f.write_str("a key made for this process"),
        }
    }
}

/// The key files in a data dir.
pub struct MasterKeyFiles {
    pub current: PathBuf,
    pub next: PathBuf,
}

impl MasterKeyFiles {
    pub fn in_dir(data_dir: &Path) -> Self {
        Self {
            current: data_dir.join("master.key"),
            next: data_dir.join("master.key.next"),
        }
    }

    /// Writes `key` as the next key (mode 0600), replacing an older attempt.
    pub fn write_next(&self, key: &MasterKey) -> Result<(), SecretError> {
        write_key_file(&self.next, key, true)
    }

    /// Makes the next key the current one (an atomic rename).
    pub fn promote_next(&self) -> Result<(), SecretError> {
        std::fs::rename(&self.next, &self.current).map_err(|source| SecretError::KeyFile {
            path: self.current.clone(),
            source,
        })
    }
}

fn key_file_error(path: &Path) -> impl FnOnce(std::io::Error) -> SecretError + '_ {
    move |source| SecretError::KeyFile {
        path: path.to_path_buf(),
        source,
    }
}

fn write_key_file(path: &Path, key: &MasterKey, replace: bool) -> Result<(), SecretError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(key_file_error(path))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if replace {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(key_file_error(path))?;
    file.write_all(format!("{}\n", key.encoded().expose_secret()).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(key_file_error(path))
}

fn read_key_file(path: &Path) -> Result<Option<MasterKey>, SecretError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            warn_if_readable_by_others(path);
            MasterKey::parse(&text, &path.display().to_string()).map(Some)
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SecretError::KeyFile {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "the master key file is readable by other users: chmod 600 it");
        }
    }
}

/// The vault for this process: the key from `master_key_env` (the value of
/// `ONYX_MASTER_KEY`, with `ONYX_MASTER_KEY_PREVIOUS` still opening what the
/// key before it sealed), or else the data dir's key file, made on first use.
pub fn load_vault(
    data_dir: &Path,
    master_key_env: Option<&str>,
    previous_env: Option<&str>,
) -> Result<Vault, SecretError> {
    if let Some(text) = master_key_env.filter(|t| !t.trim().is_empty()) {
        let current = MasterKey::parse(text, "ONYX_MASTER_KEY")?;
        let older = previous_env
            .filter(|t| !t.trim().is_empty())
            .map(|t| MasterKey::parse(t, "ONYX_MASTER_KEY_PREVIOUS"))
            .transpose()?
            .into_iter()
            .collect();
        return Ok(Vault::new(current, older, KeySource::Environment));
    }
    let files = MasterKeyFiles::in_dir(data_dir);
    let current = match read_key_file(&files.current)? {
        Some(key) => key,
        None => {
            let key = MasterKey::generate()?;
            write_key_file(&files.current, &key, false)?;
            tracing::info!(path = %files.current.display(), key_id = key.id(), "made a master key for sealing credentials");
            key
        }
    };
    let older = read_key_file(&files.next)?.into_iter().collect();
    Ok(Vault::new(current, older, KeySource::File(files.current)))
}

/// [`load_vault`] with `ONYX_MASTER_KEY` and `ONYX_MASTER_KEY_PREVIOUS` from
/// the environment (what `serve` and `onyx keys rotate-master` use).
pub fn vault_from_env(data_dir: &Path) -> Result<Vault, SecretError> {
    let env = |name: &str| std::env::var(name).ok();
    load_vault(
        data_dir,
        env("ONYX_MASTER_KEY").as_deref(),
        env("ONYX_MASTER_KEY_PREVIOUS").as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_start_makes_a_private_key_file_and_later_starts_reuse_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_vault(dir.path(), None, None).unwrap();
        let path = dir.path().join("master.key");
        assert_eq!(first.source(), &KeySource::File(path.clone()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let sealed = first.seal("secret", "c").unwrap();
        let again = load_vault(dir.path(), None, None).unwrap();
        assert_eq!(again.key_id(), first.key_id());
        assert_eq!(again.open(&sealed, "c").unwrap().expose_secret(), "secret");
    }

    #[test]
    fn the_environment_wins_over_the_file_and_a_pending_next_key_still_opens() {
        let dir = tempfile::tempdir().unwrap();
        let from_file = load_vault(dir.path(), None, None).unwrap();
        let hex = "ab".repeat(32);
        let from_env = load_vault(dir.path(), Some(&hex), None).unwrap();
        assert_eq!(from_env.source(), &KeySource::Environment);
        assert_ne!(from_env.key_id(), from_file.key_id());

        let files = MasterKeyFiles::in_dir(dir.path());
        let next = MasterKey::generate().unwrap();
        let next_vault = Vault::new(
            MasterKey::parse(next.encoded().expose_secret(), "t").unwrap(),
            Vec::new(),
            KeySource::Generated,
        );
        files.write_next(&next).unwrap();
        let sealed_by_next = next_vault.seal("s", "c").unwrap();
        let between = load_vault(dir.path(), None, None).unwrap();
        assert_eq!(
            between.key_id(),
            from_file.key_id(),
            "the old key seals until promoted"
        );
        assert_eq!(between.open(&sealed_by_next, "c").unwrap().expose_secret(), "s");
        files.promote_next().unwrap();
        let after = load_vault(dir.path(), None, None).unwrap();
        assert_eq!(after.key_id(), next_vault.key_id());
        assert!(!files.next.exists());
    }
}
