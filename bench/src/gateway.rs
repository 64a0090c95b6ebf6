//! A running `onyx serve` as the evaluation's [`Backend`]: files written with
//! `PUT /v1/memory/files/{agent}/{path}`, searched with `GET
//! /v1/memory/search`, as a user's client would. [`Gateway::start`] runs the
//! binary on a fresh data directory with an Ollama-style embedder.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use onyx::memory::Mode;
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::eval::mode_name;
use crate::recall::{Backend, Hit, Searched};

/// How long the gateway may take to start, load its index or embed what was written.
const PATIENCE: Duration = Duration::from_secs(600);
const POLL: Duration = Duration::from_millis(100);

pub struct Gateway {
    child: Child,
    url: String,
    client: reqwest::Client,
    _home: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

#[derive(Deserialize)]
struct Status {
    pending: usize,
    embedder: EmbedderState,
    search_index: SearchIndex,
}

#[derive(Deserialize)]
struct EmbedderState {
    ready: bool,
    error: Option<String>,
}

#[derive(Deserialize)]
struct SearchIndex {
    state: String,
}

#[derive(Deserialize)]
struct Results {
    mode: Mode,
    note: Option<String>,
    data: Vec<Hit>,
}

impl Gateway {
    /// Starts `binary serve` with `memory` as its config's `memory` block (JSON5)
    /// and waits until its embedder is ready (so chunks are sized for it).
    pub async fn start(binary: &Path, memory: &str) -> Result<Self, String> {
        let home = tempfile::tempdir().map_err(|e| e.to_string())?;
        let config = home.path().join("onyx.json5");
        std::fs::write(&config, format!("{{ memory: {memory} }}")).map_err(|e| e.to_string())?;
        let mut child = Command::new(binary)
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env("HOME", home.path())
            .env("ONYX_DATA_DIR", home.path().join("data"))
            .env("ONYX_LOG", "warn")
            .env_remove("ONYX_CONFIG")
            .env_remove("ONYX_API_KEY")
            .env_remove("OLLAMA_HOST")
            .env_remove("OPENAI_API_KEY")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(PATIENCE, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("listening on ") {
                    return Some(url.to_string());
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .ok_or_else(|| format!("{} did not say where it listens", binary.display()))?;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let gateway = Self {
            child,
            url,
            client: reqwest::Client::new(),
            _home: home,
        };
        gateway
            .wait_for("the embedder to be ready and the index loaded", |s| {
                s.embedder.ready && s.search_index.state == "ready"
            })
            .await?;
        Ok(gateway)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    async fn status(&self) -> Result<Status, String> {
        let response = self
            .client
            .get(format!("{}/v1/memory/status", self.url))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("GET /v1/memory/status: {}", response.status()));
        }
        response.json().await.map_err(|e| e.to_string())
    }

    /// Polls `/v1/memory/status` until `done` holds.
    async fn wait_for(&self, what: &str, done: impl Fn(&Status) -> bool) -> Result<(), String> {
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < PATIENCE {
            match self.status().await {
                Ok(status) if done(&status) => return Ok(()),
                Ok(status) => {
                    last = format!(
                        "{} pending, embedder error {:?}",
                        status.pending, status.embedder.error
                    )
                }
                Err(err) => last = err,
            }
            tokio::time::sleep(POLL).await;
        }
        Err(format!("waited {PATIENCE:?} for {what}: {last}"))
    }
}

impl Backend for Gateway {
    async fn write(&self, agent: &str, path: &str, content: &str) -> Result<(), String> {
        let response = self
            .client
            .put(format!("{}/v1/memory/files/{agent}/{path}", self.url))
            .header("content-type", "text/markdown")
            .body(content.to_string())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            let status = response.status();
            return Err(format!(
                "PUT {agent}/{path}: {status} {}",
                response.text().await.unwrap_or_default()
            ));
        }
        Ok(())
    }

    async fn settle(&self) -> Result<(), String> {
        self.wait_for("every chunk to be embedded", |s| s.pending == 0)
            .await
    }

    async fn search(
        &self,
        agent: &str,
        query: &str,
        limit: usize,
        mode: Mode,
        _today: &str,
    ) -> Result<Searched, String> {
        let limit = limit.to_string();
        let url = url::Url::parse_with_params(
            &format!("{}/v1/memory/search", self.url),
            [
                ("agent", agent),
                ("q", query),
                ("mode", mode_name(mode)),
                ("limit", limit.as_str()),
            ],
        )
        .map_err(|e| e.to_string())?;
        let response = self.client.get(url).send().await.map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            let status = response.status();
            return Err(format!(
                "GET /v1/memory/search: {status} {}",
                response.text().await.unwrap_or_default()
            ));
        }
        let results: Results = response.json().await.map_err(|e| e.to_string())?;
        Ok(Searched {
            mode: results.mode,
            note: results.note,
            hits: results.data,
        })
    }
}
