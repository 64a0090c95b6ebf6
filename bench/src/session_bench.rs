//! `session-bench`: append latency at the start vs the end of a long session,
//! history load at turn 10 vs the end of it (compacted), and
//! `GET /v1/sessions`-equivalent list latency over many sessions, through
//! the real `Sessions` service (object store + SurrealDB).
//!
//! ```sh
//! session-bench local DATA_DIR [MESSAGES] [SESSIONS]
//! session-bench s3 DATA_DIR ENDPOINT ACCESS_KEY SECRET_KEY [MESSAGES] [SESSIONS]
//! ```
//! The database is embedded SurrealKV under DATA_DIR in both cases.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use onyx::chat::Role;
use onyx::config::SurrealConfig;
use onyx::sessions::{ListFilter, LogMessage, Sessions};
use onyx::storage::{Db, LocalStore, ObjectStore, S3Settings, S3Store};
use onyx_bench::{ms, percentile};
use secrecy::SecretString;

fn message(i: usize) -> LogMessage {
    let role = if i.is_multiple_of(2) {
        Role::User
    } else {
        Role::Assistant
    };
    LogMessage::plain(
        role,
        format!("message number {i}: a sentence of ordinary length for a chat turn"),
    )
}

/// Loads a session's history 30 times: p50, p99, and how many turns it read.
async fn history_load(
    sessions: &Sessions,
    session: &onyx::sessions::SessionMeta,
) -> Result<(Duration, Duration, usize), String> {
    let mut times = Vec::with_capacity(30);
    let mut turns = 0;
    for _ in 0..30 {
        let t = Instant::now();
        turns = sessions
            .history(session)
            .await
            .map_err(|e| e.to_string())?
            .turns
            .len();
        times.push(t.elapsed());
    }
    Ok((percentile(&mut times, 0.5), percentile(&mut times, 0.99), turns))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (store, rest): (Arc<dyn ObjectStore>, &[String]) = match args.get(1).map(String::as_str) {
        Some("local") if args.len() >= 3 => (
            Arc::new(LocalStore::new(format!("{}/objects", args[2]))),
            &args[3..],
        ),
        Some("s3") if args.len() >= 6 => {
            let access = SecretString::from(args[4].clone());
            let secret = SecretString::from(args[5].clone());
            let settings = S3Settings {
                endpoint: Some(&args[3]),
                region: "us-east-1",
                access_key: Some(&access),
                secret_key: Some(&secret),
                bucket_prefix: "bench-",
            };
            (Arc::new(S3Store::new(settings).await), &args[6..])
        }
        _ => {
            eprintln!(
                "usage: session-bench local DATA_DIR [MESSAGES] [SESSIONS]\n       session-bench s3 DATA_DIR ENDPOINT ACCESS SECRET [MESSAGES] [SESSIONS]"
            );
            return ExitCode::FAILURE;
        }
    };
    let messages: usize = rest.first().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let session_count: usize = rest.get(1).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    match run(store, &args[2], messages, session_count).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("session-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(
    store: Arc<dyn ObjectStore>,
    data_dir: &str,
    messages: usize,
    session_count: usize,
) -> Result<(), String> {
    store.ensure_buckets().await.map_err(|e| e.to_string())?;
    let db_config = SurrealConfig::at(format!("surrealkv://{data_dir}/db"), "bench");
    let db = Db::connect(&db_config).await.map_err(|e| e.to_string())?;
    db.migrate().await.map_err(|e| e.to_string())?;
    let backend = store.backend();
    let sessions = Sessions::new(store, db).await.map_err(|e| e.to_string())?;

    // Append latency: one message per append, into one growing session.
    let session = sessions.create("main", "api").await.map_err(|e| e.to_string())?;
    let mut latencies = Vec::with_capacity(messages);
    let mut early_history = None;
    let started = Instant::now();
    for i in 0..messages {
        if i == 10 {
            early_history = Some(history_load(&sessions, &session).await?);
        }
        let t = Instant::now();
        sessions
            .append(&session, vec![message(i)])
            .await
            .map_err(|e| e.to_string())?;
        latencies.push(t.elapsed());
        if (i + 1) % 1000 == 0 {
            eprintln!("  appended {}/{messages}", i + 1);
        }
    }
    let total = started.elapsed();
    let window = 20.min(messages / 2).max(1);
    let mut early: Vec<Duration> = latencies[..window].to_vec();
    let mut late: Vec<Duration> = latencies[messages - window..].to_vec();
    println!("backend: {backend}");
    println!(
        "append, one message each: {messages} appends in {:.1} s",
        total.as_secs_f64()
    );
    println!(
        "  messages 1–{window}: p50 {} p99 {}   messages {}–{messages}: p50 {} p99 {}",
        ms(percentile(&mut early, 0.5)),
        ms(percentile(&mut early, 0.99)),
        messages - window + 1,
        ms(percentile(&mut late, 0.5)),
        ms(percentile(&mut late, 0.99)),
    );

    // History load (what a new agent turn reads): at turn 10, and at the last
    // turn of the long session once a compaction keeps its last 10 turns.
    if let Some((p50, p99, turns)) = early_history {
        println!(
            "history load at turn 10 ({turns} turns read): p50 {} p99 {}",
            ms(p50),
            ms(p99)
        );
    }
    sessions
        .compacted(
            &session,
            "a summary of everything before",
            messages.saturating_sub(10) as u64,
        )
        .await
        .map_err(|e| e.to_string())?;
    let (p50, p99, turns) = history_load(&sessions, &session).await?;
    println!(
        "history load at turn {messages}, compacted ({turns} turns read): p50 {} p99 {}",
        ms(p50),
        ms(p99)
    );

    // List latency over many sessions (metadata only, as GET /v1/sessions).
    let started = Instant::now();
    for i in 0..session_count {
        let agent = if i.is_multiple_of(10) { "helper" } else { "main" };
        let s = sessions.create(agent, "api").await.map_err(|e| e.to_string())?;
        sessions
            .append(&s, vec![message(i)])
            .await
            .map_err(|e| e.to_string())?;
        if (i + 1) % 1000 == 0 {
            eprintln!("  created {}/{session_count} sessions", i + 1);
        }
    }
    println!(
        "created {session_count} sessions in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for (label, filter) in [
        (
            "newest 50",
            ListFilter {
                limit: 50,
                ..ListFilter::default()
            },
        ),
        (
            "agent=helper, 50",
            ListFilter {
                limit: 50,
                agent: Some("helper".into()),
                ..ListFilter::default()
            },
        ),
        (
            "q=number 77, 50",
            ListFilter {
                limit: 50,
                query: Some("number 77".into()),
                ..ListFilter::default()
            },
        ),
    ] {
        let mut samples = Vec::new();
        for _ in 0..30 {
            let t = Instant::now();
            let (rows, _) = sessions.list(&filter).await.map_err(|e| e.to_string())?;
            samples.push(t.elapsed());
            if rows.is_empty() {
                return Err(format!("{label}: no rows"));
            }
        }
        println!(
            "list {label} of {session_count}: p50 {} p99 {}",
            ms(percentile(&mut samples, 0.5)),
            ms(percentile(&mut samples, 0.99))
        );
    }
    Ok(())
}
