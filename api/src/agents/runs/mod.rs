//! Durable agent runs. Every run (API, UI, chat bots, tasks, wake-ups) has an
//! id and a row in SurrealDB, and works in its own task: a client that hangs
//! up does not stop it, it finishes and records its turn. Clients re-attach
//! to its events while it runs (and a few minutes after), cancel it from any
//! replica, and list past runs.
//!
//! - `store`: the `agent_run` rows, leases and the interrupted sweep
//! - `live`: this replica's runs in progress (event replay, cancel switch)
//!
//! `upkeep` keeps this replica's leases fresh with the lease module's
//! [`Renewals`] (hearing cancels asked on other replicas when it renews), and
//! marks runs whose replica died as `interrupted`, releasing their inbox
//! claims, withdrawing their approval requests and noting it in the session.

mod live;
mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use live::LiveRun;
pub use store::{AgentRun, Ending, RunFilter, RunStatus, RunStore};

use super::approvals::Approvals;
use crate::clock::SharedClock;
use crate::inbox::Inbox;
use crate::lease::{Heard, Leases};
use crate::sessions::{LogMessage, Sessions};
use crate::storage::{Db, DbError};

/// How long a finished run's events stay here for late re-attaching.
const KEEP_FINISHED: Duration = Duration::from_secs(300);
pub struct Runs {
    store: RunStore,
    live: Mutex<HashMap<String, Arc<LiveRun>>>,
    inbox: Inbox,
    sessions: Arc<Sessions>,
    approvals: Approvals,
}

impl Runs {
    /// `lease_db`: where leases are renewed and lapsed ones found (its own
    /// connection to a server, [`Db::dedicated`]).
    pub fn new(
        db: Db,
        lease_db: Db,
        lease: Duration,
        clock: SharedClock,
        inbox: Inbox,
        sessions: Arc<Sessions>,
    ) -> Arc<Self> {
        Arc::new(Self {
            approvals: Approvals::new(db.clone()),
            store: RunStore::new(db.clone(), Leases::new(lease_db, "agent_run", lease, clock)),
            live: Mutex::new(HashMap::new()),
            inbox,
            sessions,
        })
    }

    pub fn store(&self) -> &RunStore {
        &self.store
    }

    fn live_runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LiveRun>>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records the run as started on this replica and makes it live here,
    /// its lease renewed until it ends: a cancel asked elsewhere, or the lease
    /// taken back (this replica stalled past it), stops it.
    pub async fn begin(&self, record: &AgentRun, turn: &[LogMessage]) -> Result<Arc<LiveRun>, DbError> {
        let lease = self.store.start(record, turn).await?;
        let run = LiveRun::new(
            record.id.clone(),
            record.agent.clone(),
            record.session.clone(),
            lease.clone(),
        );
        let hearing = Arc::downgrade(&run);
        run.hold(self.store.renewals().hold_hearing(&record.id, lease, move |heard| {
            let Some(run) = hearing.upgrade() else { return };
            match heard {
                Heard::Renewed(renewed) if renewed.cancel_requested == Some(true) => run.cancel(),
                Heard::Renewed(_) => {}
                // Another replica took it for interrupted: its end will not be recorded twice.
                Heard::Lost if !run.is_ending() => {
                    tracing::info!(run = %run.id, "a run's lease was taken back while it ran; stopping it");
                    run.cancel();
                }
                Heard::Lost => {}
            }
        }));
        self.live_runs().insert(record.id.clone(), run.clone());
        Ok(run)
    }

    /// Records how the run ended (its lease renewed until the record is
    /// written); its events stay for late re-attaching a while (the sweep
    /// forgets it after `KEEP_FINISHED`).
    pub async fn end(&self, run: &LiveRun, ending: &Ending<'_>) {
        run.set_ending();
        match self.store.finish(&run.id, &run.lease, ending).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(run = %run.id, "the run ended after another replica marked it interrupted")
            }
            Err(err) => tracing::error!(run = %run.id, error = %err, "could not record how the run ended"),
        }
        run.release();
    }

    /// A run in progress (or recently ended) on this replica.
    pub fn live(&self, id: &str) -> Option<Arc<LiveRun>> {
        self.live_runs().get(id).cloned()
    }

    /// The run in progress on this replica for `session`, if any.
    pub fn running_in(&self, session: &str) -> Option<Arc<LiveRun>> {
        self.live_runs()
            .values()
            .find(|run| run.session.as_deref() == Some(session) && !run.is_finished())
            .cloned()
    }

    /// Cancels a running run here, or asks the replica running it (it hears
    /// within a second). `None`: no such run.
    pub async fn cancel(&self, id: &str) -> Result<Option<AgentRun>, DbError> {
        match self.live(id) {
            Some(run) if !run.is_finished() => run.cancel(),
            _ => {
                self.store.request_cancel(id).await?;
            }
        }
        self.store.get(id).await
    }

    /// Renews this replica's leases (the lease module's loop) and, in a loop
    /// of its own, sweeps expired ones (a future for the app's `Background`;
    /// it ends when `Runs` is dropped). The two never wait on each other: a
    /// sweep slowed by a busy store must not delay the renewals that keep this
    /// replica's own runs from being taken for interrupted.
    pub fn upkeep(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let renewals = self.store.renewals().run();
        let sweep_every = (self.store.leases().term() / 3).max(self.store.renewals().interval());
        let sweeping = Arc::downgrade(self);
        let sweeps = async move {
            loop {
                let Some(runs) = sweeping.upgrade() else { return };
                runs.forget_finished();
                runs.sweep().await;
                drop(runs);
                tokio::time::sleep(sweep_every).await;
            }
        };
        async move {
            tokio::join!(renewals, sweeps);
        }
    }

    /// Forgets runs that ended more than `KEEP_FINISHED` ago.
    fn forget_finished(&self) {
        self.live_runs().retain(|_, run| !run.ended_before(KEEP_FINISHED));
    }

    /// Runs whose replica died: interrupted, their inbox claims handed back,
    /// and their sessions told.
    pub async fn sweep(&self) {
        let orphans = match self.store.interrupt_expired().await {
            Ok(orphans) => orphans,
            Err(err) => {
                tracing::debug!(error = %err, "could not look for interrupted runs");
                return;
            }
        };
        for orphan in orphans {
            tracing::warn!(run = %orphan.id, agent = %orphan.agent, "an agent run's replica stopped mid-run; marked interrupted");
            if let Err(err) = self.inbox.release(&orphan.id).await {
                tracing::warn!(run = %orphan.id, error = %err, "could not hand back an interrupted run's inbox messages");
            }
            if let Err(err) = self.approvals.withdraw(&orphan.id).await {
                tracing::warn!(run = %orphan.id, error = %err, "could not withdraw an interrupted run's approval requests");
            }
            let Some(session) = &orphan.session else { continue };
            let Ok(session) = self.sessions.get(session).await else {
                continue;
            };
            let mut turn = orphan.turn;
            let note = LogMessage::plain(
                crate::providers::types::Role::Assistant,
                "(interrupted: the server working on this answer stopped before it finished)",
            );
            turn.push(note.aborted());
            if let Err(err) = self.sessions.append(&session, turn).await {
                tracing::warn!(run = %orphan.id, error = %err, "could not note the interrupted run in its session");
            }
        }
    }
}
