//! The orchestration loop end to end through the real binary and the
//! scripted fake model: an agent proposes, the policy auto-approves, steps
//! run on different agents, the mission succeeds, an event fires a trigger
//! that makes the next proposal (once: the cooldown holds); a full quota
//! rejects at the gate; a demoted agent's work needs approval; a failed
//! mission is diagnosed; a note promoted to MEMORY.md is shared; two
//! replicas run every step exactly once; a step whose replica is killed is
//! recovered after its lease. The event stream carries new events and ends
//! when the gateway shuts down.

use serde_json::{Value, json};

use crate::harness::services::Service;
use crate::harness::*;

fn config(fakes: &Fakes) -> TestConfig {
    TestConfig::new(fakes).merge(json!({
        "agents": {
            "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
            "list": [
                { "id": "lead", "default": true },
                { "id": "researcher" },
                { "id": "writer" },
                { "id": "slowpoke", "model": "openai/fake-slow" },
            ],
        },
        "orchestration": { "leaseSeconds": 2, "reactionSeed": 7 },
    }))
}

pub(crate) async fn put_policy(onyx: &Onyx, key: &str, value: Value) {
    let (status, body) = reply(onyx.put(&format!("/v1/policy/{key}")).json(&value)).await;
    assert_eq!(status, 200, "{body}");
}

pub(crate) async fn propose(onyx: &Onyx, body: Value) -> Value {
    let (status, proposal) = reply(onyx.post("/v1/proposals").json(&body)).await;
    assert_eq!(status, 201, "{proposal}");
    proposal
}

/// Waits until the mission has ended; returns it with its steps.
pub(crate) async fn ended(onyx: &Onyx, mission: &str) -> Value {
    wait_until(secs(60), &format!("mission {mission} ends"), async || {
        let m = onyx.get_json(&format!("/v1/missions/{mission}")).await;
        (!matches!(m["status"].as_str(), Some("queued" | "running"))).then_some(m)
    })
    .await
}

async fn proposals_from(onyx: &Onyx, source: &str) -> Vec<Value> {
    let all = onyx.get_json("/v1/proposals").await;
    all["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"] == source)
        .cloned()
        .collect()
}

#[tokio::test]
async fn proposals_become_missions_whose_events_close_the_loop() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes).build()), &[]).await;
    put_policy(
        &onyx,
        "auto_approve",
        json!({"enabled": true, "allowed_step_kinds": ["research", "write", "diagnose"]}),
    )
    .await;
    let (status, trigger) = reply(onyx.post("/v1/triggers").json(&json!({
        "name": "Follow up a launch",
        "condition": {"type": "mission.succeeded", "payload": {"title": {"contains": "Launch"}}},
        "proposal": {"agent": "writer", "title": "Follow-up on {{payload.title}}",
                     "steps": [{"kind": "write", "input": "script: say follow-up for {{payload.title}}"}]},
        "cooldown_seconds": 3600,
    })))
    .await;
    assert_eq!(status, 201, "{trigger}");

    // The lead agent proposes through its tool; the policy approves; the two
    // steps run in order on two other agents, the second seeing the first's output.
    let answer = onyx
        .agent_answer(
            "lead",
            r#"script: propose_mission {"title": "Launch post", "description": "Announce the release", "steps": [{"kind": "research", "agent": "researcher", "input": "script: say facts: Onyx ships MCP"}, {"kind": "write", "agent": "writer", "input": "Write the post.\nscript: say post written"}]} ; answer"#,
        )
        .await;
    assert!(answer.contains("\"status\": \"accepted\""), "{answer}");
    let launch = onyx.get_json("/v1/proposals?status=accepted").await["data"][0].clone();
    assert_eq!(launch["source"], "agent");
    assert!(
        launch["reason"].as_str().unwrap().starts_with("auto:"),
        "{launch}"
    );
    let mission = ended(&onyx, launch["mission"].as_str().unwrap()).await;
    assert_eq!(mission["status"], "succeeded", "{mission}");
    let steps = mission["steps"].as_array().unwrap();
    assert_eq!(pluck(&mission["steps"], "/agent"), ["researcher", "writer"]);
    assert_eq!(steps[0]["output"], "facts: Onyx ships MCP");
    assert_eq!(steps[1]["output"], "post written");
    assert!(steps.iter().all(|s| s["attempts"] == 1), "{mission}");
    let writer_prompt = fakes
        .openai
        .state
        .requests()
        .into_iter()
        .map(|r| r.to_string())
        .find(|r| r.contains("Write the post."))
        .unwrap();
    assert!(
        writer_prompt.contains("facts: Onyx ships MCP"),
        "the second step sees the first's output"
    );

    // The success fires the trigger: the next proposal, from the trigger, runs too.
    let follow_up = poll_until(secs(30), async || {
        proposals_from(&onyx, "trigger").await.into_iter().next()
    })
    .await;
    let Some(follow_up) = follow_up else {
        panic!(
            "no trigger proposal; events: {}",
            onyx.get_json("/v1/events?limit=50").await
        )
    };
    assert_eq!(follow_up["title"], "Follow-up on Launch post");
    // Stored first, then accepted: wait for its mission.
    let follow_key = follow_up["key"].as_str().unwrap().to_string();
    let follow_mission = wait_until(secs(30), "the follow-up's mission", async || {
        let p = onyx.get_json(&format!("/v1/proposals/{follow_key}")).await;
        p["mission"].as_str().map(str::to_string)
    })
    .await;
    let follow_mission = ended(&onyx, &follow_mission).await;
    assert_eq!(follow_mission["steps"][0]["output"], "follow-up for Launch post");
    let fired = onyx.get_json("/v1/events?type=trigger.fired").await;
    assert_eq!(fired["data"].as_array().unwrap().len(), 1, "{fired}");

    // A second launch succeeds within the cooldown: the trigger holds.
    let second = propose(
        &onyx,
        json!({"agent": "lead", "title": "Launch post 2",
        "steps": [{"kind": "research", "agent": "researcher", "input": "script: say more facts"}]}),
    )
    .await;
    assert_eq!(second["status"], "accepted", "{second}");
    ended(&onyx, second["mission"].as_str().unwrap()).await;
    wait_until(secs(10), "the trigger cooling", async || {
        let cooling = onyx.get_json("/v1/events?type=trigger.cooling").await;
        (!cooling["data"].as_array().unwrap().is_empty()).then_some(())
    })
    .await;
    assert_eq!(
        proposals_from(&onyx, "trigger").await.len(),
        1,
        "no second follow-up"
    );

    // A full quota rejects at the gate, with its reason, and queues nothing.
    put_policy(&onyx, "step_quotas", json!({"research": 2})).await;
    let steps_before = onyx.get_json("/v1/steps").await["data"].as_array().unwrap().len();
    let refused = propose(
        &onyx,
        json!({"agent": "lead", "title": "More research",
        "steps": [{"kind": "research", "agent": "researcher", "input": "dig"}]}),
    )
    .await;
    assert_eq!(refused["status"], "rejected", "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("daily quota for research steps is reached (2/2 today"),
        "{refused}"
    );
    assert!(refused["mission"].is_null());
    assert_eq!(
        onyx.get_json("/v1/steps").await["data"].as_array().unwrap().len(),
        steps_before
    );
    let rejected = onyx.get_json("/v1/events?type=proposal.rejected").await;
    assert!(
        rejected["data"][0]["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains("quota"),
        "{rejected}"
    );

    // Bad proposals get a 400 naming the field.
    let (status, error) = reply(onyx.post("/v1/proposals").json(&json!({"title": "x",
        "steps": [{"kind": "Bad Kind", "input": "x"}]})))
    .await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("steps[0].kind"),
        "{error}"
    );
    let (status, error) = reply(
        onyx.put("/v1/policy/auto_approve")
            .json(&json!({"enabled": "yes"})),
    )
    .await;
    assert_eq!(status, 400, "{error}");

    // Trust: an operator's write is auto-approved; after a demoting review
    // the same kind waits for a human, at once.
    let (status, _) = reply(onyx.put("/v1/agents/lead/trust").json(&json!({"level": 3}))).await;
    assert_eq!(status, 200);
    let write =
        json!({"agent": "lead", "title": "Note", "steps": [{"kind": "write", "input": "script: say noted"}]});
    assert_eq!(propose(&onyx, write.clone()).await["status"], "accepted");
    let (status, review) = reply(onyx.post("/v1/agents/lead/reviews").json(&json!({
        "summary": "Posts went out with errors", "rating": 2, "decision": "down", "feedback": "Slow down and check facts."
    })))
    .await;
    assert_eq!(status, 201, "{review}");
    assert_eq!(
        (review["level_before"].as_u64(), review["level_after"].as_u64()),
        (Some(3), Some(2))
    );
    let pending = propose(&onyx, write).await;
    assert_eq!(
        pending["status"], "pending",
        "a demoted agent's write needs approval: {pending}"
    );
    let memory = onyx.get_json("/v1/memory/files/lead/MEMORY.md").await;
    assert!(
        memory["content"]
            .as_str()
            .unwrap()
            .contains("Slow down and check facts."),
        "{memory}"
    );
    let agent = onyx.get_json("/v1/agents/lead").await;
    assert_eq!(agent["permission_mode"], "ask", "{agent}");
    let (status, approved) = reply(onyx.post(&format!(
        "/v1/proposals/{}/approve",
        pending["key"].as_str().unwrap()
    )))
    .await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["status"], "accepted");
    let (status, again) = reply(onyx.post(&format!(
        "/v1/proposals/{}/reject",
        pending["key"].as_str().unwrap()
    )))
    .await;
    assert_eq!(status, 409, "{again}");

    // A mission that fails is diagnosed by the built-in trigger.
    let (status, _) = reply(onyx.patch("/v1/agents/writer").json(&json!({"enabled": false}))).await;
    assert_eq!(status, 200);
    let doomed = propose(
        &onyx,
        json!({"agent": "lead", "title": "Doomed",
        "steps": [{"kind": "write", "agent": "writer", "input": "script: say never"}]}),
    )
    .await;
    let _ = reply(onyx.post(&format!(
        "/v1/proposals/{}/approve",
        doomed["key"].as_str().unwrap()
    )))
    .await;
    let doomed = onyx
        .get_json(&format!("/v1/proposals/{}", doomed["key"].as_str().unwrap()))
        .await;
    let failed = ended(&onyx, doomed["mission"].as_str().unwrap()).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["steps"][0]["attempts"], 2, "retried once: {failed}");
    assert!(
        failed["steps"][0]["last_error"]
            .as_str()
            .unwrap()
            .contains("disabled"),
        "{failed}"
    );
    let diagnosis = wait_until(secs(30), "a diagnosis proposal", async || {
        proposals_from(&onyx, "trigger")
            .await
            .into_iter()
            .find(|p| p["title"] == "Diagnose: Doomed")
    })
    .await;
    assert_eq!(diagnosis["agent"], "lead", "the default agent diagnoses");
    assert_eq!(diagnosis["steps"][0]["kind"], "diagnose");

    // A note promoted to long-term memory fires the built-in insight trigger once enabled.
    let triggers = onyx.get_json("/v1/triggers").await;
    let insight = triggers["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["key"] == "builtin_insight_promoted")
        .cloned()
        .expect("the built-in insight trigger is seeded");
    assert_eq!(insight["enabled"], false, "off until enabled: {insight}");
    let (status, body) = reply(onyx.put("/v1/triggers/builtin_insight_promoted").json(&json!({
        "name": insight["name"], "condition": insight["condition"], "proposal": insight["proposal"],
        "cooldown_seconds": insight["cooldown_seconds"], "enabled": true,
    })))
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = reply(onyx.post("/v1/chat/completions").json(&json!({
        "model": "onyx:researcher",
        "messages": [{"role": "user", "content": r#"script: memory_write {"path": "MEMORY.md", "mode": "append", "content": "Deploys go out on Fridays."} ; answer"#}],
    })))
    .await;
    assert_eq!(status, 200, "{body}");
    let shared = wait_until(secs(30), "an insight proposal", async || {
        proposals_from(&onyx, "trigger")
            .await
            .into_iter()
            .find(|p| p["title"] == "Share an insight of researcher")
    })
    .await;
    assert!(
        shared["steps"][0]["input"]
            .as_str()
            .unwrap()
            .contains("Deploys go out on Fridays."),
        "{shared}"
    );
}

#[tokio::test]
async fn two_replicas_run_every_step_exactly_once_and_a_killed_step_is_recovered() {
    let fakes = Fakes::start().await;
    let surreal = Service::surreal().await;
    let config = config(&fakes).surreal(&surreal).build();
    let (a, b) = (
        Onyx::start(Some(&config), &[]).await,
        Onyx::start(Some(&config), &[]).await,
    );
    put_policy(
        &a,
        "auto_approve",
        json!({"enabled": true, "allowed_step_kinds": ["*"]}),
    )
    .await;
    let steps: Vec<Value> = (0..8)
        .map(|i| json!({"kind": "count", "agent": "researcher", "input": format!("script: say counted {i}"), "after": []}))
        .collect();
    let proposal = propose(&b, json!({"agent": "lead", "title": "Count", "steps": steps})).await;
    let mission = ended(&a, proposal["mission"].as_str().unwrap()).await;
    assert_eq!(mission["status"], "succeeded", "{mission}");
    let requests: Vec<String> = fakes
        .openai
        .state
        .requests()
        .iter()
        .map(|r| r.to_string())
        .collect();
    for (i, step) in mission["steps"].as_array().unwrap().iter().enumerate() {
        assert_eq!(step["attempts"], 1, "{step}");
        assert_eq!(step["output"], format!("counted {i}"));
        let key = step["key"].as_str().unwrap();
        // The run's own instructions name its step (a later step's prompt may
        // quote this one's from the agent's daily log).
        let runs = requests
            .iter()
            .filter(|r| r.contains(&format!("started this run (step {key} of mission")))
            .count();
        assert_eq!(runs, 1, "step {i} ran {runs} times");
    }
    drop(b);

    // A step in progress when its replica dies is run again after its lease.
    let slow = propose(
        &a,
        json!({"agent": "lead", "title": "Slow",
        "steps": [{"kind": "count", "agent": "slowpoke", "input": "take your time"}]}),
    )
    .await;
    let mission_id = slow["mission"].as_str().unwrap().to_string();
    wait_until(secs(20), "the slow step is running", async || {
        let m = a.get_json(&format!("/v1/missions/{mission_id}")).await;
        (m["steps"][0]["status"] == "running").then_some(())
    })
    .await;
    a.crash().await;
    let survivor = Onyx::start(Some(&config), &[]).await;
    let mission = ended(&survivor, &mission_id).await;
    assert_eq!(mission["status"], "succeeded", "{mission}");
    let step = &mission["steps"][0];
    assert_eq!(step["attempts"], 2, "{step}");
    assert!(
        step["last_error"].as_str().unwrap_or_default().is_empty() || step["last_error"].is_null(),
        "{step}"
    );
    let retried = survivor.get_json("/v1/events?type=step.retrying").await;
    let reason = retried["data"][0]["payload"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(reason.starts_with("stale:"), "{retried}");
}

/// The data of the next `data:` event on an open event stream, or `None`
/// when the server ended it (keep-alive comments skipped).
async fn next_event(response: &mut reqwest::Response, buffer: &mut String) -> Option<Value> {
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) {
                return Some(serde_json::from_str(data).unwrap());
            }
        }
        let chunk = tokio::time::timeout(secs(60), response.chunk())
            .await
            .expect("an event within 60 s")
            .expect("the stream reads without error")?;
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

#[tokio::test]
async fn the_event_stream_carries_new_events_and_ends_at_shutdown() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes).build()), &[]).await;
    let mut response = onyx
        .get("/v1/events/stream?type=proposal.created")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut buffer = String::new();
    assert_eq!(
        next_event(&mut response, &mut buffer).await.unwrap()["type"],
        "ready"
    );

    let proposal = propose(
        &onyx,
        json!({"agent": "researcher", "title": "Streamed", "steps": [{"kind": "write", "input": "script: say hi"}]}),
    )
    .await;
    let event = next_event(&mut response, &mut buffer).await.unwrap();
    assert_eq!(event["type"], "proposal.created", "{event}");
    assert_eq!(event["payload"]["proposal"], proposal["key"], "{event}");

    let reading = tokio::spawn(async move { next_event(&mut response, &mut buffer).await.is_none() });
    let started = std::time::Instant::now();
    let (status, _logs) = onyx.stop_and_logs().await;
    assert!(status.success(), "{status}");
    // The grace period is 30 s: a feed that held the server would take it all.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(reading.await.unwrap(), "the stream ended without another event");
}
