//! The `ObjectStore` conformance suite, run against every backend (a local
//! directory and a real S3 server), and the database against embedded
//! SurrealDB and a real SurrealDB server over ws://.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::services::{S3_ACCESS_KEY, S3_SECRET_KEY, Service};
use bytes::Bytes;
use onyx::config::SurrealConfig;
use onyx::storage::{
    Bucket, ByteRange, Db, LocalStore, ObjectKey, ObjectStore, PutCondition, S3Settings, S3Store, StoreError,
};
use secrecy::SecretString;
use serde_json::json;

fn key(k: &str) -> ObjectKey {
    ObjectKey::new(k).unwrap()
}

/// `atomic_races`: whether the backend makes concurrent create-if-absent writes
/// atomic. AWS S3, MinIO, the local store and the test server do (s3s-fs alone
/// checks a condition and then writes; `tests/s3-server` makes writes take turns).
async fn conformance(store: Arc<dyn ObjectStore>, atomic_races: bool) {
    let backend = store.backend();
    store.ensure_buckets().await.unwrap();
    store.ensure_buckets().await.unwrap(); // idempotent

    let k = key("agent/notes/today.md");
    assert!(
        store.get(Bucket::Memory, &k).await.unwrap().is_none(),
        "{backend}: missing object"
    );
    let v1 = store
        .put(Bucket::Memory, &k, Bytes::from("one"), PutCondition::IfAbsent)
        .await
        .unwrap();
    let read = store.get(Bucket::Memory, &k).await.unwrap().unwrap();
    assert_eq!(read.body, "one");
    assert_eq!(
        read.version, v1,
        "{backend}: get returns the version put returned"
    );

    // Ranged reads: the start and the end of an object, its whole size, and
    // all of an object shorter than the range; nothing for a missing one.
    let long = key("agent/notes/long.md");
    let text: String = (0..2_000).map(|i| format!("{i:04}\n")).collect();
    store
        .put(
            Bucket::Memory,
            &long,
            Bytes::from(text.clone()),
            PutCondition::Overwrite,
        )
        .await
        .unwrap();
    let head = store
        .get_range(Bucket::Memory, &long, ByteRange::Head(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (head.body.as_ref(), head.total),
        (&text.as_bytes()[..10], 10_000),
        "{backend}"
    );
    let tail = store
        .get_range(Bucket::Memory, &long, ByteRange::Tail(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (&tail.body[..], tail.total),
        (&b"1998\n1999\n"[..], 10_000),
        "{backend}"
    );
    let all = store
        .get_range(Bucket::Memory, &k, ByteRange::Tail(1_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((&all.body[..], all.total), (&b"one"[..], 3), "{backend}");
    let all = store
        .get_range(Bucket::Memory, &k, ByteRange::Head(1_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&all.body[..], b"one", "{backend}");
    let empty = key("agent/notes/empty.md");
    store
        .put(Bucket::Memory, &empty, Bytes::new(), PutCondition::Overwrite)
        .await
        .unwrap();
    let none = store
        .get_range(Bucket::Memory, &empty, ByteRange::Head(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (none.body.len(), none.total),
        (0, 0),
        "{backend}: an empty object"
    );
    let missing = key("agent/notes/missing.md");
    assert!(
        store
            .get_range(Bucket::Memory, &missing, ByteRange::Tail(5))
            .await
            .unwrap()
            .is_none()
    );
    for gone in [&long, &empty] {
        store.delete(Bucket::Memory, gone).await.unwrap();
    }

    // Create-if-absent refuses a second writer.
    let second = store
        .put(Bucket::Memory, &k, Bytes::from("two"), PutCondition::IfAbsent)
        .await;
    assert!(
        matches!(second, Err(StoreError::PreconditionFailed)),
        "{backend}: {second:?}"
    );

    // If-Match: the current version wins, a stale one is refused.
    let v2 = store
        .put(
            Bucket::Memory,
            &k,
            Bytes::from("two"),
            PutCondition::IfMatch(v1.clone()),
        )
        .await
        .unwrap();
    assert_ne!(v1, v2);
    let stale = store
        .put(
            Bucket::Memory,
            &k,
            Bytes::from("three"),
            PutCondition::IfMatch(v1),
        )
        .await;
    assert!(
        matches!(stale, Err(StoreError::PreconditionFailed)),
        "{backend}: {stale:?}"
    );
    assert_eq!(store.get(Bucket::Memory, &k).await.unwrap().unwrap().body, "two");
    let missing = store
        .put(
            Bucket::Memory,
            &key("nope.md"),
            Bytes::from("x"),
            PutCondition::IfMatch(v2),
        )
        .await;
    assert!(
        matches!(missing, Err(StoreError::PreconditionFailed)),
        "{backend}: If-Match on a missing object"
    );

    store
        .put(Bucket::Memory, &k, Bytes::from("four"), PutCondition::Overwrite)
        .await
        .unwrap();
    assert_eq!(store.get(Bucket::Memory, &k).await.unwrap().unwrap().body, "four");

    // Buckets are separate; listing is by prefix and sorted.
    store
        .put(
            Bucket::Sessions,
            &k,
            Bytes::from("other bucket"),
            PutCondition::Overwrite,
        )
        .await
        .unwrap();
    for name in ["agent/b.md", "agent/a.md", "agentx/c.md", "other/d.md"] {
        store
            .put(
                Bucket::Memory,
                &key(name),
                Bytes::from(name),
                PutCondition::Overwrite,
            )
            .await
            .unwrap();
    }
    let listed: Vec<String> = store
        .list(Bucket::Memory, "agent/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(
        listed,
        ["agent/a.md", "agent/b.md", "agent/notes/today.md"],
        "{backend}"
    );
    let all = store.list(Bucket::Memory, "").await.unwrap();
    assert_eq!(all.len(), 5, "{backend}: {all:?}");
    assert_eq!(all.iter().find(|o| o.key == "agent/a.md").unwrap().size, 10);

    // Concurrent create-if-absent: exactly one writer wins.
    if atomic_races {
        let contenders = (0..8).map(|i| {
            let store = store.clone();
            async move {
                store
                    .put(
                        Bucket::Sessions,
                        &key("race/0001.jsonl"),
                        Bytes::from(format!("{i}")),
                        PutCondition::IfAbsent,
                    )
                    .await
            }
        });
        let results = futures::future::join_all(contenders).await;
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{backend}: {results:?}"
        );
    }

    store.delete(Bucket::Memory, &k).await.unwrap();
    store.delete(Bucket::Memory, &k).await.unwrap(); // deleting a missing object succeeds
    assert!(store.get(Bucket::Memory, &k).await.unwrap().is_none());
}

#[tokio::test]
async fn local_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance(Arc::new(LocalStore::new(dir.path())), true).await;
}

/// A store on the S3 server `s3`, signing with the test access key and `secret`.
async fn s3_store(s3: &Service, secret: &str, bucket_prefix: &str) -> S3Store {
    let url = s3.url();
    let access = SecretString::from(S3_ACCESS_KEY);
    let secret = SecretString::from(secret);
    S3Store::new(S3Settings {
        endpoint: Some(&url),
        region: "us-east-1",
        access_key: Some(&access),
        secret_key: Some(&secret),
        bucket_prefix,
    })
    .await
}

#[tokio::test]
async fn s3_store_conforms_against_a_real_s3_server() {
    let s3 = Service::s3().await;
    let store = s3_store(&s3, S3_SECRET_KEY, "test-").await;
    conformance(Arc::new(store), true).await;
    assert!(
        s3.dir.path().join("test-onyx-memory").is_dir(),
        "buckets carry the configured prefix"
    );
}

#[tokio::test]
async fn s3_with_wrong_credentials_is_unavailable_not_silent() {
    let s3 = Service::s3().await;
    let store = s3_store(&s3, "not-the-secret", "").await;
    assert!(matches!(
        store.ensure_buckets().await,
        Err(StoreError::Unavailable(_))
    ));
}

fn surreal_config(url: String, credentials: bool) -> SurrealConfig {
    SurrealConfig {
        user: credentials.then(|| "root".to_string()),
        pass: credentials.then(|| SecretString::from("root")),
        ..SurrealConfig::at(url, "test")
    }
}

async fn database_roundtrip(db: &Db) {
    assert_eq!(onyx::storage::SCHEMA_VERSION, 21);
    // Versions 2–19 defined memory, agent, task, chat, run, owner-chat, stored-response, usage, audit, provider, orchestration, notification and MCP server tables (reading an undefined table is an error).
    for table in [
        "memory_chunk",
        "login_failure",
        "memory_file",
        "embedding_cache",
        "agent",
        "inbox_message",
        "task",
        "task_run",
        "chat_session",
        "approval",
        "agent_run",
        "owner_chat",
        "stored_response",
        "usage_record",
        "usage_window",
        "usage_reservation",
        "usage_lease",
        "audit_event",
        "provider",
        "model_alias",
        "proposal",
        "mission",
        "step",
        "step_claim",
        "event",
        "policy",
        "trigger",
        "reaction",
        "agent_trust",
        "agent_review",
        "notification",
        "mcp_server",
    ] {
        let rows: Vec<serde_json::Value> = db
            .rows(&format!("SELECT * FROM {table}"), json!({}), 0)
            .await
            .unwrap();
        assert!(rows.is_empty());
    }
    // Version 21 indexed reactions: the pending poll and each event's cooldown check.
    let info: Vec<serde_json::Value> = db.rows("INFO FOR TABLE reaction", json!({}), 0).await.unwrap();
    for index in ["reaction_status_created", "reaction_target"] {
        assert!(info[0]["indexes"].get(index).is_some(), "{index}: {info:?}");
    }
    db.execute(
        "CREATE session:abc SET agent_id = 'main', title = $title",
        json!({"title": "hello"}),
    )
    .await
    .unwrap();
    #[derive(serde::Deserialize)]
    struct Row {
        title: String,
    }
    let rows: Vec<Row> = db
        .rows("SELECT title FROM session WHERE agent_id = 'main'", json!({}), 0)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].title, "hello");
    let err = db
        .execute("CREATE session:abc SET agent_id = 'again'", json!({}))
        .await;
    assert!(err.is_err(), "duplicate ids are errors, not silently ignored");
}

#[tokio::test]
async fn embedded_database_migrates_idempotently() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("surrealkv://{}", dir.path().join("db").display());
    let db = Db::connect(&surreal_config(url, false)).await.unwrap();
    db.migrate().await.unwrap();
    database_roundtrip(&db).await;
    // Running the migrations again changes nothing and keeps the data.
    db.migrate().await.unwrap();
    let rows: Vec<serde_json::Value> = db.rows("SELECT * FROM session", json!({}), 0).await.unwrap();
    assert_eq!(rows.len(), 1);
    let mem = Db::connect(&surreal_config("mem://".into(), false))
        .await
        .unwrap();
    mem.migrate().await.unwrap();
    database_roundtrip(&mem).await;
}

#[tokio::test]
async fn server_database_over_websocket() {
    let server = Service::surreal().await;
    let db = Db::connect(&surreal_config(format!("ws://{}", server.addr), true))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    database_roundtrip(&db).await;
    db.health().await.unwrap();
    let wrong = SurrealConfig {
        pass: Some(SecretString::from("wrong")),
        ..surreal_config(format!("ws://{}", server.addr), true)
    };
    assert!(Db::connect(&wrong).await.is_err());
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let db = Db::connect(&surreal_config("mem://".into(), false))
        .await
        .unwrap();
    db.execute("UPSERT onyx_meta:schema SET version = 99", json!({}))
        .await
        .unwrap();
    let err = db.migrate().await.unwrap_err().to_string();
    assert!(err.contains("schema version 99 is newer"), "{err}");
}

/// A store's table files keep the block size they were written with, so
/// changing `storage.surrealdb.blockKb` (or its default, in an upgrade) keeps
/// every row readable, old tables and new.
#[tokio::test]
async fn rows_survive_a_change_of_block_size() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("surrealkv://{}", dir.path().join("db").display());
    let with_blocks = |block_kb| SurrealConfig {
        embedded: onyx::config::EmbeddedStore {
            memtable_mb: 8,
            block_kb,
            ..onyx::config::EmbeddedStore::default()
        },
        ..surreal_config(url.clone(), false)
    };
    // 12 MB in 1 MB transactions: more than the 8 MB memtable holds, so
    // table files are written with each block size.
    let write = |db: Db, round: usize| async move {
        for batch in 0..12 {
            db.execute(
                "FOR $i IN 0..500 { CREATE doc SET round = $round, n = $batch * 500 + $i, body = string::repeat('x', 2000) };",
                json!({"round": round, "batch": batch}),
            )
            .await
            .unwrap();
        }
        db
    };
    let count = |db: Db| async move {
        let rows: Vec<serde_json::Value> = db
            .rows("SELECT round, count() AS n FROM doc GROUP BY round", json!({}), 0)
            .await
            .unwrap();
        (db, rows)
    };
    let db = write(Db::connect(&with_blocks(64)).await.unwrap(), 0).await;
    db.close().await.unwrap();
    let first_tables = table_files(dir.path());
    assert!(
        !first_tables.is_empty(),
        "no table file written with 64 KiB blocks"
    );
    let db = write(Db::connect(&with_blocks(4)).await.unwrap(), 1).await;
    db.close().await.unwrap();
    assert!(
        table_files(dir.path()).difference(&first_tables).next().is_some(),
        "no table file written with 4 KiB blocks"
    );
    let db = Db::connect(&with_blocks(4)).await.unwrap();
    let (db, rows) = count(db).await;
    assert_eq!(
        rows,
        vec![json!({"round": 0, "n": 6000}), json!({"round": 1, "n": 6000})]
    );
    db.close().await.unwrap();
    let (db, rows) = count(Db::connect(&with_blocks(64)).await.unwrap()).await;
    assert_eq!(
        rows,
        vec![json!({"round": 0, "n": 6000}), json!({"round": 1, "n": 6000})]
    );
    let middle: Vec<serde_json::Value> = db
        .rows(
            "SELECT VALUE string::len(body) FROM doc WHERE round = 0 AND n = 3333",
            json!({}),
            0,
        )
        .await
        .unwrap();
    assert_eq!(middle, vec![json!(2000)]);
    db.close().await.unwrap();
}

/// The names of SurrealKV's table files (`{id}.sst`) anywhere under `dir`.
fn table_files(dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    let mut found = std::collections::BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "sst") {
                found.insert(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    found
}

/// Replicas started together against a fresh server each open several
/// connections, and each connection that selects the new namespace and
/// database may be the one that creates them; then all of them migrate.
/// The losers of those races are told to try again, and do.
#[tokio::test]
async fn replicas_started_together_on_a_fresh_server_all_connect_and_migrate() {
    let server = Service::surreal().await;
    let config = surreal_config(format!("ws://{}", server.addr), true);
    let replicas = futures::future::join_all((0..6).map(|_| async {
        let db = Db::connect(&config).await?;
        db.migrate().await?;
        Ok::<_, onyx::storage::DbError>(db)
    }))
    .await;
    for replica in replicas {
        let db = replica.unwrap();
        assert_eq!(db.schema_version().await.unwrap(), onyx::storage::SCHEMA_VERSION);
    }
}

/// When a one-row query sent just after one that computes for seconds
/// (a loop: the server does not switch to another request of its connection
/// inside it) came back, and when the long one did.
async fn short_query_behind_a_long_one(db: &Db) -> (Duration, Duration) {
    let started = Instant::now();
    let long = {
        let db = db.clone();
        tokio::spawn(async move {
            db.execute(
                "FOR $a IN 0..20 { LET $x = math::sum(array::range(0, 2000).map(|$b| $a * $b)); }; RETURN 1;",
                json!({}),
            )
            .await
            .unwrap();
            started.elapsed()
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    db.execute("RETURN 1;", json!({})).await.unwrap();
    let short = started.elapsed();
    (short, long.await.unwrap())
}

/// A SurrealDB server runs one connection's requests in one task, so over a
/// single connection a short query (a run's claim, a lease renewal) waits
/// out whatever computes ahead of it; with `storage.surrealdb.connections`
/// it goes out on a connection that is not busy.
#[tokio::test]
async fn a_short_query_is_not_held_up_behind_a_long_one_on_a_server() {
    let server = Service::surreal().await;
    let url = format!("ws://{}", server.addr);
    let connect = |connections| {
        let config = SurrealConfig {
            connections,
            ..surreal_config(url.clone(), true)
        };
        async move { Db::connect(&config).await }
    };
    let one = connect(1).await.unwrap();
    assert_eq!(one.connections(), 1);
    let (short, long) = short_query_behind_a_long_one(&one).await;
    assert!(
        short >= long / 2,
        "over one connection the short query waits for the long one (short {short:?}, long {long:?})"
    );
    let pooled = connect(onyx::config::DEFAULT_CONNECTIONS).await.unwrap();
    assert_eq!(pooled.connections(), onyx::config::DEFAULT_CONNECTIONS);
    let (short, long) = short_query_behind_a_long_one(&pooled).await;
    assert!(
        short < long / 2,
        "over several connections the short query does not wait (short {short:?}, long {long:?})"
    );
    // Every connection is signed in and on the configured database.
    pooled.migrate().await.unwrap();
    database_roundtrip(&pooled).await;
}
