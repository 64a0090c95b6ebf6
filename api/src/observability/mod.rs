//! Logs and metrics: the tracing subscriber (human or JSON) and the Prometheus
//! registry that `/metrics` renders, the live tail the UI follows, and
//! `error_chain`, how an error and its sources are written to the log.

mod logging;
mod metrics;
pub mod tail;

pub use logging::init_logging;
pub use metrics::Metrics;

/// An error and each of its sources, `: `-separated, for the log (a source
/// whose text the previous level already ends with is not repeated).
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(next) = source {
        let part = next.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = next.source();
    }
    text
}
