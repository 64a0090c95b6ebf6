//! The scheduler end to end: once / interval / cron tasks fire when due (on
//! second-resolution schedules), pause, resume, cancel and run-now; agents
//! scheduling their own work; heartbeats; catch-up after downtime; two
//! replicas on one SurrealDB server running every due run exactly once; and a
//! run killed mid-way recorded as failed while the task goes on.

use std::collections::HashSet;
use std::time::Duration;

use crate::harness::services::Service;
use crate::harness::*;
use serde_json::{Value, json};

/// Agents on the fake upstream, a short lease and no failure backoff.
fn config(fakes: &Fakes) -> TestConfig {
    TestConfig::new(fakes).merge(json!({
        "agents": {
            "defaults": { "model": "openai/fake-echo", "permissionMode": "allow-all", "timezone": "Europe/Berlin" },
            "list": [
                { "id": "main", "default": true },
                { "id": "scripter", "model": "openai/fake-script" },
                { "id": "slow", "model": "openai/fake-slow" },
            ],
        },
        "scheduler": { "leaseSeconds": 2, "failureBackoffSeconds": 0, "maxConsecutiveFailures": 3 },
    }))
}

impl Onyx {
    async fn create_task(&self, body: Value) -> Value {
        let (status, task) = reply(self.post("/v1/tasks").json(&body)).await;
        assert_eq!(status, 201, "{task}");
        task
    }

    async fn runs(&self, task: &str) -> Vec<Value> {
        let runs = self.get_json(&format!("/v1/tasks/{task}/runs")).await;
        runs["data"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until the task's finished runs satisfy `done`; returns them, oldest first.
    async fn wait_for_runs(&self, task: &str, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let runs = poll_until(secs(30), async || {
            let mut runs: Vec<Value> = self
                .runs(task)
                .await
                .into_iter()
                .filter(|r| r["status"] != "running")
                .collect();
            runs.reverse();
            done(&runs).then_some(runs)
        });
        if let Some(runs) = runs.await {
            return runs;
        }
        panic!(
            "task {task} never reached: {what}: {:#?}\n{}",
            self.runs(task).await,
            self.stderr.lock().unwrap()
        );
    }

    async fn patch_task(&self, task: &str, body: Value) -> (u16, Value) {
        reply(self.patch(&format!("/v1/tasks/{task}")).json(&body)).await
    }
}

fn succeeded(runs: &[Value]) -> Vec<&Value> {
    runs.iter().filter(|r| r["status"] == "succeeded").collect()
}

fn time(value: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(value.as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc)
}

/// A run started at or after its due time, and not long after.
fn assert_on_time(run: &Value) {
    let lag = time(&run["started_at"]) - time(&run["scheduled_for"]);
    assert!(
        lag >= chrono::Duration::zero() && lag < chrono::Duration::seconds(3),
        "started {lag} after it was due: {run}"
    );
}

#[tokio::test]
async fn once_interval_and_cron_tasks_fire_when_due() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes).build()), &[]).await;

    // once, two seconds from now, delivered into an existing session too.
    let (_, chat) = onyx
        .chat(json!({"model": "onyx:main", "messages": [{"role": "user", "content": "hello"}]}))
        .await;
    assert!(chat["choices"][0]["message"]["content"].is_string(), "{chat}");
    let sessions = onyx.get_json("/v1/sessions?agent=main").await;
    let inbox_session = sessions["data"][0]["id"].as_str().unwrap().to_string();
    let once = onyx
        .create_task(json!({
            "name": "reminder", "prompt": "once-ping", "schedule_type": "once", "schedule_value": "+2s",
            "deliver_to": format!("session:{inbox_session}"),
        }))
        .await;
    assert_eq!(once["status"], "active");
    assert_eq!(once["timezone"], "Europe/Berlin", "the configured default");
    let id = once["id"].as_str().unwrap();
    let runs = onyx.wait_for_runs(id, "one run", |r| !r.is_empty()).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["status"], "succeeded", "{runs:?}");
    assert_eq!(runs[0]["result"], "echo: once-ping");
    assert_eq!(runs[0]["trigger"], "schedule");
    assert_eq!(runs[0]["scheduled_for"], once["next_run"]);
    assert_on_time(&runs[0]);
    assert!(runs[0]["tokens"]["total"].as_u64().unwrap() > 0, "{runs:?}");
    let task = onyx.get_json(&format!("/v1/tasks/{id}")).await;
    assert_eq!(
        (task["status"].as_str(), task["next_run"].as_str()),
        (Some("completed"), None),
        "{task}"
    );
    assert_eq!(task["last_status"], "succeeded");
    // The run kept its own session, and the result was delivered to the other one.
    let session = onyx
        .get_json(&format!(
            "/v1/sessions/{}",
            runs[0]["session_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(session["source"], "task", "{session}");
    assert_eq!(runs[0]["delivered_to"], format!("session:{inbox_session}"));
    let delivered = onyx.get_json(&format!("/v1/sessions/{inbox_session}")).await;
    let transcript = delivered["messages"].to_string();
    assert!(
        transcript.contains("**reminder** (scheduled task)") && transcript.contains("echo: once-ping"),
        "{delivered}"
    );

    // interval: every second, keeping its rhythm.
    let tick = onyx
        .create_task(json!({"prompt": "tick", "schedule_type": "interval", "schedule_value": "1s"}))
        .await;
    let tick_id = tick["id"].as_str().unwrap();
    let runs = onyx
        .wait_for_runs(tick_id, "three runs", |r| succeeded(r).len() >= 3)
        .await;
    for pair in runs.windows(2) {
        assert_eq!(
            time(&pair[1]["scheduled_for"]) - time(&pair[0]["scheduled_for"]),
            chrono::Duration::seconds(1),
            "{pair:?}"
        );
    }
    runs.iter().for_each(assert_on_time);

    // pause: no more runs; resume: they come back; cancel: gone.
    let (status, paused) = onyx.patch_task(tick_id, json!({"status": "paused"})).await;
    assert_eq!(
        (status, paused["status"].as_str()),
        (200, Some("paused")),
        "{paused}"
    );
    // A run claimed before the pause finishes; none is claimed after it.
    let settled = wait_until(secs(30), "no run in flight", async || {
        let runs = onyx.runs(tick_id).await;
        runs.iter()
            .all(|run| run["status"] != "running")
            .then_some(runs.len())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(onyx.runs(tick_id).await.len(), settled, "a paused task ran");
    let (status, resumed) = onyx.patch_task(tick_id, json!({"status": "active"})).await;
    assert_eq!(status, 200, "{resumed}");
    onyx.wait_for_runs(tick_id, "runs after resuming", |r| r.len() > settled)
        .await;
    assert_eq!(reply(onyx.delete(&format!("/v1/tasks/{tick_id}"))).await.0, 200);
    assert_eq!(reply(onyx.get(&format!("/v1/tasks/{tick_id}"))).await.0, 404);

    // cron with seconds: every other second, on even seconds.
    let cron = onyx
        .create_task(
            json!({"prompt": "cron-ping", "schedule_type": "cron", "schedule_value": "*/2 * * * * *"}),
        )
        .await;
    let cron_id = cron["id"].as_str().unwrap();
    let runs = onyx
        .wait_for_runs(cron_id, "two runs", |r| succeeded(r).len() >= 2)
        .await;
    for run in &runs {
        assert_eq!(time(&run["scheduled_for"]).timestamp() % 2, 0, "{run}");
        assert_on_time(run);
    }

    // Five-field crontab, daily at 09:00 Berlin time: the next run says so.
    let daily = onyx
        .create_task(
            json!({"prompt": "morning summary", "schedule_type": "cron", "schedule_value": "0 9 * * *"}),
        )
        .await;
    let next = time(&daily["next_run"]).with_timezone(&chrono_tz::Europe::Berlin);
    assert_eq!(next.format("%H:%M:%S").to_string(), "09:00:00", "{daily}");
    // Run now: one manual run; the schedule stays where it was.
    let daily_id = daily["id"].as_str().unwrap();
    let (status, run) = reply(onyx.post(&format!("/v1/tasks/{daily_id}/run"))).await;
    assert_eq!(status, 202, "{run}");
    assert_eq!(run["trigger"], "manual");
    let runs = onyx
        .wait_for_runs(daily_id, "the manual run", |r| !r.is_empty())
        .await;
    assert_eq!(runs[0]["result"], "echo: morning summary");
    let after = onyx.get_json(&format!("/v1/tasks/{daily_id}")).await;
    assert_eq!(after["next_run"], daily["next_run"]);
    assert_eq!(after["last_status"], "succeeded");
}

#[tokio::test]
async fn agents_schedule_list_pause_and_cancel_their_own_tasks() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes).build()), &[]).await;
    let say = async |text: String| onyx.agent_answer("scripter", &text).await;
    // The task's own prompt is a script too (one step: no " ; " inside the
    // outer script): when it runs, it lists its tasks.
    let args = json!({"prompt": "script: list_tasks {}", "schedule_type": "interval",
                      "schedule_value": "1s", "name": "self-check", "context_mode": "main"});
    let answer = say(format!("script: schedule_task {args} ; answer")).await;
    assert!(answer.contains("Task scheduled (ID: "), "{answer}");
    assert!(answer.contains("next run: 20"), "{answer}");
    let tasks = onyx.get_json("/v1/tasks?agent=scripter").await;
    let task = &tasks["data"][0];
    assert_eq!(task["created_by"], "agent:scripter", "{tasks}");
    assert_eq!(task["context_mode"], "main");
    let id = task["id"].as_str().unwrap().to_string();

    // It runs as the agent, in the agent's main session, with its tools.
    let runs = onyx
        .wait_for_runs(&id, "two runs", |r| succeeded(r).len() >= 2)
        .await;
    let result = runs[0]["result"].as_str().unwrap();
    assert!(result.contains(&id) && result.contains("self-check"), "{result}");
    assert_eq!(
        runs[0]["session_id"], runs[1]["session_id"],
        "main mode shares one session"
    );

    let listed = say("script: list_tasks {} ; answer".into()).await;
    assert!(listed.contains(&id) && listed.contains("next run"), "{listed}");
    let paused = say(format!("script: pause_task {} ; answer", json!({"task_id": id}))).await;
    assert!(paused.contains("paused"), "{paused}");
    assert_eq!(
        onyx.get_json(&format!("/v1/tasks/{id}")).await["status"],
        "paused"
    );
    // Another agent's task is not its to touch.
    let other = onyx
        .create_task(
            json!({"agent": "main", "prompt": "x", "schedule_type": "cron", "schedule_value": "@daily"}),
        )
        .await;
    let refused = say(format!(
        "script: cancel_task {} ; answer",
        json!({"task_id": other["id"]})
    ))
    .await;
    assert!(refused.contains("you have no task"), "{refused}");
    let cancelled = say(format!("script: cancel_task {} ; answer", json!({"task_id": id}))).await;
    assert!(cancelled.contains("cancelled"), "{cancelled}");
    assert_eq!(reply(onyx.get(&format!("/v1/tasks/{id}"))).await.0, 404);
}

#[tokio::test]
async fn bad_schedules_timezones_and_prompts_get_clear_400s() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes).build()), &[]).await;
    // A task with prompt "x" on this schedule; a daily one with `extra` fields on top.
    let task =
        |kind: &str, value: &str| json!({"prompt": "x", "schedule_type": kind, "schedule_value": value});
    let daily = |extra: Value| {
        let mut body = task("cron", "@daily");
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let cases = [
        (task("cron", "0 9 * *"), "schedule_value", "4 fields"),
        (task("cron", "0 25 * * *"), "schedule_value", "not a valid cron"),
        (task("cron", "0 0 30 2 *"), "schedule_value", "never fires"),
        (task("interval", "sometimes"), "schedule_value", "not an interval"),
        (
            task("once", "2001-01-01T00:00:00Z"),
            "schedule_value",
            "in the past",
        ),
        (task("weekly", "1"), "schedule_type", "not \"cron\""),
        (daily(json!({"timezone": "Mars/Olympus"})), "timezone", "IANA"),
        (
            daily(json!({"prompt": "x".repeat(16_001)})),
            "prompt",
            "over the limit of 16000",
        ),
        (daily(json!({"prompt": "  "})), "prompt", "must say"),
        (daily(json!({"agent": "nobody"})), "agent", "no agent"),
        (
            daily(json!({"context_mode": "shared"})),
            "context_mode",
            "isolated",
        ),
        (
            daily(json!({"deliver_to": "slack:1"})),
            "deliver_to",
            "not a chat platform",
        ),
        (daily(json!({"prompt": 5})), "prompt", "string"),
        (daily(json!({"colour": "red"})), "colour", "unknown field"),
        (
            json!({"schedule_type": "cron", "schedule_value": "@daily"}),
            "prompt",
            "missing",
        ),
    ];
    for (body, param, words) in cases {
        let (status, error) = reply(onyx.post("/v1/tasks").json(&body)).await;
        assert_eq!(status, 400, "{body}: {error}");
        assert_eq!(error["error"]["param"], param, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{message:?} should say {words:?}");
    }
    let (status, _) = reply(
        onyx.post("/v1/tasks")
            .header("content-type", "application/json")
            .body("{not json"),
    )
    .await;
    assert_eq!(status, 400);
    // Nothing half-made was kept.
    assert_eq!(onyx.get_json("/v1/tasks").await["data"], json!([]));

    let task = onyx
        .create_task(json!({"prompt": "x", "schedule_type": "cron", "schedule_value": "@daily"}))
        .await;
    let id = task["id"].as_str().unwrap();
    let (status, error) = onyx.patch_task(id, json!({"status": "done"})).await;
    assert_eq!(status, 400, "{error}");
    let (status, error) = onyx.patch_task(id, json!({"schedule_value": "61 * * * *"})).await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(
        onyx.get_json(&format!("/v1/tasks/{id}")).await["schedule_value"],
        "@daily"
    );
    for (method, path) in [
        ("GET", "/v1/tasks/nope"),
        ("POST", "/v1/tasks/nope/run"),
        ("GET", "/v1/tasks/nope/runs"),
    ] {
        let (status, _) = reply(onyx.with_key(method, path, ONYX_KEY)).await;
        assert_eq!(status, 404, "{method} {path}");
    }
    let response = onyx.get("/v1/tasks?status=sleeping").send().await.unwrap();
    assert_eq!(response.status(), 400);
}

#[tokio::test]
async fn heartbeats_follow_heartbeat_md_and_never_block_tasks() {
    let fakes = Fakes::start().await;
    let config = config(&fakes)
        .agent(json!({ "id": "main", "heartbeat": { "every": "1s" } }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let heartbeat = "heartbeat-main";
    let runs = onyx
        .wait_for_runs(heartbeat, "a heartbeat", |r| !succeeded(r).is_empty())
        .await;
    let result = runs[0]["result"].as_str().unwrap();
    assert!(
        result.starts_with("echo: Heartbeat.") && result.contains("HEARTBEAT_OK"),
        "{result}"
    );
    let task = onyx.get_json(&format!("/v1/tasks/{heartbeat}")).await;
    assert_eq!(
        (task["kind"].as_str(), task["schedule_value"].as_str()),
        (Some("heartbeat"), Some("1s"))
    );
    // It comes from config: it can be paused, not deleted or rescheduled.
    assert_eq!(reply(onyx.delete(&format!("/v1/tasks/{heartbeat}"))).await.0, 409);
    let (status, _) = onyx.patch_task(heartbeat, json!({"schedule_value": "5s"})).await;
    assert_eq!(status, 409);

    // An empty checklist skips the heartbeat; a task of the same agent still runs.
    let (status, body) = reply(
        onyx.put("/v1/agents/main/files/HEARTBEAT.md")
            .body("# HEARTBEAT.md\n\n<!-- nothing to check -->\n"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let task = onyx
        .create_task(json!({"prompt": "still here", "schedule_type": "interval", "schedule_value": "1s"}))
        .await;
    let runs = onyx
        .wait_for_runs(heartbeat, "a skipped heartbeat", |r| {
            r.iter().any(|run| run["status"] == "skipped")
        })
        .await;
    let skipped = runs.iter().find(|r| r["status"] == "skipped").unwrap();
    assert_eq!(skipped["result"], "HEARTBEAT.md is empty");
    let task_runs = onyx
        .wait_for_runs(task["id"].as_str().unwrap(), "task runs", |r| {
            succeeded(r).len() >= 2
        })
        .await;
    assert_eq!(task_runs[0]["result"], "echo: still here");
}

#[tokio::test]
async fn runs_missed_while_down_catch_up_once_or_are_skipped() {
    let fakes = Fakes::start().await;
    let with_catch_up = |mode: &str| {
        config(&fakes)
            .merge(json!({ "scheduler": { "catchUp": mode, "missedAfterSeconds": 1 } }))
            .build()
    };
    let onyx = Onyx::start(Some(&with_catch_up("once")), &[]).await;
    let task = onyx
        .create_task(json!({"prompt": "catch me", "schedule_type": "interval", "schedule_value": "2s"}))
        .await;
    let id = task["id"].as_str().unwrap().to_string();
    onyx.wait_for_runs(&id, "a first run", |r| !r.is_empty()).await;
    let (dir, _) = onyx.stop().await;

    // Down for three beats: one catch-up run, not three.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let onyx = Onyx::start_in(dir, Some(&with_catch_up("once")), &[]).await;
    let runs = onyx
        .wait_for_runs(&id, "a catch-up run", |r| {
            r.iter().any(|run| run["trigger"] == "catch-up")
        })
        .await;
    let caught_up: Vec<_> = runs.iter().filter(|r| r["trigger"] == "catch-up").collect();
    assert_eq!(caught_up.len(), 1, "{runs:#?}");
    assert_eq!(caught_up[0]["status"], "succeeded");
    let task = onyx.get_json(&format!("/v1/tasks/{id}")).await;
    assert!(
        time(&task["next_run"]) > time(&caught_up[0]["started_at"]),
        "{task}"
    );
    let (dir, _) = onyx.stop().await;

    // With catchUp "skip", the missed run is recorded as skipped, not run.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let before = fakes.openai.state.requests().len();
    let onyx = Onyx::start_in(dir, Some(&with_catch_up("skip")), &[]).await;
    let runs = onyx
        .wait_for_runs(&id, "a skipped run", |r| {
            r.iter().any(|run| run["status"] == "skipped")
        })
        .await;
    let skipped: Vec<_> = runs.iter().filter(|r| r["status"] == "skipped").collect();
    assert_eq!(skipped.len(), 1, "{runs:#?}");
    assert!(
        skipped[0]["result"]
            .as_str()
            .unwrap()
            .contains("missed while Onyx was down")
    );
    assert_eq!(
        fakes.openai.state.requests().len(),
        before,
        "a skipped run called the model"
    );
    // And the schedule goes on.
    let count = runs.len();
    let runs = onyx
        .wait_for_runs(&id, "a scheduled run after the skip", |r| r.len() > count)
        .await;
    assert_eq!(runs.last().unwrap()["trigger"], "schedule");
}

#[tokio::test]
async fn two_replicas_on_one_database_run_every_due_run_exactly_once() {
    let fakes = Fakes::start().await;
    let (s3, surreal) = (Service::s3().await, Service::surreal().await);
    let config = config(&fakes).s3(&s3).surreal(&surreal).build();
    let (a, b) = (
        Onyx::start(Some(&config), &[]).await,
        Onyx::start(Some(&config), &[]).await,
    );
    let mut once = Vec::new();
    for i in 0..6 {
        // Made on both replicas, so both runners are awake for them.
        let replica = if i % 2 == 0 { &a } else { &b };
        let task = replica
            .create_task(
                json!({"prompt": format!("once-{i}"), "schedule_type": "once", "schedule_value": "+2s"}),
            )
            .await;
        once.push(task["id"].as_str().unwrap().to_string());
    }
    let interval = a
        .create_task(json!({"prompt": "beat", "schedule_type": "interval", "schedule_value": "1s"}))
        .await;
    let interval = interval["id"].as_str().unwrap().to_string();
    let beats = a
        .wait_for_runs(&interval, "six beats", |r| succeeded(r).len() >= 6)
        .await;
    for id in &once {
        b.wait_for_runs(id, "its run", |r| !r.is_empty()).await;
    }
    // Let anything in flight land (every run ended), then count.
    a.patch_task(&interval, json!({"status": "paused"})).await;
    wait_until(secs(30), "the beats in flight end", async || {
        let runs = a.runs(&interval).await;
        runs.iter().all(|r| r["status"] != "running").then_some(())
    })
    .await;
    let replicas: HashSet<String> = beats
        .iter()
        .map(|r| r["replica"].as_str().unwrap().to_string())
        .collect();
    for id in &once {
        let runs = a.runs(id).await;
        assert_eq!(runs.len(), 1, "task {id} ran {} times: {runs:#?}", runs.len());
        assert_eq!(runs[0]["status"], "succeeded");
    }
    let beats = a.runs(&interval).await;
    let due_times: HashSet<&str> = beats
        .iter()
        .map(|r| r["scheduled_for"].as_str().unwrap())
        .collect();
    assert_eq!(
        due_times.len(),
        beats.len(),
        "an occurrence ran twice: {beats:#?}"
    );
    // The model saw each run once.
    let requests = fakes.openai.state.requests();
    let asked = |text: &str| {
        requests
            .iter()
            .filter(|r| {
                let last = &r["messages"].as_array().unwrap().last().unwrap()["content"];
                // The agent's volatile context starts the newest user message.
                onyx_test_fakes::script::without_context(last.as_str().unwrap()) == text
            })
            .count()
    };
    for i in 0..6 {
        assert_eq!(asked(&format!("once-{i}")), 1, "once-{i}");
    }
    assert_eq!(asked("beat"), beats.len());
    eprintln!("beats ran on {} replica(s): {replicas:?}", replicas.len());
}

#[tokio::test]
async fn a_run_killed_mid_way_is_recorded_failed_and_the_task_goes_on() {
    let fakes = Fakes::start().await;
    let surreal = Service::surreal().await;
    let config = config(&fakes).surreal(&surreal).build();
    let victim = Onyx::start(Some(&config), &[]).await;
    // fake-slow takes 3 s to answer: long enough to die in the middle.
    let task = victim
        .create_task(json!({"agent": "slow", "prompt": "slow work", "schedule_type": "interval", "schedule_value": "4s"}))
        .await;
    let id = task["id"].as_str().unwrap().to_string();
    wait_until(secs(10), "the slow run is in progress", async || {
        (victim.get_json(&format!("/v1/tasks/{id}")).await["running"] == true).then_some(())
    })
    .await;
    assert_eq!(victim.get_json(&format!("/v1/tasks/{id}")).await["running"], true);
    victim.crash().await;

    let survivor = Onyx::start(Some(&config), &[]).await;
    let runs = survivor
        .wait_for_runs(&id, "the dead run failed and a later one succeeded", |r| {
            r.iter().any(|run| run["status"] == "failed") && r.iter().any(|run| run["status"] == "succeeded")
        })
        .await;
    let failed = runs.iter().find(|r| r["status"] == "failed").unwrap();
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("stopped before it finished"),
        "{failed}"
    );
    let ok = runs.iter().find(|r| r["status"] == "succeeded").unwrap();
    assert_ne!(failed["replica"], ok["replica"]);
    assert!(time(&ok["scheduled_for"]) > time(&failed["scheduled_for"]));
    let task = survivor.get_json(&format!("/v1/tasks/{id}")).await;
    assert_eq!(task["status"], "active", "{task}");
    assert_eq!(
        task["consecutive_failures"], 0,
        "a success resets the streak: {task}"
    );
}

#[tokio::test]
async fn a_task_failing_again_and_again_is_paused() {
    let fakes = Fakes::start().await;
    let config = config(&fakes)
        .agent(json!({ "id": "broken", "model": "openai/fake-500" }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let task = onyx
        .create_task(
            json!({"agent": "broken", "prompt": "fail", "schedule_type": "interval", "schedule_value": "1s"}),
        )
        .await;
    let id = task["id"].as_str().unwrap();
    let runs = onyx.wait_for_runs(id, "three failures", |r| r.len() >= 3).await;
    assert!(runs.iter().all(|r| r["status"] == "failed"), "{runs:#?}");
    let task = onyx.get_json(&format!("/v1/tasks/{id}")).await;
    assert_eq!(task["status"], "paused", "{task}");
    assert_eq!(task["consecutive_failures"], 3);
    // The last run may have found openai's circuit open after the failures before it.
    let last_error = task["last_error"].as_str().unwrap();
    assert!(
        last_error.contains("500") || last_error.contains("broke") || last_error.contains("circuit is open"),
        "{task}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(onyx.runs(id).await.len(), 3, "a paused task ran again");
    let (_, logs) = onyx.stop_and_logs().await;
    assert!(
        logs.contains("task stopped after failing too many times in a row"),
        "{logs}"
    );
}

#[tokio::test]
async fn a_task_made_on_a_replica_that_dies_runs_on_time_on_another() {
    let fakes = Fakes::start().await;
    let surreal = Service::surreal().await;
    let config = config(&fakes).surreal(&surreal).build();
    let (maker, survivor) = (
        Onyx::start(Some(&config), &[]).await,
        Onyx::start(Some(&config), &[]).await,
    );
    // The survivor has nothing due: without news of the new task it would
    // sleep its full safety interval (a minute).
    let task = maker
        .create_task(
            json!({"prompt": "from the other side", "schedule_type": "once", "schedule_value": "+3s"}),
        )
        .await;
    maker.crash().await;
    let id = task["id"].as_str().unwrap();
    let runs = survivor.wait_for_runs(id, "its run", |r| !r.is_empty()).await;
    assert_eq!(runs[0]["status"], "succeeded", "{runs:?}");
    assert_on_time(&runs[0]);
}
