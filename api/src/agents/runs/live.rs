//! A run in progress on this replica: every event it has emitted, kept so a
//! client that attaches late (a reloaded tab, a second device) gets all of
//! them, then the rest as they come; and the switch that cancels it. The run
//! works in its own task, so nobody watching does not stop it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::watch;

use super::store::Renewed;
use crate::agents::run_contract::RunEvent;
use crate::lease::{Holding, Lease};

pub struct LiveRun {
    pub id: String,
    pub agent: String,
    pub session: Option<String>,
    /// The lease this replica holds on the run's row (its token fences the end).
    pub lease: Lease,
    /// Keeps the lease renewed while the run works (dropped once its end is recorded).
    holding: Mutex<Option<Holding<Renewed>>>,
    /// Set when the run starts recording its end (its lease is released then).
    ending: AtomicBool,
    events: Mutex<Vec<Arc<RunEvent>>>,
    /// How many events there are, and whether the last one has come.
    progress: watch::Sender<(usize, bool)>,
    cancel: watch::Sender<bool>,
    /// When the last event came (so the replica can forget the run later).
    finished_at: Mutex<Option<Instant>>,
}

impl LiveRun {
    pub fn new(id: String, agent: String, session: Option<String>, lease: Lease) -> Arc<Self> {
        Arc::new(Self {
            id,
            agent,
            session,
            lease,
            holding: Mutex::new(None),
            ending: AtomicBool::new(false),
            events: Mutex::new(Vec::new()),
            progress: watch::Sender::new((0, false)),
            cancel: watch::Sender::new(false),
            finished_at: Mutex::new(None),
        })
    }

    /// Keeps `holding` (the lease's renewal) until [`release`](Self::release).
    pub fn hold(&self, holding: Holding<Renewed>) {
        *self
            .holding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(holding);
    }

    /// Stops renewing the lease.
    pub fn release(&self) {
        self.holding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }

    /// The run is recording its end (which releases its lease).
    pub fn set_ending(&self) {
        self.ending.store(true, Ordering::SeqCst);
    }

    pub fn is_ending(&self) -> bool {
        self.ending.load(Ordering::SeqCst)
    }

    fn events(&self) -> std::sync::MutexGuard<'_, Vec<Arc<RunEvent>>> {
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds an event; `last` ends the run's stream.
    pub fn emit(&self, event: RunEvent, last: bool) {
        let count = {
            let mut events = self.events();
            events.push(Arc::new(event));
            events.len()
        };
        if last {
            *self
                .finished_at
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
        }
        self.progress.send_replace((count, last));
    }

    /// Whether the run ended more than `ago` ago.
    pub fn ended_before(&self, ago: Duration) -> bool {
        self.finished_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|at| at.elapsed() >= ago)
    }

    pub fn is_finished(&self) -> bool {
        self.progress.borrow().1
    }

    /// Asks the run to stop; it records what was done and ends `Cancelled`.
    pub fn cancel(&self) {
        self.cancel.send_replace(true);
    }

    /// Resolves once the run is asked to stop.
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut cancel = self.cancel.subscribe();
        async move {
            let _ = cancel.wait_for(|cancelled| *cancelled).await;
        }
    }

    /// Every event from the first, then each new one until the last.
    pub fn subscribe(self: &Arc<Self>) -> BoxStream<'static, Arc<RunEvent>> {
        let run = self.clone();
        let mut progress = self.progress.subscribe();
        async_stream::stream! {
            let mut next = 0;
            loop {
                let (count, finished) = *progress.borrow_and_update();
                let batch: Vec<Arc<RunEvent>> = run.events()[next..count].to_vec();
                next = count;
                for event in batch {
                    yield event;
                }
                if finished || progress.changed().await.is_err() {
                    break;
                }
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    fn lease() -> Lease {
        Lease {
            owner: "replica".into(),
            token: 1,
            until: "2026-11-27T09:00:00.000000Z".into(),
        }
    }

    use super::*;

    fn text(event: &RunEvent) -> &str {
        match event {
            RunEvent::Text(text) => text,
            _ => "",
        }
    }

    #[tokio::test]
    async fn a_late_subscriber_gets_every_event_then_the_rest() {
        let run = LiveRun::new("r".into(), "main".into(), None, lease());
        run.emit(RunEvent::Text("a".into()), false);
        run.emit(RunEvent::Text("b".into()), false);
        let mut late = run.subscribe();
        assert_eq!(text(&late.next().await.unwrap()), "a");
        assert_eq!(text(&late.next().await.unwrap()), "b");
        let writer = run.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            writer.emit(RunEvent::Text("c".into()), true);
        });
        assert_eq!(text(&late.next().await.unwrap()), "c");
        assert!(
            late.next().await.is_none(),
            "the stream ends after the last event"
        );
        assert!(run.is_finished());
        let again: Vec<_> = run.subscribe().collect().await;
        assert_eq!(again.len(), 3);
    }

    #[tokio::test]
    async fn cancelling_wakes_the_run() {
        let run = LiveRun::new("r".into(), "main".into(), None, lease());
        let cancelled = run.cancelled();
        run.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(1), cancelled)
            .await
            .expect("the cancel signal arrives");
    }
}
