//! The loop's tables in SurrealDB. Every change that must happen once across
//! replicas (claiming a step, firing a trigger, finishing a mission) is a
//! conditional update that only one writer can win; a running step is held
//! with a [`lease`](crate::lease), kept alive by the lease module's
//! [`Renewals`] while it runs.

use std::sync::Arc;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::{Value, json};

use super::model::*;
use crate::lease::{self, Lease, Leases, Renewals};
use crate::storage::{Db, DbError};

#[derive(Clone)]
pub struct MissionStore {
    db: Db,
    leases: Leases,
    /// Renews the leases of the steps running on this replica.
    renewals: Arc<Renewals<IgnoredAny>>,
}

const ACTIVE: &str = "status IN ['queued', 'running']";
/// Reactions of one status, oldest first: the reactive loop's poll, through
/// `reaction_status_created` (processed reactions pile up; pending ones are few).
const REACTIONS_BY_STATUS: &str =
    "SELECT * OMIT id FROM reaction WHERE status = $status ORDER BY created_at LIMIT $limit";
/// A target's latest reaction of a kind, through `reaction_target`.
const LAST_REACTION: &str = "SELECT created_at FROM reaction WHERE target = $target AND `type` = $kind ORDER BY created_at DESC LIMIT 1";

impl MissionStore {
    /// `leases` on their own connection ([`Db::dedicated`]), so renewals do
    /// not queue behind the replica's other queries.
    pub fn new(db: Db, leases: Leases) -> Self {
        Self {
            db,
            renewals: Renewals::new(leases.clone(), "key"),
            leases,
        }
    }

    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// The renewals of this replica's step leases (a running step holds its
    /// lease there; the loop is the app's to spawn).
    pub fn renewals(&self) -> &Arc<Renewals<IgnoredAny>> {
        &self.renewals
    }

    async fn rows<T: DeserializeOwned>(&self, sql: &str, vars: Value) -> Result<Vec<T>, DbError> {
        self.db.rows(sql, vars, 0).await
    }

    async fn write<T: DeserializeOwned>(&self, sql: &str, vars: Value) -> Result<Vec<T>, DbError> {
        self.db.rows_retrying(sql, vars, 0).await
    }

    // Proposals, missions and steps.

    pub async fn insert_proposal(&self, proposal: &Proposal) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "CREATE type::record('proposal', $p.key) CONTENT $p",
                json!({"p": proposal}),
            )
            .await
            .map(drop)
    }

    /// Rejects a pending proposal; `false` if it was no longer pending.
    pub async fn reject(&self, key: &str, reason: &str, at: &str) -> Result<bool, DbError> {
        let rows: Vec<Value> = self
            .write(
                "UPDATE type::record('proposal', $key) SET status = 'rejected', reason = $reason, decided_at = $at
                 WHERE status = 'pending' RETURN key",
                json!({"key": key, "reason": reason, "at": at}),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Accepts a pending proposal and creates its mission and steps, all or
    /// nothing; `false` if it was no longer pending.
    pub async fn accept(
        &self,
        key: &str,
        reason: &str,
        mission: &Mission,
        steps: &[Step],
    ) -> Result<bool, DbError> {
        let mut response = self
            .db
            .execute_retrying(
                "BEGIN TRANSACTION;
                 LET $accepted = (UPDATE type::record('proposal', $key)
                     SET status = 'accepted', reason = $reason, decided_at = $m.created_at, mission = $m.key
                     WHERE status = 'pending' RETURN key);
                 IF array::len($accepted) > 0 {
                     CREATE type::record('mission', $m.key) CONTENT $m;
                     FOR $s IN $steps { CREATE type::record('step', $s.key) CONTENT $s; };
                 };
                 RETURN $accepted;
                 COMMIT TRANSACTION;",
                json!({"key": key, "reason": reason, "m": mission, "steps": steps}),
            )
            .await?;
        let at = response.num_statements().saturating_sub(2);
        let accepted: Vec<Value> = Db::take_rows(&mut response, at)?;
        Ok(!accepted.is_empty())
    }

    pub async fn proposal(&self, key: &str) -> Result<Option<Proposal>, DbError> {
        let rows = self
            .rows(
                "SELECT * OMIT id FROM type::record('proposal', $key)",
                json!({"key": key}),
            )
            .await?;
        Ok(rows.into_iter().next())
    }

    pub async fn proposals(&self, status: Option<&str>, limit: usize) -> Result<Vec<Proposal>, DbError> {
        self.rows(
            "SELECT * OMIT id FROM proposal WHERE !$status OR status = $status ORDER BY created_at DESC LIMIT $limit",
            json!({"status": status, "limit": limit}),
        )
        .await
    }

    pub async fn mission(&self, key: &str) -> Result<Option<Mission>, DbError> {
        let rows = self
            .rows(
                "SELECT * OMIT id FROM type::record('mission', $key)",
                json!({"key": key}),
            )
            .await?;
        Ok(rows.into_iter().next())
    }

    pub async fn missions(
        &self,
        status: Option<&str>,
        agent: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Mission>, DbError> {
        self.rows(
            "SELECT * OMIT id FROM mission WHERE (!$status OR status = $status) AND (!$agent OR agent = $agent)
             ORDER BY created_at DESC LIMIT $limit",
            json!({"status": status, "agent": agent, "limit": limit}),
        )
        .await
    }

    pub async fn steps_of(&self, mission: &str) -> Result<Vec<Step>, DbError> {
        self.rows(
            "SELECT * OMIT id FROM step WHERE mission = $mission ORDER BY index",
            json!({"mission": mission}),
        )
        .await
    }

    pub async fn steps(
        &self,
        status: Option<&str>,
        agent: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Step>, DbError> {
        self.rows(
            "SELECT * OMIT id FROM step WHERE (!$status OR status = $status) AND (!$agent OR agent = $agent)
             ORDER BY created_at DESC LIMIT $limit",
            json!({"status": status, "agent": agent, "limit": limit}),
        )
        .await
    }

    pub async fn step(&self, key: &str) -> Result<Option<Step>, DbError> {
        let rows = self
            .rows(
                "SELECT * OMIT id FROM type::record('step', $key)",
                json!({"key": key}),
            )
            .await?;
        Ok(rows.into_iter().next())
    }

    /// Steps of `kind` created since `since` (the quota's day).
    pub async fn steps_of_kind_since(&self, kind: &str, since: &str) -> Result<u64, DbError> {
        self.count(
            "SELECT count() AS n FROM step WHERE kind = $kind AND created_at >= $since GROUP ALL",
            json!({"kind": kind, "since": since}),
        )
        .await
    }

    pub async fn active_missions(&self) -> Result<u64, DbError> {
        self.count(
            &format!("SELECT count() AS n FROM mission WHERE {ACTIVE} GROUP ALL"),
            json!({}),
        )
        .await
    }

    async fn count(&self, sql: &str, vars: Value) -> Result<u64, DbError> {
        let rows: Vec<Value> = self.rows(sql, vars).await?;
        Ok(rows.first().and_then(|r| r["n"].as_u64()).unwrap_or(0))
    }

    /// Queued steps, oldest first: candidates to claim.
    pub async fn queued_steps(&self, limit: usize) -> Result<Vec<Step>, DbError> {
        self.rows(
            "SELECT * OMIT id FROM step WHERE status = 'queued' ORDER BY created_at, index LIMIT $limit",
            json!({"limit": limit}),
        )
        .await
    }

    /// Takes a queued step for `owner` under a new lease; `None` if another
    /// replica (or an earlier claim) got it first. The conditional update is
    /// what makes it exclusive: of two replicas that both see the step queued,
    /// one writes first and the other's retry finds it running.
    pub async fn claim(&self, step: &Step, owner: &str, now: &str) -> Result<Option<Step>, DbError> {
        let _claim = self.leases.time_claim();
        let mut response = self
            .db
            .execute_retrying(
                &format!(
                    "BEGIN TRANSACTION;
                     LET $claimed = (UPDATE type::record('step', $key)
                         SET status = 'running', started_at = $now, attempts = $attempt, {claim}
                         WHERE status = 'queued' AND (attempts ?? 0) = $previous RETURN AFTER);
                     IF array::len($claimed) > 0 {{
                         CREATE type::record('step_claim', [$key, $attempt]) CONTENT {{ step: $key, attempt: $attempt, owner: $lease.owner, at: $now }};
                         UPDATE type::record('mission', $claimed[0].mission) SET status = 'running' WHERE status = 'queued';
                     }};
                     RETURN $claimed;
                     COMMIT TRANSACTION;",
                    claim = lease::CLAIM
                ),
                json!({
                    "key": step.key, "attempt": step.attempts + 1, "previous": step.attempts,
                    "lease": self.leases.offer(owner), "now": now,
                }),
            )
            .await?;
        let at = response.num_statements().saturating_sub(2);
        let claimed: Vec<Step> = Db::take_rows(&mut response, at)?;
        Ok(claimed.into_iter().next())
    }

    /// Ends a running step held under `held` (or, without a lease, by anyone:
    /// `report_step`); `false` if it was not running under that lease.
    pub async fn finish(
        &self,
        key: &str,
        held: Option<&Lease>,
        status: WorkStatus,
        output: Option<&str>,
        error: Option<&str>,
        at: &str,
    ) -> Result<bool, DbError> {
        let rows: Vec<Value> = self
            .write(
                &format!(
                    "UPDATE type::record('step', $key)
                     SET status = $status, output = $output ?? output, last_error = $error, finished_at = $at,
                         {release}
                     WHERE status = 'running' AND (!$held OR ({held})) RETURN key",
                    release = lease::RELEASE,
                    held = lease::HELD
                ),
                json!({"key": key, "held": held, "status": status, "output": output, "error": error, "at": at}),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Running steps whose lease lapsed (past its grace).
    pub async fn stale_steps(&self) -> Result<Vec<Step>, DbError> {
        let mut steps = Vec::new();
        for lapsed in self.renewals.lapsed("status = 'running'").await? {
            steps.extend(self.step(&lapsed.key).await?);
        }
        Ok(steps)
    }

    /// A running step back to the queue (another attempt) or failed: its
    /// holder's own retry (`held` current), or a reaper's (`lapsed_by`: the
    /// lease lapsed before then, [`Leases::reap_cutoff`]).
    pub async fn recover(
        &self,
        key: &str,
        held: &Lease,
        lapsed_by: Option<&str>,
        requeue: bool,
        error: &str,
        at: &str,
    ) -> Result<bool, DbError> {
        let holder = if lapsed_by.is_some() {
            lease::LAPSED
        } else {
            lease::HELD
        };
        let rows: Vec<Value> = self
            .write(
                &format!(
                    "UPDATE type::record('step', $key)
                     SET status = IF $requeue THEN 'queued' ELSE 'failed' END, last_error = $error,
                         finished_at = IF $requeue THEN NONE ELSE $at END, {release}
                     WHERE status = 'running' AND {holder} RETURN key",
                    release = lease::RELEASE
                ),
                json!({
                    "key": key, "held": held, "now": lapsed_by, "requeue": requeue, "error": error, "at": at,
                }),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Queued steps of a mission that will never run (what they wait for failed).
    pub async fn cancel_steps(&self, keys: &[String], reason: &str, at: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPDATE step SET status = 'cancelled', last_error = $reason, finished_at = $at
                 WHERE key IN $keys AND status = 'queued'",
                json!({"keys": keys, "reason": reason, "at": at}),
            )
            .await
            .map(drop)
    }

    /// Sets a mission's final status once; `false` if it already had one.
    pub async fn finalize(&self, key: &str, status: WorkStatus, at: &str) -> Result<bool, DbError> {
        let rows: Vec<Value> = self
            .write(
                &format!(
                    "UPDATE type::record('mission', $key) SET status = $status, finished_at = $at WHERE {ACTIVE} RETURN key"
                ),
                json!({"key": key, "status": status, "at": at}),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Cancels a mission and its queued steps (running ones finish).
    pub async fn cancel_mission(&self, key: &str, at: &str) -> Result<bool, DbError> {
        let cancelled = self.finalize(key, WorkStatus::Cancelled, at).await?;
        if cancelled {
            self.db
                .execute_retrying(
                    "UPDATE step SET status = 'cancelled', last_error = 'the mission was cancelled', finished_at = $at
                     WHERE mission = $key AND status = 'queued'",
                    json!({"key": key, "at": at}),
                )
                .await?;
        }
        Ok(cancelled)
    }

    // Events.

    pub async fn insert_event(&self, event: &OpsEvent) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "CREATE type::record('event', $e.key) CONTENT $e",
                json!({"e": event}),
            )
            .await
            .map(drop)
    }

    pub async fn events(
        &self,
        kind: Option<&str>,
        agent: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OpsEvent>, DbError> {
        self.rows(
            "SELECT * OMIT id FROM event
             WHERE (!$type OR `type` = $type) AND (!$agent OR agent = $agent) AND (!$after OR key > $after)
             ORDER BY key DESC LIMIT $limit",
            json!({"type": kind, "agent": agent, "after": after, "limit": limit}),
        )
        .await
    }

    // Policy: configuration as data.

    pub async fn policy(&self, key: &str) -> Result<Option<Value>, DbError> {
        let rows: Vec<Value> = self
            .rows(
                "SELECT `value` FROM type::record('policy', $key)",
                json!({"key": key}),
            )
            .await?;
        Ok(rows.into_iter().next().map(|r| r["value"].clone()))
    }

    pub async fn policies(&self) -> Result<Vec<Value>, DbError> {
        self.rows(
            "SELECT key, `value`, updated_at FROM policy ORDER BY key",
            json!({}),
        )
        .await
    }

    pub async fn set_policy(&self, key: &str, value: &Value, at: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPSERT type::record('policy', $key) CONTENT { key: $key, value: $value, updated_at: $at }",
                json!({"key": key, "value": value, "at": at}),
            )
            .await
            .map(drop)
    }

    pub async fn delete_policy(&self, key: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying("DELETE type::record('policy', $key)", json!({"key": key}))
            .await
            .map(drop)
    }

    // Triggers.

    pub async fn triggers(&self) -> Result<Vec<ReactionTrigger>, DbError> {
        self.rows("SELECT * OMIT id FROM trigger ORDER BY name", json!({}))
            .await
    }

    pub async fn trigger(&self, key: &str) -> Result<Option<ReactionTrigger>, DbError> {
        let rows = self
            .rows(
                "SELECT * OMIT id FROM type::record('trigger', $key)",
                json!({"key": key}),
            )
            .await?;
        Ok(rows.into_iter().next())
    }

    pub async fn save_trigger(&self, trigger: &ReactionTrigger) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPSERT type::record('trigger', $t.key) CONTENT $t",
                json!({"t": trigger}),
            )
            .await
            .map(drop)
    }

    /// Adds a trigger only if none has its key (the built-in ones, once).
    pub async fn seed_trigger(&self, trigger: &ReactionTrigger) -> Result<(), DbError> {
        let exists = self.trigger(&trigger.key).await?.is_some();
        if !exists {
            self.save_trigger(trigger).await?;
        }
        Ok(())
    }

    pub async fn delete_trigger(&self, key: &str) -> Result<bool, DbError> {
        let rows: Vec<Value> = self
            .write(
                "DELETE type::record('trigger', $key) RETURN BEFORE",
                json!({"key": key}),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Marks a trigger fired at `now` unless it fired after `cooled` (its
    /// cooldown): exactly one replica wins.
    pub async fn fire(&self, key: &str, now: &str, cooled: &str) -> Result<bool, DbError> {
        let rows: Vec<Value> = self
            .write(
                "UPDATE type::record('trigger', $key) SET last_fired = $now
                 WHERE enabled = true AND (!last_fired OR last_fired <= $cooled) RETURN key",
                json!({"key": key, "now": now, "cooled": cooled}),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    // Reactions.

    pub async fn insert_reaction(&self, reaction: &Reaction) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "CREATE type::record('reaction', $r.key) CONTENT $r",
                json!({"r": reaction}),
            )
            .await
            .map(drop)
    }

    /// When `target` last got a reaction of `kind` (for the matrix's cooldown).
    pub async fn last_reaction(&self, target: &str, kind: &str) -> Result<Option<String>, DbError> {
        let rows: Vec<Value> = self
            .rows(LAST_REACTION, json!({"target": target, "kind": kind}))
            .await?;
        Ok(rows
            .first()
            .and_then(|r| r["created_at"].as_str())
            .map(str::to_string))
    }

    /// The oldest `limit` reactions, of one status or all.
    pub async fn reactions(&self, status: Option<&str>, limit: usize) -> Result<Vec<Reaction>, DbError> {
        let sql = if status.is_some() {
            REACTIONS_BY_STATUS
        } else {
            "SELECT * OMIT id FROM reaction ORDER BY created_at LIMIT $limit"
        };
        self.rows(sql, json!({"status": status, "limit": limit})).await
    }

    /// Takes a pending reaction for processing; `false` if another replica did.
    pub async fn claim_reaction(&self, key: &str) -> Result<bool, DbError> {
        let rows: Vec<Value> = self
            .write(
                "UPDATE type::record('reaction', $key) SET status = 'processed' WHERE status = 'pending' RETURN key",
                json!({"key": key}),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// What a processed reaction led to.
    pub async fn settle_reaction_result(
        &self,
        key: &str,
        proposal: Option<&str>,
        note: Option<&str>,
    ) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPDATE type::record('reaction', $key) SET proposal = $proposal, note = $note",
                json!({"key": key, "proposal": proposal, "note": note}),
            )
            .await
            .map(drop)
    }

    // Trust levels and reviews.

    pub async fn trust_level(&self, agent: &str) -> Result<Option<u8>, DbError> {
        let rows: Vec<Value> = self
            .rows(
                "SELECT level FROM type::record('agent_trust', $agent)",
                json!({"agent": agent}),
            )
            .await?;
        Ok(rows
            .first()
            .and_then(|r| r["level"].as_u64())
            .and_then(|l| u8::try_from(l).ok()))
    }

    pub async fn trust_levels(&self) -> Result<Vec<Value>, DbError> {
        self.rows("SELECT agent, level, updated_at FROM agent_trust", json!({}))
            .await
    }

    /// Records a review and sets the agent's level, together.
    pub async fn insert_review(&self, review: &Review) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "BEGIN TRANSACTION;
                 CREATE type::record('agent_review', $r.key) CONTENT $r;
                 UPSERT type::record('agent_trust', $r.agent) CONTENT { agent: $r.agent, level: $r.level_after, updated_at: $r.at };
                 COMMIT TRANSACTION;",
                json!({"r": review}),
            )
            .await
            .map(drop)
    }

    pub async fn set_trust_level(&self, agent: &str, level: u8, at: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPSERT type::record('agent_trust', $agent) CONTENT { agent: $agent, level: $level, updated_at: $at }",
                json!({"agent": agent, "level": level, "at": at}),
            )
            .await
            .map(drop)
    }

    pub async fn reviews(&self, agent: &str) -> Result<Vec<Review>, DbError> {
        self.rows(
            "SELECT * OMIT id FROM agent_review WHERE agent = $agent ORDER BY at DESC",
            json!({"agent": agent}),
        )
        .await
    }

    pub async fn changes(&self, table: &str) -> Result<futures::stream::BoxStream<'static, ()>, DbError> {
        self.db.changes(table).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> MissionStore {
        store_at(crate::clock::system()).await
    }

    async fn store_at(clock: crate::clock::SharedClock) -> MissionStore {
        let config = crate::config::SurrealConfig::at("mem://", "test");
        let db = Db::connect(&config).await.unwrap();
        db.migrate().await.unwrap();
        let leases = Leases::new(db.clone(), "step", std::time::Duration::from_secs(60), clock);
        MissionStore::new(db, leases)
    }

    fn queued_step(key: &str) -> Step {
        serde_json::from_value(json!({
            "key": key, "mission": "m1", "index": 0, "kind": "research", "agent": "a",
            "input": "look it up", "status": "queued", "created_at": "2026-11-27T09:00:00.000000Z",
        }))
        .unwrap()
    }

    /// Time moves by the clock: a held step is renewed by the renewal round
    /// however long it runs; once its holder stops, it is reaped only past
    /// the half-lease grace, once, and the late holder cannot finish it.
    #[tokio::test]
    async fn a_step_lease_is_renewed_and_reaped_only_past_its_grace() {
        let clock = crate::clock::ManualClock::at(crate::clock::parse_stamp("2026-11-27T09:00:00Z").unwrap());
        let store = store_at(clock.clone()).await;
        let step = queued_step("s1");
        store
            .db
            .execute_retrying(
                "CREATE type::record('step', $s.key) CONTENT $s",
                json!({"s": step}),
            )
            .await
            .unwrap();
        let now = "2026-11-27T09:00:00.000000Z";
        let claimed = store.claim(&step, "replica-1", now).await.unwrap().unwrap();
        assert!(
            store.claim(&step, "replica-2", now).await.unwrap().is_none(),
            "taken once"
        );
        let held = claimed.lease().unwrap();
        assert_eq!((held.owner.as_str(), held.token), ("replica-1", 1));

        let holding = store.renewals().hold("s1", held.clone());
        for _ in 0..6 {
            clock.advance(std::time::Duration::from_secs(20));
            store.renewals().renew_all().await;
            assert!(store.stale_steps().await.unwrap().is_empty(), "renewed");
        }
        drop(holding);
        clock.advance(std::time::Duration::from_secs(61));
        assert!(store.stale_steps().await.unwrap().is_empty(), "within the grace");
        clock.advance(std::time::Duration::from_secs(30));
        let stale = store.stale_steps().await.unwrap();
        assert_eq!(stale.len(), 1);
        let cutoff = store.leases().reap_cutoff();
        let at = crate::clock::stamp(crate::clock::Clock::now(&*clock));
        assert!(
            store
                .recover("s1", &held, Some(&cutoff), true, "stale", &at)
                .await
                .unwrap()
        );
        assert!(
            !store
                .recover("s1", &held, Some(&cutoff), true, "stale", &at)
                .await
                .unwrap(),
            "reaped once"
        );
        assert!(
            !store
                .finish("s1", Some(&held), WorkStatus::Succeeded, Some("late"), None, &at)
                .await
                .unwrap(),
            "the late holder is fenced out"
        );
        let requeued = store.step("s1").await.unwrap().unwrap();
        assert_eq!(
            (requeued.status.clone(), requeued.attempts),
            (WorkStatus::Queued, 1)
        );
        let again = store.claim(&requeued, "replica-2", &at).await.unwrap().unwrap();
        assert_eq!(again.lease().unwrap().token, 2);
    }

    fn event(key: &str, kind: &str) -> OpsEvent {
        OpsEvent {
            key: key.into(),
            agent: "a".into(),
            kind: kind.into(),
            tags: vec!["t".into()],
            payload: json!({"x": 1}),
            at: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[tokio::test]
    async fn events_policies_and_triggers_round_trip() {
        let store = store().await;
        store.insert_event(&event("01", "mission.failed")).await.unwrap();
        store.insert_event(&event("02", "step.started")).await.unwrap();
        let all = store.events(None, None, None, 10).await.unwrap();
        assert_eq!(
            all.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
            ["02", "01"]
        );
        let failed = store
            .events(Some("mission.failed"), Some("a"), None, 10)
            .await
            .unwrap();
        assert_eq!(failed.len(), 1);
        assert_eq!(store.events(None, None, Some("01"), 10).await.unwrap().len(), 1);

        store
            .set_policy("step_quotas", &json!({"x": 2}), "now")
            .await
            .unwrap();
        assert_eq!(store.policy("step_quotas").await.unwrap(), Some(json!({"x": 2})));
        assert_eq!(store.policies().await.unwrap()[0]["value"], json!({"x": 2}));

        let trigger = ReactionTrigger {
            key: "t1".into(),
            name: "n".into(),
            condition: json!({}),
            proposal: json!({}),
            cooldown_seconds: 60,
            enabled: true,
            last_fired: None,
            builtin: false,
        };
        store.save_trigger(&trigger).await.unwrap();
        assert!(
            store
                .fire("t1", "2026-01-01T00:01:00Z", "2026-01-01T00:00:00Z")
                .await
                .unwrap()
        );
        assert!(
            !store
                .fire("t1", "2026-01-01T00:01:30Z", "2026-01-01T00:00:30Z")
                .await
                .unwrap(),
            "cooling"
        );
        assert!(
            store
                .fire("t1", "2026-01-01T00:03:00Z", "2026-01-01T00:02:00Z")
                .await
                .unwrap()
        );
        assert_eq!(store.triggers().await.unwrap().len(), 1);
    }

    /// The reactive loop polls the pending reactions every second and each
    /// event checks its target's last reaction: both read through an index,
    /// so their cost stays that of the few rows they want however many
    /// processed reactions pile up.
    #[tokio::test]
    async fn reactions_are_read_through_indexes_oldest_pending_first() {
        let store = store().await;
        for (i, status) in ["processed", "pending", "processed", "pending", "pending"]
            .iter()
            .enumerate()
        {
            let reaction: Reaction = serde_json::from_value(json!({
                "key": format!("r{i}"), "event": "e", "source_agent": "a", "target": if i < 2 { "b" } else { "c" },
                "type": "review", "status": status, "created_at": format!("2026-11-27T09:00:0{}.000000Z", 5 - i),
            }))
            .unwrap();
            store.insert_reaction(&reaction).await.unwrap();
        }
        let pending: Vec<String> = store
            .reactions(Some("pending"), 2)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.key)
            .collect();
        assert_eq!(pending, ["r4", "r3"], "the oldest pending first");
        assert_eq!(store.reactions(None, 10).await.unwrap().len(), 5);
        assert_eq!(
            store.last_reaction("b", "review").await.unwrap().as_deref(),
            Some("2026-11-27T09:00:05.000000Z")
        );

        let vars = json!({"status": "pending", "limit": 20, "target": "b", "kind": "review"});
        for sql in [REACTIONS_BY_STATUS, LAST_REACTION] {
            let plan = store.db.plan(sql, vars.clone()).await;
            assert!(
                plan.iter().any(|op| op == "IndexScan") && !plan.iter().any(|op| op == "TableScan"),
                "{sql}: {plan:?}"
            );
        }
    }
}
