//! Test harness: starts the real `onyx` binary (on port 0, with its own HOME and
//! data dir, provider variables cleared) against fake upstreams, and waits on
//! `/health` rather than sleeping. `config` builds the config text, `wait`
//! polls for what happens asynchronously, `inprocess` runs the router without a
//! process, `services` starts the S3 and SurrealDB servers, `unprivileged`
//! runs the binary as `nobody`.

pub mod config;
pub mod inprocess;
pub mod procs;
pub mod services;
pub mod unprivileged;
pub mod wait;

pub use config::TestConfig;
pub use procs::{alive, assert_all_end, running, running_with};
pub use wait::{poll_until, secs, wait_until};

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use onyx_test_fakes::{DEFAULT_KEY, FakeServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const ONYX_KEY: &str = "onyx_sk_test_key_0123456789";

pub struct Fakes {
    pub openai: FakeServer,
    pub anthropic: FakeServer,
    pub ollama: FakeServer,
}

impl Fakes {
    pub async fn start() -> Self {
        Self {
            openai: onyx_test_fakes::openai::start(Some(DEFAULT_KEY.into()), 0)
                .await
                .unwrap(),
            anthropic: onyx_test_fakes::anthropic::start(Some(DEFAULT_KEY.into()), 0)
                .await
                .unwrap(),
            ollama: onyx_test_fakes::ollama::start(0).await.unwrap(),
        }
    }

    /// A config with all three providers, aliases and an API key.
    pub fn config(&self) -> String {
        TestConfig::new(self).build()
    }
}

/// What happens to the server's stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stderr {
    /// Read continuously into [`Onyx::stderr`].
    Drained,
    /// A pipe kept open that nobody reads: once it is full, every write to it blocks.
    Unread,
}

pub struct Onyx {
    pub child: Child,
    /// The unread end of the stderr pipe ([`Stderr::Unread`]), held open.
    _unread_stderr: Option<tokio::process::ChildStderr>,
    /// Everything the process wrote to stderr so far (drained continuously,
    /// so logging can never block the server on a full pipe).
    pub stderr: Arc<Mutex<String>>,
    stderr_reader: tokio::task::JoinHandle<()>,
    pub url: String,
    pub dir: tempfile::TempDir,
    pub client: reqwest::Client,
}

impl Onyx {
    /// Starts `onyx serve` with this config text (`None`: no config file at all).
    pub async fn start(config: Option<&str>, env: &[(&str, &str)]) -> Self {
        Self::try_start(config, env)
            .await
            .unwrap_or_else(|(code, stderr)| panic!("onyx failed to start ({code:?}): {stderr}"))
    }

    pub fn command(dir: &std::path::Path, env: &[(&str, &str)]) -> Command {
        // `ONYX_BIN` may name another build (a worktree sharing the target dir
        // overwrites `target/debug/onyx`).
        let binary = std::env::var("ONYX_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_onyx").into());
        let mut cmd = Command::new(binary);
        for var in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "OPENROUTER_API_KEY",
            "OLLAMA_HOST",
            "ONYX_CONFIG",
            "ONYX_API_KEY",
            "ONYX_LOCAL_MODEL_URL",
            "ONYX_DATA_DIR",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_BEARER_TOKEN_BEDROCK",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("HOME", dir)
            .env("ONYX_DATA_DIR", dir.join("data"))
            // Without an embedder configured Onyx fetches its built-in model;
            // tests never reach the internet (a test that wants it sets its own).
            .env("ONYX_LOCAL_MODEL_URL", "http://127.0.0.1:9/")
            .env("FAKE_KEY", DEFAULT_KEY)
            .env("ONYX_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `onyx <args> --config <dir>/onyx.json5` to the end, with `dir` as its home.
    pub async fn cli(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
        Self::command(dir, &[])
            .args(args)
            .arg("--config")
            .arg(dir.join("onyx.json5"))
            .output()
            .await
            .unwrap()
    }

    /// Like [`start`], but returns the exit status and stderr when it fails to start.
    pub async fn try_start(
        config: Option<&str>,
        env: &[(&str, &str)],
    ) -> Result<Self, (Option<i32>, String)> {
        Self::try_start_in(tempfile::tempdir().unwrap(), config, env).await
    }

    /// Starts on an existing home/data dir (to restart after a crash).
    pub async fn start_in(dir: tempfile::TempDir, config: Option<&str>, env: &[(&str, &str)]) -> Self {
        Self::try_start_in(dir, config, env)
            .await
            .unwrap_or_else(|(code, stderr)| panic!("onyx failed to start ({code:?}): {stderr}"))
    }

    /// SIGTERM, wait for the exit, and return everything logged to stderr.
    pub async fn stop_and_logs(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().unwrap().to_string();
        let _ = std::process::Command::new("kill").arg("-TERM").arg(pid).status();
        let status = self.child.wait().await.unwrap();
        let _ = (&mut self.stderr_reader).await;
        let logs = self.stderr.lock().unwrap().clone();
        (status, logs)
    }

    /// SIGTERM and wait, keeping the data dir for a restart; with the logs.
    pub async fn stop(mut self) -> (tempfile::TempDir, String) {
        let pid = self.child.id().unwrap().to_string();
        let _ = std::process::Command::new("kill").arg("-TERM").arg(pid).status();
        self.child.wait().await.unwrap();
        let _ = (&mut self.stderr_reader).await;
        let logs = self.stderr.lock().unwrap().clone();
        (self.dir, logs)
    }

    /// `kill -9`, keeping the data dir for a restart.
    pub async fn crash(mut self) -> tempfile::TempDir {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
        self.dir
    }

    pub async fn try_start_in(
        dir: tempfile::TempDir,
        config: Option<&str>,
        env: &[(&str, &str)],
    ) -> Result<Self, (Option<i32>, String)> {
        Self::try_start_with(dir, config, env, Stderr::Drained).await
    }

    /// Starts with a stderr pipe nobody reads (its `stderr` stays empty).
    pub async fn start_with_unread_stderr(config: Option<&str>, env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::try_start_with(dir, config, env, Stderr::Unread)
            .await
            .unwrap_or_else(|(code, _)| panic!("onyx failed to start ({code:?})"))
    }

    pub async fn try_start_with(
        dir: tempfile::TempDir,
        config: Option<&str>,
        env: &[(&str, &str)],
        stderr_mode: Stderr,
    ) -> Result<Self, (Option<i32>, String)> {
        let cmd = Self::command(dir.path(), env);
        Self::launch(dir, config, cmd, stderr_mode).await
    }

    /// Runs `cmd` (an `onyx` command line so far) as `serve` on port 0 with
    /// `config` written to `dir`, and waits until it is healthy.
    pub async fn launch(
        dir: tempfile::TempDir,
        config: Option<&str>,
        mut cmd: Command,
        stderr_mode: Stderr,
    ) -> Result<Self, (Option<i32>, String)> {
        cmd.arg("serve").arg("--listen").arg("127.0.0.1:0");
        if let Some(config) = config {
            let path = dir.path().join("onyx.json5");
            std::fs::write(&path, config).unwrap();
            cmd.arg("--config").arg(path);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let unread_stderr = match stderr_mode {
            Stderr::Drained => None,
            Stderr::Unread => child.stderr.take(),
        };
        let stderr_reader = {
            let sink = stderr.clone();
            let pipe = child.stderr.take();
            tokio::spawn(async move {
                let Some(pipe) = pipe else { return };
                let mut err_lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = err_lines.next_line().await {
                    let mut sink = sink.lock().unwrap();
                    sink.push_str(&line);
                    sink.push('\n');
                }
            })
        };
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("listening on ") {
                    return Some(url.to_string());
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        let Some(url) = url else {
            let status = child.wait().await.unwrap();
            let _ = stderr_reader.await;
            let logs = stderr.lock().unwrap().clone();
            return Err((status.code(), logs));
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let client = reqwest::Client::new();
        let health = format!("{url}/health");
        wait_until(secs(30), &format!("onyx is healthy at {url}"), async || {
            let response = client.get(&health).send().await.ok()?;
            response.status().is_success().then_some(())
        })
        .await;
        Ok(Self {
            child,
            _unread_stderr: unread_stderr,
            stderr,
            stderr_reader,
            url,
            dir,
            client,
        })
    }

    /// `method path` with no key.
    pub fn anonymous(&self, method: &str, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method.parse().unwrap(), format!("{}{path}", self.url))
    }

    /// `method path` with `key` as the bearer token.
    pub fn with_key(&self, method: &str, path: &str, key: &str) -> reqwest::RequestBuilder {
        self.anonymous(method, path).bearer_auth(key)
    }

    /// `GET path` with the test key.
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.with_key("GET", path, ONYX_KEY)
    }

    /// `POST path` with the test key.
    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.with_key("POST", path, ONYX_KEY)
    }

    /// `PUT path` with the test key.
    pub fn put(&self, path: &str) -> reqwest::RequestBuilder {
        self.with_key("PUT", path, ONYX_KEY)
    }

    /// `PATCH path` with the test key.
    pub fn patch(&self, path: &str) -> reqwest::RequestBuilder {
        self.with_key("PATCH", path, ONYX_KEY)
    }

    /// `DELETE path` with the test key.
    pub fn delete(&self, path: &str) -> reqwest::RequestBuilder {
        self.with_key("DELETE", path, ONYX_KEY)
    }

    /// Makes an API key over HTTP (`POST /v1/keys`, which answers 201); the created key.
    pub async fn create_key(&self, name: &str, scope: &str) -> Value {
        let body = serde_json::json!({ "name": name, "scope": scope });
        let (status, created) = reply(self.post("/v1/keys").json(&body)).await;
        assert_eq!(status, 201, "{created}");
        created
    }

    /// GET with the test key; the body as JSON.
    pub async fn get_json(&self, path: &str) -> Value {
        self.get(path).send().await.unwrap().json().await.unwrap()
    }

    /// `GET /health` with the test key (its detail: each dependency) as JSON.
    pub async fn health(&self) -> Value {
        reply(self.get("/health")).await.1
    }

    pub async fn chat(&self, body: Value) -> (u16, Value) {
        let response = self
            .post("/v1/chat/completions")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// The answer of `agent` to one user message (which must succeed).
    pub async fn agent_answer(&self, agent: &str, text: &str) -> String {
        let (status, body) = self
            .chat(json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": text}]}))
            .await;
        assert_eq!(status, 200, "{body}");
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }
}

/// Sends `request`: the status and the body (JSON, or `Null` when it is not JSON).
pub async fn reply(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// The string at `pointer` (`"/role"`, `"/function/name"`) in each element of the array `items`.
pub fn pluck(items: &Value, pointer: &str) -> Vec<String> {
    let items = items
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {items}"));
    items
        .iter()
        .map(|item| match item.pointer(pointer).and_then(Value::as_str) {
            Some(text) => text.to_string(),
            None => panic!("no string at {pointer} in {item}"),
        })
        .collect()
}

/// The `id`s in an OpenAI list body's `data`, in order.
pub fn ids(list: &Value) -> Vec<String> {
    pluck(&list["data"], "/id")
}

/// The entry for the dependency `name` in a `/health` body.
pub fn dependency(health: &Value, name: &str) -> Value {
    health["dependencies"]
        .as_array()
        .and_then(|deps| deps.iter().find(|d| d["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no {name} in {health}"))
}

/// The `x-onyx-session-id` a chat response carries.
pub fn session_id(response: &reqwest::Response) -> String {
    response.headers()["x-onyx-session-id"]
        .to_str()
        .unwrap()
        .to_string()
}

/// Reads an SSE response into its `data:` payloads (including `[DONE]`).
pub async fn sse_events(response: reqwest::Response) -> Vec<String> {
    let text = response.text().await.unwrap();
    text.split("\n\n")
        .filter_map(|event| {
            event
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(String::from)
        })
        .collect()
}

/// The chunks of an SSE chat stream, parsed, without `[DONE]`.
pub fn chunks(events: &[String]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

/// All content deltas of a chat stream, joined.
pub fn streamed_text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

/// Tool-call arguments of a chat stream, reassembled per index: (id, name, arguments).
pub fn streamed_tool_calls(chunks: &[Value]) -> Vec<(String, String, String)> {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for chunk in chunks {
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().unwrap() as usize;
            if calls.len() <= index {
                calls.resize(index + 1, Default::default());
            }
            if let Some(id) = call["id"].as_str() {
                calls[index].0 = id.into();
            }
            if let Some(name) = call["function"]["name"].as_str() {
                calls[index].1 = name.into();
            }
            if let Some(args) = call["function"]["arguments"].as_str() {
                calls[index].2.push_str(args);
            }
        }
    }
    calls
}

pub fn weather_tool() -> Value {
    serde_json::json!([{"type": "function", "function": {
        "name": "lookup", "description": "Look something up",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    }}])
}
