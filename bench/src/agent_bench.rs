//! `agent-bench`: Onyx's own work in an agent turn, without the model, in the
//! order the runtime does it: the run's record (`agent_run`, with its lease),
//! the inbox claim, system prompt composition from the workspace files and
//! memory injection (a search of the agent's memory); then, after the model,
//! the inbox settlement and the session append (together) and the run's
//! end record, which the client waits for; and the daily-log line the
//! runtime writes in the background. Embedded SurrealKV and the local object
//! store, as `onyx serve` runs by default.
//!
//! It also times what the runtime's compaction check does with each turn's
//! prompt: counting its tokens (`context::count_request`, each line's count
//! kept), beside tokenizing the same messages whole, as before.
//!
//! A busy day is one run with many turns (`agent-bench 10000`): it also
//! prints the overhead around the 10th turn and around the last, and their
//! ratio (a turn's cost must not grow with the day). Conversations change
//! every 100 turns, as a day's do.
//!
//! ```sh
//! agent-bench [TURNS]      # default 300
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use onyx::agents::context;
use onyx::agents::prompt::{self, Inputs};
use onyx::agents::runs::{AgentRun, Ending, RunStatus, Runs};
use onyx::agents::workspace;
use onyx::chat::{Message, Role};
use onyx::clock;
use onyx::config::SurrealConfig;
use onyx::inbox::Inbox;
use onyx::memory::{Memory, NoteTarget, Settings};
use onyx::sessions::{LogMessage, Sessions};
use onyx::storage::{Db, LocalStore, ObjectStore};
use onyx_bench::{machine, ms, percentile};

#[tokio::main]
async fn main() -> ExitCode {
    let turns: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    match run(turns).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("agent-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(turns: usize) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("onyx-agent-bench-{}", std::process::id()));
    let result = measure(&dir, turns).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn measure(dir: &std::path::Path, turns: usize) -> Result<(), String> {
    println!("machine: {}", machine());
    let db = Db::connect(&SurrealConfig::at(
        format!("surrealkv://{}", dir.join("db").display()),
        "bench",
    ))
    .await
    .map_err(|e| e.to_string())?;
    db.migrate().await.map_err(|e| e.to_string())?;
    let objects: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(dir.join("objects")));
    objects.ensure_buckets().await.map_err(|e| e.to_string())?;
    let memory = Memory::new(objects.clone(), db.clone(), None, Settings::default());
    memory.prepare_chunking().await.map_err(|e| e.to_string())?;
    // Searches run in the resident index, as in a running replica.
    memory.load_search_index().await.map_err(|e| e.to_string())?;
    let sessions = Sessions::new(objects.clone(), db.clone())
        .await
        .map_err(|e| e.to_string())?;
    let inbox = Inbox::new(db.clone());
    let runs = Runs::new(
        db.clone(),
        db,
        std::time::Duration::from_secs(30),
        clock::system(),
        inbox.clone(),
        sessions.clone(),
    );
    workspace::seed_if_new(objects.as_ref(), "main")
        .await
        .map_err(|e| e.to_string())?;
    // A realistic memory: a curated file of 60 facts and 40 notes in today's log.
    let facts: String = (0..60)
        .map(|i| format!("- Fact {i}: the user likes topic{i} and project{}\n", i % 7))
        .collect();
    memory
        .write_file("main", "MEMORY.md", format!("# Memory\n\n{facts}"), None)
        .await
        .map_err(|e| e.to_string())?;
    for i in 0..40 {
        memory
            .append_note(
                "main",
                NoteTarget::Daily(chrono_tz::UTC),
                &format!("earlier note {i} about project{}", i % 7),
            )
            .await
            .map_err(|e| e.to_string())?;
    }
    let mut session = sessions
        .create("main", "bench")
        .await
        .map_err(|e| e.to_string())?;
    let mut compose_times = Vec::with_capacity(turns);
    let mut end_times = Vec::with_capacity(turns);
    let mut totals = Vec::with_capacity(turns);
    let mut log_lines = Vec::with_capacity(turns);
    let (mut counts, mut whole_counts) = (Vec::with_capacity(turns), Vec::with_capacity(turns));
    let tokenizer = tiktoken_rs::o200k_base_singleton();
    let mut by_turn = Vec::with_capacity(turns + 10);
    for turn in 0..turns + 10 {
        if turn > 0 && turn % 100 == 0 {
            session = sessions
                .create("main", "bench")
                .await
                .map_err(|e| e.to_string())?;
        }
        let question = format!("what do you remember about project{}?", turn % 7);
        let asked = vec![LogMessage::plain(Role::User, question.clone())];
        let started = Instant::now();
        let run = runs
            .begin(
                &AgentRun::starting("main", Some(&session.id), "api", "openai/bench".into()),
                &asked,
            )
            .await
            .map_err(|e| e.to_string())?;
        let claimed = inbox.claim("main", &run.id).await.map_err(|e| e.to_string())?;
        let composed = prompt::compose(
            &memory,
            Inputs {
                agent: "main",
                now: clock::now(),
                timezone: chrono_tz::UTC,
                session: None,
                inbox: &claimed,
                memory_query: Some(&question),
                skills: &[],
            },
        )
        .await;
        let composed_at = started.elapsed();
        // The compaction check's count, kept out of the turn's times above.
        let request = [
            Message::system(composed.stable.clone()),
            Message::user(format!("{}\n{question}", composed.context)),
        ];
        let counting = Instant::now();
        let counted = context::count_request(&request, &[]);
        let counted_in = counting.elapsed();
        let counting = Instant::now();
        let whole: usize = request
            .iter()
            .map(|m| context::PER_MESSAGE + tokenizer.encode_with_special_tokens(&m.text_content()).len())
            .sum();
        let whole_in = counting.elapsed();
        if counted != whole {
            return Err(format!(
                "turn {turn}: {counted} tokens counted by line, {whole} whole"
            ));
        }
        let answered = Instant::now();
        let mut turn_messages = asked;
        turn_messages.push(LogMessage::plain(Role::Assistant, format!("answer {turn}")));
        let (settled, appended) =
            tokio::join!(inbox.commit(&run.id), sessions.append(&session, turn_messages));
        settled.map_err(|e| e.to_string())?;
        appended.map_err(|e| e.to_string())?;
        runs.end(
            &run,
            &Ending {
                status: RunStatus::Succeeded,
                prompt_tokens: 1200,
                completion_tokens: 40,
                tools_used: &[],
                iterations: 1,
                error: None,
            },
        )
        .await;
        let ended_in = answered.elapsed();
        let turn_done = started.elapsed();
        // The runtime writes this line in the background, after the answer.
        let line_started = Instant::now();
        memory
            .append_note(
                "main",
                NoteTarget::Daily(chrono_tz::UTC),
                &format!("session bench: asked “{question}” → answered"),
            )
            .await
            .map_err(|e| e.to_string())?;
        by_turn.push(turn_done);
        if turn >= 10 {
            compose_times.push(composed_at);
            end_times.push(ended_in);
            totals.push(turn_done);
            log_lines.push(line_started.elapsed());
            counts.push(counted_in);
            whole_counts.push(whole_in);
        }
        if turn == 0 && !composed.sections.iter().any(|s| s == "Relevant memory") {
            return Err(format!("memory was not injected: {:?}", composed.sections));
        }
    }
    println!(
        "{turns} turns (after 10 warm-up), the daily log growing from 40 to {} lines",
        40 + turns + 10
    );
    println!(
        "before the model (run record + inbox claim + compose + memory injection): p50 {}, p99 {}",
        ms(percentile(&mut compose_times, 0.5)),
        ms(percentile(&mut compose_times, 0.99))
    );
    println!(
        "after the model (inbox settled + session append, then the run's end record): p50 {}, p99 {}",
        ms(percentile(&mut end_times, 0.5)),
        ms(percentile(&mut end_times, 0.99))
    );
    println!(
        "turn overhead the client waits for (run record + inbox claim + compose + inject, then the above): p50 {}, p99 {}",
        ms(percentile(&mut totals, 0.5)),
        ms(percentile(&mut totals, 0.99))
    );
    println!(
        "daily-log line, written in the background after the answer: p50 {}, p99 {}",
        ms(percentile(&mut log_lines, 0.5)),
        ms(percentile(&mut log_lines, 0.99))
    );
    println!(
        "counting the prompt's tokens (the compaction check): p50 {} with each line's count kept, {} tokenizing it whole",
        ms(percentile(&mut counts, 0.5)),
        ms(percentile(&mut whole_counts, 0.5))
    );
    if turns >= 1_000 {
        let window = 100;
        let mut early = by_turn[10..10 + window].to_vec();
        let last = by_turn.len();
        let mut late = by_turn[last - window..].to_vec();
        let (early, late) = (percentile(&mut early, 0.5), percentile(&mut late, 0.5));
        println!(
            "turn overhead around the 10th turn (turns 10-{}): p50 {}; around turn {last} (the last {window}): p50 {}; late/early {:.2}",
            10 + window - 1,
            ms(early),
            ms(late),
            late.as_secs_f64() / early.as_secs_f64()
        );
    }
    Ok(())
}
