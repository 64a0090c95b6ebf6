//! A busy day costs nothing extra (issue 39), on S3 and a SurrealDB server
//! with two replicas: a turn reads only the start and end of a long daily
//! log that both replicas append to at once, while the files API still shows
//! the log whole; and under a soak-like load of agent runs on both replicas,
//! with leases of a few seconds that the slow runs outlive (renewed every
//! 750 ms), no run is taken for interrupted while its replica lives, and
//! neither logs a WARN.

use serde_json::{Value, json};

use crate::harness::services::Service;
use crate::harness::*;

/// Two replicas of `config` sharing a real S3 server and a SurrealDB
/// server (kept running while the returned services live).
async fn two_replicas(config: TestConfig) -> (Onyx, Onyx, (Service, Service)) {
    let (s3, surreal) = (Service::s3().await, Service::surreal().await);
    let config = config.s3(&s3).surreal(&surreal).build();
    let (a, b) = (start(&config).await, start(&config).await);
    (a, b, (s3, surreal))
}

/// Starts a replica, polling while the SurrealDB server still answers its
/// WebSocket with 503 (it opens its port before it serves).
async fn start(config: &str) -> Onyx {
    let mut last = String::new();
    for _ in 0..50 {
        match Onyx::try_start(Some(config), &[]).await {
            Ok(onyx) => return onyx,
            Err((_, stderr)) if stderr.contains("503 Service Unavailable") => last = stderr,
            Err((code, stderr)) => panic!("onyx failed to start ({code:?}): {stderr}"),
        }
    }
    panic!("the SurrealDB server never served: {last}")
}

/// A note long enough that a few hundred make a log far past a prompt's cap.
fn note(replica: &str, i: usize) -> String {
    format!(
        "{replica}-note {i:03}: {}",
        "the herb garden wants water before the frost, and the roses want pruning. ".repeat(5)
    )
}

/// Appends `count` notes through `onyx`, one after another; the log's path.
async fn append_notes(onyx: &Onyx, replica: &str, count: usize) -> String {
    let mut path = String::new();
    for i in 0..count {
        let (status, body) = reply(
            onyx.post("/v1/memory")
                .json(&json!({"content": note(replica, i)})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        path = body["path"].as_str().unwrap().to_string();
    }
    path
}

fn newest_user_message(fakes: &Fakes) -> String {
    let request = fakes.openai.state.last_request().unwrap();
    let messages = request["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    user["content"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_turn_reads_only_the_ends_of_a_busy_log_two_replicas_append_to() {
    let fakes = Fakes::start().await;
    let config =
        TestConfig::new(&fakes).agent(json!({"id": "main", "default": true, "model": "openai/fake-echo"}));
    let (a, b, _services) = two_replicas(config).await;
    let (path, other) = tokio::join!(append_notes(&a, "a", 120), append_notes(&b, "b", 120));
    assert_eq!(path, other, "one day's log");

    // Whole, on either replica: every note exactly once, as listed.
    let log = b.get_json(&format!("/v1/memory/files/main/{path}")).await;
    let content = log["content"].as_str().unwrap().to_string();
    for i in 0..120 {
        for replica in ["a", "b"] {
            let line = format!("{replica}-note {i:03}:");
            assert_eq!(content.matches(&line).count(), 1, "{line} in the log once");
        }
    }
    // 240 notes of ~390 bytes: three times the prompt's cap (30,000, below).
    assert!(content.len() > 3 * 30_000, "a busy day: {} bytes", content.len());
    let files = a.get_json("/v1/memory/files?agent=main").await;
    let listed = files["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path.as_str())
        .cloned()
        .unwrap();
    assert_eq!(listed["size"], content.len());

    // A turn's prompt holds the log's first and last notes, and not its middle.
    let lines: Vec<&str> = content.lines().filter(|l| l.contains("-note ")).collect();
    let (first, middle, last) = (lines[0], lines[lines.len() / 2], lines[lines.len() - 1]);
    let (status, body) = a
        .chat(json!({"model": "onyx:main", "messages": [{"role": "user", "content": "what did I note today?"}]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let context = newest_user_message(&fakes);
    // `a-note 060` out of `- 13:05 a-note 060: the herb garden …`.
    let marker = |l: &str| {
        let at = l.find("-note ").unwrap();
        l[at - 1..at + 10].to_string()
    };
    assert!(
        context.contains(&marker(first)),
        "the first note: {}",
        marker(first)
    );
    assert!(context.contains(&marker(last)), "the last note: {}", marker(last));
    assert!(!context.contains(&marker(middle)), "the middle was not read");
    assert!(context.contains("bytes or more omitted"), "said so");
    assert!(context.len() < 30_000, "within the cap: {}", context.len());
}

/// How one turn of the load answered: its run id (when it got one) and, when
/// it did not answer 200 with content, what it answered instead.
struct Turn {
    run: String,
    failure: Option<String>,
}

/// Runs `count` agent turns on `onyx`, `slow` of them on a model that takes
/// three seconds (longer than the lease), all at once.
async fn turns(onyx: &Onyx, count: usize, slow: usize) -> Vec<Turn> {
    let requests = (0..count).map(|i| async move {
        let agent = if i < slow { "slow" } else { "main" };
        let response = onyx
            .post("/v1/chat/completions")
            .json(&json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": format!("turn {i}")}]}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let run = response
            .headers()
            .get("x-onyx-run-id")
            .and_then(|id| id.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let answered = status == 200 && body["choices"][0]["message"]["content"].is_string();
        let failure = (!answered).then(|| format!("{agent} turn {i} answered {status}: {body}"));
        Turn { run, failure }
    });
    futures::future::join_all(requests).await
}

/// What either replica's log says about its leases, short enough to read in
/// a failed test's output: how many renewals were slower than the renewal
/// interval and the loop's late wakes (each with the longest), then the
/// warnings and errors (at most 20 a replica).
fn lease_lines(replicas: [(&str, &Onyx); 2]) -> Vec<String> {
    let longest = |lines: &[&str], field: &str| {
        lines
            .iter()
            .filter_map(|l| {
                l.split(field)
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .unwrap_or_default()
    };
    let mut said = Vec::new();
    for (name, replica) in replicas {
        let log = replica.stderr.lock().unwrap().clone();
        let slow: Vec<&str> = log.lines().filter(|l| l.contains("took_ms=")).collect();
        let late: Vec<&str> = log.lines().filter(|l| l.contains("late_ms=")).collect();
        said.push(format!(
            "{name}: {} renewals slower than the interval (longest {} ms), {} late wakes of the loop (longest {} ms)",
            slow.len(),
            longest(&slow, "took_ms="),
            late.len(),
            longest(&late, "late_ms="),
        ));
        said.extend(
            log.lines()
                .filter(|l| {
                    l.contains(" WARN ") || l.contains(" ERROR ") || l.contains("lapsed past its grace")
                })
                .take(20)
                .map(|l| format!("{name}: {l}")),
        );
    }
    said
}

#[tokio::test]
async fn under_load_no_run_is_taken_for_interrupted_while_its_replica_lives() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes).merge(json!({"agents": {
        "defaults": { "runLeaseSeconds": 3 },
        "list": [
            { "id": "main", "default": true, "model": "openai/fake-echo" },
            { "id": "slow", "model": "openai/fake-slow" },
        ],
    }}));
    let (a, b, _services) = two_replicas(config).await;
    // Three rounds of 40 turns on each replica at once; the slow ones (3 s of
    // model time, and the rest of the turn) outlive the lease, so only
    // renewals keep them. On a loaded machine (a debug SurrealDB server) a
    // renewal write can take several leases to come back; the reaper's grace
    // widens by its own slowest recent lease write, so live runs are not reaped.
    const PER_ROUND: usize = 40;
    let mut runs = Vec::new();
    for _ in 0..3 {
        let (on_a, on_b) = tokio::join!(turns(&a, PER_ROUND, 6), turns(&b, PER_ROUND, 6));
        runs.extend(on_a);
        runs.extend(on_b);
    }
    assert_eq!(runs.len(), 6 * PER_ROUND);
    let failures: Vec<&String> = runs.iter().filter_map(|turn| turn.failure.as_ref()).collect();
    assert!(
        failures.is_empty(),
        "{} turns failed:\n{failures:#?}\nthe replicas said:\n{}",
        failures.len(),
        lease_lines([("a", &a), ("b", &b)]).join("\n")
    );
    let said = || lease_lines([("a", &a), ("b", &b)]).join("\n");
    for replica in [&a, &b] {
        let interrupted = replica.get_json("/v1/runs?status=interrupted&limit=500").await;
        assert_eq!(
            interrupted["data"],
            json!([]),
            "none taken for interrupted; the replicas said:\n{}",
            said()
        );
    }
    let succeeded = a.get_json("/v1/runs?status=succeeded&limit=500").await;
    let ids = ids(&succeeded);
    for turn in &runs {
        assert!(
            ids.contains(&turn.run),
            "run {} succeeded; the replicas said:\n{}",
            turn.run,
            said()
        );
    }
    for (name, replica) in [("a", &a), ("b", &b)] {
        let log = replica.stderr.lock().unwrap().clone();
        let warnings: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR ") || l.contains("taken back"))
            .collect();
        assert!(
            warnings.is_empty(),
            "replica {name} warned: {warnings:#?}\nthe replicas said:\n{}",
            said()
        );
        assert!(
            log.contains(" INFO "),
            "the log was read: {}",
            &log[..log.len().min(300)]
        );
    }
}

#[tokio::test]
async fn health_says_how_full_the_search_indexs_budget_is() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .set("memory.residentBudgetMb", json!(2))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    append_notes(&onyx, "a", 20).await;
    let chunks = wait_until(secs(10), "the index holds the notes", async || {
        let status = onyx.get_json("/v1/memory/status").await;
        let held = status["search_index"]["chunks"].as_u64()?;
        (held >= 20 && status["chunks"] == held).then_some(held)
    })
    .await;
    let entry = dependency(&onyx.health().await, "search-index");
    assert!(
        entry["detail"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{chunks} chunks, ")),
        "{entry}"
    );
    assert_eq!(entry["status"], "up", "{entry}");
    let detail = entry["detail"].as_str().unwrap();
    assert!(
        detail.contains("of its 2 MB budget") && detail.contains("% full"),
        "{detail}"
    );
    for part in ["vectors", "postings", "text", "metadata"] {
        assert!(detail.contains(part), "{part} in {detail}");
    }
    let status = onyx.get_json("/v1/memory/status").await;
    let index = &status["search_index"];
    assert_eq!(index["budget_bytes"], 2 * 1_048_576);
    assert!(
        index["bytes"]["text"].as_u64().unwrap() >= 20 * 380,
        "the notes' text is counted: {index}"
    );

    for bad in [json!(0), json!(2_000_000)] {
        let config = TestConfig::new(&fakes)
            .set("memory.residentBudgetMb", bad.clone())
            .build();
        let Err((_, stderr)) = Onyx::try_start(Some(&config), &[]).await else {
            panic!("a budget of {bad} MB was accepted")
        };
        assert!(stderr.contains("memory.residentBudgetMb"), "{stderr}");
    }
}
