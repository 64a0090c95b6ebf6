//! Keeping a conversation within the model's context window. Before a model
//! call, when the request would fill more than the threshold (75% by
//! default) of the window, the older turns of the history are compacted:
//!
//! 1. a memory flush: one extra model turn, offered only `memory_write`,
//!    asks the agent to save what must outlive the compaction;
//! 2. the older turns (and any earlier summary) become one summary; the most
//!    recent turns, up to a quarter of the window, stay verbatim;
//! 3. the session records it (`Sessions::compacted`: the log keeps every
//!    original turn), and the run emits a notice for the user.
//!
//! Both model calls share a time limit; if it passes or summarizing fails,
//! the oldest turns are dropped instead (with a notice saying so). Nothing
//! here can hang a run or lose the log.

use super::Agents;
use super::context;
use super::error::AgentError;
use super::run_contract::{RunRequest, reply_of};
use super::tools::{self, ToolContext, ToolSpec};
use crate::chat::Completion;
use crate::providers::types::{Message, Role, ToolDef};
use crate::providers::{ModelTarget, ProviderError};
use crate::sessions::{History, LogMessage, SessionMeta};

/// The share of the window the turns kept verbatim may take.
const KEEP_SHARE: f64 = 0.25;
/// The share of the window the transcript to summarize may take.
const TRANSCRIPT_SHARE: f64 = 0.5;
/// Room left for the summary when choosing the turns to keep.
const SUMMARY_ALLOWANCE: usize = 800;
/// Model steps the memory flush may take (each may call `memory_write`).
const FLUSH_STEPS: usize = 3;

const FLUSH_PROMPT: &str = "Before the conversation is compacted: the older turns above are about to be replaced \
by a short summary. If anything in them must be remembered beyond that summary (facts about the user, \
decisions, commitments, open tasks), save it now with memory_write (a note in today's log, or a line in \
MEMORY.md for durable facts). When nothing more needs saving, answer DONE.";

const SUMMARY_PROMPT: &str = "Summarize the conversation transcript below for your own future reference: the \
user's goals and preferences, what was decided and done (with names, numbers and file paths), and what is \
still open. Write plain prose or short bullets, at most about 400 words. Answer with the summary only.";

/// What compacting did, for the notice and the record.
pub struct Compacted {
    pub before_tokens: usize,
    pub after_tokens: usize,
    /// Older turns that became the summary (or were dropped).
    pub turns: usize,
    /// The summary failed or timed out: the oldest turns were dropped instead.
    pub fallback: bool,
}

impl Compacted {
    pub fn notice(&self) -> String {
        if self.fallback {
            format!(
                "The conversation was getting too long for the model, and summarizing it did not work: the {} oldest turns were left out of what the model sees (the session log keeps them).",
                self.turns
            )
        } else {
            format!(
                "The conversation was getting too long for the model: its {} oldest turns were summarized ({} → {} tokens). The session log keeps every turn.",
                self.turns, self.before_tokens, self.after_tokens
            )
        }
    }
}

/// Where the compactable history sits in a run's messages.
pub struct Request<'a> {
    pub request: &'a RunRequest,
    /// The model's context window, in tokens.
    pub window: u32,
    pub targets: &'a [ModelTarget],
    /// The composed system prompt(s) and the client's own, before the history.
    pub prefix: &'a [Message],
    /// The history as the model gets it (converted once per compaction, not per step).
    pub past: &'a [Message],
    /// Everything after the history (the client's new messages, this run's steps).
    pub rest: &'a [Message],
    pub tool_defs: &'a [ToolDef],
    pub context: &'a ToolContext,
}

impl Agents {
    /// Compacts a session now (`POST /v1/sessions/{id}/compact`, `/compact`
    /// in a chat), whatever its size. `None`: too short to compact.
    pub async fn compact_session(&self, session: &SessionMeta) -> Result<Option<Compacted>, AgentError> {
        let agent = self
            .registry
            .get(&session.agent_id)
            .await?
            .ok_or_else(|| AgentError::UnknownAgent(session.agent_id.clone()))?;
        let (model, targets) = self.resolve_model(&agent)?;
        let mut history = self.sessions.history(session).await?;
        let context = self.tool_context(&agent).await;
        let prefix = [Message::system(format!(
            "You are the Onyx agent \"{}\".",
            agent.id
        ))];
        let request = RunRequest {
            agent,
            history: Default::default(),
            messages: Vec::new(),
            client_system: Vec::new(),
            client_tools: Vec::new(),
            turn: Vec::new(),
            session: Some(session.clone()),
            source: "api".into(),
            include_memory: false,
            stream: false,
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            ask_in: None,
            who: Default::default(),
        };
        let past = history.to_messages();
        let call = Request {
            request: &request,
            window: context::window(&model, &self.context_windows),
            targets: &targets,
            prefix: &prefix,
            past: &past,
            rest: &[],
            tool_defs: &[],
            context: &context,
        };
        Ok(self.compact_if_needed(call, &mut history, true).await)
    }

    /// Compacts `history` if the request would pass the threshold (or always,
    /// when `force`). `None`: nothing to do.
    pub(super) async fn compact_if_needed(
        &self,
        call: Request<'_>,
        history: &mut History,
        force: bool,
    ) -> Option<Compacted> {
        let window = call.window as usize;
        let settings = self.compaction;
        let limit = (window as f64 * settings.threshold) as usize;
        if !force
            && (!settings.enabled || self.request_measure(&call, call.past, context::upper_bound) <= limit)
        {
            return None;
        }
        let before = self.request_measure(&call, call.past, context::count_request);
        if !force && before <= limit {
            return None;
        }
        // What compaction cannot shrink: the system prompt, this turn, the tools.
        let fixed = self.request_measure(&call, &[], context::count_request);
        // Kept turns get at most half of what is left under the limit (and a
        // quarter of the window), so the next turns do not compact again at once.
        let room = limit.saturating_sub(fixed + SUMMARY_ALLOWANCE) / 2;
        let keep = kept_turns(history, room.min((window as f64 * KEEP_SHARE) as usize));
        let older = history.turns.len() - keep;
        if older == 0 && history.summary.is_none() {
            return None;
        }
        let kept_from = history.turns.get(older).map_or_else(
            || history.turns.last().map_or(0, |(seq, _)| seq + 1),
            |(seq, _)| *seq,
        );
        let summarized = tokio::time::timeout(settings.timeout, async {
            self.flush_memory(&call).await;
            self.summarize(&call, history, older, window).await
        })
        .await;
        let (summary, fallback) = match summarized {
            Ok(Ok(summary)) => (summary, false),
            Ok(Err(err)) => {
                tracing::warn!(agent = %call.request.agent.id, error = %err, "summarizing for compaction failed; dropping the oldest turns instead");
                (dropped_summary(history, older), true)
            }
            Err(_) => {
                tracing::warn!(agent = %call.request.agent.id, timeout = ?settings.timeout, "compaction timed out; dropping the oldest turns instead");
                (dropped_summary(history, older), true)
            }
        };
        if let Some(session) = &call.request.session
            && let Err(err) = self.sessions.compacted(session, &summary, kept_from).await
        {
            tracing::error!(session = %session.id, error = %err, "could not record the compaction; the next turn will compact again");
        }
        history.turns.drain(..older);
        history.summary = Some(summary);
        Some(Compacted {
            before_tokens: before,
            after_tokens: self.request_measure(&call, &history.to_messages(), context::count_request),
            turns: older,
            fallback,
        })
    }

    /// The whole request (prefix, history, the rest, tools) measured by
    /// `measure`: the tokenizer, or the cheap byte bound.
    fn request_measure(
        &self,
        call: &Request<'_>,
        past: &[Message],
        measure: fn(&[Message], &[ToolDef]) -> usize,
    ) -> usize {
        // Both measures are sums over messages, so the parts add up (no copy).
        measure(call.prefix, &[]) + measure(past, &[]) + measure(call.rest, call.tool_defs)
    }

    /// One extra turn, with only `memory_write`, to save what must outlive
    /// the compaction. Its failures only cost the flush.
    async fn flush_memory(&self, call: &Request<'_>) {
        // Only when the agent may write its memory at all.
        let offered = tools::offered(
            &call.request.agent,
            call.request.agent.permission_mode,
            &self.tools,
            &self.mcp,
            false,
        );
        let Some(write) = offered.iter().find(|t| t.name == tools::MEMORY_WRITE.name) else {
            return;
        };
        let tool_defs = [ToolSpec::function(write)];
        let mut messages: Vec<Message> = call.prefix.iter().chain(call.past).cloned().collect();
        messages.push(Message::user(FLUSH_PROMPT));
        for _ in 0..FLUSH_STEPS {
            let completion = match self
                .chat_once(call.request, call.targets, &messages, &tool_defs)
                .await
            {
                Ok(completion) => completion,
                Err(err) => {
                    tracing::warn!(agent = %call.request.agent.id, error = %err, "the pre-compaction memory flush failed");
                    return;
                }
            };
            let (content, calls) = reply_of(&completion);
            messages.push(Message::assistant(content, calls.clone()));
            if calls.is_empty() {
                return;
            }
            for tool_call in calls {
                let name = tool_call.function.name.as_str();
                let output = if name == tools::MEMORY_WRITE.name {
                    tools::call(call.context, name, &tool_call.arguments()).await
                } else {
                    tools::ToolOutput::error(format!("only memory_write is available now, not {name:?}"))
                };
                messages.push(Message::tool_result(tool_call.id.clone(), output.content));
            }
        }
    }

    /// The older turns (and the earlier summary) as one summary.
    async fn summarize(
        &self,
        call: &Request<'_>,
        history: &History,
        older: usize,
        window: usize,
    ) -> Result<String, ProviderError> {
        let transcript = transcript(history, older, (window as f64 * TRANSCRIPT_SHARE) as usize);
        let messages = [Message::system(SUMMARY_PROMPT), Message::user(transcript)];
        let completion = self.chat_once(call.request, call.targets, &messages, &[]).await?;
        let summary = reply_of(&completion).0.trim().to_string();
        if summary.is_empty() {
            return Err(ProviderError::InvalidRequest(
                "the model returned an empty summary".into(),
            ));
        }
        Ok(summary)
    }

    /// One non-streaming model call with the run's model and settings.
    pub(super) async fn chat_once(
        &self,
        request: &RunRequest,
        targets: &[ModelTarget],
        messages: &[Message],
        tool_defs: &[ToolDef],
    ) -> Result<Completion, ProviderError> {
        let call = request.model_call(messages, tool_defs, false)?;
        let (reply, _, _) = self.router.complete(targets, &call).await?;
        reply.into_completion()
    }
}

/// How many of the newest turns fit in `budget` tokens (whole turns only).
fn kept_turns(history: &History, budget: usize) -> usize {
    let mut used = 0;
    let mut kept = 0;
    for (_, messages) in history.turns.iter().rev() {
        let tokens: usize = messages
            .iter()
            .filter_map(LogMessage::to_message)
            .map(|m| context::count_message(&m))
            .sum();
        if used + tokens > budget {
            break;
        }
        used += tokens;
        kept += 1;
    }
    kept
}

/// The earlier summary and the `older` turns as text, newest kept when it
/// is longer than `budget` tokens (each message clipped to a paragraph).
fn transcript(history: &History, older: usize, budget: usize) -> String {
    let mut lines: Vec<String> = history.turns[..older]
        .iter()
        .flat_map(|(_, messages)| messages)
        .filter(|m| !m.is_compaction() && matches!(m.role(), Role::User | Role::Assistant | Role::Tool))
        .map(|m| format!("{}: {}", m.role_name(), crate::text::one_line(&m.text(), 1_500)))
        .filter(|line| !line.ends_with(": "))
        .collect();
    let mut used: usize = lines.iter().map(|l| context::count_text(l)).sum();
    let mut cut = 0;
    while used > budget && cut < lines.len() {
        used -= context::count_text(&lines[cut]);
        cut += 1;
    }
    lines.drain(..cut);
    let mut text = String::new();
    if let Some(summary) = &history.summary {
        text.push_str(&format!("Summary of what came before:\n{summary}\n\n"));
    }
    if cut > 0 {
        text.push_str(&format!("({cut} earlier messages are omitted.)\n"));
    }
    text.push_str("Transcript:\n");
    text.push_str(&lines.join("\n"));
    text
}

/// When no summary could be made: the earlier summary (if any), and a note
/// that turns were dropped.
fn dropped_summary(history: &History, older: usize) -> String {
    let note = format!(
        "({older} older turns were dropped from the context without a summary; the session log keeps them.)"
    );
    match &history.summary {
        Some(summary) => format!("{summary}\n\n{note}"),
        None => note,
    }
}

/// A tool result as the model sees it: clipped to a tenth of the window
/// (the log keeps it whole).
pub fn clip_tool_result(content: &str, window: u32) -> String {
    // About four characters a token.
    let cap = (window as usize * 4 / 10).max(2_000);
    super::prompt::truncate(content, cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::LogMessage;

    fn turn(seq: u64, words: usize) -> (u64, Vec<LogMessage>) {
        let text = vec!["word"; words].join(" ");
        (
            seq,
            vec![
                LogMessage::plain(Role::User, text.clone()),
                LogMessage::plain(Role::Assistant, text),
            ],
        )
    }

    #[test]
    fn the_newest_whole_turns_within_the_budget_are_kept() {
        let history = History {
            summary: None,
            turns: vec![turn(0, 100), turn(1, 100), turn(2, 100)],
        };
        // Each turn is two messages of about 100 tokens and 4 of overhead.
        assert_eq!(kept_turns(&history, 500), 2);
        assert_eq!(kept_turns(&history, 100), 0);
    }

    #[test]
    fn a_long_transcript_keeps_its_newest_messages_and_says_what_was_left_out() {
        let history = History {
            summary: Some("earlier: a trip to Lisbon".into()),
            turns: (0..50).map(|i| turn(i, 50)).collect(),
        };
        let text = transcript(&history, 50, 1_000);
        assert!(text.starts_with("Summary of what came before:\nearlier: a trip to Lisbon"));
        assert!(text.contains("earlier messages are omitted"));
        assert!(context::count_text(&text) < 1_200);
    }

    #[test]
    fn big_tool_results_are_clipped_for_the_model() {
        let big = "x".repeat(100_000);
        let clipped = clip_tool_result(&big, 8_000);
        assert!(clipped.len() < 5_000, "{}", clipped.len());
        assert!(clipped.contains("characters omitted"));
        assert_eq!(clip_tool_result("small", 8_000), "small");
    }
}
