//! The [`Provider`] the one-run-per-request CLIs share: one run per request
//! from the pool, the request written to stdin, the CLI's JSON lines turned
//! into [`Step`]s by the CLI's [`Dialect`]; and how any subscription
//! provider's steps become a `chat.completion` or its chunks
//! ([`answer_completion`], [`answer_stream`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::process::{Run, Spawn};
use super::sealed::{self, Lease};
use super::{OnyxTools, Supervisor, prompt};
use crate::chat::{ChunkFactory, Completion, Delta, FinishReason, Message, Usage};
use crate::config::{ProviderConfig, ProviderKind};
use crate::providers::{
    ChatCall, ChatChunkStream, CompletionReply, EmbeddingsCall, Provider, ProviderError, completion_id,
    unsupported,
};

/// What one line of a CLI's output means for the answer.
#[derive(Debug)]
pub enum Step {
    Text(String),
    Done { usage: Usage, finish: &'static str },
    Failed(ProviderError),
    Skip,
}

/// How one CLI is started, sent a request and read.
pub trait Dialect: Send + Sync + 'static {
    const KIND: ProviderKind;
    /// The CLI's name, as in its config dir `{dataDir}/subscriptions/{cli}/`.
    const CLI: &'static str;
    /// The program's name in messages ("Claude Code").
    const PROGRAM: &'static str;
    /// The program started when the config names none.
    const DEFAULT_COMMAND: &'static str;
    /// The models listed when the config names none.
    const MODELS: &'static [&'static str];
    /// The run for `model` with `system` as its system prompt, and Onyx's
    /// `/mcp` as its one MCP server when it is an agent run.
    fn spawn(&self, command: &str, model: &str, system: &str, tools: Option<&OnyxTools>) -> Spawn;
    /// What is written to stdin for the user's turn.
    fn request(&self, user: &str) -> String;
    fn step(&self, provider: &str, line: &Value) -> Step;
}

pub struct CliProvider<D> {
    settings: Settings,
    command: String,
    supervisor: Arc<Supervisor>,
    dialect: Arc<D>,
}

impl<D: Dialect> CliProvider<D> {
    pub fn new(config: &ProviderConfig, dialect: D) -> Self {
        Self {
            settings: Settings::new(config),
            command: config
                .command
                .clone()
                .unwrap_or_else(|| D::DEFAULT_COMMAND.into()),
            supervisor: Arc::new(Supervisor::new()),
            dialect: Arc::new(dialect),
        }
    }

    /// Starts a run and hands it the request.
    async fn start(
        &self,
        model: &str,
        call: &ChatCall,
    ) -> Result<(Run, Lease, OwnedSemaphorePermit), ProviderError> {
        let prompt =
            prompt::render(&call.request, D::KIND.as_str()).map_err(ProviderError::InvalidRequest)?;
        let permit = self
            .supervisor
            .slot()
            .await
            .ok_or_else(|| self.unreachable("the pool is closed".into()))?;
        let tools = OnyxTools::of(call);
        let spawn = self
            .dialect
            .spawn(&self.command, model, &prompt.system, tools.as_ref());
        let lease = sealed::lease(D::CLI);
        let mut run = Run::start(spawn).map_err(|err| {
            self.supervisor.died();
            self.unreachable(format!("cannot start {:?}: {err}", self.command))
        })?;
        if let Err(err) = run.send(&self.dialect.request(&prompt.user)).await {
            self.supervisor.died();
            let ended = run.ended().await;
            return Err(self.unreachable(format!("cannot write the request: {err} ({ended})")));
        }
        Ok((run, lease, permit))
    }

    fn unreachable(&self, detail: String) -> ProviderError {
        ProviderError::Connect {
            provider: self.settings.name.clone(),
            detail,
        }
    }
}

/// What a stream needs after the provider's borrow ends.
struct Reader<D> {
    name: String,
    supervisor: Arc<Supervisor>,
    dialect: Arc<D>,
}

impl<D: Dialect> Reader<D> {
    /// Reads lines up to the first that matters; a run that ends first died.
    async fn next(&self, run: &mut Run) -> Step {
        loop {
            let Some(line) = run.next().await else {
                self.supervisor.died();
                let ended = run.ended().await;
                tracing::warn!(provider = %self.name, pid = run.pid(), %ended, "{} exited before answering", D::PROGRAM);
                return Step::Failed(ProviderError::Upstream {
                    provider: self.name.clone(),
                    status: 502,
                    message: format!("the {} process exited before answering", D::PROGRAM),
                    kind: Some("server_error".into()),
                    code: Some("subscription_process_exited".into()),
                    param: None,
                });
            };
            match self.dialect.step(&self.name, &line) {
                Step::Skip => continue,
                other => return other,
            }
        }
    }
}

impl<D: Dialect> CliProvider<D> {
    /// The answer of a run started for the request, step by step.
    async fn run_steps(&self, model: &str, call: &ChatCall) -> Result<Steps, ProviderError> {
        let (mut run, lease, permit) = self.start(model, call).await?;
        let reader = Reader {
            name: self.settings.name.clone(),
            supervisor: self.supervisor.clone(),
            dialect: self.dialect.clone(),
        };
        Ok(Box::pin(async_stream::stream! {
            let _permit = permit;
            loop {
                match reader.next(&mut run).await {
                    Step::Skip => {}
                    done @ Step::Done { .. } => {
                        reader.supervisor.answered();
                        yield done;
                        run.finish().await;
                        // Sealed again (a token refreshed during the run included).
                        drop(lease);
                        return;
                    }
                    failed @ Step::Failed(_) => {
                        yield failed;
                        drop(run);
                        drop(lease);
                        return;
                    }
                    text => yield text,
                }
            }
        }))
    }
}

/// An answer as it arrives; it ends after [`Step::Done`] or [`Step::Failed`]
/// (and after its source has cleaned up, so readers drain it to the end).
pub type Steps = BoxStream<'static, Step>;

/// The whole answer as a `chat.completion`, within `timeout`.
pub async fn answer_completion(
    name: &str,
    model: &str,
    timeout: Duration,
    mut steps: Steps,
) -> Result<Completion, ProviderError> {
    let answer = async {
        let mut text = String::new();
        loop {
            match steps.next().await {
                Some(Step::Text(piece)) => text.push_str(&piece),
                Some(Step::Done { usage, finish }) => return Ok((text, usage, finish)),
                Some(Step::Failed(err)) => return Err(err),
                Some(Step::Skip) => {}
                None => return Err(ended_early(name)),
            }
        }
    };
    let (text, usage, finish) = crate::providers::within(name, timeout, answer, |e| e).await?;
    while steps.next().await.is_some() {}
    Ok(Completion::single(
        completion_id(),
        model.to_string(),
        Message::answer(Some(text), Vec::new()),
        FinishReason::parse(finish),
        usage,
    ))
}

/// The answer as `chat.completion.chunk`s; an error before the first word
/// (within `timeout`) is the response's status, not a broken stream.
pub async fn answer_stream(
    name: &str,
    model: &str,
    timeout: Duration,
    mut steps: Steps,
) -> Result<ChatChunkStream, ProviderError> {
    let first = async {
        loop {
            match steps.next().await {
                Some(Step::Skip) => {}
                Some(step) => return Ok(step),
                None => return Err(ended_early(name)),
            }
        }
    };
    let first = crate::providers::within(name, timeout, first, |e| e).await?;
    if let Step::Failed(err) = first {
        return Err(err);
    }
    let factory = ChunkFactory::new(completion_id(), model.to_string());
    let name = name.to_string();
    let chunks = async_stream::stream! {
        yield Ok(factory.delta(Delta::start(), None));
        let mut pending = Some(first);
        loop {
            let next = match pending.take() {
                Some(step) => Some(step),
                None => steps.next().await,
            };
            match next {
                Some(Step::Text(text)) => {
                    yield Ok(factory.delta(Delta::text(text), None));
                }
                Some(Step::Done { usage, finish }) => {
                    yield Ok(factory.delta(Delta::default(), Some(FinishReason::parse(finish))));
                    // Always: the router records it and drops it for a client that did not ask.
                    yield Ok(factory.usage(usage));
                    while steps.next().await.is_some() {}
                    return;
                }
                Some(Step::Failed(err)) => {
                    yield Err(err);
                    return;
                }
                Some(Step::Skip) => {}
                None => {
                    yield Err(ended_early(&name));
                    return;
                }
            }
        }
    };
    Ok(Box::pin(chunks) as ChatChunkStream)
}

/// A source that ended without saying the answer was done or failed.
fn ended_early(name: &str) -> ProviderError {
    ProviderError::BadResponse {
        provider: name.to_string(),
        detail: "the answer ended before it was complete".into(),
    }
}

/// A subscription provider: its answer to a request as [`Steps`]; the
/// [`Provider`] around it is the same for every CLI.
pub trait Answers: Send + Sync + 'static {
    const KIND: ProviderKind;
    /// The models listed when the config names none.
    const MODELS: &'static [&'static str];
    fn settings(&self) -> &Settings;
    fn steps<'a>(&'a self, model: &'a str, call: &'a ChatCall)
    -> BoxFuture<'a, Result<Steps, ProviderError>>;
}

/// What every subscription provider takes from its config.
pub struct Settings {
    pub name: String,
    pub timeout: Duration,
    pub models: Vec<String>,
}

impl Settings {
    pub fn new(config: &ProviderConfig) -> Self {
        Self {
            name: config.name.clone(),
            timeout: config.timeout,
            models: config.models.clone(),
        }
    }
}

impl<A: Answers> Provider for A {
    fn name(&self) -> &str {
        &self.settings().name
    }

    fn kind(&self) -> ProviderKind {
        A::KIND
    }

    fn complete<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<CompletionReply, ProviderError>> {
        Box::pin(async move {
            let steps = self.steps(model, call).await?;
            answer_completion(&self.settings().name, model, self.settings().timeout, steps)
                .await
                .map(CompletionReply::Typed)
        })
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<ChatChunkStream, ProviderError>> {
        Box::pin(async move {
            let steps = self.steps(model, call).await?;
            answer_stream(&self.settings().name, model, self.settings().timeout, steps).await
        })
    }

    fn embeddings<'a>(
        &'a self,
        _model: &'a str,
        _call: &'a EmbeddingsCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>> {
        unsupported(&self.settings().name, "embeddings")
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        let configured = &self.settings().models;
        let models = if configured.is_empty() {
            A::MODELS.iter().map(|m| m.to_string()).collect()
        } else {
            configured.clone()
        };
        Box::pin(async move { Ok(models) })
    }
}

impl<D: Dialect> Answers for CliProvider<D> {
    const KIND: ProviderKind = D::KIND;
    const MODELS: &'static [&'static str] = D::MODELS;

    fn settings(&self) -> &Settings {
        &self.settings
    }

    fn steps<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<Steps, ProviderError>> {
        Box::pin(self.run_steps(model, call))
    }
}
