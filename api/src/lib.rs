//! Onyx: a self-hosted personal AI assistant gateway.
//!
//! Module map (see `DESIGN.md`): `config` loads and validates `onyx.json5`;
//! `agents` runs assistants (prompt, tool loop, tools) and `inbox` carries
//! their messages; `memory` keeps files-first memory and its search index;
//! `providers` routes `provider/model` to OpenAI-compatible, Anthropic and
//! Ollama upstreams; `http` is the axum surface; `auth` checks keys and
//! passwords; `health` and `observability` report on the running gateway;
//! `cli` is the `onyx` binary; `app` wires them together.

pub mod agents;
pub mod app;
pub mod auth;
pub mod backoff;
pub mod channels;
pub mod cli;
pub mod config;
pub mod health;
pub mod http;
pub mod inbox;
pub mod memory;
pub mod observability;
pub mod plugins;
pub mod providers;
pub mod scheduler;
pub mod sessions;
pub mod storage;
pub mod text;
