//! `copilot/…` (type `copilot`): a GitHub Copilot subscription through the
//! Copilot CLI (npm `@github/copilot`) in the mode its official SDK
//! (`@github/copilot-sdk`) drives: `copilot --headless --stdio`, JSON-RPC
//! over stdio ([`rpc`](super::rpc)). The protocol holds many sessions per
//! process, so each provider keeps one long-lived CLI and opens a session
//! per request (at most [`POOL_SIZE`](super::POOL_SIZE) at a time): create,
//! send the prompt, read its events up to `session.idle`, delete it. A CLI
//! that dies fails its turns with a clean 502 and is started again on the
//! next request, after a backoff.

mod session;

use std::sync::Arc;

use futures::future::BoxFuture;
use secrecy::ExposeSecret;
use serde_json::json;

use super::driver::{Answers, Settings, Step, Steps};
use super::process::Spawn;
use super::rpc::{Connection, RpcError};
use super::sealed::{self, Lease};
use super::{OnyxTools, Supervisor, home, prompt};
use crate::config::{ProviderConfig, ProviderKind};
use crate::providers::{ChatCall, ProviderError};
use session::{Byok, PROTOCOLS, Turn};

/// The base URL that means "the signed-in GitHub account" (no BYOK upstream).
pub const DEFAULT_BASE_URL: &str = "https://api.githubcopilot.com";
const PROGRAM: &str = "GitHub Copilot";

pub struct Copilot {
    settings: Settings,
    command: String,
    byok: Option<Byok>,
    supervisor: Arc<Supervisor>,
    /// The CLI now running, if any, and the lease keeping its credentials
    /// unsealed while it runs.
    cli: tokio::sync::Mutex<Option<(Arc<Connection>, Lease)>>,
}

pub fn provider(config: &ProviderConfig) -> Copilot {
    let base = config.base_url.as_str().trim_end_matches('/');
    Copilot {
        settings: Settings::new(config),
        command: config.command.clone().unwrap_or_else(|| "copilot".into()),
        byok: (base != DEFAULT_BASE_URL).then(|| Byok {
            base_url: base.to_string(),
            api_key: config.api_key.as_ref().map(|k| k.expose_secret().to_string()),
        }),
        supervisor: Arc::new(Supervisor::new()),
        cli: tokio::sync::Mutex::new(None),
    }
}

impl Copilot {
    fn unreachable(&self, detail: String) -> ProviderError {
        ProviderError::Connect {
            provider: self.settings.name.clone(),
            detail,
        }
    }

    /// The running CLI, started (and its protocol version checked) if none is.
    async fn connection(&self) -> Result<Arc<Connection>, ProviderError> {
        let mut cli = self.cli.lock().await;
        if let Some((running, _)) = cli.as_ref().filter(|(c, _)| c.is_open()) {
            return Ok(running.clone());
        }
        // A dead CLI's lease ends first, sealing what it may have refreshed.
        *cli = None;
        let lease = sealed::lease("copilot");
        let dir = home("copilot");
        let mut args = vec!["--headless", "--no-auto-update", "--stdio"];
        if self.byok.is_some() {
            args.push("--no-auto-login");
        }
        let spawn = Spawn {
            program: self.command.clone(),
            args: args.into_iter().map(str::to_string).collect(),
            env: vec![
                ("COPILOT_HOME".into(), dir.display().to_string()),
                ("COPILOT_AUTO_UPDATE".into(), "false".into()),
                // The sign-in lives in the config dir, as `onyx login copilot` wrote it.
                ("COPILOT_DISABLE_KEYTAR".into(), "1".into()),
            ],
            home: dir.clone(),
            cwd: dir.join("work"),
            // The system prompt goes in the session's JSON-RPC request, on stdin.
            files: Vec::new(),
        };
        let started = Connection::start(spawn).map_err(|err| {
            self.supervisor.died();
            self.unreachable(format!("cannot start {:?}: {err}", self.command))
        })?;
        let hello = json!({"supportedTaskKinds": ["agent", "client", "shell"]});
        let version = match started.request("connect", hello).await {
            Ok(reply) => reply["protocolVersion"].as_u64(),
            Err(err) => {
                self.supervisor.died();
                let ended = started.ended().await;
                return Err(self.unreachable(format!("the CLI did not connect: {err} ({ended})")));
            }
        };
        if !version.is_some_and(|v| PROTOCOLS.contains(&v)) {
            self.supervisor.died();
            return Err(self.unreachable(format!(
                "the CLI speaks SDK protocol {version:?}, Onyx speaks {PROTOCOLS:?}: install @github/copilot 1.0.102 or a compatible version"
            )));
        }
        tracing::info!(provider = %self.settings.name, pid = started.pid(), "GitHub Copilot CLI started");
        let started = Arc::new(started);
        *cli = Some((started.clone(), lease));
        Ok(started)
    }

    fn exited(&self) -> ProviderError {
        self.supervisor.died();
        self.exited_error()
    }

    fn failed(&self, err: RpcError) -> ProviderError {
        match err {
            RpcError::Remote { message, .. } => ProviderError::Upstream {
                provider: self.settings.name.clone(),
                status: 502,
                message,
                kind: None,
                code: Some("subscription_error".into()),
                param: None,
            },
            RpcError::Closed | RpcError::Write(_) => self.exited(),
        }
    }

    /// Opens a session for the request, sends it, and reads its answer.
    async fn session_steps(&self, model: &str, call: &ChatCall) -> Result<Steps, ProviderError> {
        let prompt = prompt::render(&call.request, ProviderKind::Copilot.as_str())
            .map_err(ProviderError::InvalidRequest)?;
        let permit = self
            .supervisor
            .slot()
            .await
            .ok_or_else(|| self.unreachable("the pool is closed".into()))?;
        let cli = self.connection().await?;
        let id = uuid::Uuid::new_v4().to_string();
        let mut events = cli.subscribe(&id);
        let cwd = home("copilot").join("work").display().to_string();
        let tools = OnyxTools::of(call);
        let params = session::create(
            &id,
            model,
            &prompt.system,
            &cwd,
            self.byok.as_ref(),
            tools.as_ref(),
        );
        let guard = SessionGuard {
            cli: cli.clone(),
            id: id.clone(),
        };
        let asks = cli.clone();
        cli.request("session.create", params)
            .await
            .map_err(|e| self.failed(e))?;
        cli.request("session.send", json!({"sessionId": id, "prompt": prompt.user}))
            .await
            .map_err(|e| self.failed(e))?;
        let name = self.settings.name.clone();
        let supervisor = self.supervisor.clone();
        let exited = self.exited_error();
        Ok(Box::pin(async_stream::stream! {
            let _permit = permit;
            let _guard = guard;
            let mut turn = Turn::default();
            loop {
                let Some(event) = events.recv().await else {
                    supervisor.died();
                    yield Step::Failed(exited);
                    return;
                };
                if let Some(answer) = session::permission(&id, &event) {
                    if let Err(err) = asks.request("session.permissions.handlePendingPermissionRequest", answer).await {
                        tracing::warn!(%err, session = %id, "could not answer the Copilot CLI's permission request");
                    }
                    continue;
                }
                match turn.step(&name, &event) {
                    Step::Skip => {}
                    done @ Step::Done { .. } => {
                        supervisor.answered();
                        yield done;
                        return;
                    }
                    failed @ Step::Failed(_) => {
                        yield failed;
                        return;
                    }
                    text => yield text,
                }
            }
        }))
    }

    /// The error of a CLI that died mid-turn (the backoff is applied by the caller).
    fn exited_error(&self) -> ProviderError {
        ProviderError::Upstream {
            provider: self.settings.name.clone(),
            status: 502,
            message: format!("the {PROGRAM} process exited before answering"),
            kind: Some("server_error".into()),
            code: Some("subscription_process_exited".into()),
            param: None,
        }
    }
}

/// Ends a session when its request is done or dropped: stops a turn still
/// running and deletes the session's state from the CLI's config dir.
struct SessionGuard {
    cli: Arc<Connection>,
    id: String,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.cli.unsubscribe(&self.id);
        if !self.cli.is_open() {
            return;
        }
        let cli = self.cli.clone();
        let id = self.id.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = cli.request("session.abort", json!({"sessionId": id})).await;
                if let Err(err) = cli.request("session.delete", json!({"sessionId": id})).await {
                    tracing::debug!(%err, session = %id, "Copilot session not deleted");
                }
            });
        }
    }
}

impl Answers for Copilot {
    const KIND: ProviderKind = ProviderKind::Copilot;
    const MODELS: &'static [&'static str] = &["gpt-5", "claude-sonnet-4.5", "gpt-5-mini"];

    fn settings(&self) -> &Settings {
        &self.settings
    }

    fn steps<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<Steps, ProviderError>> {
        Box::pin(self.session_steps(model, call))
    }
}
