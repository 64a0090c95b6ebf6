//! What a new turn builds on: after a compaction, the summary of everything
//! before the kept turns, then those turns and the ones since. The log keeps
//! every original turn; a compaction adds a `compaction` record to it and
//! moves where the history starts, so reading it stays bounded however long
//! the session gets.

use serde_json::{Value, json};

use super::types::LogMessage;

/// The role of the log record a compaction leaves (never sent to a model).
pub const COMPACTION_ROLE: &str = "compaction";

#[derive(Debug, Default, Clone)]
pub struct History {
    /// The summary of the turns before `turns`, if the session was compacted.
    pub summary: Option<String>,
    /// Whole turns (one log segment each) with their sequence numbers.
    pub turns: Vec<(u64, Vec<LogMessage>)>,
}

impl History {
    /// The turns' messages, without compaction records.
    pub fn messages(&self) -> impl Iterator<Item = &LogMessage> {
        self.turns
            .iter()
            .flat_map(|(_, messages)| messages)
            .filter(|m| m.role != COMPACTION_ROLE)
    }

    /// As OpenAI messages for the model: the summary first (as a system note).
    pub fn to_openai(&self) -> Vec<Value> {
        self.summary
            .iter()
            .map(|summary| summary_message(summary))
            .chain(self.messages().map(LogMessage::to_openai))
            .collect()
    }
}

/// How a summary reaches the model.
pub fn summary_message(summary: &str) -> Value {
    json!({"role": "system", "content": format!(
        "Summary of the earlier part of this conversation (older turns were compacted to stay within the context window):\n\n{summary}"
    )})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_comes_first_and_compaction_records_are_not_sent() {
        let history = History {
            summary: Some("we planned a trip".into()),
            turns: vec![
                (
                    7,
                    vec![
                        LogMessage::plain("user", "hi"),
                        LogMessage::plain("assistant", "hello"),
                    ],
                ),
                (9, vec![LogMessage::plain(COMPACTION_ROLE, "we planned a trip")]),
            ],
        };
        let sent = history.to_openai();
        assert_eq!(sent.len(), 3);
        assert_eq!(sent[0]["role"], "system");
        assert!(sent[0]["content"].as_str().unwrap().contains("we planned a trip"));
        assert_eq!(sent[2]["content"], "hello");
    }
}
