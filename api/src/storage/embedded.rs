//! Embedded SurrealKV, opened by Onyx rather than by the SDK's URL dispatch,
//! because only a datastore built here can be given engine settings: the SDK
//! passes none, and SurrealKV otherwise sizes its block cache at half the
//! machine's memory and its memtable at up to 4 GB. `storage.surrealdb.
//! cacheMb` and `memtableMb` cap them; `blockKb` sizes the table files'
//! blocks (new files only). The datastore is then served to the
//! SDK's local engine, the same engine a `surrealkv://` URL would get.
//!
//! The datastore handle is kept beside the SDK client so a stopping process
//! closes the store itself, on the runtime (`Db::close`): left to the last
//! dropped handle, SurrealKV closes in a task of its own, or, dropped outside
//! the runtime, not at all ("No runtime available for closing the store").
//! Also how a stopping process knows the store is closed (`wait_closed`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use surrealdb::Surreal;
use surrealdb::engine::local::Db as Local;
use surrealdb_cnf::ConfigMap;
use surrealdb_engine_local::Datastore;

use super::DbError;
use crate::config::EmbeddedStore;

const KB: u64 = 1024;
const MB: u64 = 1024 * KB;

fn failed(path: &str, err: impl std::fmt::Display) -> DbError {
    DbError::Surreal(format!("{path}: {err}"))
}

/// An open embedded store: the SDK client and the datastore behind it.
pub struct Embedded {
    pub client: Surreal<Local>,
    pub datastore: Arc<Datastore>,
}

/// Opens (creating if need be) the SurrealKV store at `path` with its caches capped.
pub async fn open(path: &str, tuning: &EmbeddedStore) -> Result<Embedded, DbError> {
    let dir = path.split_once('?').map_or(path, |(dir, _)| dir);
    // SurrealKV wants its parent directory to exist.
    if let Some(parent) = Path::new(dir).parent() {
        std::fs::create_dir_all(parent).map_err(|err| failed(path, err))?;
    }
    let settings = ConfigMap::empty()
        .with_key_value(
            "surrealkv_block_cache_capacity",
            (tuning.cache_mb * MB).to_string(),
        )
        .with_key_value(
            "surrealkv_max_memtable_size",
            (tuning.memtable_mb * MB).to_string(),
        )
        .with_key_value("surrealkv_block_size", (tuning.block_kb * KB).to_string());
    let (notify, notifications) = async_channel::bounded(surrealdb_cnf::NOTIFICATIONS_CHANNEL_SIZE);
    // As the SDK's own local connect does: maintenance starts only after the
    // version check and bootstrap, so a new store is never taken for an old one.
    let datastore: Arc<Datastore> = Datastore::builder()
        .with_config(settings)
        .with_notify(notify)
        .without_maintenance_tasks()
        .build_with_path(&format!("surrealkv://{path}"))
        .await
        .map_err(|err| failed(path, err))?;
    datastore.check_version().await.map_err(|err| failed(path, err))?;
    datastore.bootstrap().await.map_err(|err| failed(path, err))?;
    datastore.start_maintenance_tasks();
    let client = Surreal::<Local>::unstable_from_datastore(datastore.clone(), Some(notifications)).await?;
    Ok(Embedded { client, datastore })
}

/// Stops the datastore's maintenance tasks, flushes the write-ahead log and
/// closes the store, on this runtime; later queries on any handle fail.
pub async fn shutdown(datastore: &Datastore) -> Result<(), DbError> {
    datastore
        .shutdown()
        .await
        .map_err(|err| DbError::Surreal(format!("closing the embedded database: {err}")))
}

/// Waits, at most `limit`, until the embedded store in `dir` is closed: the
/// engine closes it in a task of its own once the last handle is dropped,
/// and releases its `LOCK` file last. Closed cleanly, the next start does not
/// replay the write-ahead log (slow, and memory the process keeps).
pub async fn wait_closed(dir: &Path, limit: Duration) -> bool {
    let lock = dir.join("LOCK");
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let free = match std::fs::File::open(&lock) {
            // `flock` locks belong to the open file, so this one conflicts
            // with the engine's even in the same process.
            Ok(file) => file.try_lock().is_ok(),
            Err(err) => err.kind() == std::io::ErrorKind::NotFound,
        };
        if free {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
