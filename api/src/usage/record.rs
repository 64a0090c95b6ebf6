//! Usage records, written off the request path. Requests put one record per
//! upstream call on a channel; one writer sums them per minute and caller
//! (key, agent, task, session, run, provider, model) and inserts the sums
//! every second, so a busy gateway writes a few rows a second, not one per
//! call. What is left is written on shutdown.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::providers::{Attribution, ModelRef, Usage};
use crate::storage::Db;

const BATCH_EVERY: Duration = Duration::from_secs(1);
/// Distinct sums held before they are written early.
const BATCH_ROWS: usize = 200;
/// Past this many records waiting, new ones are dropped (and logged) rather
/// than let memory grow while the database is down.
const QUEUE_CAPACITY: usize = 50_000;

/// Upstream calls of one caller in one minute. Stored in `usage_record`
/// with the minute as `at` and `day` (several rows may sum the same minute:
/// one per write); the text of those is made when rows are written, not per call.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// The minute's start, in seconds since the Unix epoch (UTC).
    #[serde(skip)]
    pub minute: i64,
    pub key_id: Option<String>,
    pub agent: Option<String>,
    pub task: Option<String>,
    pub session: Option<String>,
    pub run: Option<String>,
    pub provider: String,
    /// The upstream model name.
    pub model: String,
    /// Calls summed here.
    pub requests: u64,
    /// Of those, the calls with a known price.
    pub priced_requests: u64,
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
    /// One call.
    pub fn new(who: &Attribution, served_by: &ModelRef, usage: &Usage, cost: Option<f64>) -> Self {
        let seconds = crate::clock::now().timestamp();
        Self {
            minute: seconds - seconds.rem_euclid(60),
            key_id: who.key.as_deref().map(String::from),
            agent: who.agent.clone(),
            task: who.task.clone(),
            session: who.session.clone(),
            run: who.run.clone(),
            provider: served_by.provider.clone(),
            model: served_by.model.clone(),
            requests: 1,
            priced_requests: u64::from(cost.is_some()),
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

    /// What makes two records one sum.
    fn group(&self) -> String {
        let parts = [
            self.key_id.as_deref(),
            self.agent.as_deref(),
            self.task.as_deref(),
            self.session.as_deref(),
            self.run.as_deref(),
            Some(self.provider.as_str()),
            Some(self.model.as_str()),
        ];
        let mut group = String::with_capacity(128);
        let _ = write!(group, "{}\u{1f}", self.minute);
        for part in parts {
            // Unit separators keep `a`+`bc` apart from `ab`+`c`; absent
            // fields differ from empty ones.
            group.push_str(part.map_or("\u{0}", |p| p));
            group.push('\u{1f}');
        }
        group.push(if self.priced { 'p' } else { 'u' });
        group
    }

    fn add(&mut self, other: &Record) {
        self.requests += other.requests;
        self.priced_requests += other.priced_requests;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.priced_usd += other.priced_usd;
        self.cost_usd = self.cost_usd.map(|c| c + other.cost_usd.unwrap_or(0.0));
    }
}

/// A sum as stored: the record with its minute as text.
#[derive(Serialize)]
pub struct Row {
    /// The minute's start, RFC 3339 UTC with microseconds (sorts as text).
    at: String,
    /// `YYYY-MM-DD` (UTC), for grouping by day.
    day: String,
    #[serde(flatten)]
    record: Record,
}

impl From<Record> for Row {
    fn from(record: Record) -> Self {
        let minute = chrono::DateTime::from_timestamp(record.minute, 0).unwrap_or_default();
        Self {
            at: crate::clock::stamp(minute),
            day: crate::clock::day(minute),
            record,
        }
    }
}

/// Records summed by [`Record::group`] until they are written.
#[derive(Default)]
struct Sums {
    rows: HashMap<String, Record>,
}

impl Sums {
    fn add(&mut self, record: Record) {
        match self.rows.entry(record.group()) {
            Entry::Occupied(mut sum) => sum.get_mut().add(&record),
            Entry::Vacant(slot) => {
                slot.insert(record);
            }
        }
    }

    fn len(&self) -> usize {
        self.rows.len()
    }

    fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn take(&mut self) -> Vec<Record> {
        self.rows.drain().map(|(_, r)| r).collect()
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
    /// Wakes the writer before its batch is due: a flush, or a queue filling up.
    wake: Arc<Notify>,
}

impl Writer {
    /// Starts the writer task on `db`.
    pub fn start(db: Db) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let wake = Arc::new(Notify::new());
        tokio::spawn(write_loop(db, rx, wake.clone()));
        Self { tx, wake }
    }

    pub fn send(&self, record: Record) {
        if let Err(err) = self.tx.try_send(Message::Record(Box::new(record))) {
            tracing::warn!(error = %err, "usage record dropped: the writer is behind");
        }
        if self.tx.capacity() < QUEUE_CAPACITY / 4 {
            self.wake.notify_one();
        }
    }

    /// Waits until everything sent so far is written (shutdown, tests).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Message::Flush(done)).await.is_ok() {
            self.wake.notify_one();
            let _ = wait.await;
        }
    }
}

/// Sums records until the oldest unwritten one is `BATCH_EVERY` old, then
/// writes them. While a batch is open the writer sleeps rather than wait on
/// the queue: waking it for every record cost the gateway a task switch, a
/// timer and a buffer per request.
async fn write_loop(db: Db, mut rx: mpsc::Receiver<Message>, wake: Arc<Notify>) {
    let mut batch = Sums::default();
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    let mut buffer = Vec::with_capacity(256);
    // When the oldest unwritten record must be written: a steady trickle of
    // records must not keep postponing it.
    let mut due: Option<tokio::time::Instant> = None;
    loop {
        let mut timed_out = false;
        match due {
            None => {
                if rx.recv_many(&mut buffer, 256).await == 0 {
                    write(&db, &mut batch).await;
                    return;
                }
            }
            Some(due) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(due) => timed_out = true,
                    _ = wake.notified() => {}
                }
            }
        }
        let mut closed = false;
        loop {
            for message in buffer.drain(..) {
                match message {
                    Message::Record(record) => batch.add(*record),
                    Message::Flush(done) => waiting.push(done),
                }
            }
            match rx.try_recv() {
                Ok(message) => buffer.push(message),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        if closed || timed_out || batch.len() >= BATCH_ROWS || !waiting.is_empty() {
            write(&db, &mut batch).await;
            for done in waiting.drain(..) {
                let _ = done.send(());
            }
        }
        if closed {
            return;
        }
        due = match (batch.is_empty(), due) {
            (true, _) => None,
            (false, Some(due)) => Some(due),
            (false, None) => Some(tokio::time::Instant::now() + BATCH_EVERY),
        };
    }
}

async fn write(db: &Db, batch: &mut Sums) {
    if batch.is_empty() {
        return;
    }
    let rows: Vec<Row> = batch.take().into_iter().map(Row::from).collect();
    let count = rows.len();
    let result = db
        .execute_retrying("INSERT INTO usage_record $rows", json!({ "rows": rows }))
        .await;
    if let Err(err) = result {
        tracing::error!(error = %err, count, "could not store usage records");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_of_one_caller_in_one_minute_are_one_row() {
        let db = Db::scratch().await;
        let writer = Writer::start(db.clone());
        let target = ModelRef {
            provider: "openai".into(),
            model: "gpt".into(),
        };
        let mut who = Attribution {
            session: Some("s1".into()),
            ..Attribution::default()
        };
        for _ in 0..3 {
            writer.send(Record::new(&who, &target, &Usage::new(10, 5), Some(0.25)));
        }
        writer.send(Record::new(&who, &target, &Usage::new(1, 1), None));
        who.session = Some("s2".into());
        writer.send(Record::new(&who, &target, &Usage::new(1, 1), Some(0.5)));
        writer.flush().await;
        let rows: Vec<serde_json::Value> = db
            .rows(
                "SELECT session, requests, priced_requests, prompt_tokens, cost_usd FROM usage_record ORDER BY session, requests DESC",
                json!({}),
                0,
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(rows[0]["session"], "s1");
        assert_eq!(rows[0]["requests"], 3);
        assert_eq!(rows[0]["prompt_tokens"], 30);
        assert_eq!(rows[0]["cost_usd"], 0.75);
        assert_eq!(rows[1]["requests"], 1, "unpriced calls sum apart: {rows:?}");
        assert!(rows[1]["cost_usd"].is_null(), "{rows:?}");
        assert_eq!(rows[2]["session"], "s2");
    }

    async fn requests_in(db: &Db) -> i64 {
        let rows: Vec<serde_json::Value> = db
            .rows("SELECT requests FROM usage_record", json!({}), 0)
            .await
            .unwrap();
        rows.iter().filter_map(|r| r["requests"].as_i64()).sum()
    }

    #[tokio::test]
    async fn an_open_batch_is_written_when_due_and_a_flush_does_not_wait_for_it() {
        let db = Db::scratch().await;
        let writer = Writer::start(db.clone());
        let target = ModelRef {
            provider: "openai".into(),
            model: "gpt".into(),
        };
        let who = Attribution::default();
        writer.send(Record::new(&who, &target, &Usage::new(1, 1), None));
        // No flush: the writer sleeps on the open batch and writes it when due.
        let mut written = 0;
        for _ in 0..100 {
            written = requests_in(&db).await;
            if written == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(written, 1, "the batch was never written on its own");
        // A batch opened, then more records and a flush while the writer sleeps on it.
        writer.send(Record::new(&who, &target, &Usage::new(1, 1), None));
        tokio::time::sleep(Duration::from_millis(20)).await;
        writer.send(Record::new(&who, &target, &Usage::new(1, 1), None));
        let started = std::time::Instant::now();
        writer.flush().await;
        assert_eq!(requests_in(&db).await, 3);
        assert!(
            started.elapsed() < BATCH_EVERY,
            "the flush waited for the batch to fall due"
        );
    }
}
