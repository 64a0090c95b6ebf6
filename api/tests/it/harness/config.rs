//! `TestConfig`: the gateway config a test starts with, as a JSON tree built
//! from typed pieces instead of text edits. `Fakes::config()` is its base: all
//! three fake providers, two aliases and the test key (`TestConfig::empty()`
//! has none of them); a test adds or overrides sections and `build()`s the
//! text (JSON, which is JSON5).

use serde_json::{Value, json};

use super::services::{S3_ACCESS_KEY, S3_SECRET_KEY, Service};
use super::{Fakes, ONYX_KEY};

#[derive(Clone, Debug)]
pub struct TestConfig(Value);

impl TestConfig {
    /// The providers of `fakes` (keys through `${FAKE_KEY}`), aliases and the test key.
    pub fn new(fakes: &Fakes) -> Self {
        Self(json!({
            "gateway": { "auth": { "apiKeys": [ONYX_KEY] }, "maxBodyBytes": 65536, "shutdownGraceSeconds": 30 },
            "providers": {
                "openai": { "type": "openai", "baseUrl": format!("{}/v1", fakes.openai.url()), "apiKey": "${FAKE_KEY}", "maxRetries": 2 },
                "anthropic": { "type": "anthropic", "baseUrl": fakes.anthropic.url(), "apiKey": "${FAKE_KEY}" },
                "ollama": { "type": "ollama", "baseUrl": fakes.ollama.url() },
            },
            "models": { "aliases": {
                "resilient": ["openai/fake-500", "anthropic/fake-echo"],
                "fast": "ollama/fake-echo",
            } },
        }))
    }

    /// Nothing set: the built-in defaults, with no providers and no key.
    pub fn empty() -> Self {
        Self(json!({}))
    }

    /// Deep-merges `patch`: objects merge key by key, anything else replaces.
    pub fn merge(mut self, patch: Value) -> Self {
        merge(&mut self.0, patch);
        self
    }

    /// Sets one value at a dotted path (`"gateway.recordSessions"`).
    pub fn set(self, path: &str, value: Value) -> Self {
        let patch = path.rsplit('.').fold(value, |inner, key| json!({ key: inner }));
        self.merge(patch)
    }

    /// Adds an agent to `agents.list`, or merges into the one with its id.
    pub fn agent(mut self, agent: Value) -> Self {
        let list = self.0["agents"]["list"].take();
        let mut list = list.as_array().cloned().unwrap_or_default();
        match list.iter_mut().find(|a| a["id"] == agent["id"]) {
            Some(existing) => merge(existing, agent),
            None => list.push(agent),
        }
        self.0["agents"]["list"] = Value::Array(list);
        self
    }

    /// Objects in the S3 server `s3` (the test credentials).
    pub fn s3(self, s3: &Service) -> Self {
        self.set(
            "storage.objects",
            json!({ "type": "s3", "endpoint": s3.url(), "region": "us-east-1",
                    "accessKey": S3_ACCESS_KEY, "secretKey": S3_SECRET_KEY }),
        )
    }

    /// The database on the SurrealDB server `surreal`.
    pub fn surreal(self, surreal: &Service) -> Self {
        self.surreal_url(&format!("ws://{}", surreal.addr))
    }

    /// The database at `url`, with the test server's credentials.
    pub fn surreal_url(self, url: &str) -> Self {
        self.set(
            "storage.surrealdb",
            json!({ "url": url, "user": "root", "pass": "root" }),
        )
    }

    /// The config text.
    pub fn build(&self) -> String {
        serde_json::to_string_pretty(&self.0).unwrap()
    }
}

fn merge(into: &mut Value, patch: Value) {
    match (into, patch) {
        (Value::Object(into), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, patch) => *into = patch,
    }
}
