//! Usage records: one row per upstream model call, written off the request
//! path. Requests put records on a channel; one writer inserts them in
//! batches (every 100 ms or 200 rows) and flushes what is left on shutdown.

use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use crate::providers::{Attribution, ModelRef, Usage};
use crate::storage::Db;

const BATCH_EVERY: Duration = Duration::from_millis(100);
const BATCH_ROWS: usize = 200;
/// Past this many records waiting, new ones are dropped (and logged) rather
/// than let memory grow while the database is down.
const QUEUE_CAPACITY: usize = 50_000;

/// One upstream call, as stored in `usage_record`.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// RFC 3339 UTC with microseconds (sorts as text).
    pub at: String,
    /// `YYYY-MM-DD` (UTC), for grouping by day.
    pub day: String,
    pub key_id: Option<String>,
    pub agent: Option<String>,
    pub task: Option<String>,
    pub session: Option<String>,
    pub run: Option<String>,
    pub provider: String,
    /// The upstream model name.
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
    /// `None` when the model has no price (unknown, not free).
    pub cost_usd: Option<f64>,
    /// The cost when known, else 0: what sums add up.
    pub priced_usd: f64,
    pub priced: bool,
}

impl Record {
    pub fn new(who: &Attribution, served_by: &ModelRef, usage: &Usage, cost: Option<f64>) -> Self {
        let now = crate::clock::now();
        Self {
            at: crate::clock::stamp(now),
            day: crate::clock::day(now),
            key_id: who.key.as_deref().map(String::from),
            agent: who.agent.clone(),
            task: who.task.clone(),
            session: who.session.clone(),
            run: who.run.clone(),
            provider: served_by.provider.clone(),
            model: served_by.model.clone(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.cached_tokens(),
            cache_write_tokens: usage.cache_write_tokens(),
            reasoning_tokens: usage.reasoning_tokens(),
            cost_usd: cost,
            priced_usd: cost.unwrap_or(0.0),
            priced: cost.is_some(),
        }
    }
}

enum Message {
    Record(Box<Record>),
    Flush(oneshot::Sender<()>),
}

/// The sending side: cheap to clone, never waits.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Message>,
}

impl Writer {
    /// Starts the writer task on `db`.
    pub fn start(db: Db) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        tokio::spawn(write_loop(db, rx));
        Self { tx }
    }

    pub fn send(&self, record: Record) {
        if let Err(err) = self.tx.try_send(Message::Record(Box::new(record))) {
            tracing::warn!(error = %err, "usage record dropped: the writer is behind");
        }
    }

    /// Waits until everything sent so far is written (shutdown, tests).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Message::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

async fn write_loop(db: Db, mut rx: mpsc::Receiver<Message>) {
    let mut batch: Vec<Record> = Vec::with_capacity(BATCH_ROWS);
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    // When the oldest unwritten record must be written: a steady trickle of
    // records must not keep postponing it.
    let mut due: Option<tokio::time::Instant> = None;
    loop {
        let mut buffer = Vec::with_capacity(BATCH_ROWS);
        let limit = BATCH_ROWS - batch.len();
        let (received, timed_out) = match due {
            None => (rx.recv_many(&mut buffer, limit).await, false),
            Some(due) => match tokio::time::timeout_at(due, rx.recv_many(&mut buffer, limit)).await {
                Ok(n) => (n, false),
                Err(_) => (0, true),
            },
        };
        if received == 0 && !timed_out {
            write(&db, &mut batch).await;
            return;
        }
        for message in buffer {
            match message {
                Message::Record(record) => batch.push(*record),
                Message::Flush(done) => waiting.push(done),
            }
        }
        if timed_out || batch.len() >= BATCH_ROWS || !waiting.is_empty() {
            write(&db, &mut batch).await;
            for done in waiting.drain(..) {
                let _ = done.send(());
            }
        }
        due = match (batch.is_empty(), due) {
            (true, _) => None,
            (false, Some(due)) => Some(due),
            (false, None) => Some(tokio::time::Instant::now() + BATCH_EVERY),
        };
    }
}

async fn write(db: &Db, batch: &mut Vec<Record>) {
    if batch.is_empty() {
        return;
    }
    let rows = std::mem::take(batch);
    let count = rows.len();
    let result = db
        .execute_retrying("INSERT INTO usage_record $rows", json!({ "rows": rows }))
        .await;
    if let Err(err) = result {
        tracing::error!(error = %err, count, "could not store usage records");
    }
}
