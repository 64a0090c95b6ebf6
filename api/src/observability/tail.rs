//! The live log tail behind `GET /v1/logs`: a tracing layer that keeps the
//! last lines in a ring and broadcasts new ones to followers. Lines carry the
//! same fields the log does (secrets are never logged in the first place).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

const KEEP: usize = 1000;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct LogLine {
    pub ts: String,
    pub level: String,
    pub target: String,
    pub message: String,
}

pub struct LogTail {
    recent: Mutex<VecDeque<LogLine>>,
    live: tokio::sync::broadcast::Sender<LogLine>,
}

/// The process's tail (one subscriber per process).
pub fn tail() -> &'static LogTail {
    static TAIL: OnceLock<LogTail> = OnceLock::new();
    TAIL.get_or_init(|| LogTail {
        recent: Mutex::new(VecDeque::with_capacity(KEEP)),
        live: tokio::sync::broadcast::channel(256).0,
    })
}

impl LogTail {
    pub fn recent(&self) -> Vec<LogLine> {
        self.recent
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn follow(&self) -> tokio::sync::broadcast::Receiver<LogLine> {
        self.live.subscribe()
    }

    fn push(&self, line: LogLine) {
        if let Ok(mut recent) = self.recent.lock() {
            if recent.len() == KEEP {
                recent.pop_front();
            }
            recent.push_back(line.clone());
        }
        let _ = self.live.send(line);
    }
}

/// Collects an event's message and fields as `message key=value …`.
#[derive(Default)]
struct Text(String);

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
            if self.0.starts_with('"') {
                self.0 = self.0.trim_matches('"').to_string();
            }
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

pub struct TailLayer;

impl<S: tracing::Subscriber> Layer<S> for TailLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut text = Text::default();
        event.record(&mut text);
        tail().push(LogLine {
            ts: crate::clock::now_stamp(),
            level: event.metadata().level().to_string().to_lowercase(),
            target: event.metadata().target().to_string(),
            message: text.0,
        });
    }
}
