//! Installs the global tracing subscriber. `ONYX_LOG` (or `RUST_LOG`) sets the
//! filter, default [`DEFAULT_FILTER`]; the format comes from config or `ONYX_LOG_FORMAT`.
//!
//! Lines reach stderr through a bounded queue drained by a writer thread
//! (`tracing-appender`'s non-blocking writer, lossy): a slow or blocked stderr
//! (a full pipe nobody reads, a stuck log driver) costs dropped lines, counted
//! in [`dropped_lines`] and `/metrics`, never a stalled request.

use std::sync::OnceLock;

use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

/// Onyx at `info`; the embedded database's own start-up chatter (about twenty
/// lines of LSM and WAL settings) only at `warn`, so `ONYX_LOG=debug` shows it.
pub const DEFAULT_FILTER: &str = "info,surrealdb=warn,surrealkv=warn";

/// Lines queued for stderr before new ones are dropped (`ONYX_LOG_BUFFER_LINES`).
pub const DEFAULT_BUFFER_LINES: usize = 16_384;

/// The drop counter of the process's writer (one subscriber per process).
static DROPS: OnceLock<ErrorCounter> = OnceLock::new();

/// Keeps the log writer thread; dropping it writes out what is queued (for at
/// most about a second, so a blocked stderr cannot hold up the exit).
#[must_use = "dropping the guard stops the log writer"]
pub struct LogGuard {
    _writer: Option<WorkerGuard>,
}

/// Log lines dropped so far because stderr did not keep up.
pub fn dropped_lines() -> u64 {
    DROPS.get().map_or(0, |drops| {
        u64::try_from(drops.dropped_lines()).unwrap_or(u64::MAX)
    })
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty())
}

fn buffer_lines() -> usize {
    env("ONYX_LOG_BUFFER_LINES")
        .and_then(|n| n.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_BUFFER_LINES)
}

/// A writer that queues at most `lines` lines for `out` and drops (and counts) the rest.
fn lossy_writer<W: std::io::Write + Send + 'static>(out: W, lines: usize) -> (NonBlocking, WorkerGuard) {
    NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(lines)
        .thread_name("onyx-log-writer")
        .finish(out)
}

pub fn init_logging(format: LogFormat) -> LogGuard {
    let filter = env("ONYX_LOG")
        .or_else(|| env("RUST_LOG"))
        .unwrap_or_else(|| DEFAULT_FILTER.into());
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let format = match std::env::var("ONYX_LOG_FORMAT").as_deref() {
        Ok("json") => LogFormat::Json,
        Ok("human") => LogFormat::Human,
        _ => format,
    };
    let (writer, guard) = lossy_writer(std::io::stderr(), buffer_lines());
    let drops = writer.error_counter();
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(super::tail::TailLayer);
    let installed = match format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(writer),
            )
            .try_init(),
        LogFormat::Human => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_target(false)
                    .with_writer(writer),
            )
            .try_init(),
    };
    // A second init (tests, embedding) keeps the first subscriber and its writer.
    if installed.is_err() {
        return LogGuard { _writer: None };
    }
    let _ = DROPS.set(drops);
    LogGuard { _writer: Some(guard) }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;

    /// A writer that blocks until the test lets it go, like a full pipe.
    struct Stuck(mpsc::Receiver<()>);

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.0.recv();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_blocked_writer_drops_and_counts_instead_of_blocking() {
        let (release, stuck) = mpsc::channel();
        let (mut writer, guard) = lossy_writer(Stuck(stuck), 8);
        let started = Instant::now();
        for n in 0..1000 {
            writer.write_all(format!("line {n}\n").as_bytes()).unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        let dropped = writer.error_counter().dropped_lines();
        // At most the queue and the line being written got through.
        assert!(dropped >= 1000 - 8 - 1, "dropped {dropped}");
        drop(release);
        drop(guard);
    }
}
