//! What a new turn builds on: after a compaction, the summary of everything
//! before the kept turns, then those turns and the ones since. The log keeps
//! every original turn; a compaction adds a `compaction` record to it and
//! moves where the history starts, so reading it stays bounded however long
//! the session gets.

use super::log_message::LogMessage;
use crate::providers::types::Message;

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
            .filter(|m| !m.is_compaction())
    }

    /// As chat messages for the model: the summary first (as a system note).
    pub fn to_messages(&self) -> Vec<Message> {
        self.summary
            .iter()
            .map(|summary| summary_message(summary))
            .chain(self.messages().filter_map(LogMessage::to_message))
            .collect()
    }
}

/// How a summary reaches the model.
pub fn summary_message(summary: &str) -> Message {
    Message::system(format!(
        "Summary of the earlier part of this conversation (older turns were compacted to stay within the context window):\n\n{summary}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::types::Role;

    #[test]
    fn the_summary_comes_first_and_compaction_records_are_not_sent() {
        let history = History {
            summary: Some("we planned a trip".into()),
            turns: vec![
                (
                    7,
                    vec![
                        LogMessage::plain(Role::User, "hi"),
                        LogMessage::plain(Role::Assistant, "hello"),
                    ],
                ),
                (9, vec![LogMessage::compaction("we planned a trip", 7)]),
            ],
        };
        let sent = history.to_messages();
        assert_eq!(sent.len(), 3);
        assert_eq!(sent[0].role, Role::System);
        assert!(sent[0].text_content().contains("we planned a trip"));
        assert_eq!(sent[2].text_content(), "hello");
    }
}
