//! Prometheus metrics: requests by route and status, latency histograms,
//! upstream latency and errors by provider, tokens by provider and model
//! (and of the prompt tokens, those read from a provider's prompt cache), and
//! the cost of calls with a known price (`onyx_cost_usd_total`), and each
//! provider's circuit (`onyx_circuit_state`: 0 closed, 1 half-open, 2 open;
//! `onyx_circuit_openings_total`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::handles::{Handles, pair_key};

type CostCounter = Counter<f64, std::sync::atomic::AtomicU64>;

/// The series one route's requests update.
struct RequestSeries {
    requests: Counter,
    seconds: Histogram,
}

/// The series one provider's model updates, each made when first used (a
/// series that was never updated is not rendered, as before).
#[derive(Default)]
struct ModelSeries {
    prompt_tokens: std::sync::OnceLock<Counter>,
    completion_tokens: std::sync::OnceLock<Counter>,
    cached_tokens: std::sync::OnceLock<Counter>,
    cost: std::sync::OnceLock<CostCounter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabels {
    provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    provider: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    provider: String,
    model: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    provider: String,
    model: String,
}

/// `onyx_log_lines_dropped_total`: read from the log writer when rendered.
#[derive(Debug)]
struct LogLinesDropped;

impl prometheus_client::encoding::EncodeMetric for LogLinesDropped {
    fn encode(&self, mut encoder: prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<prometheus_client::encoding::NoLabelSet, u64, u64>(
            &super::logging::dropped_lines(),
            None,
        )
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Counter
    }
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 100 µs … ~13 s
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: HistogramFamily<RouteLabels>,
    upstream_seconds: HistogramFamily<ProviderLabels>,
    upstream_errors: Family<ErrorLabels, Counter>,
    tokens: Family<TokenLabels, Counter>,
    cached_tokens: Family<ModelLabels, Counter>,
    cost: Family<ModelLabels, CostCounter>,
    circuit_state: Family<ProviderLabels, Gauge>,
    circuit_openings: Family<ProviderLabels, Counter>,
    login_password_checks: Counter,
    totals: Totals,
    /// By route, method and status.
    request_series: Handles<RequestSeries>,
    /// By provider.
    upstream_series: Handles<Histogram>,
    /// By provider and model.
    model_series: Handles<ModelSeries>,
}

/// Process-wide sums for the status page (the families hold the detail).
#[derive(Default)]
struct Totals {
    requests: std::sync::atomic::AtomicU64,
    errors: std::sync::atomic::AtomicU64,
    prompt_tokens: std::sync::atomic::AtomicU64,
    completion_tokens: std::sync::atomic::AtomicU64,
    cached_tokens: std::sync::atomic::AtomicU64,
}

/// What the status page shows.
#[derive(Debug, Clone, Copy, serde::Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Counters {
    pub requests: u64,
    pub errors: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of the prompt tokens, those read from providers' prompt caches.
    pub cached_tokens: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("onyx");
        let requests = Family::<RequestLabels, Counter>::default();
        let request_seconds: HistogramFamily<RouteLabels> = Family::new_with_constructor(latency_histogram);
        let upstream_seconds: HistogramFamily<ProviderLabels> =
            Family::new_with_constructor(latency_histogram);
        let upstream_errors = Family::<ErrorLabels, Counter>::default();
        let tokens = Family::<TokenLabels, Counter>::default();
        let cached_tokens = Family::<ModelLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by route, method and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to the response head, by route",
            request_seconds.clone(),
        );
        registry.register(
            "upstream_request_duration_seconds",
            "Time until a provider answered (first byte for streams), by provider",
            upstream_seconds.clone(),
        );
        registry.register(
            "upstream_errors",
            "Failed provider calls by provider and reason",
            upstream_errors.clone(),
        );
        registry.register(
            "tokens",
            "Tokens by provider, model and kind (prompt/completion)",
            tokens.clone(),
        );
        registry.register(
            "prompt_cached_tokens",
            "Prompt tokens read from the provider's prompt cache, by provider and model (also counted in tokens)",
            cached_tokens.clone(),
        );
        let cost = Family::<ModelLabels, CostCounter>::default();
        registry.register(
            "cost_usd",
            "Cost of upstream calls in USD by provider and model (calls with a known price only)",
            cost.clone(),
        );
        registry.register(
            "log_lines_dropped",
            "Log lines dropped because stderr did not keep up (the gateway never waits for it)",
            LogLinesDropped,
        );
        let circuit_state = Family::<ProviderLabels, Gauge>::default();
        registry.register(
            "circuit_state",
            "Each provider's circuit breaker: 0 closed, 1 half-open (probing), 2 open (skipped)",
            circuit_state.clone(),
        );
        let circuit_openings = Family::<ProviderLabels, Counter>::default();
        registry.register(
            "circuit_openings",
            "Times a provider's circuit opened after consecutive failures, by provider",
            circuit_openings.clone(),
        );
        let login_password_checks = Counter::default();
        registry.register(
            "login_password_checks",
            "UI login passwords checked against the argon2id hash (throttled attempts are refused before)",
            login_password_checks.clone(),
        );
        Self {
            cost,
            circuit_state,
            circuit_openings,
            login_password_checks,
            registry,
            requests,
            request_seconds,
            upstream_seconds,
            upstream_errors,
            tokens,
            cached_tokens,
            totals: Totals::default(),
            request_series: Handles::default(),
            upstream_series: Handles::default(),
            model_series: Handles::default(),
        }
    }

    pub fn counters(&self) -> Counters {
        use std::sync::atomic::Ordering::Relaxed;
        Counters {
            requests: self.totals.requests.load(Relaxed),
            errors: self.totals.errors.load(Relaxed),
            prompt_tokens: self.totals.prompt_tokens.load(Relaxed),
            completion_tokens: self.totals.completion_tokens.load(Relaxed),
            cached_tokens: self.totals.cached_tokens.load(Relaxed),
        }
    }

    /// A login's password was checked (hashed).
    pub fn record_password_check(&self) {
        self.login_password_checks.inc();
    }

    pub fn record_request(&self, route: &str, method: &str, status: u16, seconds: f64) {
        let mut key = pair_key(route, method);
        // HTTP statuses have three digits.
        for digit in [status / 100 % 10, status / 10 % 10, status % 10] {
            key.push(char::from(b'0' + digit as u8));
        }
        let make = || RequestSeries {
            requests: self
                .requests
                .get_or_create(&RequestLabels {
                    route: route.into(),
                    method: method.into(),
                    status,
                })
                .clone(),
            seconds: self
                .request_seconds
                .get_or_create(&RouteLabels { route: route.into() })
                .clone(),
        };
        self.request_series.with(&key, make, |series| {
            series.requests.inc();
            series.seconds.observe(seconds);
        });
        self.totals
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if status >= 500 {
            self.totals
                .errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub fn record_upstream(&self, provider: &str, seconds: f64) {
        let make = || {
            self.upstream_seconds
                .get_or_create(&ProviderLabels {
                    provider: provider.into(),
                })
                .clone()
        };
        self.upstream_series
            .with(provider, make, |histogram| histogram.observe(seconds));
    }

    /// Calls `update` with the series of `provider`'s `model`.
    fn with_model(&self, provider: &str, model: &str, update: impl FnOnce(&ModelSeries)) {
        self.model_series
            .with(&pair_key(provider, model), ModelSeries::default, update);
    }

    pub fn record_upstream_error(&self, provider: &str, reason: &str) {
        let labels = ErrorLabels {
            provider: provider.into(),
            reason: reason.into(),
        };
        self.upstream_errors.get_or_create(&labels).inc();
    }

    /// A provider's circuit opened.
    pub fn record_circuit_opened(&self, provider: &str) {
        self.circuit_openings
            .get_or_create(&ProviderLabels {
                provider: provider.into(),
            })
            .inc();
    }

    /// The circuits as they are now (providers since removed drop out).
    pub fn set_circuit_states(&self, states: &[(String, i64)]) {
        self.circuit_state.clear();
        for (provider, state) in states {
            self.circuit_state
                .get_or_create(&ProviderLabels {
                    provider: provider.clone(),
                })
                .set(*state);
        }
    }

    /// The cost of one upstream call whose price is known.
    pub fn record_cost(&self, provider: &str, model: &str, usd: f64) {
        self.with_model(provider, model, |series| {
            series
                .cost
                .get_or_init(|| model_series(&self.cost, provider, model))
                .inc_by(usd);
        });
    }

    /// Tokens an upstream reports having used for one request.
    pub fn record_usage(&self, provider: &str, model: &str, prompt_tokens: u64, completion_tokens: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.totals.prompt_tokens.fetch_add(prompt_tokens, Relaxed);
        self.totals
            .completion_tokens
            .fetch_add(completion_tokens, Relaxed);
        if prompt_tokens == 0 && completion_tokens == 0 {
            return;
        }
        let tokens = |kind| {
            self.tokens
                .get_or_create(&TokenLabels {
                    provider: provider.into(),
                    model: model.into(),
                    kind,
                })
                .clone()
        };
        self.with_model(provider, model, |series| {
            if prompt_tokens > 0 {
                series
                    .prompt_tokens
                    .get_or_init(|| tokens("prompt"))
                    .inc_by(prompt_tokens);
            }
            if completion_tokens > 0 {
                series
                    .completion_tokens
                    .get_or_init(|| tokens("completion"))
                    .inc_by(completion_tokens);
            }
        });
    }

    /// Prompt tokens an upstream read from its prompt cache for one request.
    pub fn record_cached(&self, provider: &str, model: &str, cached_tokens: u64) {
        if cached_tokens == 0 {
            return;
        }
        self.totals
            .cached_tokens
            .fetch_add(cached_tokens, std::sync::atomic::Ordering::Relaxed);
        self.with_model(provider, model, |series| {
            series
                .cached_tokens
                .get_or_init(|| model_series(&self.cached_tokens, provider, model))
                .inc_by(cached_tokens);
        });
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The series of `family` for `provider`'s `model`.
fn model_series<M: Clone>(family: &Family<ModelLabels, M>, provider: &str, model: &str) -> M {
    family
        .get_or_create(&ModelLabels {
            provider: provider.into(),
            model: model.into(),
        })
        .clone()
}
