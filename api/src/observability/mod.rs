//! Logs and metrics: the tracing subscriber (human or JSON) and the Prometheus
//! registry that `/metrics` renders, and the live tail the UI follows.

mod logging;
mod metrics;
pub mod tail;

pub use logging::init_logging;
pub use metrics::{Counters, Metrics};
