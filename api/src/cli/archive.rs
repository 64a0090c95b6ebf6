//! The backup archive: a tar stream compressed with zstd, one entry per
//! thing kept, and `manifest.json` last (what made it, the schema version,
//! counts, and every entry's size and SHA-256). Entry paths:
//!
//! - `database.surql`: the database dump (SurrealDB's export);
//! - `objects/{bucket}/{key}`: every object (memory files, session logs, skills);
//! - `data/{path}`: the data dir's own files (sign-ins, agents' work folders);
//! - `secrets/master.key` (and `master.key.next`): only with `--include-master-key`.
//!
//! Reading verifies before anything is used: every entry a plain file with a
//! safe path, each hash and size as the manifest says, nothing missing, nothing extra.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The layout this build writes and reads.
pub const FORMAT: u32 = 1;
pub const MANIFEST: &str = "manifest.json";
pub const DATABASE: &str = "database.surql";
pub const OBJECTS: &str = "objects/";
pub const DATA: &str = "data/";
pub const SECRETS: &str = "secrets/";
/// zstd's default level: about as fast as the disk, a third of the size of JSON text.
const ZSTD_LEVEL: i32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{0} is not an Onyx backup: {1}")]
    NotABackup(String, String),
    #[error("the archive is damaged or was changed: {0}")]
    Damaged(String),
}

pub fn io_error(path: impl AsRef<Path>) -> impl FnOnce(std::io::Error) -> ArchiveError {
    let path = path.as_ref().display().to_string();
    move |source| ArchiveError::Io { path, source }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub sessions: u64,
    pub memory_files: u64,
    pub memory_chunks: u64,
    pub tasks: u64,
    pub providers: u64,
    /// Objects per bucket.
    pub objects: BTreeMap<String, u64>,
    pub data_files: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// Unix permission bits, kept for data-dir files (credentials are 0600).
    pub mode: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format: u32,
    pub onyx_version: String,
    pub schema_version: u32,
    pub created_at: String,
    /// `embedded` or `server`: where the database was.
    pub database: String,
    /// `local` or `s3`: where the objects were.
    pub objects: String,
    /// The id of the master key that sealed the stored credentials.
    pub master_key_id: Option<String>,
    /// Whether `secrets/master.key` is in the archive.
    pub master_key_included: bool,
    pub counts: Counts,
    pub entries: Vec<Entry>,
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `path` is relative with only plain components (no `..`, no root).
pub fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\\')
        && !path.contains('\0')
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// Writes an archive to `{path}.partial`, renamed to `path` by [`finish`](Self::finish).
pub struct ArchiveWriter {
    path: PathBuf,
    partial: PathBuf,
    tar: tar::Builder<zstd::Encoder<'static, BufWriter<File>>>,
    entries: Vec<Entry>,
}

/// Counts and hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    read: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

impl ArchiveWriter {
    /// Starts an archive at `path`, which must not exist yet.
    pub fn create(path: &Path) -> Result<Self, ArchiveError> {
        if path.exists() {
            return Err(ArchiveError::Io {
                path: path.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "exists already (a backup is never overwritten)",
                ),
            });
        }
        let partial = partial_path(path);
        let file = File::create(&partial).map_err(io_error(&partial))?;
        let encoder = zstd::Encoder::new(BufWriter::new(file), ZSTD_LEVEL).map_err(io_error(&partial))?;
        let mut tar = tar::Builder::new(encoder);
        tar.mode(tar::HeaderMode::Deterministic);
        Ok(Self {
            path: path.to_path_buf(),
            partial,
            tar,
            entries: Vec::new(),
        })
    }

    fn header(size: u64, mode: u32) -> tar::Header {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(size);
        header.set_mode(mode & 0o777);
        header
    }

    /// Adds `size` bytes read from `data` as `path`; fails if fewer arrive.
    pub fn add(&mut self, path: &str, size: u64, mode: u32, data: impl Read) -> Result<(), ArchiveError> {
        let mut reading = Hashing {
            inner: data.take(size),
            hasher: Sha256::new(),
            read: 0,
        };
        let mut header = Self::header(size, mode);
        self.tar
            .append_data(&mut header, path, &mut reading)
            .map_err(io_error(&self.partial))?;
        if reading.read != size {
            return Err(ArchiveError::Damaged(format!(
                "{path} changed while it was read ({} of {size} bytes)",
                reading.read
            )));
        }
        self.entries.push(Entry {
            path: path.to_string(),
            size,
            sha256: hex(&reading.hasher.finalize()),
            mode: mode & 0o777,
        });
        Ok(())
    }

    pub fn add_bytes(&mut self, path: &str, mode: u32, bytes: &[u8]) -> Result<(), ArchiveError> {
        self.add(path, bytes.len() as u64, mode, bytes)
    }

    /// Adds the file at `source` as `path`, with its permission bits.
    pub fn add_file(&mut self, path: &str, source: &Path) -> Result<(), ArchiveError> {
        let file = File::open(source).map_err(io_error(source))?;
        let meta = file.metadata().map_err(io_error(source))?;
        #[cfg(unix)]
        let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
        #[cfg(not(unix))]
        let mode = 0o644;
        self.add(path, meta.len(), mode, BufReader::new(file))
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Writes the manifest (with every entry added so far) and moves the
    /// finished archive to its path; its size in bytes.
    pub fn finish(mut self, mut manifest: Manifest) -> Result<u64, ArchiveError> {
        manifest.entries = std::mem::take(&mut self.entries);
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|err| ArchiveError::Damaged(format!("manifest: {err}")))?;
        let mut header = Self::header(json.len() as u64, 0o644);
        self.tar
            .append_data(&mut header, MANIFEST, json.as_slice())
            .map_err(io_error(&self.partial))?;
        let encoder = self.tar.into_inner().map_err(io_error(&self.partial))?;
        let mut out = encoder.finish().map_err(io_error(&self.partial))?;
        out.flush().map_err(io_error(&self.partial))?;
        let file = out.into_inner().map_err(|err| ArchiveError::Io {
            path: self.partial.display().to_string(),
            source: err.into_error(),
        })?;
        file.sync_all().map_err(io_error(&self.partial))?;
        let size = file.metadata().map_err(io_error(&self.partial))?.len();
        std::fs::rename(&self.partial, &self.path).map_err(io_error(&self.path))?;
        Ok(size)
    }

    /// Removes the unfinished archive (after a failure).
    pub fn abandon(self) {
        let _ = std::fs::remove_file(&self.partial);
    }
}

pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// The archive's entries in order, decompressing as they are read.
pub type Entries = tar::Archive<zstd::Decoder<'static, BufReader<File>>>;

pub fn open(path: &Path) -> Result<Entries, ArchiveError> {
    let file = File::open(path).map_err(io_error(path))?;
    let decoder = zstd::Decoder::new(file)
        .map_err(|err| ArchiveError::NotABackup(path.display().to_string(), format!("not zstd: {err}")))?;
    Ok(tar::Archive::new(decoder))
}

/// The path of an archive entry, refused unless it is a plain file with a safe path.
pub fn entry_path<R: Read>(entry: &tar::Entry<'_, R>) -> Result<String, ArchiveError> {
    let path = entry
        .path()
        .map_err(|err| ArchiveError::Damaged(format!("an entry's path: {err}")))?;
    let path = path
        .to_str()
        .ok_or_else(|| ArchiveError::Damaged(format!("{} is not UTF-8", path.display())))?
        .to_string();
    if entry.header().entry_type() != tar::EntryType::Regular {
        return Err(ArchiveError::Damaged(format!("{path} is not a plain file")));
    }
    if !is_plain_relative(&path) {
        return Err(ArchiveError::Damaged(format!(
            "{path:?} is not a plain relative path"
        )));
    }
    Ok(path)
}

/// Reads an entry to the end, returning its size and SHA-256 (with `sink` getting the bytes).
pub fn copy_hashed(mut from: impl Read, sink: &mut impl Write) -> std::io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = from.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        sink.write_all(&buffer[..n])?;
        total += n as u64;
    }
    Ok((total, hex(&hasher.finalize())))
}

/// Reads the whole archive once and checks it against its manifest
/// (`progress` gets the number of entries read); the manifest if all holds.
pub fn verify(path: &Path, progress: &dyn Fn(u64)) -> Result<Manifest, ArchiveError> {
    let mut archive = open(path)?;
    let mut seen: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut manifest: Option<Manifest> = None;
    let entries = archive
        .entries()
        .map_err(|err| ArchiveError::NotABackup(path.display().to_string(), err.to_string()))?;
    for entry in entries {
        let entry = entry.map_err(|err| ArchiveError::Damaged(err.to_string()))?;
        let name = entry_path(&entry)?;
        if manifest.is_some() {
            return Err(ArchiveError::Damaged(format!("{name} comes after the manifest")));
        }
        if name == MANIFEST {
            let mut text = Vec::new();
            let mut entry = entry;
            entry
                .read_to_end(&mut text)
                .map_err(|err| ArchiveError::Damaged(format!("{MANIFEST}: {err}")))?;
            let parsed: Manifest = serde_json::from_slice(&text).map_err(|err| {
                ArchiveError::NotABackup(path.display().to_string(), format!("{MANIFEST}: {err}"))
            })?;
            manifest = Some(parsed);
            continue;
        }
        let (size, sha256) = copy_hashed(entry, &mut std::io::sink())
            .map_err(|err| ArchiveError::Damaged(format!("{name}: {err}")))?;
        if seen.insert(name.clone(), (size, sha256)).is_some() {
            return Err(ArchiveError::Damaged(format!("{name} appears twice")));
        }
        progress(seen.len() as u64);
    }
    let manifest = manifest.ok_or_else(|| {
        ArchiveError::NotABackup(path.display().to_string(), format!("no {MANIFEST} (cut short?)"))
    })?;
    if manifest.format != FORMAT {
        return Err(ArchiveError::NotABackup(
            path.display().to_string(),
            format!("archive format {} (this onyx reads {FORMAT})", manifest.format),
        ));
    }
    for listed in &manifest.entries {
        match seen.remove(&listed.path) {
            None => return Err(ArchiveError::Damaged(format!("{} is missing", listed.path))),
            Some((size, sha256)) if size != listed.size || sha256 != listed.sha256 => {
                return Err(ArchiveError::Damaged(format!(
                    "{} does not match its checksum",
                    listed.path
                )));
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = seen.keys().next() {
        return Err(ArchiveError::Damaged(format!("{extra} is not in the manifest")));
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            format: FORMAT,
            onyx_version: "test".into(),
            schema_version: 1,
            created_at: "2026-11-27T00:00:00Z".into(),
            database: "embedded".into(),
            objects: "local".into(),
            master_key_id: None,
            master_key_included: false,
            counts: Counts::default(),
            entries: Vec::new(),
        }
    }

    #[test]
    fn what_is_written_verifies_and_any_changed_byte_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.tar.zst");
        let mut writer = ArchiveWriter::create(&path).unwrap();
        writer
            .add_bytes("objects/onyx-memory/main/MEMORY.md", 0o644, b"remember the NAS")
            .unwrap();
        let long_key = format!("objects/onyx-sessions/main/{}/log.jsonl", "s".repeat(300));
        writer.add_bytes(&long_key, 0o600, b"{}\n").unwrap();
        writer.finish(manifest()).unwrap();
        assert!(!partial_path(&path).exists());
        assert!(ArchiveWriter::create(&path).is_err(), "never overwrites a backup");

        let verified = verify(&path, &|_| {}).unwrap();
        assert_eq!(verified.entries.len(), 2);
        assert_eq!(
            verified.entries.iter().find(|e| e.path == long_key).unwrap().mode,
            0o600
        );

        // Flip one byte of the memory file's content inside the tar stream.
        let raw = zstd::decode_all(File::open(&path).unwrap()).unwrap();
        let at = raw.windows(7).position(|w| w == b"the NAS").unwrap();
        let mut changed = raw.clone();
        changed[at] = b'T';
        let tampered = dir.path().join("t.tar.zst");
        std::fs::write(&tampered, zstd::encode_all(changed.as_slice(), 3).unwrap()).unwrap();
        let err = verify(&tampered, &|_| {}).unwrap_err().to_string();
        assert!(err.contains("does not match its checksum"), "{err}");

        // Cut short: the manifest is gone.
        let cut = dir.path().join("c.tar.zst");
        std::fs::write(&cut, zstd::encode_all(&raw[..1024], 3).unwrap()).unwrap();
        assert!(verify(&cut, &|_| {}).is_err());
    }

    #[test]
    fn unsafe_entry_paths_are_refused() {
        for bad in ["../x", "/etc/passwd", "a/../../b", "", "a\\b"] {
            assert!(!is_plain_relative(bad), "{bad:?}");
        }
        assert!(is_plain_relative("data/workspaces/main/notes.txt"));
    }

    /// A hand-made archive (tar's own writer refuses these names).
    fn crafted(dir: &Path, name: &[u8], kind: tar::EntryType) -> PathBuf {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_entry_type(kind);
        header.set_size(4);
        header.set_mode(0o644);
        header.set_cksum();
        let mut tar = tar::Builder::new(Vec::new());
        tar.append(&header, &b"evil"[..]).unwrap();
        let path = dir.join("crafted.tar.zst");
        std::fs::write(
            &path,
            zstd::encode_all(tar.into_inner().unwrap().as_slice(), 3).unwrap(),
        )
        .unwrap();
        path
    }

    #[test]
    fn an_archive_escaping_its_target_or_holding_links_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = verify(
            &crafted(dir.path(), b"data/../../etc/cron.d/x", tar::EntryType::Regular),
            &|_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("not a plain relative path"), "{err}");
        let err = verify(
            &crafted(dir.path(), b"data/link", tar::EntryType::Symlink),
            &|_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("not a plain file"), "{err}");
        std::fs::write(dir.path().join("junk"), b"not zstd").unwrap();
        assert!(verify(&dir.path().join("junk"), &|_| {}).is_err());
    }
}
