//! Onyx's integration tests, as one test binary (one link of the gateway and its
//! SurrealDB and AWS SDK dependencies instead of one per file). Most modules
//! drive the real `onyx` binary from outside against fake upstreams (see
//! `harness`); `bad_input` sends requests to the real router in-process
//! (`harness::inprocess`), for API-shape checks that need no process. Add a module here, not a file beside
//! `it/`: every file directly in `api/tests/` is a binary of its own.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

mod agents;
mod azure;
mod backup;
mod bad_input;
mod bedrock;
mod body_fields;
mod budgets;
mod busy_day;
mod chat_approvals;
mod circuits;
mod compaction;
mod cors;
mod deployment;
mod edge_keyless;
mod edge_login;
mod edge_powers;
mod edge_routes;
mod fuzz;
mod gemini;
mod hardening;
mod keys;
mod knowledge;
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
mod local_embedder;
mod logging;
mod mcp;
mod mcp_client;
mod mcp_oauth;
mod mcp_servers_live;
mod memory;
mod memory_rerank;
mod messages;
mod missions;
mod notifications;
mod observability;
mod openapi;
mod plugins;
mod projects;
mod prompt_cache;
mod providers;
mod providers_live;
mod reactions;
mod responses;
mod routing;
mod runs;
mod sandbox;
mod scheduler;
mod session_settings;
mod sessions;
mod skills;
mod speaks_first;
mod startup;
mod storage;
mod storage_backends;
mod subscription_tools;
mod tools_process;
mod tools_search;
mod tools_sessions_send;
mod ui;
mod upstream_wire;
mod usage;
