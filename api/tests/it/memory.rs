//! Memory end to end: the files API, hybrid search (each leg proven to
//! matter), daily-log appends, path tricks, the embedder going away and coming
//! back, files edited behind Onyx's back, and rebuilding a lost index. Runs on
//! the embedded default and on S3 + a SurrealDB server.

use crate::harness::services::Service;
use crate::harness::*;
use serde_json::{Value, json};

/// The fake Ollama's topic-aware embeddings, `dimensions` wide, synced every second.
fn config(fakes: &Fakes, dimensions: u32) -> TestConfig {
    TestConfig::new(fakes).set(
        "memory",
        json!({
            "embedder": { "type": "ollama", "model": "all-minilm", "dimensions": dimensions },
            "syncIntervalSeconds": 1,
        }),
    )
}

const CURATED: &str = "# Memory

## Pets
My dog Rex needs his rabies vaccination every spring at the vet on Elm Street.

## Work
The quarterly roadmap review with my manager is on Friday.

## Tickets
Deployment ticket OX-4711 tracks the flaky database migration.

## Kitchen
Grandma's lasagna recipe uses fresh garlic and a slow oven.
";

const SHARED_DOC: &str = "# Travel policy

Book flights through the company airline portal and keep hotel receipts.
";

impl Onyx {
    async fn search(&self, query: &str, mode: &str) -> Value {
        let (status, hits) =
            reply(
                self.get("/v1/memory/search")
                    .query(&[("q", query), ("mode", mode), ("agent", "main")]),
            )
            .await;
        assert_eq!(status, 200, "{hits}");
        hits
    }

    async fn write(&self, path: &str, content: &str) -> Value {
        let response = self
            .put(&format!("/v1/memory/files/{path}"))
            .header("content-type", "text/markdown")
            .body(content.to_string())
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        assert_eq!(status, 200, "{body}\n{}", self.stderr.lock().unwrap());
        serde_json::from_str(&body).unwrap()
    }

    /// Polls the index status until `done` says so (the background worker is asynchronous).
    async fn wait_for_status(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let status = poll_until(secs(20), async || {
            let status = self.get_json("/v1/memory/status").await;
            done(&status).then_some(status)
        });
        if let Some(status) = status.await {
            return status;
        }
        panic!(
            "memory never reached: {what}: {}",
            self.get_json("/v1/memory/status").await
        );
    }

    /// Asks for a comparison of the files with the index now; its report.
    async fn sync_memory(&self) -> Value {
        reply(self.post("/v1/memory/sync")).await.1
    }

    async fn wait_for_resident_index(&self) -> Value {
        self.wait_for_status("the resident search index loaded", |s| {
            s["search_index"]["state"] == "ready"
        })
        .await
    }

    /// Polls a search until `found` says so (another replica's write arrives
    /// through the live feed, asynchronously).
    async fn search_until(&self, query: &str, mode: &str, found: impl Fn(&Value) -> bool) -> Value {
        let hits = poll_until(secs(5), async || {
            let hits = self.search(query, mode).await;
            found(&hits).then_some(hits)
        });
        if let Some(hits) = hits.await {
            return hits;
        }
        panic!(
            "{query} ({mode}) never matched: {}",
            self.search(query, mode).await
        );
    }

    async fn wait_for_vectors(&self) -> Value {
        self.wait_for_status("embedder ready, nothing pending", |s| {
            s["embedder"]["ready"] == true && s["pending"] == 0
        })
        .await
    }
}

fn top(results: &Value) -> (String, String) {
    let hit = &results["data"][0];
    (
        hit["path"].as_str().unwrap_or_default().to_string(),
        hit["heading"].as_str().unwrap_or_default().to_string(),
    )
}

fn paths_and_lines(results: &Value) -> Vec<(String, u64, u64)> {
    results["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                format!("{}/{}", h["agent"].as_str().unwrap(), h["path"].as_str().unwrap()),
                h["start_line"].as_u64().unwrap(),
                h["end_line"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Writes the corpus and proves each leg of the search matters.
async fn exercise_search(onyx: &Onyx) {
    onyx.wait_for_vectors().await;
    // Searches below run in the resident index, which is kept current by the writes.
    onyx.wait_for_resident_index().await;
    let written = onyx.write("main/MEMORY.md", CURATED).await;
    assert_eq!(written["chunks"], 5, "{written}");
    assert_eq!(written["pending"], 0, "written with the embedder up: {written}");
    onyx.write("_shared/handbook.md", SHARED_DOC).await;
    onyx.write(
        "other/MEMORY.md",
        "# Memory\n\n## Pets\nMy cat Tom hates the vet.\n",
    )
    .await;

    // A rare identifier: only full text finds it.
    let text = onyx.search("OX-4711", "text").await;
    assert_eq!(text["mode"], "text");
    assert_eq!(top(&text), ("MEMORY.md".into(), "Memory".into()), "{text}");
    let hit = &text["data"][0];
    assert_eq!(
        (hit["start_line"].as_u64(), hit["end_line"].as_u64()),
        (Some(9), Some(10))
    );
    assert!(
        hit["snippet"].as_str().unwrap().contains("**OX**-**4711**"),
        "{hit}"
    );
    assert_eq!(hit["legs"], json!(["text"]));
    let vector = onyx.search("OX-4711", "vector").await;
    let best = vector["data"][0]["score"].as_f64().unwrap_or(0.0);
    assert!(
        best < 0.3,
        "the vector leg has no real match for an identifier: {vector}"
    );

    // A paraphrase sharing no words: only the vector leg finds it.
    let paraphrase = "canine immunization appointment";
    let text = onyx.search(paraphrase, "text").await;
    assert!(text["data"].as_array().unwrap().is_empty(), "{text}");
    let vector = onyx.search(paraphrase, "vector").await;
    assert_eq!(vector["mode"], "vector");
    assert!(
        vector["data"][0]["snippet"].as_str().unwrap().contains("Rex"),
        "{vector}"
    );
    assert!(vector["data"][0]["score"].as_f64().unwrap() > 0.5, "{vector}");
    assert_eq!(vector["data"][0]["legs"], json!(["vector"]));

    // Hybrid gets both.
    for (query, expected) in [("OX-4711", "4711"), (paraphrase, "Rex")] {
        let hybrid = onyx.search(query, "hybrid").await;
        assert_eq!(hybrid["mode"], "hybrid");
        assert!(
            hybrid["data"][0]["snippet"].as_str().unwrap().contains(expected),
            "{query}: {hybrid}"
        );
    }
    let both = onyx.search("OX-4711 canine immunization", "hybrid").await;
    let snippets: Vec<&str> = both["data"].as_array().unwrap()[..2]
        .iter()
        .map(|h| h["snippet"].as_str().unwrap())
        .collect();
    assert!(
        snippets.iter().any(|s| s.contains("4711")) && snippets.iter().any(|s| s.contains("Rex")),
        "{both}"
    );

    // Shared documents are found by every agent; other agents' memory is not.
    let travel = onyx.search("plane tickets and lodging", "hybrid").await;
    assert!(
        travel["data"].as_array().unwrap()[..2]
            .iter()
            .any(|h| h["agent"] == "_shared"),
        "{travel}"
    );
    let cats = onyx.search("Tom the cat", "hybrid").await;
    assert!(
        cats["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["agent"] != "other"),
        "{cats}"
    );
}

#[tokio::test]
async fn hybrid_search_on_the_embedded_default() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, 128).build()), &[]).await;
    exercise_search(&onyx).await;
}

#[tokio::test]
async fn hybrid_search_on_s3_and_a_surrealdb_server() {
    let fakes = Fakes::start().await;
    let (s3, surreal) = (Service::s3().await, Service::surreal().await);
    let onyx = Onyx::start(Some(&config(&fakes, 128).s3(&s3).surreal(&surreal).build()), &[]).await;
    exercise_search(&onyx).await;
    let status = onyx.get_json("/v1/memory/status").await;
    assert_eq!(status["files"], 3, "{status}");

    // A file dropped into the bucket behind Onyx's back (s3s-fs serves a directory).
    let outside = s3.dir.path().join("onyx-memory/main/memory");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(
        outside.join("boat.md"),
        "# Boat\n\nThe sailboat mooring fee is due in March.\n",
    )
    .unwrap();
    let report = onyx.sync_memory().await;
    assert_eq!(report["reindexed"], 1, "{report}");
    let hits = onyx.search("mooring", "hybrid").await;
    assert_eq!(hits["data"][0]["path"], "memory/boat.md", "{hits}");
    // The resident index holds exactly what SurrealDB holds.
    onyx.wait_for_status("the search index holds every chunk", |s| {
        s["files"] == 4 && s["search_index"]["chunks"] == s["chunks"]
    })
    .await;
}

#[tokio::test]
async fn files_api_reads_lists_overwrites_and_deletes() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, 64).build()), &[]).await;
    let first = onyx
        .write("main/USER.md", "# User\n\nName: Ada. Likes espresso.\n")
        .await;
    let etag = first["etag"].as_str().unwrap().to_string();

    let file = onyx.get_json("/v1/memory/files/main/USER.md").await;
    assert_eq!(file["content"], "# User\n\nName: Ada. Likes espresso.\n");
    let raw = onyx
        .get("/v1/memory/files/main/USER.md")
        .header("accept", "text/markdown")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.headers()["etag"], format!("\"{etag}\"").as_str());
    assert_eq!(
        raw.text().await.unwrap(),
        "# User\n\nName: Ada. Likes espresso.\n"
    );

    // JSON bodies work too; If-Match protects against lost updates.
    let (status, _) = reply(
        onyx.put("/v1/memory/files/main/USER.md")
            .header("if-match", format!("\"{etag}\""))
            .json(&json!({"content": "# User\n\nName: Ada. Likes green tea now.\n"})),
    )
    .await;
    assert_eq!(status, 200);
    let stale = onyx
        .put("/v1/memory/files/main/USER.md")
        .header("if-match", format!("\"{etag}\""))
        .body("lost update");
    let (status, body) = reply(stale).await;
    assert_eq!(status, 412);
    assert_eq!(body["error"]["code"], "etag_mismatch");
    assert!(
        onyx.get_json("/v1/memory/files/main/USER.md").await["content"]
            .as_str()
            .unwrap()
            .contains("green tea")
    );
    assert_eq!(
        onyx.search("espresso", "text").await["data"],
        json!([]),
        "old text left the index"
    );
    assert_eq!(
        onyx.search("green tea", "text").await["data"][0]["path"],
        "USER.md"
    );

    // Workspace files are stored but not indexed; _shared is listed for every agent.
    onyx.write("main/SOUL.md", "# Soul\nCurious and kind.\n").await;
    onyx.write("_shared/faq.md", "# FAQ\n").await;
    let list = onyx.get_json("/v1/memory/files?agent=main").await;
    let entries: Vec<(String, String, bool)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["agent"].as_str().unwrap().into(),
                f["path"].as_str().unwrap().into(),
                f["indexed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        vec![
            ("main".into(), "SOUL.md".into(), false),
            ("main".into(), "USER.md".into(), true),
            ("_shared".into(), "faq.md".into(), true),
        ]
    );
    assert_eq!(onyx.search("curious kind", "text").await["data"], json!([]));

    let deleted = onyx.delete("/v1/memory/files/main/USER.md").send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(onyx.search("green tea", "text").await["data"], json!([]));
    let (status, missing) = reply(onyx.get("/v1/memory/files/main/USER.md")).await;
    assert_eq!(status, 404);
    assert_eq!(missing["error"]["code"], "file_not_found");
    let again = onyx.delete("/v1/memory/files/main/USER.md").send().await.unwrap();
    assert_eq!(again.status(), 404);
}

#[tokio::test]
async fn notes_append_to_todays_log_and_concurrent_appends_all_land() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, 64).build()), &[]).await;
    let appends = (0..12).map(|i| {
        let onyx = &onyx;
        async move {
            let response = onyx
                .post("/v1/memory")
                .json(&json!({"content": format!("note number {i} about zebras")}))
                .send()
                .await
                .unwrap();
            let status = response.status();
            let body = response.text().await.unwrap();
            assert_eq!(status, 200, "{body}\n{}", onyx.stderr.lock().unwrap());
            serde_json::from_str::<Value>(&body).unwrap()
        }
    });
    let outcomes = futures::future::join_all(appends).await;
    let path = outcomes[0]["path"].as_str().unwrap().to_string();
    assert!(path.starts_with("memory/20") && path.ends_with(".md"), "{path}");
    let log = onyx.get_json(&format!("/v1/memory/files/main/{path}")).await;
    let content = log["content"].as_str().unwrap();
    for i in 0..12 {
        assert!(
            content.contains(&format!("note number {i} about zebras")),
            "{content}"
        );
    }
    assert!(content.starts_with("# 20"), "{content}");

    let (_, curated) = reply(
        onyx.post("/v1/memory")
            .json(&json!({"agent": "main", "content": "Prefers metric units", "target": "memory"})),
    )
    .await;
    assert_eq!(curated["path"], "MEMORY.md");
    let hits = onyx.search("metric units", "text").await;
    assert_eq!(hits["data"][0]["path"], "MEMORY.md");
    assert_eq!(
        onyx.search("zebras", "text").await["data"][0]["path"],
        path.as_str()
    );
}

#[tokio::test]
async fn bad_requests_and_path_tricks_are_refused() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, 64).build()), &[]).await;
    for (path, param) in [
        ("/v1/memory/files/main/..%2F..%2Fetc%2Fpasswd.md", "path"),
        ("/v1/memory/files/main/%2Fetc%2Fx.md", "path"),
        ("/v1/memory/files/main/notes/.hidden.md", "path"),
        ("/v1/memory/files/main/run.sh", "path"),
        ("/v1/memory/files/main/a%5Cb.md", "path"),
        ("/v1/memory/files/Main/MEMORY.md", "agent"),
        ("/v1/memory/files/..%2Fsessions/MEMORY.md", "agent"),
    ] {
        let (status, body) = reply(onyx.put(path).body("x")).await;
        assert_eq!(status, 400, "{path}");
        assert_eq!(body["error"]["param"], param, "{path}: {body}");
        let read = onyx.get(path).send().await.unwrap();
        assert_eq!(read.status(), 400, "{path}");
    }
    assert!(!onyx.dir.path().join("etc").exists());

    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (onyx.get("/v1/memory/search"), 400, "q"),
        (onyx.get("/v1/memory/search?q=x&mode=fuzzy"), 400, "mode"),
        (onyx.get("/v1/memory/search?q=x&limit=lots"), 400, "limit"),
        (onyx.get("/v1/memory/search?q=x&agent=..%2F"), 400, "agent"),
        (
            onyx.post("/v1/memory")
                .header("content-type", "application/json")
                .body("{not json"),
            400,
            "",
        ),
        (
            onyx.post("/v1/memory").body(r#"{"content": "x"}"#),
            415,
            "content-type",
        ),
        (
            onyx.post("/v1/memory").json(&json!({"content": 5})),
            400,
            "content",
        ),
        (
            onyx.post("/v1/memory")
                .json(&json!({"content": "x", "target": "soul"})),
            400,
            "target",
        ),
        (
            onyx.post("/v1/memory").json(&json!({"content": "   "})),
            400,
            "content",
        ),
        (
            onyx.put("/v1/memory/files/main/MEMORY.md")
                .header("content-type", "application/json")
                .body("{}"),
            400,
            "content",
        ),
        (
            onyx.put("/v1/memory/files/main/MEMORY.md")
                .body(vec![0xff, 0xfe, 0x00]),
            400,
            "",
        ),
        (
            onyx.put("/v1/memory/files/main/MEMORY.md")
                .body("x".repeat(70_000)),
            413,
            "",
        ),
    ];
    for (request, status, param) in cases {
        let (actual, body) = reply(request).await;
        assert_eq!(actual, status);
        assert!(
            body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        if !param.is_empty() {
            assert_eq!(body["error"]["param"], param, "{body}");
        }
    }
    let (unauthorized, _) = reply(onyx.anonymous("GET", "/v1/memory/files")).await;
    assert_eq!(unauthorized, 401);
    // Nothing half-written survived the refusals.
    assert_eq!(
        onyx.get_json("/v1/memory/files?agent=main").await["data"],
        json!([])
    );
}

#[tokio::test]
async fn an_embedder_outage_loses_nothing_and_recovers() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, 128).build()), &[]).await;
    onyx.wait_for_vectors().await;
    let outage = |down: bool| {
        let url = format!("{}/_fake/embed-outage", fakes.ollama.url());
        async move {
            reqwest::Client::new()
                .post(url)
                .json(&json!({"down": down}))
                .send()
                .await
                .unwrap();
        }
    };
    outage(true).await;
    let written = onyx.write("main/MEMORY.md", CURATED).await;
    assert_eq!(written["chunks"], 5);
    assert_eq!(written["pending"], 5, "chunks wait for the embedder: {written}");

    let results = onyx.search("canine immunization rabies", "hybrid").await;
    assert_eq!(results["mode"], "text", "{results}");
    assert_eq!(results["requested_mode"], "hybrid");
    assert!(
        results["note"].as_str().unwrap().contains("embedder"),
        "{results}"
    );
    assert!(results["data"][0]["snippet"].as_str().unwrap().contains("rabies"));
    let health: Value = onyx.health().await;
    let embedder = dependency(&health, "embedder");
    assert_eq!(embedder["status"], "down", "{health}");
    assert!(
        embedder["detail"].as_str().unwrap().contains("waiting"),
        "{embedder}"
    );
    assert_eq!(health["status"], "degraded");

    outage(false).await;
    let status = onyx.wait_for_vectors().await;
    assert_eq!(status["chunks"], 5);
    let results = onyx.search("canine immunization appointment", "hybrid").await;
    assert_eq!(results["mode"], "hybrid", "{results}");
    assert!(
        results["data"][0]["snippet"].as_str().unwrap().contains("Rex"),
        "{results}"
    );
}

#[tokio::test]
async fn files_changed_behind_onyxs_back_are_picked_up() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, 64).build()), &[]).await;
    let bucket = onyx.dir.path().join("data/objects/onyx-memory");
    onyx.write("main/MEMORY.md", "# Memory\n\nThe wifi password is hunter2.\n")
        .await;
    assert!(
        bucket.join("main/MEMORY.md").exists(),
        "the layout the test relies on"
    );

    std::fs::create_dir_all(bucket.join("main/memory")).unwrap();
    std::fs::write(
        bucket.join("main/memory/projects.md"),
        "# Projects\n\nRestoring a blue sailboat.\n",
    )
    .unwrap();
    std::fs::write(
        bucket.join("main/MEMORY.md"),
        "# Memory\n\nThe wifi password changed to swordfish.\n",
    )
    .unwrap();
    let report = onyx.sync_memory().await;
    assert_eq!(report["reindexed"], 2, "{report}");
    assert_eq!(
        onyx.search("sailboat", "text").await["data"][0]["path"],
        "memory/projects.md"
    );
    assert_eq!(onyx.search("hunter2", "text").await["data"], json!([]));
    assert_eq!(
        onyx.search("swordfish", "text").await["data"][0]["path"],
        "MEMORY.md"
    );

    // Deleted on disk: the periodic sync (every second here) drops its chunks.
    std::fs::remove_file(bucket.join("main/memory/projects.md")).unwrap();
    wait_until(secs(10), "the periodic sync notices the deletion", async || {
        (onyx.search("sailboat", "text").await["data"] == json!([])).then_some(())
    })
    .await;
}

/// Searches whose results must not depend on whether the index was rebuilt.
async fn snapshot(onyx: &Onyx) -> Vec<Vec<(String, u64, u64)>> {
    let mut out = Vec::new();
    for (query, mode) in [
        ("OX-4711", "text"),
        ("canine immunization appointment", "vector"),
        ("garlic oven dinner", "hybrid"),
        ("plane tickets", "hybrid"),
    ] {
        out.push(paths_and_lines(&onyx.search(query, mode).await));
    }
    out
}

#[tokio::test]
async fn a_lost_database_is_rebuilt_from_the_files_with_the_same_results() {
    let fakes = Fakes::start().await;
    let config = config(&fakes, 128).build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    onyx.wait_for_vectors().await;
    onyx.write("main/MEMORY.md", CURATED).await;
    onyx.write("_shared/handbook.md", SHARED_DOC).await;
    onyx.post("/v1/memory")
        .json(&json!({"content": "cooked a garlic dinner in the oven"}))
        .send()
        .await
        .unwrap();
    // Snapshot only once the note is indexed and embedded like the others:
    // the rebuilt index has every file complete from its first search.
    onyx.wait_for_status("three files indexed and embedded", |s| {
        s["files"] == 3 && s["pending"] == 0 && s["embedder"]["ready"] == true
    })
    .await;
    let before = snapshot(&onyx).await;
    assert!(before.iter().all(|hits| !hits.is_empty()), "{before:?}");

    // Lose the whole database; startup rebuilds the index from the files.
    let dir = onyx.crash().await;
    std::fs::remove_dir_all(dir.path().join("data/db")).unwrap();
    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    onyx.wait_for_status("rebuilt and embedded", |s| {
        s["files"] == 3 && s["pending"] == 0 && s["embedder"]["ready"] == true
    })
    .await;
    assert_eq!(snapshot(&onyx).await, before);

    // And so does `onyx reindex`, run while the gateway is down.
    let dir = onyx.crash().await;
    std::fs::remove_dir_all(dir.path().join("data/db")).unwrap();
    let output = Onyx::cli(dir.path(), &["reindex"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("reindexed 3 memory file(s)"), "{stderr}");
    assert!(stderr.contains("0 waiting for the embedder"), "{stderr}");
    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    let status = onyx.get_json("/v1/memory/status").await;
    assert_eq!(
        (status["files"].as_u64(), status["pending"].as_u64()),
        (Some(3), Some(0)),
        "{status}"
    );
    onyx.wait_for_vectors().await;
    assert_eq!(snapshot(&onyx).await, before);
}

#[tokio::test]
async fn a_new_embedder_or_chunking_rebuilds_the_index_with_progress() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, 64).build()), &[]).await;
    onyx.wait_for_vectors().await;
    onyx.write("main/MEMORY.md", CURATED).await;
    let before = onyx.get_json("/v1/memory/status").await;
    assert_eq!(before["embedder"]["dimensions"], 64);
    let dir = onyx.crash().await;

    // Another model size and smaller chunks: everything is re-chunked and re-embedded.
    let changed = config(&fakes, 96)
        .merge(json!({ "memory": { "chunkTokens": 64, "chunkOverlap": 8 } }))
        .build();
    let onyx = Onyx::start_in(dir, Some(&changed), &[]).await;
    let status = onyx
        .wait_for_status("re-embedded at 96 dimensions", |s| {
            s["embedder"]["dimensions"] == 96
                && s["embedder"]["ready"] == true
                && s["pending"] == 0
                && s["files"] == 1
                // After a kill -9, SurrealKV's range scans (count, BM25) can lag
                // the point reads for a moment; the count must converge to 5.
                && s["chunks"] == 5
        })
        .await;
    assert_eq!(status["chunks"], 5, "{status}\n{}", onyx.stderr.lock().unwrap());
    // The same lag can leave the first vector search of a loaded machine
    // empty; the re-embedded chunk must be found within a few tries.
    wait_until(
        secs(30),
        "the re-embedded chunk found by vector search",
        async || {
            let hits = onyx.search("canine immunization appointment", "vector").await;
            hits["data"][0]["snippet"]
                .as_str()
                .is_some_and(|s| s.contains("Rex"))
                .then_some(())
        },
    )
    .await;
    let (_, logs) = onyx.stop_and_logs().await;
    assert!(
        logs.contains("chunking changed; rebuilding the memory index"),
        "{logs}"
    );
    assert!(
        logs.contains("embedder changed; re-embedding all memory"),
        "{logs}"
    );
}

/// Texts the fake Ollama was asked to embed, without the worker's probes.
fn embedded_texts(fakes: &Fakes) -> Vec<String> {
    fakes
        .ollama
        .state
        .requests()
        .iter()
        .filter_map(|r| r["input"].as_array().cloned())
        .flatten()
        .filter_map(|t| t.as_str().map(String::from))
        .filter(|t| !t.ends_with(" probe"))
        .collect()
}

#[tokio::test]
async fn unchanged_text_is_never_embedded_twice() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, 64).build()), &[]).await;
    onyx.wait_for_vectors().await;
    onyx.write("main/MEMORY.md", CURATED).await;
    assert_eq!(embedded_texts(&fakes).len(), 5);

    // One section edited, one added: only those two are embedded.
    let edited = CURATED.replace("on Friday", "on Monday") + "\n## Boat\nThe mooring fee is due in March.\n";
    let written = onyx.write("main/MEMORY.md", &edited).await;
    assert_eq!(written["chunks"], 6);
    let texts = embedded_texts(&fakes);
    assert_eq!(texts.len(), 7, "{texts:#?}");
    assert!(
        texts[5..].iter().any(|t| t.contains("on Monday"))
            && texts[5..].iter().any(|t| t.contains("mooring"))
    );

    // The same text in another file reuses the cached vectors.
    onyx.write("main/memory/copy.md", CURATED).await;
    assert_eq!(embedded_texts(&fakes).len(), 7);
}

#[tokio::test]
async fn two_replicas_share_memory_files_and_index() {
    let fakes = Fakes::start().await;
    let (s3, surreal) = (Service::s3().await, Service::surreal().await);
    let config = config(&fakes, 64).s3(&s3).surreal(&surreal).build();
    let (a, b) = (
        Onyx::start(Some(&config), &[]).await,
        Onyx::start(Some(&config), &[]).await,
    );
    // Alternating replicas: each reads what the other wrote before appending
    // (simultaneous appends: busy_day and memory::service's unit tests).
    let mut path = String::new();
    for i in 0..8 {
        let replica = if i % 2 == 0 { &a } else { &b };
        let (status, body) = reply(
            replica
                .post("/v1/memory")
                .json(&json!({"content": format!("replica note {i:02}")})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        path = body["path"].as_str().unwrap().to_string();
    }
    let log = b.get_json(&format!("/v1/memory/files/main/{path}")).await;
    let content = log["content"].as_str().unwrap();
    for i in 0..8 {
        assert_eq!(
            content.matches(&format!("replica note {i:02}")).count(),
            1,
            "{content}"
        );
    }
    // Replica a's search index follows b's writes (each note is a chunk of its own).
    wait_until(secs(10), "replica a finds the last note", async || {
        let hits = a.search("replica note 07", "text").await;
        hits["data"][0]["snippet"]
            .as_str()
            .is_some_and(|s| s.contains("07"))
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn each_replicas_search_index_follows_the_others_writes() {
    let fakes = Fakes::start().await;
    let (s3, surreal) = (Service::s3().await, Service::surreal().await);
    let config = config(&fakes, 64).s3(&s3).surreal(&surreal).build();
    let a = Onyx::start(Some(&config), &[]).await;
    a.wait_for_vectors().await;
    a.write("main/MEMORY.md", CURATED).await;
    // B loads what A wrote before it started...
    let b = Onyx::start(Some(&config), &[]).await;
    b.wait_for_vectors().await;
    let loaded = b.wait_for_resident_index().await;
    assert_eq!(loaded["search_index"]["chunks"], 5, "{loaded}");
    a.wait_for_resident_index().await;
    let ticket = b.search("OX-4711", "text").await;
    assert!(
        ticket["data"][0]["snippet"].as_str().unwrap().contains("4711"),
        "{ticket}"
    );

    // ...and follows what A writes afterwards: new text, its vectors, a delete.
    a.write(
        "main/memory/boat.md",
        "# Boat\n\nThe sailboat mooring fee is due in March.\n",
    )
    .await;
    let has = |word: &'static str| {
        move |hits: &Value| {
            hits["data"].as_array().is_some_and(|d| {
                d.iter()
                    .any(|h| h["snippet"].as_str().unwrap_or("").contains(word))
            })
        }
    };
    b.search_until("mooring", "text", has("mooring")).await;
    let vector = b
        .search_until("sailboat anchorage payment", "vector", has("mooring"))
        .await;
    assert_eq!(vector["mode"], "vector", "{vector}");
    let (removed, _) = reply(a.delete("/v1/memory/files/main/memory/boat.md")).await;
    assert!((200..300).contains(&removed), "{removed}");
    b.search_until("mooring", "text", |hits| hits["data"] == json!([]))
        .await;

    // Both replicas hold the same chunks.
    let (on_a, on_b) = (
        a.get_json("/v1/memory/status").await,
        b.get_json("/v1/memory/status").await,
    );
    // (The resident indexes: each replica's own.)
    for field in ["state", "chunks"] {
        assert_eq!(
            on_a["search_index"][field], on_b["search_index"][field],
            "{on_a}\n{on_b}"
        );
    }
    assert_eq!(on_b["search_index"]["chunks"], on_b["chunks"], "{on_b}");
}

#[tokio::test]
async fn a_restart_searches_from_its_snapshot_and_reads_only_the_files_changed_meanwhile() {
    let fakes = Fakes::start().await;
    let config = config(&fakes, 64).build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    onyx.write("main/USER.md", "# User\n\nName: Ada. Likes espresso.\n")
        .await;
    onyx.write("main/MEMORY.md", "# Memory\n\nThe boat is moored at pier 7.\n")
        .await;
    onyx.wait_for_vectors().await;
    let before = onyx.search("espresso", "hybrid").await;
    assert_eq!(before["data"][0]["path"], "USER.md", "{before}");

    // A graceful stop saves the index beside the database.
    let (dir, _) = onyx.stop().await;
    assert!(dir.path().join("data/memory-index.snapshot").is_file());
    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    // (The embedder, not the index, is what a search may wait for here.)
    onyx.wait_for_vectors().await;
    let after = onyx.search("espresso", "hybrid").await;
    // The same hits in the same order; a score may differ in its fourth
    // decimal (the fused score carries the cosine, and the vectors come back
    // from the snapshot as stored rows rather than as embedded).
    let strip = |hits: &Value| -> Vec<(Value, f64)> {
        hits["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let mut h = h.clone();
                let score = h["score"].take().as_f64().unwrap();
                (h, score)
            })
            .collect()
    };
    let (before_hits, after_hits) = (strip(&before), strip(&after));
    assert_eq!(before_hits.len(), after_hits.len(), "{before}\n{after}");
    for ((b, b_score), (a, a_score)) in before_hits.iter().zip(&after_hits) {
        assert_eq!(a, b, "the same hits after a restart");
        assert!((a_score - b_score).abs() < 0.005, "{before}\n{after}");
    }
    // A file changed behind the gateway's back while it was down would be read
    // again; here nothing changed, so everything came from the snapshot.
    onyx.write("main/MEMORY.md", "# Memory\n\nThe boat moved to pier 9.\n")
        .await;
    let (dir, logs) = onyx.stop().await;
    assert!(
        logs.contains("memory search index loaded chunks=2 from_snapshot=2 files_read=0"),
        "{logs}"
    );
    // Embedded storage closed before the process ended: no log replay at the next start.
    assert!(logs.contains("database closed"), "{logs}");
    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    let moved = onyx.search("pier", "text").await;
    assert_eq!(moved["data"].as_array().map(Vec::len), Some(1), "{moved}");
    assert!(
        moved["data"][0]["snippet"].as_str().unwrap().contains("9"),
        "{moved}"
    );
}
