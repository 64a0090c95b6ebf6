//! Conversations kept as sessions: the log (JSONL in the object store, see
//! `log`) is the truth; the metadata in SurrealDB (`meta`) is derived from it
//! and rebuilt by `onyx reindex`; `service` keeps the two in step and parks
//! turns while the object store is down; `history` is what a new turn builds
//! on (from the latest compaction on).

mod history;
mod log;
mod meta;
pub mod recorder;
mod service;
mod types;

pub use history::{COMPACTION_ROLE, History, summary_message};
pub use log::SessionLog;
pub use meta::{decode_cursor, encode_cursor};
pub use service::{SessionError, Sessions, parse_id};
pub use types::{ListFilter, LogMessage, ReasoningEffort, SessionMeta, SessionSettings, Status};
