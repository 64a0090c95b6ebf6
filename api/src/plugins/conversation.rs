//! One incoming chat message, start to finish: the sender's access, the
//! commands (`/new`, `/status`, `/start`, `/stop`, `/compact`), routing to an agent, the
//! chat's session, typing while the agent works, and the reply split at the
//! platform's limit. Messages of one chat are answered in order; `/stop`
//! jumps the queue and cancels the chat's current run. A run waiting for an
//! approval posts Approve/Deny buttons in the chat and holds the chat's queue
//! until someone on the allowlist presses one (or the timeout denies).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use onyx_plugin_sdk::{ButtonPress, IncomingMessage, OutgoingMessage, Plugin, PressAnswer, split_message};

use super::chats::Chats;
use super::routing;
use crate::agents::approvals;
use crate::agents::{AgentDef, AgentError, Agents, LiveRun, Thread, Turn, TurnError};
use crate::config::Binding;
use crate::providers::types::Message;
use crate::sessions::{SessionError, Sessions};
use crate::storage::{DbError, StoreError};

/// Telegram shows "typing…" for about five seconds per call.
const TYPING_EVERY: Duration = Duration::from_secs(4);

/// Why a chat message got no answer. The user is told `reply`; the log gets
/// the whole chain.
#[derive(Debug, thiserror::Error)]
enum ConversationError {
    #[error("the agent {0:?} this chat is bound to does not exist")]
    UnknownAgent(String),
    #[error("the agent {0:?} is disabled")]
    Disabled(String),
    #[error(transparent)]
    Agent(#[from] Arc<AgentError>),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<TurnError> for ConversationError {
    fn from(err: TurnError) -> Self {
        match err {
            TurnError::AgentGone(id) => Self::UnknownAgent(id),
            TurnError::AgentDisabled(id) => Self::Disabled(id),
            TurnError::Workspace(err) => Self::Store(err),
            TurnError::Session(err) => Self::Session(err),
            TurnError::Storage(err) => Self::Db(err),
        }
    }
}

impl ConversationError {
    fn reply(&self) -> String {
        let what = match self {
            Self::UnknownAgent(_) | Self::Disabled(_) => self.to_string(),
            Self::Agent(err) => err.public_message(),
            Self::Session(_) | Self::Db(_) | Self::Store(_) => "storage is unavailable right now".into(),
        };
        format!("Sorry, that did not work: {what}")
    }
}

/// Who may talk to a plugin's bot: listed user ids, or everyone with `"*"`.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    users: Vec<String>,
}

impl AllowList {
    pub fn new(users: Vec<String>) -> Self {
        Self { users }
    }

    pub fn allows(&self, user_id: &str) -> bool {
        self.users.iter().any(|u| u == "*" || u == user_id)
    }
}

pub struct Conversations {
    pub agents: Arc<Agents>,
    pub sessions: Arc<Sessions>,
    pub chats: Chats,
    pub bindings: Vec<Binding>,
    pub allow: HashMap<String, AllowList>,
    /// One queue per chat, worked through by one task: a chat's messages are
    /// answered one at a time, in the order they arrived.
    chat_queues: Mutex<HashMap<String, Queue>>,
    /// The run answering each chat now, for `/stop`.
    current_runs: Mutex<HashMap<String, Arc<LiveRun>>>,
}

type Queue = tokio::sync::mpsc::UnboundedSender<(Arc<dyn Plugin>, IncomingMessage)>;

enum Command {
    New,
    Status,
    Start,
    Stop,
    Compact,
}

/// `/new`, `/status`, `/start`, `/stop` and `/compact`, also in Telegram's `/new@botname` form.
fn command(text: &str) -> Option<Command> {
    let word = text.split_whitespace().next()?;
    let word = word.split('@').next().unwrap_or(word);
    match word {
        "/new" | "/reset" => Some(Command::New),
        "/status" => Some(Command::Status),
        "/start" => Some(Command::Start),
        "/stop" => Some(Command::Stop),
        "/compact" => Some(Command::Compact),
        _ => None,
    }
}

impl Conversations {
    pub fn new(
        agents: Arc<Agents>,
        sessions: Arc<Sessions>,
        chats: Chats,
        bindings: Vec<Binding>,
        allow: HashMap<String, AllowList>,
    ) -> Self {
        Self {
            agents,
            sessions,
            chats,
            bindings,
            allow,
            chat_queues: Mutex::new(HashMap::new()),
            current_runs: Mutex::new(HashMap::new()),
        }
    }

    fn current_runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LiveRun>>> {
        self.current_runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a message behind the earlier ones of its chat; returns at once.
    /// `/stop` is not queued: it cancels what the queue is working on.
    pub fn enqueue(self: &Arc<Self>, plugin: Arc<dyn Plugin>, message: IncomingMessage) {
        let chat = format!("{}:{}", message.platform, message.chat_id);
        if matches!(command(&message.text), Some(Command::Stop)) {
            let conversations = self.clone();
            tokio::spawn(async move { conversations.stop(plugin, message, &chat).await });
            return;
        }
        let mut queues = self
            .chat_queues
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let queue = queues.entry(chat).or_insert_with(|| {
            let (queue, mut waiting) = tokio::sync::mpsc::unbounded_channel();
            let conversations = self.clone();
            tokio::spawn(async move {
                while let Some((plugin, message)) = waiting.recv().await {
                    conversations.handle(plugin, message).await;
                }
            });
            queue
        });
        let _ = queue.send((plugin, message));
    }

    /// Whether the sender may talk to the bot; a stranger is told how to get on the list.
    async fn admit(&self, plugin: &dyn Plugin, message: &IncomingMessage) -> bool {
        let platform = &message.platform;
        let allowed = self
            .allow
            .get(platform)
            .is_some_and(|a| a.allows(&message.user_id));
        if !allowed {
            tracing::info!(platform = %platform, user = %message.user_id, "refused a message from a user not on the allowlist");
            let text = format!(
                "Sorry, I only talk to people on my allowlist. Your {platform} user id is {}: ask my owner to add it to plugins.{platform}.allowFrom.",
                message.user_id
            );
            send_all(plugin, reply_to(message, text)).await;
        }
        allowed
    }

    /// An Approve/Deny button pressed in a chat: decided only for an
    /// allowlisted user. Returns what the presser is shown.
    pub async fn pressed(&self, press: &ButtonPress) -> PressAnswer {
        let answer = |text: &str, close: bool| PressAnswer {
            text: text.into(),
            close,
        };
        let allowed = self
            .allow
            .get(&press.platform)
            .is_some_and(|a| a.allows(&press.user_id));
        if !allowed {
            tracing::info!(platform = %press.platform, user = %press.user_id, "refused a button press from a user not on the allowlist");
            return answer("Sorry, only my owner can answer this.", false);
        }
        let Some((approve, id)) = approvals::parse_button(&press.data) else {
            return answer("That button does nothing.", false);
        };
        match self.agents.approvals.decide(id, approve).await {
            Ok(true) if approve => answer("Approved.", true),
            Ok(true) => answer("Denied.", true),
            Ok(false) => answer("This request was already answered or has timed out.", true),
            Err(err) => {
                tracing::warn!(approval = %id, error = %err, "could not record a decision from a chat");
                answer(
                    "Sorry, that did not work: storage is unavailable right now.",
                    false,
                )
            }
        }
    }

    /// `/stop`: cancels the run answering this chat, if one is.
    async fn stop(&self, plugin: Arc<dyn Plugin>, message: IncomingMessage, chat: &str) {
        if !self.admit(plugin.as_ref(), &message).await {
            return;
        }
        let running = self
            .current_runs()
            .get(chat)
            .filter(|run| !run.is_finished())
            .cloned();
        let text = match running {
            Some(run) => {
                run.cancel();
                "Stopped.".to_string()
            }
            None => "Nothing is running.".to_string(),
        };
        send_all(plugin.as_ref(), reply_to(&message, text)).await;
    }

    /// Answers one message; every failure ends as a message to the user (a
    /// run stopped with `/stop` says nothing more).
    async fn handle(&self, plugin: Arc<dyn Plugin>, message: IncomingMessage) {
        if !self.admit(plugin.as_ref(), &message).await {
            return;
        }
        let chat = format!("{}:{}", message.platform, message.chat_id);
        let text = match self.answer(plugin.clone(), &message, &chat).await {
            Ok(text) => text,
            Err(ConversationError::Agent(err)) if matches!(*err, AgentError::Cancelled) => return,
            Err(err) => {
                tracing::warn!(chat = %chat, error = %crate::error_chain::chain(&err), "could not answer a chat message");
                err.reply()
            }
        };
        send_all(plugin.as_ref(), reply_to(&message, text)).await;
    }

    /// The agent the chat is bound to (else the default one), enabled and
    /// its workspace seeded.
    async fn agent_for(&self, message: &IncomingMessage) -> Result<AgentDef, ConversationError> {
        Ok(match routing::route(&self.bindings, message) {
            Some(id) => self.agents.turn_agent(id).await?,
            None => {
                let agent = self.agents.registry.default_agent().await?;
                self.agents.ready_for_turn(agent).await?
            }
        })
    }

    async fn answer(
        &self,
        plugin: Arc<dyn Plugin>,
        message: &IncomingMessage,
        chat: &str,
    ) -> Result<String, ConversationError> {
        let agent = self.agent_for(message).await?;
        let platform = message.platform.as_str();
        match command(&message.text) {
            Some(Command::New) => {
                self.chats
                    .start_new(&self.sessions, chat, &agent.id, platform)
                    .await?;
                return Ok(format!("Started a new conversation with {}.", agent.name));
            }
            Some(Command::Status) => {
                let session = self
                    .chats
                    .current(&self.sessions, chat, &agent.id, platform)
                    .await?;
                return Ok(format!(
                    "Agent: {} ({})\nModel: {}\nSession: {} ({} messages)",
                    agent.name,
                    agent.id,
                    agent.model.as_deref().unwrap_or("none configured"),
                    session.id,
                    session.message_count
                ));
            }
            Some(Command::Start) => {
                return Ok(format!(
                    "Hi, I'm {}. Send me a message. /new starts a fresh conversation, /status shows where we are, /stop stops an answer under way, /compact summarizes a long conversation.",
                    agent.name
                ));
            }
            // Handled before queueing; one that gets here found nothing to stop.
            Some(Command::Stop) => return Ok("Nothing is running.".into()),
            Some(Command::Compact) => {
                let session = self
                    .chats
                    .current(&self.sessions, chat, &agent.id, platform)
                    .await?;
                return Ok(
                    match self.agents.compact_session(&session).await.map_err(Arc::new)? {
                        Some(done) => done.notice(),
                        None => "Nothing to compact yet: the conversation is still short.".into(),
                    },
                );
            }
            None => {}
        }
        let session = self
            .chats
            .current(&self.sessions, chat, &agent.id, platform)
            .await?;
        let content = if message.direct {
            message.text.clone()
        } else {
            format!(
                "{}: {}",
                message.user_name.as_deref().unwrap_or(&message.user_id),
                message.text
            )
        };
        let mut user = Message::user(content);
        user.name = Some(sanitize_name(message));
        let note = format!(
            "You are chatting on {platform}{}. Keep formatting simple (plain text, short paragraphs, code blocks).",
            if message.direct {
                " in a direct chat"
            } else {
                " in a group"
            }
        );
        let agent_id = agent.id.clone();
        let turn = Turn {
            note: Some(note),
            ..Turn::of(Thread::Open(session), user, platform)
        };
        let mut request = self.agents.open_turn(agent, turn, None).await?;
        request.ask_in = Some(chat.to_string());
        let typing = tokio::spawn({
            let chat_id = message.chat_id.clone();
            async move {
                loop {
                    if let Err(err) = plugin.typing(&chat_id).await {
                        tracing::debug!(error = %err, "typing indicator failed");
                    }
                    tokio::time::sleep(TYPING_EVERY).await;
                }
            }
        });
        let outcome = match self.agents.start_run(request).await {
            Ok(run) => {
                self.current_runs().insert(chat.to_string(), run.clone());
                let outcome = crate::agents::outcome(&run).await;
                self.current_runs().remove(chat);
                outcome
            }
            Err(err) => Err(Arc::new(err)),
        };
        typing.abort();
        let outcome = outcome?;
        let mut text = outcome.content;
        for notice in outcome.notices {
            text.push_str(&format!("\n\n({notice})"));
        }
        // Only admitted (allowlisted) users get this far.
        if let Err(err) = self.agents.last_chats.record(&agent_id, chat).await {
            tracing::warn!(chat = %chat, error = %err, "could not record where the owner talks to the agent");
        }
        Ok(if text.trim().is_empty() {
            "(no answer)".to_string()
        } else {
            text
        })
    }
}

/// A reply in the message's chat (threaded to it in groups).
fn reply_to(message: &IncomingMessage, text: String) -> OutgoingMessage {
    OutgoingMessage {
        reply_to: (!message.direct).then(|| message.message_id.clone()),
        ..OutgoingMessage::text(message.chat_id.clone(), text)
    }
}

/// OpenAI's `name` allows `[a-zA-Z0-9_-]{1,64}`.
fn sanitize_name(message: &IncomingMessage) -> String {
    let name: String = message
        .user_name
        .as_deref()
        .unwrap_or(&message.user_id)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(64)
        .collect();
    if name.is_empty() { "user".into() } else { name }
}

/// Sends a reply in as many messages as the platform's limit needs.
pub async fn send_all(plugin: &dyn Plugin, message: OutgoingMessage) {
    let parts = split_message(&message.text, plugin.max_message_chars());
    for (i, text) in parts.into_iter().enumerate() {
        let part = OutgoingMessage {
            reply_to: if i == 0 { message.reply_to.clone() } else { None },
            ..OutgoingMessage::text(message.chat_id.clone(), text)
        };
        if let Err(err) = plugin.send(part).await {
            tracing::warn!(plugin = plugin.name(), chat = %message.chat_id, error = %err, "could not send a reply");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_recognised_with_or_without_the_bot_name() {
        assert!(matches!(command("/new"), Some(Command::New)));
        assert!(matches!(command("/new@onyx_bot"), Some(Command::New)));
        assert!(matches!(command(" /status "), Some(Command::Status)));
        assert!(matches!(command("/stop@onyx_bot"), Some(Command::Stop)));
        assert!(command("tell me about /new things").is_none());
        assert!(command("/news").is_none());
    }

    #[test]
    fn the_allowlist_admits_listed_users_or_everyone_with_a_star() {
        assert!(!AllowList::default().allows("1"));
        assert!(AllowList::new(vec!["1".into()]).allows("1"));
        assert!(!AllowList::new(vec!["1".into()]).allows("2"));
        assert!(AllowList::new(vec!["*".into()]).allows("2"));
    }
}
