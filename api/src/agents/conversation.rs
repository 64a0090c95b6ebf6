//! Where every turn starts. An HTTP chat, a chat platform's message, a
//! scheduled task, a mission step and a wake-up all come here with the
//! agent, the session they continue and the new messages; they get back the
//! `RunRequest` the runtime starts: the agent found and enabled, its
//! workspace seeded, its session opened and read, the session's settings
//! applied. What each source does with the run (stream it, wait for it,
//! deliver it) stays with the source.

use super::Agents;
use super::registry::AgentDef;
use super::run_contract::RunRequest;
use crate::config::PermissionMode;
use crate::providers::Attribution;
use crate::providers::types::{Message, Role};
use crate::sessions::{LogMessage, SessionError, SessionMeta};
use crate::storage::{DbError, StoreError};

/// Which session a turn continues.
pub enum Thread {
    /// A new session, its source named (`"task"`, `"mission"`, `"inbox"`, the HTTP client's).
    New(String),
    /// The session a stable name stands for, created on first use (an agent's main session).
    Named { name: String, source: String },
    /// A session by its id, as a client names it.
    Existing(String),
    /// A session the source already opened (a chat platform's current one).
    Open(SessionMeta),
}

/// One turn to open.
pub struct Turn {
    pub thread: Thread,
    /// Whether the model sees the session's earlier turns.
    pub history: bool,
    /// The new messages; system and developer ones are kept after the
    /// composed prompt, the rest are the turn recorded in the session.
    pub messages: Vec<Message>,
    /// A system note about the situation (who started the run, where it answers).
    pub note: Option<String>,
    /// Where the run was started (`api`, `ui`, `telegram`, `task`, `inbox`, `mission`).
    pub source: String,
    /// Who the run's model calls are for.
    pub who: Attribution,
}

impl Turn {
    /// A turn of one new message.
    pub fn of(thread: Thread, message: Message, source: &str) -> Self {
        Self {
            thread,
            history: true,
            messages: vec![message],
            note: None,
            source: source.into(),
            who: Attribution::default(),
        }
    }
}

/// Why a turn could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("agent {0:?} no longer exists")]
    AgentGone(String),
    #[error("agent {0:?} is disabled")]
    AgentDisabled(String),
    #[error("could not set up the agent's workspace: {0}")]
    Workspace(#[source] StoreError),
    #[error("could not open the session: {0}")]
    Session(#[source] SessionError),
    #[error("storage is unavailable: {0}")]
    Storage(#[from] DbError),
}

impl Agents {
    /// The enabled agent `id`, its workspace seeded: who a turn goes to.
    pub async fn turn_agent(&self, id: &str) -> Result<AgentDef, TurnError> {
        let agent = self
            .registry
            .get(id)
            .await?
            .ok_or_else(|| TurnError::AgentGone(id.to_string()))?;
        self.ready_for_turn(agent).await
    }

    /// `agent`, if enabled, with its workspace seeded (for a caller that
    /// already has the definition, such as the default agent).
    pub async fn ready_for_turn(&self, agent: AgentDef) -> Result<AgentDef, TurnError> {
        if !agent.enabled {
            return Err(TurnError::AgentDisabled(agent.id));
        }
        self.prepare(&agent).await.map_err(TurnError::Workspace)?;
        Ok(agent)
    }

    /// Opens `turn` for `agent` (from [`turn_agent`](Self::turn_agent)),
    /// its permission mode capped at `cap` when given (a wake-up runs under
    /// the stricter of the sender's and its own).
    pub async fn open_turn(
        &self,
        mut agent: AgentDef,
        turn: Turn,
        cap: Option<PermissionMode>,
    ) -> Result<RunRequest, TurnError> {
        if let Some(cap) = cap {
            agent.permission_mode = agent.permission_mode.stricter(cap);
        }
        let session = match turn.thread {
            Thread::New(source) => self.sessions.create(&agent.id, &source).await,
            Thread::Named { name, source } => self.sessions.open_named(&name, &agent.id, &source).await,
            Thread::Existing(id) => self.sessions.get(&id).await,
            Thread::Open(meta) => Ok(meta),
        }
        .map_err(TurnError::Session)?;
        let history = if turn.history {
            // An unreadable history starts the turn afresh rather than failing it.
            self.sessions.history(&session).await.unwrap_or_default()
        } else {
            Default::default()
        };
        let (mut client_system, messages): (Vec<Message>, Vec<Message>) = turn
            .messages
            .into_iter()
            .partition(|m| matches!(m.role, Role::System | Role::Developer));
        if let Some(note) = turn.note {
            client_system.insert(0, Message::system(note));
        }
        let mut request = RunRequest {
            agent,
            history,
            turn: messages.iter().cloned().map(LogMessage::new).collect(),
            messages,
            client_system,
            client_tools: Vec::new(),
            session: Some(session),
            source: turn.source,
            include_memory: false,
            ask_in: None,
            stream: false,
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            who: turn.who,
        };
        request.apply_session_settings();
        Ok(request)
    }
}
