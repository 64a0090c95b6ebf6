//! Logs and metrics: the tracing subscriber (human or JSON) and the Prometheus
//! registry that `/metrics` renders, and the live tail the UI follows.
//! Logging never blocks a request: a stderr that does not keep up loses lines,
//! counted in `onyx_log_lines_dropped_total`.

mod handles;
mod logging;
mod metrics;
pub mod tail;

pub use logging::{LogGuard, dropped_lines, init_logging};
pub use metrics::{Counters, Metrics};
