//! Onyx: a self-hosted personal AI assistant gateway.
//!
//! Module map (see `DESIGN.md`). Dependencies point inward: the edge (`http`,
//! `cli`) and the wiring (`app`) import domain modules; domain modules import
//! `storage` and the leaves; no two modules import each other
//! (`architecture_tests` checks this).
//!
//! - Edge and wiring: `cli` is the `onyx` binary (`serve`, `doctor`, `keys`,
//!   `reindex`); `http` is the axum surface; `app` builds everything from the
//!   config, runs the database migrations and owns the background loops.
//! - Domain: `agents` runs assistants (prompt, tool loop, tools, durable
//!   runs) and `inbox`
//!   carries their messages; `tasks` keeps scheduled tasks and `scheduler`
//!   runs them; `memory` keeps files-first memory and its search index;
//!   `skills` keeps skill folders (a `SKILL.md` and its files);
//!   `sessions` records conversations; `notifications` tells the owner's
//!   browser what agents said outside a watched turn; `providers` routes `provider/model` to
//!   OpenAI-compatible, Anthropic and Ollama upstreams; `plugins` connects
//!   chat platforms and `channels` delivers to them; `auth` checks keys and
//!   passwords; `audit` records admin actions; `secrets` seals credentials at rest;
//!   `sandbox` confines `exec`, the vendor CLIs and the files agents name;
//!   `health` and `observability` report on the running gateway;
//!   `config` loads and validates `onyx.json5`; `usage` records every
//!   upstream call's tokens and cost and enforces budgets and rate limits.
//! - Storage: `storage` holds the object store and SurrealDB (with its
//!   migrations, run explicitly by `serve`, `doctor` and `reindex`).
//! - Leaves, importing nothing from the crate: `chat` (the OpenAI-shaped
//!   vocabulary providers answer in: messages, completions, chunks, usage),
//!   `model_ref` (`provider/model`),
//!   `clock` (timestamps and days as stored), `error_chain` (an error's
//!   whole chain for logs, and its root cause), `background` (spawned loops,
//!   stopped on shutdown), `backoff`, `replica` (this process's name among
//!   replicas, for leases), `text`, `limits` (budgets and rate limits as
//!   configured).

pub mod agents;
pub mod app;
#[cfg(test)]
mod architecture_tests;
pub mod audit;
pub mod auth;
pub mod background;
pub mod backoff;
pub mod channels;
pub mod chat;
pub mod cli;
pub mod clock;
pub mod config;
#[cfg(test)]
mod docs_tests;
pub mod error_chain;
pub mod features;
#[cfg(test)]
mod fuzzing;
pub mod health;
pub mod http;
pub mod inbox;
pub mod knowledge;
pub mod lease;
pub mod limits;
pub mod locks;
pub mod mcp_client;
pub mod memory;
pub mod model_ref;
pub mod notifications;
pub mod observability;
pub mod orchestration;
pub mod plugins;
pub mod providers;
pub mod replica;
pub mod responses;
pub mod sandbox;
pub mod scheduler;
pub mod secrets;
pub mod sessions;
pub mod skills;
pub mod storage;
pub mod tasks;
pub mod text;
pub mod usage;
