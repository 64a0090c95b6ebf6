//! Subscription providers: models the user already pays for through a
//! vendor's own program (Claude Code for Claude Pro/Max, the Codex CLI for
//! ChatGPT Plus/Pro, the Copilot CLI for GitHub Copilot), driven in its
//! headless JSON mode with its own tools off, so Onyx's agent loop stays in
//! charge. Never the vendor's OAuth tokens replayed against an API.
//!
//! Claude Code and Codex fix the model and system prompt when they start and
//! keep one conversation per process, while chat completions are stateless,
//! so each request is one short-lived run (the way the vendors' Agent SDKs
//! use them), bounded by a pool of [`POOL_SIZE`] runs per provider. The
//! Copilot CLI's JSON-RPC protocol holds many sessions per process, so it is
//! one long-lived process per provider with a session per request. A process
//! that dies before answering makes the next start wait a backoff; shutdown
//! kills every one still alive ([`stop_all`]). Credentials live in the CLI's
//! config dir under the data dir, `{dataDir}/subscriptions/{cli}/`, the one
//! folder of it the CLI can reach: every CLI runs inside Onyx's sandbox
//! ([`confine`]).
//!
//! In an agent run, the CLI gets the run's tools as an MCP server: Onyx's
//! own `/mcp` at the address it listens on ([`set_gateway_address`]), with
//! the run's token ([`OnyxTools`]); its own tools stay off.

pub mod claude;
pub mod codex;
mod confine;
pub mod copilot;
pub mod device_login;
mod driver;
mod process;
mod prompt;
mod rpc;
pub mod sealed;
pub mod status;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::backoff::Backoff;

pub use process::stop_all;

/// The most runs of one provider at a time.
pub const POOL_SIZE: usize = 4;

static DATA_DIR: OnceLock<PathBuf> = OnceLock::new();
static GATEWAY: OnceLock<std::net::SocketAddr> = OnceLock::new();

/// Where this gateway listens (set once it is bound), for its CLIs' MCP client.
pub fn set_gateway_address(bound: std::net::SocketAddr) {
    let _ = GATEWAY.set(bound);
}

/// Where this replica is reached on the machine it runs on
/// (`http://127.0.0.1:PORT` when it listens on every address), once listening.
pub fn gateway_base_url() -> Option<String> {
    let bound = GATEWAY.get()?;
    let ip = match bound.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    Some(format!("http://{}", std::net::SocketAddr::new(ip, bound.port())))
}

/// Onyx's `/mcp` for one run's CLI: its URL on this replica, and the run's token.
pub struct OnyxTools {
    pub url: String,
    pub token: secrecy::SecretString,
}

impl OnyxTools {
    /// For a call that carries a run token, once the gateway is listening.
    pub fn of(call: &crate::providers::ChatCall) -> Option<Self> {
        let token = call.tool_token.clone()?;
        let Some(bound) = GATEWAY.get() else {
            tracing::warn!("a run token but no listening address: the CLI runs without Onyx's tools");
            return None;
        };
        // A gateway listening on every address is reached on loopback.
        let ip = match bound.ip() {
            std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
            ip => ip,
        };
        let url = format!("http://{}/mcp", std::net::SocketAddr::new(ip, bound.port()));
        Some(Self { url, token })
    }

    /// The `Authorization` header's value.
    pub fn bearer(&self) -> String {
        use secrecy::ExposeSecret;
        format!("Bearer {}", self.token.expose_secret())
    }
}

/// Where the CLIs keep their credentials: set once at startup.
pub fn set_data_dir(dir: &Path) {
    let _ = DATA_DIR.set(dir.to_path_buf());
}

/// Seals every CLI's plaintext credential files with the startup vault
/// (`onyx serve` at start and after [`stop_all`]); how many it sealed.
pub fn seal_at_rest() -> usize {
    match (sealed::vault(), DATA_DIR.get()) {
        (Some(vault), Some(dir)) => sealed::seal_all(&vault, dir),
        _ => 0,
    }
}

/// The config dir of `cli` (`claude`, `codex`, `copilot`) under `data_dir`.
pub fn cli_home(data_dir: &Path, cli: &str) -> PathBuf {
    data_dir.join("subscriptions").join(cli)
}

/// The gateway's data dir (set at startup).
fn data_dir() -> PathBuf {
    DATA_DIR
        .get()
        .cloned()
        .or_else(|| std::env::var_os("ONYX_DATA_DIR").map(PathBuf::from))
        .unwrap_or_else(std::env::temp_dir)
}

fn home(cli: &str) -> PathBuf {
    cli_home(&data_dir(), cli)
}

/// Bounds concurrent runs and spaces out starts after runs that died.
struct Supervisor {
    permits: Arc<Semaphore>,
    restart: Mutex<Restart>,
}

struct Restart {
    backoff: Backoff,
    not_before: Option<Instant>,
}

impl Supervisor {
    fn new() -> Self {
        Self {
            permits: Arc::new(Semaphore::new(POOL_SIZE)),
            restart: Mutex::new(Restart {
                backoff: Backoff::new(Duration::from_millis(200), Duration::from_secs(10)),
                not_before: None,
            }),
        }
    }

    /// A slot in the pool, once any backoff after a death has passed.
    async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.permits.clone().acquire_owned().await.ok()?;
        let wait = self.restart.lock().ok().and_then(|r| r.not_before);
        if let Some(at) = wait {
            tokio::time::sleep_until(at).await;
        }
        Some(permit)
    }

    fn died(&self) {
        if let Ok(mut restart) = self.restart.lock() {
            let wait = restart.backoff.failed();
            restart.not_before = Some(Instant::now() + wait);
        }
    }

    fn answered(&self) {
        if let Ok(mut restart) = self.restart.lock() {
            restart.backoff.succeeded();
            restart.not_before = None;
        }
    }
}

/// The CLI behind a provider of `kind` (`claude`, `codex`, `copilot`; none for other kinds).
pub fn cli_for(kind: &str) -> Option<&'static str> {
    use crate::config::ProviderKind;
    if kind == ProviderKind::ClaudeSubscription.as_str() {
        Some("claude")
    } else if kind == ProviderKind::Codex.as_str() {
        Some("codex")
    } else if kind == ProviderKind::Copilot.as_str() {
        Some("copilot")
    } else {
        None
    }
}

/// This gateway's config dir of `cli` (see [`cli_home`]).
pub fn config_home(cli: &str) -> PathBuf {
    home(cli)
}

/// The sign-in state of the CLI behind a provider of `kind` (none for other kinds).
pub fn sign_in(kind: &str) -> Option<status::SubscriptionStatus> {
    let cli = cli_for(kind)?;
    let now = u64::try_from(crate::clock::now().timestamp_millis()).unwrap_or(0);
    Some(status::status(cli, &home(cli), now))
}
