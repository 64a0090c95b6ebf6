//! Approvals for dangerous tool calls in `ask` mode, kept in SurrealDB so any
//! replica can take the decision (`POST /v1/approvals/{id}`, or a button in
//! the chat the run came from) while the run that asked waits on another.
//! Unanswered requests are denied at the timeout.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::clock::now_stamp;
use crate::storage::{Db, DbError};

const POLL: Duration = Duration::from_millis(150);

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Approval {
    pub id: String,
    pub agent: String,
    pub session: Option<String>,
    pub tool: String,
    pub arguments: Value,
    pub created_at: String,
    /// `pending`, `approved`, `denied` or `expired`.
    pub status: String,
}

/// A chat button's data: `approve:<id>` or `deny:<id>`.
pub fn button_data(approve: bool, id: &str) -> String {
    format!("{}:{id}", if approve { "approve" } else { "deny" })
}

/// Reads a chat button's data back: (approve?, approval id).
pub fn parse_button(data: &str) -> Option<(bool, &str)> {
    match data.split_once(':')? {
        ("approve", id) if !id.is_empty() => Some((true, id)),
        ("deny", id) if !id.is_empty() => Some((false, id)),
        _ => None,
    }
}

impl Approval {
    /// The chat message asking for it, and its Approve / Deny buttons.
    pub fn announcement(&self, timeout: Duration) -> (String, Vec<onyx_plugin_sdk::Button>) {
        let text = format!(
            "{} wants to run {}: {}\nApprove within {} s, or it is denied.",
            self.agent,
            self.tool,
            crate::text::one_line(&self.arguments.to_string(), 500),
            timeout.as_secs()
        );
        let button = |label: &str, approve| onyx_plugin_sdk::Button {
            label: label.into(),
            data: button_data(approve, &self.id),
        };
        (text, vec![button("Approve", true), button("Deny", false)])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approved,
    Denied,
    TimedOut,
}

#[derive(Clone)]
pub struct Approvals {
    db: Db,
}

#[derive(Deserialize)]
struct StatusRow {
    status: String,
}

impl Approvals {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// Asks for approval of a call the run `run` wants to make.
    pub async fn request(
        &self,
        run: &str,
        agent: &str,
        session: Option<&str>,
        tool: &str,
        arguments: &Value,
    ) -> Result<Approval, DbError> {
        let approval = Approval {
            id: uuid::Uuid::now_v7().to_string(),
            agent: agent.into(),
            session: session.map(String::from),
            tool: tool.into(),
            arguments: arguments.clone(),
            created_at: now_stamp(),
            status: "pending".into(),
        };
        self.db
            .execute_retrying(
                "CREATE type::record('approval', $id) CONTENT {
                     key: $id, run: $run, agent: $a.agent, session: $a.session, tool: $a.tool,
                     arguments: $a.arguments, created_at: $a.created_at, status: 'pending'
                 }",
                json!({ "id": approval.id, "run": run, "a": approval }),
            )
            .await?;
        crate::notifications::Notifier::new(self.db.clone())
            .approval(agent, tool, &crate::text::one_line(&arguments.to_string(), 300))
            .await;
        Ok(approval)
    }

    /// Records a decision; `false` when there is no pending request with that id.
    pub async fn decide(&self, id: &str, approve: bool) -> Result<bool, DbError> {
        let rows: Vec<StatusRow> = self
            .db
            .rows(
                "UPDATE type::record('approval', $id) SET status = $status, decided_at = $now
                 WHERE status = 'pending' RETURN status",
                json!({"id": id, "status": if approve { "approved" } else { "denied" }, "now": now_stamp()}),
                0,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Withdraws what the run `run` still waits for (it was cancelled, failed
    /// or its replica died): nobody is left to act on an approval.
    pub async fn withdraw(&self, run: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPDATE approval SET status = 'withdrawn', decided_at = $now
                 WHERE status = 'pending' AND run = $run",
                json!({"run": run, "now": now_stamp()}),
            )
            .await?;
        Ok(())
    }

    /// Waits for the decision; a request nobody answers is denied (`expired`).
    pub async fn wait(&self, id: &str, timeout: Duration) -> Decision {
        let deadline = Instant::now() + timeout;
        loop {
            let rows: Result<Vec<StatusRow>, _> = self
                .db
                .rows(
                    "SELECT status FROM type::record('approval', $id)",
                    json!({ "id": id }),
                    0,
                )
                .await;
            match rows.ok().and_then(|r| r.into_iter().next()).map(|r| r.status) {
                Some(status) if status == "approved" => return Decision::Approved,
                Some(status) if status == "denied" => return Decision::Denied,
                _ => {}
            }
            if Instant::now() >= deadline {
                // Too late to approve now; a decision racing this is lost on purpose.
                let _ = self
                    .db
                    .execute_retrying(
                        "UPDATE type::record('approval', $id) SET status = 'expired' WHERE status = 'pending'",
                        json!({ "id": id }),
                    )
                    .await;
                return Decision::TimedOut;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    pub async fn pending(&self) -> Result<Vec<Approval>, DbError> {
        self.db
            .rows(
                "SELECT key AS id, agent, session, tool, arguments, created_at, status FROM approval
                 WHERE status = 'pending' ORDER BY created_at",
                json!({}),
                0,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn button_data_round_trips_and_rejects_anything_else() {
        let id = "0194a3c2-0000-7000-8000-000000000000";
        assert!(
            button_data(true, id).len() <= 64,
            "Telegram's callback_data limit"
        );
        assert_eq!(parse_button(&button_data(true, id)), Some((true, id)));
        assert_eq!(parse_button(&button_data(false, id)), Some((false, id)));
        assert_eq!(parse_button("approve:"), None);
        assert_eq!(parse_button("launch:x"), None);
    }
}
