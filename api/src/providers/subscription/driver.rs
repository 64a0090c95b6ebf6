//! The [`Provider`] every subscription CLI shares: one run per request from
//! the pool, the request written to stdin, the CLI's JSON lines turned into
//! a `chat.completion` or its chunks by the CLI's [`Dialect`].

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::process::{Run, Spawn};
use super::{Supervisor, prompt};
use crate::config::{ProviderConfig, ProviderKind};
use crate::providers::types::{AssistantMessage, Choice, ChunkFactory, Completion, Delta, Usage, unix_now};
use crate::providers::{
    ChatCall, ChunkStream, EmbeddingsCall, Provider, ProviderError, completion_id, unsupported,
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
    /// The program's name in messages ("Claude Code").
    const PROGRAM: &'static str;
    /// The program started when the config names none.
    const DEFAULT_COMMAND: &'static str;
    /// The models listed when the config names none.
    const MODELS: &'static [&'static str];
    /// The run for `model` with `system` as its system prompt.
    fn spawn(&self, command: &str, model: &str, system: &str) -> Spawn;
    /// What is written to stdin for the user's turn.
    fn request(&self, user: &str) -> String;
    fn step(&self, provider: &str, line: &Value) -> Step;
}

pub struct CliProvider<D> {
    name: String,
    command: String,
    timeout: Duration,
    models: Vec<String>,
    supervisor: Arc<Supervisor>,
    dialect: Arc<D>,
}

impl<D: Dialect> CliProvider<D> {
    pub fn new(config: &ProviderConfig, dialect: D) -> Self {
        Self {
            name: config.name.clone(),
            command: config
                .command
                .clone()
                .unwrap_or_else(|| D::DEFAULT_COMMAND.into()),
            timeout: config.timeout,
            models: config.models.clone(),
            supervisor: Arc::new(Supervisor::new()),
            dialect: Arc::new(dialect),
        }
    }

    /// Starts a run and hands it the request.
    async fn start(
        &self,
        model: &str,
        call: &ChatCall,
    ) -> Result<(Run, OwnedSemaphorePermit), ProviderError> {
        let prompt =
            prompt::render(&call.request, D::KIND.as_str()).map_err(ProviderError::InvalidRequest)?;
        let permit = self
            .supervisor
            .slot()
            .await
            .ok_or_else(|| self.unreachable("the pool is closed".into()))?;
        let spawn = self.dialect.spawn(&self.command, model, &prompt.system);
        let mut run = Run::start(spawn).map_err(|err| {
            self.supervisor.died();
            self.unreachable(format!("cannot start {:?}: {err}", self.command))
        })?;
        if let Err(err) = run.send(&self.dialect.request(&prompt.user)).await {
            self.supervisor.died();
            let ended = run.ended().await;
            return Err(self.unreachable(format!("cannot write the request: {err} ({ended})")));
        }
        Ok((run, permit))
    }

    fn unreachable(&self, detail: String) -> ProviderError {
        ProviderError::Connect {
            provider: self.name.clone(),
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
    fn reader(&self) -> Reader<D> {
        Reader {
            name: self.name.clone(),
            supervisor: self.supervisor.clone(),
            dialect: self.dialect.clone(),
        }
    }
}

impl<D: Dialect> Provider for CliProvider<D> {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ProviderKind {
        D::KIND
    }

    fn chat<'a>(&'a self, model: &'a str, call: &'a ChatCall) -> BoxFuture<'a, Result<Value, ProviderError>> {
        Box::pin(async move {
            let (mut run, _permit) = self.start(model, call).await?;
            let reader = self.reader();
            let answer = async {
                let mut text = String::new();
                loop {
                    match reader.next(&mut run).await {
                        Step::Text(piece) => text.push_str(&piece),
                        Step::Done { usage, finish } => return Ok((text, usage, finish)),
                        Step::Failed(err) => return Err(err),
                        Step::Skip => {}
                    }
                }
            };
            let (text, usage, finish) =
                crate::providers::within(&self.name, self.timeout, answer, |e| e).await?;
            self.supervisor.answered();
            run.finish().await;
            let completion = Completion {
                id: completion_id(),
                object: "chat.completion",
                created: unix_now(),
                model: model.to_string(),
                choices: vec![Choice {
                    index: 0,
                    message: AssistantMessage {
                        role: "assistant",
                        content: Some(text),
                        tool_calls: None,
                        refusal: None,
                    },
                    finish_reason: finish,
                    logprobs: None,
                }],
                usage,
            };
            serde_json::to_value(completion).map_err(|err| ProviderError::BadResponse {
                provider: self.name.clone(),
                detail: err.to_string(),
            })
        })
    }

    fn chat_stream<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<ChunkStream, ProviderError>> {
        Box::pin(async move {
            let (mut run, permit) = self.start(model, call).await?;
            let reader = self.reader();
            // Errors before the first word are the response's status, not a broken stream.
            let first = async { Ok(reader.next(&mut run).await) };
            let first = crate::providers::within(&self.name, self.timeout, first, |e| e).await?;
            if let Step::Failed(err) = first {
                return Err(err);
            }
            let factory = ChunkFactory::new(completion_id(), model.to_string());
            let chunks = async_stream::stream! {
                let _permit = permit;
                let role = Delta { role: Some("assistant"), content: Some(String::new()), tool_calls: None };
                yield Ok(factory.delta(role, None));
                let mut pending = Some(first);
                loop {
                    let next = match pending.take() {
                        Some(step) => step,
                        None => reader.next(&mut run).await,
                    };
                    match next {
                        Step::Text(text) => {
                            let delta = Delta { content: Some(text), ..Delta::default() };
                            yield Ok(factory.delta(delta, None));
                        }
                        Step::Done { usage, finish } => {
                            reader.supervisor.answered();
                            yield Ok(factory.delta(Delta::default(), Some(finish)));
                            // Always: the router records it and drops it for a client that did not ask.
                            yield Ok(factory.usage(usage));
                            run.finish().await;
                            return;
                        }
                        Step::Failed(err) => {
                            yield Err(err);
                            return;
                        }
                        Step::Skip => {}
                    }
                }
            };
            Ok(Box::pin(chunks) as ChunkStream)
        })
    }

    fn embeddings<'a>(
        &'a self,
        _model: &'a str,
        _call: &'a EmbeddingsCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>> {
        unsupported(&self.name, "embeddings")
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        let models = if self.models.is_empty() {
            D::MODELS.iter().map(|m| m.to_string()).collect()
        } else {
            self.models.clone()
        };
        Box::pin(async move { Ok(models) })
    }
}
