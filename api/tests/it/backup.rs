//! `onyx backup` and `onyx restore` through the real binary: sessions,
//! memory, skills, a provider sealed under the master key and a scheduled
//! task are written, backed up, wiped and restored, and the restored Onyx
//! serves the same sessions and search hits, the provider answers and the
//! task fires; on the embedded default (backed up while it serves, through
//! its control socket, and stopped) and on a SurrealDB server with S3
//! (backed up while Onyx runs and writes). Restore refuses non-empty
//! targets, damaged archives and the wrong master key, and a restore that
//! fails half-way leaves its targets empty.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use onyx_test_fakes::DEFAULT_KEY;
use serde_json::{Value, json};

use crate::harness::services::Service;
use crate::harness::*;

const MASTER_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const NOTE: &str = "# Storage\n\nThe backups live on the NAS in the garage, next to the bikes.\n";

fn config(fakes: &Fakes) -> TestConfig {
    TestConfig::new(fakes).merge(json!({
        "agents": { "defaults": { "model": "openai/fake-echo", "permissionMode": "allow-all" } },
        "scheduler": { "leaseSeconds": 2, "failureBackoffSeconds": 0 },
    }))
}

/// Writes everything a backup must keep; the task's id.
async fn seed(onyx: &Onyx, fakes: &Fakes) -> String {
    for text in ["plan the garden", "book the dentist"] {
        assert_eq!(onyx.agent_answer("main", text).await, format!("echo: {text}"));
    }
    let response = onyx
        .put("/v1/memory/files/main/memory/storage.md")
        .header("content-type", "text/markdown")
        .body(NOTE)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let skill = "---\nname: garden\ndescription: how the garden is kept\n---\nWater at dawn.\n";
    let (status, body) = reply(
        onyx.put("/v1/skills/main/garden")
            .json(&json!({"content": skill})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let spec = json!({"name": "sealed", "type": "openai",
        "baseUrl": format!("{}/v1", fakes.openai.url()), "apiKey": DEFAULT_KEY});
    let (status, body) = reply(onyx.post("/v1/providers").json(&spec)).await;
    assert_eq!(status, 201, "{body}");
    let (status, task) = reply(onyx.post("/v1/tasks").json(
        &json!({"name": "plants", "prompt": "water the plants", "schedule_type": "interval", "schedule_value": "2s"}),
    ))
    .await;
    assert_eq!(status, 201, "{task}");
    task["id"].as_str().unwrap().to_string()
}

/// What a person sees: sessions with their messages, search hits, skills, providers, tasks.
#[derive(Debug, PartialEq)]
struct Seen {
    sessions: BTreeMap<String, Value>,
    hits: Vec<String>,
    skills: Vec<String>,
    providers: Vec<String>,
    tasks: Vec<String>,
}

async fn seen(onyx: &Onyx) -> Seen {
    let mut sessions = BTreeMap::new();
    for id in ids(&onyx.get_json("/v1/sessions?agent=main&limit=100").await) {
        let session = onyx.get_json(&format!("/v1/sessions/{id}")).await;
        sessions.insert(id, session["messages"].clone());
    }
    let hits = wait_until(secs(30), "the note is found", async || {
        let (status, hits) = reply(onyx.get("/v1/memory/search").query(&[
            ("q", "where do the backups live"),
            ("mode", "text"),
            ("agent", "main"),
        ]))
        .await;
        let paths = pluck(&hits["data"], "/path");
        (status == 200 && paths.iter().any(|p| p == "memory/storage.md")).then_some(paths)
    })
    .await;
    let skills = pluck(&onyx.get_json("/v1/skills?agent=main").await["data"], "/name");
    let mut providers = pluck(&onyx.get_json("/v1/providers").await["data"], "/name");
    providers.sort();
    let mut tasks = ids(&onyx.get_json("/v1/tasks").await);
    tasks.sort();
    Seen {
        sessions,
        hits,
        skills,
        providers,
        tasks,
    }
}

/// The restored Onyx shows everything the original showed (sessions may
/// have been added since: the task keeps running).
fn assert_kept(before: &Seen, after: &Seen) {
    for (id, messages) in &before.sessions {
        assert_eq!(after.sessions.get(id), Some(messages), "session {id}");
    }
    assert!(before.sessions.len() >= 2, "{before:?}");
    // The task's runs keep adding daily-log lines that also match: every file
    // found before is found after, others may join it.
    for hit in &before.hits {
        assert!(
            after.hits.contains(hit),
            "{hit} found after the restore: {:?}",
            after.hits
        );
    }
    assert_eq!(after.skills, before.skills);
    assert_eq!(after.providers, before.providers);
    assert_eq!(after.tasks, before.tasks);
}

/// The sealed provider answers, and the task fires again after the restore.
async fn assert_working(onyx: &Onyx, task: &str) {
    let (status, body) = onyx
        .chat(json!({"model": "sealed/fake-echo", "messages": [{"role": "user", "content": "opened"}]}))
        .await;
    assert_eq!(status, 200, "the sealed provider key opened: {body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: opened");
    let restarted = chrono::Utc::now();
    wait_until(secs(30), "the restored task fires", async || {
        let runs = onyx.get_json(&format!("/v1/tasks/{task}/runs")).await;
        runs["data"].as_array()?.iter().find(|run| {
            run["status"] == "succeeded"
                && run["started_at"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .is_some_and(|t| t > restarted)
        })?;
        Some(())
    })
    .await;
}

/// Runs `onyx <args> --config <home>/onyx.json5` with `home` as HOME (data dir `home/data`).
async fn onyx_cli(home: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String) {
    let output = Onyx::command(home, env)
        .args(args)
        .arg("--config")
        .arg(home.join("onyx.json5"))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    (output.status.code().unwrap_or(-1), stderr)
}

/// A fresh home with the config written, as a new machine would have.
fn fresh_home(config: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("onyx.json5"), config).unwrap();
    home
}

/// Every file under `dir` (relative paths), for "nothing was left behind".
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// Agent chats landing one after another until stopped (a live backup's load).
struct Chatting {
    writing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<u32>,
}

impl Chatting {
    fn start(onyx: &Onyx) -> Self {
        let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (url, flag) = (onyx.url.clone(), writing.clone());
        let task = tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut turns = 0u32;
            while flag.load(std::sync::atomic::Ordering::Relaxed) {
                let response = client
                    .post(format!("{url}/v1/chat/completions"))
                    .bearer_auth(ONYX_KEY)
                    .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content": format!("live {turns}")}]}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                turns += 1;
            }
            turns
        });
        Self { writing, task }
    }

    /// Stops the chats; how many landed.
    async fn stop(self) -> u32 {
        self.writing.store(false, std::sync::atomic::Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

/// Consistent: every session the database names has its whole log (each
/// question with its answer), or none yet: a chat whose session was created
/// before the dump and whose first turn was written after the objects were
/// listed, as it was at the dump's moment.
fn assert_whole(after: &Seen) {
    for (id, messages) in &after.sessions {
        let messages = messages.as_array().unwrap_or_else(|| panic!("{id}: {messages}"));
        assert!(messages.len() % 2 == 0, "{id}: {messages:?}");
    }
    let whole = after
        .sessions
        .values()
        .filter(|m| m.as_array().is_some_and(|m| !m.is_empty()));
    assert!(
        whole.count() >= 2,
        "the seeded sessions and the chats before the dump kept their logs"
    );
}

#[tokio::test]
async fn an_embedded_onyx_backed_up_and_restored_serves_the_same_data() {
    let fakes = Fakes::start().await;
    let config = config(&fakes).build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let task = seed(&onyx, &fakes).await;
    let before = seen(&onyx).await;
    // The embedded database is held by `onyx serve`: the backup asks it for
    // the dump through the data dir's control socket, while chats land.
    let archive_dir = tempfile::tempdir().unwrap();
    let live = archive_dir.path().join("live.tar.zst");
    let chatting = Chatting::start(&onyx);
    let (code, stderr) = onyx_cli(onyx.dir.path(), &[], &["backup", live.to_str().unwrap()]).await;
    assert!(chatting.stop().await > 0, "chats landed during the backup");
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("backed up"), "{stderr}");
    let socket = onyx.dir.path().join("data/control.sock");
    assert!(socket.exists(), "the running server's control socket");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let archive = archive_dir.path().join("onyx.tar.zst");
    let archive_arg = archive.to_str().unwrap();

    let (home, _) = onyx.stop().await;
    assert!(!socket.exists(), "the socket goes with the server");
    // The live backup restores consistently: every session has its whole log.
    let from_live = fresh_home(&config);
    let (code, stderr) = onyx_cli(from_live.path(), &[], &["restore", live.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stderr}");
    std::fs::copy(
        home.path().join("data/master.key"),
        from_live.path().join("data/master.key"),
    )
    .unwrap();
    let restored = Onyx::start_in(from_live, Some(&config), &[]).await;
    let after = seen(&restored).await;
    assert_kept(&before, &after);
    assert_whole(&after);
    drop(restored);

    let (code, stderr) = onyx_cli(home.path(), &[], &["backup", archive_arg]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("backed up 2 session(s)") || stderr.contains("session(s)"),
        "{stderr}"
    );
    assert!(stderr.contains("is NOT in the archive"), "{stderr}");
    let (code, stderr) = onyx_cli(home.path(), &[], &["backup", archive_arg]).await;
    assert_eq!(code, 1, "a backup is never overwritten: {stderr}");

    // A new machine: the archive alone, then the master key put beside it.
    let fresh = fresh_home(&config);
    let (code, stderr) = onyx_cli(fresh.path(), &[], &["restore", archive_arg]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("put its master.key in"), "{stderr}");
    let (code, stderr) = onyx_cli(fresh.path(), &[], &["restore", archive_arg]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("refusing to restore over existing data"),
        "{stderr}"
    );
    std::fs::copy(
        home.path().join("data/master.key"),
        fresh.path().join("data/master.key"),
    )
    .unwrap();
    let restored = Onyx::start_in(fresh, Some(&config), &[]).await;
    assert_kept(&before, &seen(&restored).await);
    assert_working(&restored, &task).await;
    let (fresh, _) = restored.stop().await;

    // With --include-master-key the archive alone opens every sealed value;
    // --force moves what was there aside instead of deleting it.
    let keyed = archive_dir.path().join("keyed.tar.zst");
    let (code, stderr) = onyx_cli(
        home.path(),
        &[],
        &["backup", "--include-master-key", keyed.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let other = fresh_home(&config);
    let (code, stderr) = onyx_cli(other.path(), &[], &["restore", keyed.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stderr}");
    let restored = Onyx::start_in(other, Some(&config), &[]).await;
    assert_kept(&before, &seen(&restored).await);
    assert_working(&restored, &task).await;
    drop(restored);
    let (code, stderr) = onyx_cli(
        fresh.path(),
        &[],
        &["restore", "--force", keyed.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("moved what was in the data dir to"), "{stderr}");
    let aside: Vec<PathBuf> = std::fs::read_dir(fresh.path().join("data"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("replaced-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(aside[0].join("db").is_dir(), "the replaced database is kept");
}

#[tokio::test]
async fn a_server_and_s3_onyx_backed_up_while_it_writes_restores_consistently() {
    let fakes = Fakes::start().await;
    let (surreal, s3) = (Service::surreal().await, Service::s3().await);
    let env = [("ONYX_MASTER_KEY", MASTER_KEY)];
    let config = config(&fakes).surreal(&surreal).s3(&s3).build();
    let onyx = Onyx::start(Some(&config), &env).await;
    let task = seed(&onyx, &fakes).await;
    let before = seen(&onyx).await;

    // A live backup while chats keep landing.
    let chatting = Chatting::start(&onyx);
    let archive_dir = tempfile::tempdir().unwrap();
    let archive = archive_dir.path().join("live.tar.zst");
    let (code, stderr) = onyx_cli(onyx.dir.path(), &env, &["backup", archive.to_str().unwrap()]).await;
    assert!(chatting.stop().await > 0, "chats landed during the backup");
    assert_eq!(code, 0, "{stderr}");
    drop(onyx);

    // Restored into a new database server and a new bucket store.
    let (surreal2, s3_2) = (Service::surreal().await, Service::s3().await);
    let config2 = crate::backup::config(&fakes).surreal(&surreal2).s3(&s3_2).build();
    let fresh = fresh_home(&config2);
    let (code, stderr) = onyx_cli(fresh.path(), &env, &["restore", archive.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = onyx_cli(fresh.path(), &env, &["restore", archive.to_str().unwrap()]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("table(s)") && stderr.contains("object(s)"),
        "{stderr}"
    );
    let restored = Onyx::start_in(fresh, Some(&config2), &env).await;
    let after = seen(&restored).await;
    assert_kept(&before, &after);
    assert_whole(&after);
    assert_working(&restored, &task).await;

    // Another master key than the one that sealed the provider: refused.
    drop(restored);
    let (surreal3, s3_3) = (Service::surreal().await, Service::s3().await);
    let config3 = crate::backup::config(&fakes).surreal(&surreal3).s3(&s3_3).build();
    let wrong = fresh_home(&config3);
    let other_key = [("ONYX_MASTER_KEY", "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=")];
    let (code, stderr) = onyx_cli(wrong.path(), &other_key, &["restore", archive.to_str().unwrap()]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("sealed under master key"), "{stderr}");
}

/// The archive's entries (path, bytes), decompressed.
fn unpack(archive: &Path) -> Vec<(String, Vec<u8>)> {
    let file = std::fs::File::open(archive).unwrap();
    let mut tar = tar::Archive::new(zstd::Decoder::new(file).unwrap());
    tar.entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().to_str().unwrap().to_string();
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            (path, bytes)
        })
        .collect()
}

fn pack(entries: &[(String, Vec<u8>)], to: &Path) {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, bytes) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        tar.append_data(&mut header, path, bytes.as_slice()).unwrap();
    }
    std::fs::write(
        to,
        zstd::encode_all(tar.into_inner().unwrap().as_slice(), 3).unwrap(),
    )
    .unwrap();
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn a_damaged_archive_or_a_restore_failing_half_way_leaves_the_targets_as_they_were() {
    let fakes = Fakes::start().await;
    let (surreal, s3) = (Service::surreal().await, Service::s3().await);
    let config = config(&fakes).surreal(&surreal).s3(&s3).build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    seed(&onyx, &fakes).await;
    let archive_dir = tempfile::tempdir().unwrap();
    let archive = archive_dir.path().join("good.tar.zst");
    let (code, stderr) = onyx_cli(onyx.dir.path(), &[], &["backup", archive.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stderr}");
    drop(onyx);
    let entries = unpack(&archive);

    // The targets: a new server, new buckets, a new data dir.
    let (surreal2, s3_2) = (Service::surreal().await, Service::s3().await);
    let config2 = crate::backup::config(&fakes).surreal(&surreal2).s3(&s3_2).build();
    let fresh = fresh_home(&config2);
    // Nothing written: no file in the data dir (and the last restore below
    // finds the database without a table and the buckets without an object,
    // or it would refuse).
    let untouched = || {
        let data = files_under(&fresh.path().join("data"));
        assert!(data.is_empty(), "{data:?}");
    };

    // A changed byte in an object: found before anything is written.
    let mut changed = entries.clone();
    let object = changed
        .iter_mut()
        .find(|(p, _)| p.starts_with("objects/onyx-memory/"))
        .unwrap();
    object.1[0] ^= 0x20;
    let damaged = archive_dir.path().join("damaged.tar.zst");
    pack(&changed, &damaged);
    let (code, stderr) = onyx_cli(fresh.path(), &[], &["restore", damaged.to_str().unwrap()]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("does not match its checksum"), "{stderr}");
    untouched();

    // Cut short (no manifest): refused.
    let cut = archive_dir.path().join("cut.tar.zst");
    pack(&entries[..entries.len() - 1], &cut);
    let (code, stderr) = onyx_cli(fresh.path(), &[], &["restore", cut.to_str().unwrap()]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no manifest.json"), "{stderr}");
    untouched();

    // A dump the database rejects, with checksums that match: the objects
    // are written first, the import fails, and everything is taken back.
    let mut broken = entries.clone();
    let bad_dump = b"DEFINE TABLE session SCHEMALESS;\nTHIS IS NOT SURREALQL;\n".to_vec();
    let dump_sha = sha256(&bad_dump);
    broken.iter_mut().find(|(p, _)| p == "database.surql").unwrap().1 = bad_dump.clone();
    let manifest = broken.iter_mut().find(|(p, _)| p == "manifest.json").unwrap();
    let mut parsed: Value = serde_json::from_slice(&manifest.1).unwrap();
    for entry in parsed["entries"].as_array_mut().unwrap() {
        if entry["path"] == "database.surql" {
            entry["size"] = json!(bad_dump.len());
            entry["sha256"] = json!(dump_sha);
        }
    }
    manifest.1 = serde_json::to_vec(&parsed).unwrap();
    let half = archive_dir.path().join("half.tar.zst");
    pack(&broken, &half);
    let (code, stderr) = onyx_cli(fresh.path(), &[], &["restore", half.to_str().unwrap()]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("import"), "{stderr}");
    untouched();
    // The same targets then take the good archive.
    let (code, stderr) = onyx_cli(fresh.path(), &[], &["restore", archive.to_str().unwrap()]).await;
    assert_eq!(code, 0, "nothing was left half restored: {stderr}");
}
