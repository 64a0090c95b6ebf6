//! Installs the global tracing subscriber. `ONYX_LOG` (or `RUST_LOG`) sets the
//! filter, default [`DEFAULT_FILTER`]; the format comes from config or `ONYX_LOG_FORMAT`.
//!
//! Lines reach stderr through a bounded queue drained by a writer thread
//! (`tracing-appender`'s non-blocking writer, lossy): a slow or blocked stderr
//! (a full pipe nobody reads, a stuck log driver) costs dropped lines, counted
//! in [`dropped_lines`] and `/metrics`, never a stalled request.

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::{Layer, SubscriberExt};
use tracing_subscriber::registry::Registry;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

/// Onyx at `info`; the embedded database's own start-up chatter (about twenty
/// lines of LSM and WAL settings) only at `warn`, so `ONYX_LOG=debug` shows it.
/// The SDK's own kill of a dropped live query runs in a session with no
/// namespace and always fails (Onyx kills them itself, `storage::Db::changes`):
/// that warning is shown only at `error`, which it never is.
pub const DEFAULT_FILTER: &str = "info,surrealdb=warn,surrealkv=warn,surrealdb::method::live=error";

/// SurrealKV's store closes itself whenever any clone of its handle is
/// dropped; the clone its commit thread holds is dropped on that thread,
/// which has no async runtime, after `onyx serve` closed the store on the
/// runtime (`storage::Db::close`), and it says so at `warn`. Only that line
/// is dropped: SurrealKV's other warnings stay.
const SURREALKV_SPURIOUS: &str = "No runtime available for closing the store correctly";

/// SurrealDB's datastore, whose shutdown archives this node in the cluster
/// table: racing its own close of the engine, that write sometimes fails
/// ("The datastore is shutting down", at `error` from its instrumented
/// delete, then at `warn`) though nothing is lost: an embedded store has no
/// cluster. Only those two lines are dropped.
const SURREALDB_DATASTORE: &str = "surrealdb::core::kvs::ds";

fn archiving_at_shutdown(event: &tracing::Event<'_>) -> bool {
    let mut spurious = false;
    event.record(
        &mut |field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
            let text = format!("{value:?}");
            spurious |= match field.name() {
                "message" => text.contains("archive node during shutdown"),
                "error" => text.contains("The datastore is shutting down"),
                _ => false,
            };
        },
    );
    spurious
}

/// The SDK's WebSocket engine says at `error` that it could not hand a
/// query's answer over when the query's caller had stopped waiting: a task
/// cancelled (shutdown ends every background loop mid-query) or a request
/// that timed out. Nothing is lost; only that line is dropped.
const SURREALDB_WS: &str = "surrealdb::engine::remote::ws";

fn answer_for_a_cancelled_query(event: &tracing::Event<'_>) -> bool {
    let mut spurious = false;
    event.record(
        &mut |field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
            if field.name() == "message" {
                spurious |= format!("{value:?}").starts_with("Failed to send query results to channel");
            }
        },
    );
    spurious
}

struct SpuriousWarnings;

impl<S: tracing::Subscriber> Layer<S> for SpuriousWarnings {
    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        // SurrealKV logs through `log`: such an event's own target is `log`,
        // the crate's is its `log.target` field.
        let target = event.metadata().target();
        if target == SURREALDB_DATASTORE {
            return !archiving_at_shutdown(event);
        }
        if target == SURREALDB_WS {
            return !answer_for_a_cancelled_query(event);
        }
        if target != "log" && !target.starts_with("surrealkv") {
            return true;
        }
        let (mut from_surrealkv, mut spurious) = (target.starts_with("surrealkv"), false);
        event.record(
            &mut |field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
                let text = format!("{value:?}");
                match field.name() {
                    "message" => spurious = text == SURREALKV_SPURIOUS,
                    "log.target" => from_surrealkv = text.trim_matches('"').starts_with("surrealkv"),
                    _ => {}
                }
            },
        );
        !(from_surrealkv && spurious)
    }
}

/// The dependencies' levels a filter of `info` or quieter gets unless it names
/// them (`ONYX_LOG=info`, as compose sets it, means Onyx at info).
const DEPENDENCY_LEVELS: [(&str, &str); 3] = [
    ("surrealdb", "warn"),
    ("surrealkv", "warn"),
    ("surrealdb::method::live", "error"),
];

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

/// Colours only for a person at a terminal (and not with `NO_COLOR`): a log
/// file, `docker logs` or journald gets plain text.
fn colours() -> bool {
    std::io::stderr().is_terminal() && env("NO_COLOR").is_none()
}

/// The log filter for `spec`, as `RUST_LOG` reads it.
///
/// A filter of targets and levels alone (the default, and what people
/// usually write) becomes a static [`Targets`]. `EnvFilter` is kept for what
/// only it can do (span and field directives, `[...]`) because it tracks
/// every span: a lock on a map shared by all threads at each span's start,
/// enter, exit and close, which every request's span pays several times.
/// A spec neither can read gets [`DEFAULT_FILTER`] (a `Targets`).
fn log_filter(spec: &str) -> Box<dyn Layer<Registry> + Send + Sync> {
    let mut spec: Vec<String> = spec
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(String::from)
        .collect();
    let quiet = spec
        .iter()
        .any(|d| ["info", "warn", "error", "off"].contains(&d.to_ascii_lowercase().as_str()));
    if quiet {
        for (target, level) in DEPENDENCY_LEVELS {
            let named = spec
                .iter()
                .any(|d| d.split('=').next().is_some_and(|t| t.trim() == target));
            if !named {
                spec.push(format!("{target}={level}"));
            }
        }
    }
    let spec = spec.join(",");
    if !spec.contains('[')
        && let Ok(targets) = spec.parse::<Targets>()
    {
        return Box::new(targets);
    }
    match EnvFilter::try_new(&spec) {
        Ok(filter) => Box::new(filter),
        Err(_) => log_filter(DEFAULT_FILTER),
    }
}

pub fn init_logging(format: LogFormat) -> LogGuard {
    let filter = env("ONYX_LOG")
        .or_else(|| env("RUST_LOG"))
        .unwrap_or_else(|| DEFAULT_FILTER.into());
    let filter = log_filter(&filter);
    let format = match std::env::var("ONYX_LOG_FORMAT").as_deref() {
        Ok("json") => LogFormat::Json,
        Ok("human") => LogFormat::Human,
        _ => format,
    };
    let (writer, guard) = lossy_writer(std::io::stderr(), buffer_lines());
    let drops = writer.error_counter();
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(SpuriousWarnings)
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
                    .with_ansi(colours())
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
    use std::sync::{Arc, Mutex, mpsc};
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

    /// The messages of the events `spec` lets through, of those each test emits.
    fn passed(spec: &str) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Seen(Arc<Mutex<Vec<String>>>);
        impl<S: tracing::Subscriber> Layer<S> for Seen {
            fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
                let mut text = String::new();
                event.record(&mut |_: &tracing::field::Field, value: &dyn std::fmt::Debug| {
                    text = format!("{value:?}");
                });
                self.0.lock().unwrap().push(text);
            }
        }
        let seen = Seen::default();
        let subscriber = Registry::default().with(log_filter(spec)).with(seen.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "surrealdb::kvs", "db info");
            tracing::warn!(target: "surrealdb::kvs", "db warn");
            tracing::info!(target: "onyx::gateway", "onyx info");
            tracing::debug!(target: "onyx::gateway", "onyx debug");
            tracing::info_span!(target: "onyx::http", "request").in_scope(|| {
                tracing::debug!(target: "onyx::gateway", "debug in request");
            });
        });
        seen.0.lock().unwrap().clone()
    }

    #[test]
    fn filters_read_like_rust_log() {
        assert_eq!(passed(DEFAULT_FILTER), ["db warn", "onyx info"]);
        // Spaces around directives are ignored, as EnvFilter ignores them.
        assert_eq!(
            passed(" debug , surrealdb=error "),
            ["onyx info", "onyx debug", "debug in request"]
        );
        // A span directive (EnvFilter's): debug inside the request span only.
        assert_eq!(passed("warn,[request]=debug"), ["db warn", "debug in request"]);
        // What neither reads falls back to the default.
        assert_eq!(passed("onyx=loud[("), ["db warn", "onyx info"]);
        // A plain `info` (compose's ONYX_LOG) keeps the database quiet too,
        // unless it names the database's level itself.
        assert_eq!(passed("info"), ["db warn", "onyx info"]);
        assert_eq!(passed("info,surrealdb=info"), ["db info", "db warn", "onyx info"]);
    }

    #[test]
    fn only_the_stores_known_spurious_lines_are_dropped() {
        #[derive(Clone, Default)]
        struct Seen(Arc<Mutex<Vec<String>>>);
        impl<S: tracing::Subscriber> Layer<S> for Seen {
            fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
                let mut text = String::new();
                event.record(
                    &mut |field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
                        if field.name() == "message" {
                            text = format!("{value:?}");
                        }
                    },
                );
                self.0.lock().unwrap().push(text);
            }
        }
        let seen = Seen::default();
        let subscriber = Registry::default()
            .with(log_filter(DEFAULT_FILTER))
            .with(SpuriousWarnings)
            .with(seen.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "surrealkv::lsm", "No runtime available for closing the store correctly");
            tracing::warn!(target: "surrealkv::lsm", "Failed to clean up old WAL segments: disk full");
            tracing::warn!(target: "onyx::storage", "No runtime available for closing the store correctly");
            // SurrealDB's shutdown and cancelled-query lines, and their neighbours that stay.
            tracing::error!(target: "surrealdb::core::kvs::ds", error = "The datastore is shutting down");
            tracing::warn!(target: "surrealdb::core::kvs::ds", error = "x", "Failed to archive node during shutdown; continuing shutdown");
            tracing::error!(target: "surrealdb::core::kvs::ds", error = "disk full", "a commit failed");
            tracing::error!(target: "surrealdb::engine::remote::ws", "Failed to send query results to channel: SendError(..)");
            tracing::error!(target: "surrealdb::engine::remote::ws", "Connection lost");
        });
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                "Failed to clean up old WAL segments: disk full",
                "No runtime available for closing the store correctly",
                "a commit failed",
                "Connection lost",
            ]
        );
    }

    #[test]
    fn the_sdks_failing_live_query_kill_is_not_a_warning_at_info() {
        for spec in [DEFAULT_FILTER, "info", "warn"] {
            let subscriber = Registry::default().with(log_filter(spec));
            tracing::subscriber::with_default(subscriber, || {
                assert!(
                    !tracing::enabled!(target: "surrealdb::method::live", tracing::Level::WARN),
                    "{spec}"
                );
                assert!(
                    tracing::enabled!(target: "surrealdb::kvs", tracing::Level::WARN),
                    "{spec}"
                );
            });
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
