//! `onyx backup [--config FILE] [--include-master-key] PATH`: one archive
//! (`archive`) with the database dump, every object and the data dir's own
//! files. The dump comes first and is one read transaction, so a backup
//! taken while Onyx runs on a SurrealDB server is consistent: objects are
//! copied after it, so every object the dump names is in the archive (a file
//! written later is picked up by memory sync and `onyx reindex` after a restore).
//! An embedded database held by a running `onyx serve` is dumped by that
//! process, asked through the data dir's control socket ([`super::control`]).
//! The master key is left out unless asked for; the manifest names its id.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use indicatif::ProgressBar;

use super::archive::{self, ArchiveWriter, Counts, Manifest};
use super::control::{self, Exported};
use super::data_files;
use super::error::{CliError, connect_error, exit_code};
use crate::config::{self, Config, ObjectStoreConfig};
use crate::secrets::MasterKey;
use crate::storage::{self, Bucket, Db, ObjectKey, ObjectStore};

#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Put the master key in the archive too (then keep the archive as safe as the key).
    #[arg(long)]
    include_master_key: bool,
    /// The archive to write (tar + zstd, e.g. onyx-2026-11-27.tar.zst); must not exist.
    path: PathBuf,
}

pub async fn run(args: BackupArgs) -> ExitCode {
    exit_code("backup", backup(args).await)
}

/// A progress bar of `total` steps (drawn only on a terminal).
pub fn bar(label: &str, total: u64) -> ProgressBar {
    let progress = super::reindex::bar(label);
    progress.set_length(total);
    progress
}

impl From<archive::ArchiveError> for CliError {
    fn from(err: archive::ArchiveError) -> Self {
        CliError::Io(err.to_string())
    }
}

/// A master key and the key files that hold it (name, content).
pub type KeyWithFiles = (MasterKey, Vec<(String, Vec<u8>)>);

/// The master key as it is configured (`ONYX_MASTER_KEY`, else the data
/// dir's key file), without making one; with the files that hold it.
pub fn configured_master_key(data_dir: &Path) -> Result<Option<KeyWithFiles>, CliError> {
    if let Ok(text) = std::env::var("ONYX_MASTER_KEY")
        && !text.trim().is_empty()
    {
        let key = MasterKey::parse(&text, "ONYX_MASTER_KEY")?;
        let file = format!("{}\n", secrecy::ExposeSecret::expose_secret(key.encoded()));
        return Ok(Some((key, vec![("master.key".into(), file.into_bytes())])));
    }
    let current = data_dir.join("master.key");
    let text = match std::fs::read(&current) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(CliError::Io(format!("{}: {err}", current.display()))),
    };
    let key = MasterKey::parse(&String::from_utf8_lossy(&text), &current.display().to_string())?;
    let mut files = vec![("master.key".to_string(), text)];
    if let Ok(next) = std::fs::read(data_dir.join("master.key.next")) {
        files.push(("master.key.next".into(), next));
    }
    Ok(Some((key, files)))
}

async fn backup(args: BackupArgs) -> Result<(), CliError> {
    let started = Instant::now();
    let path = config::locate(args.config.as_deref());
    let config = config::load(path.as_deref())?;
    // None: the embedded database is held by a running `onyx serve`, which
    // dumps it for us.
    let db = match Db::connect(&config.storage.surrealdb)
        .await
        .map_err(connect_error)
    {
        Ok(db) => Some(db),
        Err(CliError::DatabaseInUse(_)) => None,
        Err(err) => return Err(err),
    };
    if let Some(db) = &db {
        check_schema(db.schema_version().await?)?;
    }
    let objects = storage::open_object_store(&config.storage).await?;
    let key = configured_master_key(&config.storage.data_dir)?;
    if args.include_master_key && key.is_none() {
        return Err(CliError::Io(
            "--include-master-key: no master key is configured (ONYX_MASTER_KEY unset, no master.key in the data dir)".into(),
        ));
    }
    let mut writer = ArchiveWriter::create(&args.path)?;
    let result = write(&mut writer, &config, db.as_ref(), objects.as_ref(), &args, &key).await;
    let (counts, manifest) = match result {
        Ok(done) => done,
        Err(err) => {
            writer.abandon();
            return Err(err);
        }
    };
    let entries = writer.entries().len();
    let size = writer.finish(manifest)?;
    if let Some(db) = db {
        db.close().await?;
    }
    eprintln!(
        "backed up {} session(s), {} memory file(s) ({} chunks), {} task(s), {} provider(s), {} object(s) and {} data-dir file(s): {} entries, {} bytes, in {} ms -> {}",
        counts.sessions,
        counts.memory_files,
        counts.memory_chunks,
        counts.tasks,
        counts.providers,
        counts.objects.values().sum::<u64>(),
        counts.data_files,
        entries,
        size,
        started.elapsed().as_millis(),
        args.path.display()
    );
    match (&key, args.include_master_key) {
        (Some((key, _)), false) => eprintln!(
            "the master key (id {}) is NOT in the archive: keep it apart from the backups; a restore needs it beside the data dir (master.key) or as ONYX_MASTER_KEY to open the stored provider keys and sign-ins",
            key.id()
        ),
        (Some((key, _)), true) => eprintln!(
            "the master key (id {}) IS in the archive: keep the archive as safe as the key",
            key.id()
        ),
        (None, _) => {}
    }
    Ok(())
}

/// Refuses a database a later Onyx has migrated: this build cannot restore it.
fn check_schema(found: u32) -> Result<(), CliError> {
    if found > storage::SCHEMA_VERSION {
        return Err(storage::DbError::SchemaTooNew {
            found,
            known: storage::SCHEMA_VERSION,
        }
        .into());
    }
    Ok(())
}

/// Dumps the database to `dump`: itself when it is open here, else through
/// the running `onyx serve` that holds it.
async fn export(db: Option<&Db>, data_dir: &Path, dump: &Path) -> Result<Exported, CliError> {
    match db {
        Some(db) => Ok(Exported::export(db, dump).await?),
        None => {
            let dump = std::path::absolute(dump)
                .map_err(|err| CliError::Io(format!("{}: {err}", dump.display())))?;
            let exported = control::export_through(data_dir, &dump)
                .await
                .map_err(CliError::Io)?;
            check_schema(exported.schema_version)?;
            Ok(exported)
        }
    }
}

async fn write(
    writer: &mut ArchiveWriter,
    config: &Config,
    db: Option<&Db>,
    objects: &dyn ObjectStore,
    args: &BackupArgs,
    key: &Option<KeyWithFiles>,
) -> Result<(Counts, Manifest), CliError> {
    // The database first: its snapshot names no object copied before it.
    let spinner = ProgressBar::new_spinner().with_message("exporting the database");
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let dump = archive::partial_path(&args.path).with_extension("surql.partial");
    let exported = export(db, &config.storage.data_dir, &dump).await;
    spinner.finish_and_clear();
    let added = exported.and_then(|exported| {
        writer.add_file(archive::DATABASE, &dump)?;
        Ok(exported)
    });
    let _ = std::fs::remove_file(&dump);
    let exported = added?;
    let schema_version = exported.schema_version;
    let mut counts = Counts {
        sessions: exported.sessions,
        memory_files: exported.memory_files,
        memory_chunks: exported.memory_chunks,
        tasks: exported.tasks,
        providers: exported.providers,
        ..Counts::default()
    };

    for bucket in Bucket::ALL {
        let listed = objects.list(bucket, "").await?;
        let progress = bar(bucket.name(), listed.len() as u64);
        let mut copied = 0u64;
        for info in listed {
            let key = ObjectKey::new(info.key)?;
            // Deleted since it was listed: nothing to keep.
            if let Some(object) = objects.get(bucket, &key).await? {
                let path = format!("{}{}/{}", archive::OBJECTS, bucket.name(), key);
                writer.add_bytes(&path, 0o644, &object.body)?;
                copied += 1;
            }
            progress.inc(1);
        }
        progress.finish_and_clear();
        counts.objects.insert(bucket.name().to_string(), copied);
    }

    let (files, links) = data_files::list(config)
        .map_err(|err| CliError::Io(format!("{}: {err}", config.storage.data_dir.display())))?;
    for link in links {
        eprintln!("onyx backup: skipping the symbolic link {}", link.display());
    }
    let progress = bar("data dir", files.len() as u64);
    for file in &files {
        writer.add_file(&format!("{}{}", archive::DATA, file.relative), &file.path)?;
        progress.inc(1);
    }
    progress.finish_and_clear();
    counts.data_files = files.len() as u64;

    if args.include_master_key
        && let Some((_, key_files)) = key
    {
        for (name, bytes) in key_files {
            writer.add_bytes(&format!("{}{name}", archive::SECRETS), 0o600, bytes)?;
        }
    }
    let manifest = Manifest {
        format: archive::FORMAT,
        onyx_version: env!("CARGO_PKG_VERSION").to_string(),
        schema_version,
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        database: if db.is_some_and(Db::is_shared) {
            "server"
        } else {
            "embedded"
        }
        .into(),
        objects: match config.storage.objects {
            ObjectStoreConfig::Local => "local",
            ObjectStoreConfig::S3 { .. } => "s3",
        }
        .into(),
        master_key_id: key.as_ref().map(|(key, _)| key.id().to_string()),
        master_key_included: args.include_master_key,
        counts: counts.clone(),
        entries: Vec::new(),
    };
    Ok((counts, manifest))
}
