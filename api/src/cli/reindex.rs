//! `onyx reindex`: rebuilds every derived table (session metadata now; memory
//! chunks later) from the object store, with a progress bar.

use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use crate::config;
use crate::sessions::Sessions;
use crate::storage::{self, Db};

pub async fn run(config_path: Option<PathBuf>) -> ExitCode {
    match reindex(config_path).await {
        Ok(count) => {
            eprintln!("reindexed {count} session(s)");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("onyx reindex: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn reindex(config_path: Option<PathBuf>) -> Result<usize, String> {
    let path = config::locate(config_path.as_deref());
    let config = config::load(path.as_deref()).map_err(|e| e.to_string())?;
    let db = Db::connect(&config.storage.surrealdb)
        .await
        .map_err(|e| e.to_string())?;
    let objects = storage::open_object_store(&config.storage)
        .await
        .map_err(|e| e.to_string())?;
    let sessions = Sessions::new(objects, db).await.map_err(|e| e.to_string())?;
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("sessions {bar:40} {pos}/{len} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let count = sessions
        .reindex(&|done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        })
        .await
        .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    // Parked turns belong in the log too: write them now if the store is back.
    sessions.drain_parked().await.map_err(|e| e.to_string())?;
    Ok(count)
}
