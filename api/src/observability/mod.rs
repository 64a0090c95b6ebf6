//! Logs and metrics: the tracing subscriber (human or JSON) and the Prometheus
//! registry that `/metrics` renders.

mod logging;
mod metrics;

pub use logging::init_logging;
pub use metrics::Metrics;
