//! Notifications: what an agent tells the owner outside a turn they are
//! watching — `send_message` to a web session, a scheduled task's or
//! heartbeat's result with no chat bound, an approval that starts waiting.
//!
//! Items live in SurrealDB (`notification`), so a browser following one
//! replica hears what every replica published (a live query wakes the
//! follower; a slow poll covers a dropped one), and nothing is lost on a
//! restart. The table is the bounded buffer a reconnecting browser resumes
//! from with `Last-Event-ID`: the newest [`KEEP`] are kept. Ids are UUIDv7,
//! so they sort by time; a follower looks back [`LOOKBACK`] behind the newest
//! id it sent, so an item another replica committed a moment late still
//! arrives, once.
//!
//! Publishing never fails its caller: a notification that cannot be stored
//! is logged, and the message, result or approval it announces stands.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;

use crate::storage::{Db, DbError};

/// How many notifications are kept (older ones are pruned as new ones come).
pub const KEEP: usize = 500;
/// How far behind the newest id sent a follower looks for late commits.
const LOOKBACK: Duration = Duration::from_secs(5);
/// How often a follower reads even without a change signal.
const POLL: Duration = Duration::from_secs(2);
/// The most a follower reads at once.
const BATCH: usize = 200;
/// The longest text a notification carries (the session or run has the rest).
const MAX_BODY_CHARS: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum NotificationKind {
    /// `send_message` wrote into a web session.
    Message,
    /// A scheduled task's or heartbeat's result that no chat received.
    TaskResult,
    /// A tool call waits for the owner's approval.
    Approval,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Notification {
    /// UUIDv7: sorts by time; the SSE event id.
    pub id: String,
    pub kind: NotificationKind,
    pub agent: String,
    pub title: String,
    pub body: String,
    /// The UI page that shows it (`/sessions/{id}`, `/approvals`, `/tasks`).
    pub link: String,
    pub created_at: String,
    pub read: bool,
}

/// Stores and reads notifications; cheap to make from a [`Db`].
#[derive(Clone)]
pub struct Notifier {
    db: Db,
}

impl Notifier {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// The agent wrote `text` into web session `session` (`send_message`).
    pub async fn message(&self, agent: &str, session: &str, text: &str) {
        let title = format!("{agent} sent a message");
        let link = format!("/sessions/{session}");
        self.publish(NotificationKind::Message, agent, title, text, link)
            .await;
    }

    /// Task `name` of `agent` answered `text`, and no chat was bound to receive it.
    pub async fn task_result(&self, agent: &str, name: &str, text: &str) {
        let title = format!("{agent}: {name}");
        self.publish(NotificationKind::TaskResult, agent, title, text, "/tasks".into())
            .await;
    }

    /// `agent` waits for approval to run `tool` with `arguments`.
    pub async fn approval(&self, agent: &str, tool: &str, arguments: &str) {
        let title = format!("{agent} wants to run {tool}");
        self.publish(
            NotificationKind::Approval,
            agent,
            title,
            arguments,
            "/approvals".into(),
        )
        .await;
    }

    async fn publish(&self, kind: NotificationKind, agent: &str, title: String, body: &str, link: String) {
        let item = Notification {
            id: uuid::Uuid::now_v7().hyphenated().to_string(),
            kind,
            agent: agent.to_string(),
            title: crate::text::one_line(&title, 200),
            body: crate::text::ellipsize(body, MAX_BODY_CHARS),
            link,
            created_at: crate::clock::now_stamp(),
            read: false,
        };
        if let Err(err) = self.store(&item).await {
            tracing::warn!(notification = %item.id, error = %err, "could not store a notification");
        }
    }

    async fn store(&self, item: &Notification) -> Result<(), DbError> {
        let mut content = serde_json::to_value(item).map_err(|err| DbError::Decode(err.to_string()))?;
        if let Some(fields) = content.as_object_mut() {
            fields.remove("id");
        }
        self.db
            .execute(
                "CREATE type::record('notification', $id) CONTENT $n;
                 LET $cut = (SELECT VALUE id FROM notification ORDER BY id DESC LIMIT 1 START $keep)[0];
                 IF $cut { DELETE notification WHERE id <= $cut };",
                json!({"id": item.id, "n": content, "keep": KEEP}),
            )
            .await?;
        Ok(())
    }

    /// The newest `limit` (only the unread ones with `unread_only`), newest first.
    pub async fn list(&self, unread_only: bool, limit: usize) -> Result<Vec<Notification>, DbError> {
        self.db
            .rows(
                "SELECT record::id(id) AS id, kind, agent, title, body, link, created_at, read FROM notification
                 WHERE !$unread OR read = false ORDER BY id DESC LIMIT $limit",
                json!({"unread": unread_only, "limit": limit}),
                0,
            )
            .await
    }

    pub async fn unread(&self) -> Result<usize, DbError> {
        #[derive(Deserialize)]
        struct Count {
            count: usize,
        }
        let rows: Vec<Count> = self
            .db
            .rows(
                "SELECT count() AS count FROM notification WHERE read = false GROUP ALL",
                json!({}),
                0,
            )
            .await?;
        Ok(rows.first().map_or(0, |r| r.count))
    }

    /// Marks these notifications read (every one with `None`); how many
    /// changed (as far as this caller can tell: another may mark some at once).
    pub async fn mark_read(&self, ids: Option<&[String]>) -> Result<usize, DbError> {
        let before = self.unread().await?;
        self.db
            .execute(
                "UPDATE notification SET read = true
                 WHERE read = false AND ($every OR record::id(id) IN $ids) RETURN NONE",
                json!({"every": ids.is_none(), "ids": ids.unwrap_or_default()}),
            )
            .await?;
        Ok(before.saturating_sub(self.unread().await?))
    }

    /// Those after `since` (exclusive), oldest first.
    async fn after(&self, since: &str) -> Result<Vec<Notification>, DbError> {
        self.db
            .rows(
                "SELECT record::id(id) AS id, kind, agent, title, body, link, created_at, read FROM notification
                 WHERE id > type::record('notification', $since) ORDER BY id LIMIT $limit",
                json!({"since": since, "limit": BATCH}),
                0,
            )
            .await
    }

    /// Every notification published after `after` (or from now on), oldest
    /// first, as it is stored by any replica; ends when `stop` turns true.
    pub fn follow(
        &self,
        after: Option<String>,
        mut stop: watch::Receiver<bool>,
    ) -> impl Stream<Item = Notification> + Send + 'static {
        let db = self.db.clone();
        let notifier = self.clone();
        async_stream::stream! {
            // Resuming: never again what the browser had; starting: only what comes next.
            let floor = after.unwrap_or_else(|| lower_bound(&uuid::Uuid::now_v7().hyphenated().to_string(), Duration::ZERO));
            let mut sent: BTreeSet<String> = BTreeSet::new();
            let mut changes = db.changes("notification").await.ok();
            loop {
                if *stop.borrow() {
                    break;
                }
                let since = match sent.last() {
                    Some(newest) => std::cmp::max(lower_bound(newest, LOOKBACK), floor.clone()),
                    None => floor.clone(),
                };
                match notifier.after(&since).await {
                    Ok(items) => {
                        for item in items {
                            if sent.insert(item.id.clone()) {
                                yield item;
                            }
                        }
                    }
                    Err(err) => tracing::warn!(error = %err, "the notification feed could not read"),
                }
                if let Some(newest) = sent.last().cloned() {
                    let keep_from = lower_bound(&newest, LOOKBACK);
                    sent = sent.split_off(&keep_from);
                }
                let woken = {
                    let changed = async {
                        match changes.as_mut() {
                            Some(stream) => stream.next().await.is_some(),
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        alive = changed => Wake::Changed { alive },
                        () = tokio::time::sleep(POLL) => Wake::Poll,
                        _ = stop.wait_for(|stopped| *stopped) => Wake::Stop,
                    }
                };
                match woken {
                    Wake::Stop => break,
                    // The live query ended (its connection dropped): subscribe again.
                    Wake::Changed { alive: false } => changes = db.changes("notification").await.ok(),
                    Wake::Changed { alive: true } | Wake::Poll => {}
                }
            }
        }
    }
}

/// What woke a follower.
enum Wake {
    Changed { alive: bool },
    Poll,
    Stop,
}

/// The smallest UUIDv7 (hyphenated) of the moment `back` before `id`'s.
fn lower_bound(id: &str, back: Duration) -> String {
    let millis = uuid::Uuid::parse_str(id)
        .ok()
        .and_then(|u| u.get_timestamp())
        .map(|t| {
            let (secs, nanos) = t.to_unix();
            secs * 1000 + u64::from(nanos) / 1_000_000
        })
        .unwrap_or(0);
    let back = u64::try_from(back.as_millis()).unwrap_or(u64::MAX);
    uuid::Builder::from_unix_timestamp_millis(millis.saturating_sub(back), &[0; 10])
        .into_uuid()
        .hyphenated()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_bound_sorts_before_every_id_of_that_moment_and_after_older_ones() {
        let id = uuid::Uuid::now_v7().hyphenated().to_string();
        let bound = lower_bound(&id, Duration::ZERO);
        assert!(bound <= id, "{bound} {id}");
        let earlier = lower_bound(&id, Duration::from_secs(5));
        assert!(earlier < bound);
        assert!(lower_bound("not a uuid", LOOKBACK) < earlier);
    }

    #[tokio::test]
    async fn the_buffer_keeps_the_newest_and_marks_read() {
        let db = Db::scratch().await;
        let notifier = Notifier::new(db);
        for n in 0..KEEP + 3 {
            notifier.message("main", "s1", &format!("m{n}")).await;
        }
        let all = notifier.list(false, KEEP + 10).await.unwrap();
        assert_eq!(all.len(), KEEP);
        assert_eq!(all[0].body, format!("m{}", KEEP + 2), "newest first");
        assert_eq!(notifier.unread().await.unwrap(), KEEP);
        let marked = notifier.mark_read(Some(&[all[0].id.clone()])).await.unwrap();
        assert_eq!(marked, 1);
        assert_eq!(notifier.unread().await.unwrap(), KEEP - 1);
        assert_eq!(notifier.mark_read(None).await.unwrap(), KEEP - 1);
        assert_eq!(notifier.unread().await.unwrap(), 0);
        assert!(notifier.list(true, 10).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_follower_resumes_after_an_id_and_hears_new_items() {
        let db = Db::scratch().await;
        let notifier = Notifier::new(db);
        notifier.message("main", "s1", "first").await;
        notifier.message("main", "s1", "second").await;
        let first = notifier.list(false, 10).await.unwrap().pop().unwrap();
        assert_eq!(first.body, "first");
        let (stop, stopped) = watch::channel(false);
        let mut follow = Box::pin(notifier.follow(Some(first.id.clone()), stopped));
        assert_eq!(follow.next().await.unwrap().body, "second");
        notifier.approval("main", "exec", "{}").await;
        let approval = follow.next().await.unwrap();
        assert_eq!(approval.kind, NotificationKind::Approval);
        stop.send_replace(true);
        assert!(follow.next().await.is_none(), "ends at shutdown");
    }
}
