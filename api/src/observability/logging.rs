//! Installs the global tracing subscriber. `ONYX_LOG` (or `RUST_LOG`) sets the
//! filter, default [`DEFAULT_FILTER`]; the format comes from config or `ONYX_LOG_FORMAT`.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

/// Onyx at `info`; the embedded database's own start-up chatter (about twenty
/// lines of LSM and WAL settings) only at `warn`, so `ONYX_LOG=debug` shows it.
pub const DEFAULT_FILTER: &str = "info,surrealdb=warn,surrealkv=warn";

pub fn init_logging(format: LogFormat) {
    let set = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
    let filter = set("ONYX_LOG")
        .or_else(|| set("RUST_LOG"))
        .unwrap_or_else(|| DEFAULT_FILTER.into());
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let format = match std::env::var("ONYX_LOG_FORMAT").as_deref() {
        Ok("json") => LogFormat::Json,
        Ok("human") => LogFormat::Human,
        _ => format,
    };
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(super::tail::TailLayer);
    // A second init (tests, embedding) keeps the first subscriber.
    let _ = match format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Human => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_target(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
}
