//! Seed 004's loop closed by a reaction, through the real binary: a mission's
//! success (event) fires a trigger whose mission's success sets off the
//! reaction matrix; the reacting agent's mission and step run; within the
//! pattern's cooldown (in minutes) the next success queues no reaction. A
//! cooldown without its unit is refused naming the key to use. A replica
//! that keeps its worker off runs nothing until an outside cron calls the
//! heartbeat (admin only), which then starts the step, and after a crash
//! recovers it once its lease is out and runs it again.

use serde_json::{Value, json};

use crate::harness::*;
use crate::missions::{ended, propose, put_policy};

fn config(fakes: &Fakes, orchestration: Value) -> TestConfig {
    TestConfig::new(fakes).merge(json!({
        "agents": {
            "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
            "list": [
                { "id": "lead", "default": true },
                { "id": "researcher" },
                { "id": "writer" },
            ],
        },
        "orchestration": orchestration,
    }))
}

/// Writes a policy; the status and answer, for refusals too.
async fn try_put_policy(onyx: &Onyx, key: &str, value: Value) -> (u16, Value) {
    reply(onyx.put(&format!("/v1/policy/{key}")).json(&value)).await
}

/// The first proposal from `source` titled `title`, once it has its mission.
async fn mission_of(onyx: &Onyx, source: &str, title: &str) -> String {
    wait_until(
        secs(30),
        &format!("a {source} proposal {title:?} with a mission"),
        async || {
            let all = onyx.get_json("/v1/proposals").await;
            all["data"]
                .as_array()?
                .iter()
                .find(|p| p["source"] == source && p["title"] == title)
                .and_then(|p| p["mission"].as_str().map(str::to_string))
        },
    )
    .await
}

async fn events(onyx: &Onyx, kind: &str) -> Vec<Value> {
    onyx.get_json(&format!("/v1/events?type={kind}")).await["data"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn an_event_fires_a_trigger_whose_success_sets_off_a_reaction_that_runs_its_mission() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, json!({ "reactionSeed": 11 })).build()), &[]).await;
    put_policy(
        &onyx,
        "auto_approve",
        json!({"enabled": true, "allowed_step_kinds": ["*"]}),
    )
    .await;
    // The seed's own pattern shape: a bare `cooldown` (minutes in seed 004,
    // seconds in Onyx before) is refused, naming what to write instead.
    let pattern = json!({"source": "writer", "tags": ["mission:succeeded"], "target": "researcher",
                         "type": "review", "probability": 1.0});
    let mut bare = pattern.clone();
    bare["cooldown"] = json!(120);
    let (status, error) = try_put_policy(&onyx, "reaction_matrix", json!({"patterns": [bare]})).await;
    assert_eq!(status, 400, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("patterns[0].cooldown is ambiguous") && message.contains("cooldown_minutes"),
        "{message}"
    );
    let mut named = pattern.clone();
    named["cooldown_minutes"] = json!(60);
    put_policy(&onyx, "reaction_matrix", json!({"patterns": [named]})).await;
    let (status, trigger) = reply(onyx.post("/v1/triggers").json(&json!({
        "name": "Write up a launch",
        "condition": {"type": "mission.succeeded", "agent": "lead"},
        "proposal": {"agent": "writer", "title": "Write-up of {{payload.title}}",
                     "steps": [{"kind": "write", "input": "script: say write-up of {{payload.title}} done"}]},
        "cooldown_seconds": 3600,
    })))
    .await;
    assert_eq!(status, 201, "{trigger}");

    // The event: the lead's mission succeeds.
    let launch = propose(
        &onyx,
        json!({"agent": "lead", "title": "Launch",
               "steps": [{"kind": "launch", "agent": "lead", "input": "script: say launched"}]}),
    )
    .await;
    assert_eq!(launch["status"], "accepted", "{launch}");
    assert_eq!(
        ended(&onyx, launch["mission"].as_str().unwrap()).await["status"],
        "succeeded"
    );

    // The trigger: the writer's write-up runs and succeeds.
    let write_up = mission_of(&onyx, "trigger", "Write-up of Launch").await;
    let write_up = ended(&onyx, &write_up).await;
    assert_eq!(write_up["status"], "succeeded", "{write_up}");
    assert_eq!(write_up["steps"][0]["output"], "write-up of Launch done");

    // The reaction: the writer's success makes the researcher review it, as a
    // mission of its own whose step runs on the researcher.
    let queued = wait_until(secs(30), "the reaction is queued", async || {
        events(&onyx, "reaction.queued").await.into_iter().next()
    })
    .await;
    assert_eq!(queued["agent"], "researcher", "{queued}");
    assert_eq!(queued["payload"]["from"], "writer");
    assert_eq!(queued["payload"]["event_type"], "mission.succeeded");
    let review = mission_of(&onyx, "reaction", "review (reacting to writer)").await;
    let review = ended(&onyx, &review).await;
    assert_eq!(review["status"], "succeeded", "{review}");
    let step = &review["steps"][0];
    assert_eq!(
        (step["agent"].as_str(), step["kind"].as_str()),
        (Some("researcher"), Some("review"))
    );
    assert_eq!(step["attempts"], 1);
    let output = step["output"].as_str().unwrap();
    assert!(
        output.contains("Agent writer did something you react to") && output.contains("as review"),
        "the step ran the reaction's prompt: {output}"
    );
    let proposal = onyx
        .get_json(&format!("/v1/proposals/{}", review["proposal"].as_str().unwrap()))
        .await;
    assert!(
        proposal["reason"].as_str().unwrap().starts_with("auto:"),
        "{proposal}"
    );

    // Within the cooldown (60 minutes), the writer's next success queues no
    // second review: the matrix says it is cooling, in seconds.
    let again = propose(
        &onyx,
        json!({"agent": "writer", "title": "Another piece",
               "steps": [{"kind": "write", "agent": "writer", "input": "script: say another piece"}]}),
    )
    .await;
    assert_eq!(
        ended(&onyx, again["mission"].as_str().unwrap()).await["status"],
        "succeeded"
    );
    let cooling = wait_until(secs(30), "the reaction cooling", async || {
        events(&onyx, "reaction.cooling").await.into_iter().next()
    })
    .await;
    assert_eq!(cooling["payload"]["cooldown_seconds"], 3600, "{cooling}");
    assert_eq!(cooling["payload"]["type"], "review");
    assert_eq!(events(&onyx, "reaction.queued").await.len(), 1, "one review only");
}

#[tokio::test]
async fn a_cron_runs_the_control_loop_of_a_replica_without_a_worker() {
    let fakes = Fakes::start().await;
    let config = config(&fakes, json!({ "worker": false, "leaseSeconds": 2 })).build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    put_policy(
        &onyx,
        "auto_approve",
        json!({"enabled": true, "allowed_step_kinds": ["*"]}),
    )
    .await;
    let proposal = propose(
        &onyx,
        json!({"agent": "lead", "title": "Cron work",
               "steps": [{"kind": "count", "agent": "researcher", "input": "script: say done on the heartbeat"}]}),
    )
    .await;
    let mission = proposal["mission"].as_str().unwrap().to_string();
    // Nothing runs it on its own here.
    let queued = onyx.get_json(&format!("/v1/missions/{mission}")).await;
    assert_eq!(queued["steps"][0]["status"], "queued", "{queued}");

    // The heartbeat is for admins only.
    let cron = onyx.create_key("cron", "chat").await;
    let (status, refused) = reply(onyx.with_key(
        "POST",
        "/v1/orchestration/heartbeat",
        cron["key"].as_str().unwrap(),
    ))
    .await;
    assert_eq!(status, 403, "{refused}");
    let (status, report) = reply(onyx.post("/v1/orchestration/heartbeat")).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["worker"], false, "{report}");
    assert_eq!(report["recovered_steps"], json!([]));
    let done = ended(&onyx, &mission).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["steps"][0]["output"], "done on the heartbeat");
    assert_eq!(done["steps"][0]["attempts"], 1);

    // A step the heartbeat started dies with its replica: a later heartbeat
    // (on the restarted replica) recovers it once its lease is out, and the
    // next one runs it again. Its first attempt hangs in a shell command (so
    // it is still running when the replica dies, however slow this machine
    // is); the second finds the mark the first left in the work dir.
    let slow_script = r#"script: exec {"command": "test -e first-attempt || (touch first-attempt && sleep 30)"} ; say slow work done"#;
    let slow = propose(
        &onyx,
        json!({"agent": "lead", "title": "Slow cron work",
               "steps": [{"kind": "count", "agent": "researcher", "input": slow_script}]}),
    )
    .await;
    let slow_mission = slow["mission"].as_str().unwrap().to_string();
    let (status, _) = reply(onyx.post("/v1/orchestration/heartbeat")).await;
    assert_eq!(status, 200);
    let mark = onyx.dir.path().join("data/workspaces/researcher/first-attempt");
    wait_until(secs(20), "the slow step's command is running", async || {
        let m = onyx.get_json(&format!("/v1/missions/{slow_mission}")).await;
        (m["steps"][0]["status"] == "running" && mark.exists()).then_some(())
    })
    .await;
    let step = onyx.get_json(&format!("/v1/missions/{slow_mission}")).await["steps"][0]["key"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = onyx.crash().await;
    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    let recovered = poll_until(secs(30), async || {
        let (status, report) = reply(onyx.post("/v1/orchestration/heartbeat")).await;
        assert_eq!(status, 200, "{report}");
        let recovered = report["recovered_steps"].as_array()?.clone();
        (!recovered.is_empty()).then_some(recovered)
    })
    .await;
    let Some(recovered) = recovered else {
        let mission = onyx.get_json(&format!("/v1/missions/{slow_mission}")).await;
        panic!("no heartbeat recovered the stale step in 30 s: {mission}");
    };
    assert_eq!(recovered, [json!(step)]);
    let done = wait_until(
        secs(60),
        "the recovered step runs again on a heartbeat",
        async || {
            let _ = reply(onyx.post("/v1/orchestration/heartbeat")).await;
            let m = onyx.get_json(&format!("/v1/missions/{slow_mission}")).await;
            (!matches!(m["status"].as_str(), Some("queued" | "running"))).then_some(m)
        },
    )
    .await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["steps"][0]["attempts"], 2, "{done}");
    assert_eq!(done["steps"][0]["output"], "slow work done", "{done}");
}
