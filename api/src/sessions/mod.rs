//! Conversations kept as sessions: the log (JSONL in the object store, see
//! `log`) is the truth; the metadata in SurrealDB (`meta`) is derived from it
//! and rebuilt by `onyx reindex`; `service` keeps the two in step and parks
//! turns while the object store is down; `history` is what a new turn builds
//! on (from the latest compaction on); `log_message` is one line of the log
//! (a chat `Message` plus its metadata).

mod history;
mod log;
mod log_message;
mod meta;
pub mod recorder;
mod service;
mod types;

pub use history::{History, summary_message};
pub use log::SessionLog;
pub use log_message::{COMPACTION_ROLE, LineKind, LogMessage, LogMessageShape};
pub use meta::{decode_cursor, encode_cursor};
pub use service::{SessionError, Sessions, parse_id};
pub use types::{ListFilter, ReasoningEffort, SessionMeta, SessionSettings, Status};
