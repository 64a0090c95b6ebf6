//! The gateway's background loops (the scheduler, memory sync and catch-up,
//! the parked-turn retry, plugin supervisors, woken agents' queue): each is
//! spawned here under a name, and on shutdown all are told to stop and
//! awaited for a bounded time. A leaf module: it imports nothing from the crate.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The running loops and the signal that stops them.
pub struct Background {
    stop: watch::Sender<bool>,
    running: Mutex<Vec<(String, JoinHandle<()>)>>,
}

impl Default for Background {
    fn default() -> Self {
        Self::new()
    }
}

impl Background {
    pub fn new() -> Self {
        Self {
            stop: watch::Sender::new(false),
            running: Mutex::new(Vec::new()),
        }
    }

    /// Runs `task` until it ends or shutdown begins; then it is dropped at
    /// the point it is waiting at (each loop is safe to stop between awaits,
    /// as it is when the process exits).
    pub fn spawn(&self, name: impl Into<String>, task: impl Future<Output = ()> + Send + 'static) {
        let mut stop = self.stop.subscribe();
        let handle = tokio::spawn(async move {
            tokio::select! {
                () = task => {}
                _ = stop.wait_for(|stopped| *stopped) => {}
            }
        });
        if let Ok(mut running) = self.running.lock() {
            running.retain(|(_, handle)| !handle.is_finished());
            running.push((name.into(), handle));
        }
    }

    /// The names of the loops still running.
    pub fn running(&self) -> Vec<String> {
        self.running.lock().map_or_else(
            |_| Vec::new(),
            |running| {
                running
                    .iter()
                    .filter(|(_, handle)| !handle.is_finished())
                    .map(|(name, _)| name.clone())
                    .collect()
            },
        )
    }

    /// Stops every loop and waits up to `bound` in all for them to end; any
    /// still running then is aborted.
    pub async fn shutdown(&self, bound: Duration) {
        self.stop.send_replace(true);
        let running = self
            .running
            .lock()
            .map(|mut running| std::mem::take(&mut *running))
            .unwrap_or_default();
        let deadline = tokio::time::Instant::now() + bound;
        for (name, handle) in running {
            let abort = handle.abort_handle();
            match tokio::time::timeout_at(deadline, handle).await {
                Ok(Ok(())) => tracing::debug!(task = %name, "background task stopped"),
                Ok(Err(err)) => tracing::warn!(task = %name, error = %err, "background task failed"),
                Err(_) => {
                    tracing::warn!(task = %name, ?bound, "background task did not stop in time; aborted");
                    abort.abort();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shutdown_stops_every_loop_within_the_bound() {
        let background = Background::new();
        background.spawn("forever", std::future::pending());
        background.spawn("sleeper", async {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        background.spawn("done", async {});
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(background.running(), ["forever", "sleeper"]);
        let started = std::time::Instant::now();
        background.shutdown(Duration::from_secs(5)).await;
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(background.running().is_empty());
    }
}
