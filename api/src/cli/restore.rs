//! `onyx restore [--config FILE] [--force] PATH`: puts a backup back where
//! the config (read as `onyx serve` reads it) keeps things. The archive is
//! verified whole before anything is touched; the targets must be empty
//! (`--force`: the data dir's files are moved aside, a server database and
//! the buckets are emptied); everything local is staged in the data dir and
//! moved into place only once all of it, and the database import, worked.
//! A failure leaves the targets as they were: staged files are removed, a
//! server database and the buckets are emptied again.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use super::archive::{self, Manifest};
use super::backup::{bar, configured_master_key};
use super::data_files::{self, KEY_FILES, RESTORE_STAGING};
use super::error::{CliError, connect_error, exit_code};
use crate::config::{self, Config, ObjectStoreConfig, SurrealConfig};
use crate::storage::{self, Bucket, Db, LocalStore, ObjectKey, ObjectStore, PutCondition};

#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Restore over existing data: the data dir's files are moved to
    /// `replaced-{time}/` inside it; a server database and the buckets are emptied.
    #[arg(long)]
    force: bool,
    /// The archive `onyx backup` wrote.
    path: PathBuf,
}

pub async fn run(args: RestoreArgs) -> ExitCode {
    exit_code("restore", restore(args).await)
}

/// Where the restore puts things, and what it must undo if it fails.
struct Targets {
    config: Config,
    staging: PathBuf,
    /// The database, when it is a server (an embedded one is staged).
    server_db: Option<Db>,
    /// The object store: S3, or a local store in the staging dir.
    objects: Arc<dyn ObjectStore>,
    objects_staged: bool,
    /// Objects written to S3, deleted again if the restore fails.
    written: Vec<(Bucket, ObjectKey)>,
    imported_into_server: bool,
}

async fn restore(args: RestoreArgs) -> Result<(), CliError> {
    let started = Instant::now();
    let path = config::locate(args.config.as_deref());
    let config = config::load(path.as_deref())?;
    let progress = bar("verifying", 0);
    let archive_path = args.path.clone();
    let verifying = progress.clone();
    let manifest = tokio::task::spawn_blocking(move || {
        archive::verify(&archive_path, &|done| verifying.set_position(done))
    })
    .await
    .map_err(|err| CliError::Io(err.to_string()))??;
    progress.finish_and_clear();
    if manifest.schema_version > storage::SCHEMA_VERSION {
        return Err(storage::DbError::SchemaTooNew {
            found: manifest.schema_version,
            known: storage::SCHEMA_VERSION,
        }
        .into());
    }
    check_master_key(&config, &manifest)?;
    let mut targets = Targets::prepare(config, args.force).await?;
    match targets.fill(&args.path, &manifest).await {
        Ok(()) => {}
        Err(err) => {
            targets.undo().await;
            return Err(err);
        }
    }
    targets.move_into_place(&manifest)?;
    let counts = &manifest.counts;
    eprintln!(
        "restored {} session(s), {} memory file(s) ({} chunks), {} task(s), {} provider(s), {} object(s) and {} data-dir file(s) from a backup of {} (onyx {}, schema version {}) in {} ms",
        counts.sessions,
        counts.memory_files,
        counts.memory_chunks,
        counts.tasks,
        counts.providers,
        counts.objects.values().sum::<u64>(),
        counts.data_files,
        manifest.created_at,
        manifest.onyx_version,
        manifest.schema_version,
        started.elapsed().as_millis(),
    );
    if let (Some(id), false) = (&manifest.master_key_id, manifest.master_key_included)
        && configured_master_key(&targets.config.storage.data_dir)?.is_none()
    {
        eprintln!(
            "the stored provider keys and sign-ins are sealed under master key {id}, which the archive does not hold: put its master.key in {} or set ONYX_MASTER_KEY before `onyx serve`",
            targets.config.storage.data_dir.display()
        );
    }
    Ok(())
}

/// A configured master key other than the one that sealed the archive's
/// credentials would make every sealed value unreadable: refused.
fn check_master_key(config: &Config, manifest: &Manifest) -> Result<(), CliError> {
    let Some(expected) = &manifest.master_key_id else {
        return Ok(());
    };
    match configured_master_key(&config.storage.data_dir)? {
        Some((key, _)) if key.id() != expected => Err(CliError::Io(format!(
            "the archive's credentials are sealed under master key {expected}, but the configured master key is {}: give the restore the key the backup was made with",
            key.id()
        ))),
        _ => Ok(()),
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |err| CliError::Io(format!("{}: {err}", path.display()))
}

/// Whether `dir` holds any file (directories alone count as empty).
fn has_files(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| match entry.file_type() {
        Ok(kind) if kind.is_dir() => has_files(&entry.path()),
        _ => true,
    })
}

impl Targets {
    /// Checks every target is empty (or, forced, empties it) and makes the staging dir.
    async fn prepare(config: Config, force: bool) -> Result<Self, CliError> {
        let data_dir = config.storage.data_dir.clone();
        let (files, _) = data_files::list(&config).map_err(io(&data_dir))?;
        let db_dir = data_files::embedded_db_dir(&config);
        let local_objects = matches!(config.storage.objects, ObjectStoreConfig::Local);
        let mut occupied: Vec<String> = files.iter().take(3).map(|f| f.relative.clone()).collect();
        if db_dir.as_deref().is_some_and(has_files) {
            occupied.push("the embedded database".into());
        }
        if local_objects && has_files(&data_dir.join("objects")) {
            occupied.push("objects".into());
        }
        let server_db = match &db_dir {
            Some(_) => None,
            None => Some(
                Db::connect(&config.storage.surrealdb)
                    .await
                    .map_err(connect_error)?,
            ),
        };
        let server_tables = match &server_db {
            Some(db) => db.tables().await?,
            None => Vec::new(),
        };
        let remote_objects = if local_objects {
            None
        } else {
            Some(storage::open_object_store(&config.storage).await?)
        };
        let mut remote_count = 0usize;
        if let Some(store) = &remote_objects {
            for bucket in Bucket::ALL {
                remote_count += store.list(bucket, "").await?.len();
            }
        }
        let not_empty = !occupied.is_empty() || !server_tables.is_empty() || remote_count > 0;
        if not_empty && !force {
            let mut what = Vec::new();
            if !occupied.is_empty() {
                what.push(format!(
                    "the data dir {} holds {}",
                    data_dir.display(),
                    occupied.join(", ")
                ));
            }
            if !server_tables.is_empty() {
                what.push(format!(
                    "the database {} has {} table(s)",
                    config.storage.surrealdb.url,
                    server_tables.len()
                ));
            }
            if remote_count > 0 {
                what.push(format!("the buckets hold {remote_count} object(s)"));
            }
            return Err(CliError::Io(format!(
                "refusing to restore over existing data ({}): restore into an empty data dir, database and buckets, or pass --force to replace them",
                what.join("; ")
            )));
        }
        if not_empty {
            set_aside(&config, &files)?;
            if let Some(db) = &server_db {
                db.remove_all_tables().await?;
            }
            if let Some(store) = &remote_objects {
                for bucket in Bucket::ALL {
                    for info in store.list(bucket, "").await? {
                        store.delete(bucket, &ObjectKey::new(info.key)?).await?;
                    }
                }
            }
        }
        let staging = data_dir.join(RESTORE_STAGING);
        if staging.exists() {
            // Left by a restore that was stopped: ours, by its name.
            std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
        }
        std::fs::create_dir_all(&staging).map_err(io(&staging))?;
        let (objects, objects_staged): (Arc<dyn ObjectStore>, bool) = match remote_objects {
            Some(store) => (store, false),
            None => {
                let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(staging.join("objects")));
                store.ensure_buckets().await?;
                (store, true)
            }
        };
        Ok(Self {
            config,
            staging,
            server_db,
            objects,
            objects_staged,
            written: Vec::new(),
            imported_into_server: false,
        })
    }

    /// Reads the archive a second time (each entry checked against the
    /// manifest again): objects into the store, the rest into staging;
    /// then imports the database dump.
    async fn fill(&mut self, path: &Path, manifest: &Manifest) -> Result<(), CliError> {
        let expected: BTreeMap<&str, &archive::Entry> =
            manifest.entries.iter().map(|e| (e.path.as_str(), e)).collect();
        let progress = bar("restoring", manifest.entries.len() as u64);
        let mut archive = archive::open(path)?;
        let entries = archive
            .entries()
            .map_err(|err| CliError::Io(format!("{}: {err}", path.display())))?;
        for entry in entries {
            let entry = entry.map_err(|err| CliError::Io(err.to_string()))?;
            let name = archive::entry_path(&entry)?;
            if name == archive::MANIFEST {
                continue;
            }
            let Some(listed) = expected.get(name.as_str()) else {
                return Err(CliError::Io(format!("{name} is not in the manifest")));
            };
            let bytes = read_checked(entry, listed)?;
            self.place(&name, listed.mode, bytes).await?;
            progress.inc(1);
        }
        progress.finish_and_clear();
        let spinner = indicatif::ProgressBar::new_spinner().with_message("importing the database");
        spinner.enable_steady_tick(std::time::Duration::from_millis(120));
        let imported = self.import_database().await;
        spinner.finish_and_clear();
        imported
    }

    async fn place(&mut self, name: &str, mode: u32, bytes: Vec<u8>) -> Result<(), CliError> {
        if let Some(rest) = name.strip_prefix(archive::OBJECTS) {
            let (bucket, key) = rest
                .split_once('/')
                .ok_or_else(|| CliError::Io(format!("{name}: no bucket")))?;
            let bucket = Bucket::ALL
                .into_iter()
                .find(|b| b.name() == bucket)
                .ok_or_else(|| CliError::Io(format!("{name}: unknown bucket {bucket:?}")))?;
            let key = ObjectKey::new(key)?;
            self.objects
                .put(bucket, &key, bytes.into(), PutCondition::IfAbsent)
                .await?;
            if !self.objects_staged {
                self.written.push((bucket, key));
            }
            return Ok(());
        }
        let staged = if name == archive::DATABASE {
            self.staging.join(archive::DATABASE)
        } else if let Some(rest) = name.strip_prefix(archive::DATA) {
            self.staging.join("data").join(rest)
        } else if let Some(rest) = name.strip_prefix(archive::SECRETS)
            && KEY_FILES.contains(&rest)
        {
            self.staging.join("secrets").join(rest)
        } else {
            return Err(CliError::Io(format!("{name}: not something a backup holds")));
        };
        write_new(&staged, mode, &bytes)
    }

    async fn import_database(&mut self) -> Result<(), CliError> {
        let dump = self.staging.join(archive::DATABASE);
        if let Some(db) = &self.server_db {
            self.imported_into_server = true;
            db.import_from(&dump).await?;
            db.migrate().await?;
            return Ok(());
        }
        let staged = self.staged_db_config();
        let db = Db::connect(&staged).await?;
        let result = async {
            db.import_from(&dump).await?;
            db.migrate().await
        }
        .await;
        db.close().await?;
        drop(db);
        result?;
        let dir = self.staging.join("db");
        if !storage::wait_closed(&dir, std::time::Duration::from_secs(10)).await {
            return Err(CliError::Io("the restored database did not close".into()));
        }
        Ok(())
    }

    fn staged_db_config(&self) -> SurrealConfig {
        let configured = &self.config.storage.surrealdb;
        SurrealConfig {
            url: format!("surrealkv://{}", self.staging.join("db").display()),
            user: None,
            pass: None,
            namespace: configured.namespace.clone(),
            database: configured.database.clone(),
            embedded: configured.embedded,
            connections: configured.connections,
        }
    }

    /// Empties again what the restore wrote to a server or bucket, and drops the staging dir.
    async fn undo(&mut self) {
        if self.imported_into_server
            && let Some(db) = &self.server_db
            && let Err(err) = db.remove_all_tables().await
        {
            eprintln!("onyx restore: could not empty the database again: {err}");
        }
        for (bucket, key) in self.written.drain(..) {
            if let Err(err) = self.objects.delete(bucket, &key).await {
                eprintln!(
                    "onyx restore: could not delete {}/{key} again: {err}",
                    bucket.name()
                );
            }
        }
        let _ = std::fs::remove_dir_all(&self.staging);
    }

    /// Renames everything staged to where `onyx serve` looks for it.
    fn move_into_place(&self, manifest: &Manifest) -> Result<(), CliError> {
        let data_dir = &self.config.storage.data_dir;
        if let Some(db_dir) = data_files::embedded_db_dir(&self.config) {
            replace_empty_dir(&self.staging.join("db"), &db_dir)?;
        }
        if self.objects_staged {
            replace_empty_dir(&self.staging.join("objects"), &data_dir.join("objects"))?;
        }
        for entry in &manifest.entries {
            let (from, to) = if let Some(rest) = entry.path.strip_prefix(archive::DATA) {
                (self.staging.join("data").join(rest), data_dir.join(rest))
            } else if let Some(rest) = entry.path.strip_prefix(archive::SECRETS) {
                (self.staging.join("secrets").join(rest), data_dir.join(rest))
            } else {
                continue;
            };
            if to.exists() {
                // Only a key file can be there (checked to be the same key).
                continue;
            }
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            std::fs::rename(&from, &to).map_err(io(&to))?;
        }
        std::fs::remove_dir_all(&self.staging).map_err(io(&self.staging))
    }
}

/// Reads an entry whole, checked against the manifest once more.
fn read_checked(entry: impl Read, listed: &archive::Entry) -> Result<Vec<u8>, CliError> {
    let mut bytes = Vec::with_capacity(listed.size as usize);
    let (size, sha256) = archive::copy_hashed(entry, &mut bytes)
        .map_err(|err| CliError::Io(format!("{}: {err}", listed.path)))?;
    if size != listed.size || sha256 != listed.sha256 {
        return Err(CliError::Io(format!(
            "{} changed since it was verified",
            listed.path
        )));
    }
    Ok(bytes)
}

fn write_new(path: &Path, mode: u32, bytes: &[u8]) -> Result<(), CliError> {
    use std::io::Write;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode & 0o777);
    let mut file = options.open(path).map_err(io(path))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io(path))
}

/// Moves `from` to `to`, where `to` holds no file (empty folders are removed).
fn replace_empty_dir(from: &Path, to: &Path) -> Result<(), CliError> {
    if to.exists() {
        if has_files(to) {
            return Err(CliError::Io(format!("{} is not empty", to.display())));
        }
        std::fs::remove_dir_all(to).map_err(io(to))?;
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::rename(from, to).map_err(io(to))
}

/// `--force` over a data dir in use: its files, embedded database and local
/// objects move to `replaced-{time}/` inside it (kept, never deleted).
fn set_aside(config: &Config, files: &[data_files::DataFile]) -> Result<(), CliError> {
    let data_dir = &config.storage.data_dir;
    let aside = data_dir.join(format!(
        "replaced-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
    ));
    let mut moved = 0usize;
    let mut move_one = |from: &Path, relative: &Path| -> Result<(), CliError> {
        let to = aside.join(relative);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::rename(from, &to).map_err(io(from))?;
        moved += 1;
        Ok(())
    };
    for file in files {
        move_one(&file.path, Path::new(&file.relative))?;
    }
    if let Some(db_dir) = data_files::embedded_db_dir(config)
        && has_files(&db_dir)
    {
        move_one(&db_dir, Path::new("db"))?;
    }
    let objects = data_dir.join("objects");
    if matches!(config.storage.objects, ObjectStoreConfig::Local) && has_files(&objects) {
        move_one(&objects, Path::new("objects"))?;
    }
    if moved > 0 {
        eprintln!(
            "onyx restore: --force: moved what was in the data dir to {} (delete it once the restore is checked)",
            aside.display()
        );
    }
    Ok(())
}
