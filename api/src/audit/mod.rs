//! The audit log: one `audit_event` record per admin action (an API key made
//! or revoked, a UI login that succeeded or failed, a provider or alias changed),
//! read newest first through `GET /v1/audit`. Recording never fails the action
//! it records: a write that fails is logged instead. Events name who acted
//! (a key's id, never its secret; `ui` for a signed-in browser; `cli`) and
//! never carry a secret.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::storage::{Db, DbError};

/// The most events one read returns.
pub const MAX_LIMIT: usize = 1000;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    KeyCreated,
    KeyRevoked,
    LoginSucceeded,
    LoginFailed,
    ProviderChanged,
    AliasChanged,
    McpServerChanged,
    MasterKeyRotated,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::KeyCreated => "key.created",
            Self::KeyRevoked => "key.revoked",
            Self::LoginSucceeded => "login.succeeded",
            Self::LoginFailed => "login.failed",
            Self::ProviderChanged => "provider.changed",
            Self::AliasChanged => "alias.changed",
            Self::McpServerChanged => "mcp_server.changed",
            Self::MasterKeyRotated => "master_key.rotated",
        }
    }
}

/// One recorded action.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditEvent {
    pub id: String,
    /// RFC 3339 UTC.
    pub at: String,
    /// `key.created`, `key.revoked`, `login.succeeded`, `login.failed`, `provider.changed`, `alias.changed`, `mcp_server.changed`, `master_key.rotated`.
    pub action: String,
    /// Who acted: an API key's id, `ui` (a signed-in browser), `cli`, or `anonymous`.
    pub actor: String,
    /// What it was done to (a key's id, a provider's name), if anything.
    pub target: Option<String>,
    /// The client's address, when known.
    pub ip: Option<String>,
    /// More about it (a key's name and scope), never a secret.
    pub detail: Option<String>,
}

/// An event about to be recorded.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub action: Action,
    pub actor: &'a str,
    pub target: Option<&'a str>,
    pub ip: Option<String>,
    pub detail: Option<String>,
}

/// Records `event`; a failure is logged, not returned.
pub async fn record(db: &Db, event: NewEvent<'_>) {
    let id = uuid::Uuid::now_v7().hyphenated().to_string();
    let result = db
        .execute(
            "CREATE type::record('audit_event', $id) SET at = $at, action = $action, actor = $actor,
             target = $target, ip = $ip, detail = $detail",
            json!({
                "id": id, "at": crate::clock::now_stamp(), "action": event.action.as_str(),
                "actor": event.actor, "target": event.target, "ip": event.ip, "detail": event.detail,
            }),
        )
        .await;
    if let Err(err) = result {
        tracing::error!(error = %err, action = event.action.as_str(), "could not record an audit event");
    }
}

/// The latest `limit` events (at most [`MAX_LIMIT`]), newest first.
pub async fn recent(db: &Db, limit: usize) -> Result<Vec<AuditEvent>, DbError> {
    db.rows(
        "SELECT record::id(id) AS id, at, action, actor, target, ip, detail FROM audit_event
         ORDER BY at DESC, id DESC LIMIT $limit",
        json!({"limit": limit.clamp(1, MAX_LIMIT)}),
        0,
    )
    .await
}
