//! `onyx reindex`: rebuilds every derived table from the object store, with
//! progress bars: session metadata, then the memory index (chunks, then
//! embeddings when an embedder answers, downloading the local embedder's model
//! first when it needs one, then SurrealDB's search indexes).

use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use super::error::{CliError, connect_error};
use crate::config;
use crate::sessions::Sessions;
use crate::storage::{self, Db};

pub async fn run(config_path: Option<PathBuf>) -> ExitCode {
    match reindex(config_path).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("onyx reindex: {err}");
            ExitCode::FAILURE
        }
    }
}

pub(super) fn bar(label: &str) -> ProgressBar {
    ProgressBar::new(0).with_style(
        ProgressStyle::with_template(&format!("{label:<16} {{bar:40}} {{pos}}/{{len}} ({{eta}})"))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

fn reporter(bar: &ProgressBar) -> impl Fn(usize, usize) + Send + Sync + '_ {
    move |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }
}

async fn reindex(config_path: Option<PathBuf>) -> Result<(), CliError> {
    let path = config::locate(config_path.as_deref());
    let config = config::load(path.as_deref())?;
    let db = Db::connect(&config.storage.surrealdb)
        .await
        .map_err(connect_error)?;
    db.migrate().await?;
    let objects = storage::open_object_store(&config.storage).await?;
    let sessions = Sessions::new(objects.clone(), db.clone()).await?;
    let progress = bar("sessions");
    let count = sessions.reindex(&reporter(&progress)).await?;
    progress.finish_and_clear();
    // Parked turns belong in the log too: write them now if the store is back.
    sessions.drain_parked().await?;
    eprintln!("reindexed {count} session(s)");

    let memory = crate::memory::build(&config, objects, db)?;
    let progress = bar("memory files");
    let report = memory.rebuild(&reporter(&progress)).await?;
    progress.finish_and_clear();
    eprintln!("reindexed {} memory file(s)", report.files);
    let progress = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("embedding model  {bar:40} {bytes}/{total_bytes} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    // The local embedder downloads its model here on first use; the error, if
    // any, is reported with the embeddings below.
    let _ = memory.prepare_embedder(&reporter(&progress)).await;
    progress.finish_and_clear();
    let progress = bar("embeddings");
    let embedded = memory.prepare_embedding(&reporter(&progress)).await;
    progress.finish_and_clear();
    let status = memory.status().await?;
    match embedded {
        Ok(()) => eprintln!(
            "{} memory chunk(s) indexed, {} waiting for the embedder",
            status.chunks, status.pending
        ),
        Err(err) => eprintln!(
            "{} memory chunk(s) indexed for full-text search; {} wait for the embedder ({}) and are embedded when `onyx serve` reaches it",
            status.chunks,
            status.pending,
            crate::error_chain::chain(&err)
        ),
    }
    Ok(())
}
