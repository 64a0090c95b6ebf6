//! One line of a session log: the chat [`Message`] as the conversation had
//! it (the same type clients send, the agent loop builds and providers
//! answer), plus what the log knows about it: when, which model wrote it,
//! the tokens it cost, whether it was cut short. A compaction record is a
//! line too (role `compaction`, the summary as its content), never sent to
//! a model.
//!
//! The JSONL line is the message's own JSON with the metadata beside it, in
//! the order the log has always written (`ts`, `role`, `content`, `name`,
//! `tool_calls`, `tool_call_id`, the message's other fields, `model`,
//! `usage`, `aborted`, `kept_from`); `content` is always written (`null`
//! when there is none). Reading is lossless for every line the log has
//! written: a stored `content`, `tool_calls` or `usage` that the types would
//! not write back the same (content parts Onyx refuses today, a tool call
//! without its `type`…) stays in the message's `extra` under its own name
//! and is written back as it came, and fields nobody models are kept.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::chat::{Content, ContentPart, Message, Role, ToolCall, Usage};
use crate::clock::now_stamp;

/// The role a compaction record has in the log.
pub const COMPACTION_ROLE: &str = "compaction";

/// The keys a line writes itself; a message's `extra` never supplies them
/// (a client's message cannot pose as the log's metadata).
const LINE_FIELDS: [&str; 10] = [
    "ts",
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "model",
    "usage",
    "aborted",
    "kept_from",
];

/// What a log line records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// A message of the conversation.
    Message,
    /// A compaction: its message is the summary (as a system note), and
    /// `kept_from` where the history restarts.
    Compaction,
}

/// One message of a session log, as a JSONL line.
#[derive(Debug, Clone, PartialEq)]
pub struct LogMessage {
    /// RFC 3339 UTC.
    pub ts: String,
    pub kind: LineKind,
    pub message: Message,
    /// The model that wrote an assistant message.
    pub model: Option<String>,
    /// The usage of the model call that made the message.
    pub usage: Option<Usage>,
    /// Set on an assistant message cut short (the client went away, the run
    /// was cancelled or interrupted).
    pub aborted: bool,
    /// On a compaction record: the log segment the history restarts at (so
    /// a reindex restores where the history starts). Older records lack it.
    pub kept_from: Option<u64>,
}

impl LogMessage {
    /// `message` as a log line, stamped now.
    pub fn new(mut message: Message) -> Self {
        message
            .extra
            .retain(|key, _| !LINE_FIELDS.contains(&key.as_str()));
        Self {
            ts: now_stamp(),
            kind: LineKind::Message,
            message,
            model: None,
            usage: None,
            aborted: false,
            kept_from: None,
        }
    }

    /// A message with plain text content, stamped now.
    pub fn plain(role: Role, text: impl Into<String>) -> Self {
        Self::new(Message::text(role, text))
    }

    /// The record of a compaction, stamped now.
    pub fn compaction(summary: &str, kept_from: u64) -> Self {
        Self {
            kind: LineKind::Compaction,
            kept_from: Some(kept_from),
            ..Self::new(Message::system(summary))
        }
    }

    /// The message with the model that wrote it.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The message with the usage of the model call that made it.
    pub fn with_usage(mut self, usage: Option<Usage>) -> Self {
        self.usage = usage;
        self
    }

    /// The message marked as cut short.
    pub fn aborted(mut self) -> Self {
        self.aborted = true;
        self
    }

    pub fn is_compaction(&self) -> bool {
        self.kind == LineKind::Compaction
    }

    /// The message as it is replayed to a model (`None` for records that are
    /// not messages, such as compactions). Only the modelled fields go: what
    /// else it had stays in the log (upstreams refuse fields they do not
    /// know, and DeepSeek refuses its own `reasoning_content`); content kept
    /// as stored, in a shape no longer read, replays as its text.
    pub fn to_message(&self) -> Option<Message> {
        if self.is_compaction() {
            return None;
        }
        let content = match (&self.message.content, self.message.extra.get("content")) {
            (None, Some(stored)) => Some(Content::Text(crate::text::content_text(stored))),
            (content, _) => content.clone(),
        };
        Some(Message {
            content,
            extra: Map::new(),
            ..self.message.clone()
        })
    }

    pub fn role(&self) -> Role {
        self.message.role
    }

    /// The role as the log writes it (`compaction` for a compaction record).
    pub fn role_name(&self) -> &'static str {
        match self.kind {
            LineKind::Message => self.message.role.as_str(),
            LineKind::Compaction => COMPACTION_ROLE,
        }
    }

    /// The text of the content: string content, or the text of the parts
    /// joined by spaces (content kept as stored too).
    pub fn text(&self) -> String {
        match (&self.message.content, self.message.extra.get("content")) {
            (Some(Content::Text(text)), _) => text.clone(),
            (Some(Content::Parts(parts)), _) => parts
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Other(value) => value["text"].as_str(),
                    part => part.text(),
                })
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(stored)) => crate::text::content_text(stored),
            (None, None) => String::new(),
        }
    }

    /// The ids of the tool calls the message made.
    pub fn tool_call_ids(&self) -> impl Iterator<Item = &str> {
        self.message
            .tool_calls
            .iter()
            .flatten()
            .map(|call| call.id.as_str())
    }

    pub fn tokens(&self) -> u64 {
        self.counted_usage().map_or(0, |u| u.total_tokens)
    }

    /// Prompt tokens the provider read from its prompt cache
    /// (`usage.prompt_tokens_details.cached_tokens`).
    pub fn cached_tokens(&self) -> u64 {
        self.counted_usage().map_or(0, |u| u.cached_tokens())
    }

    /// The usage to count: the typed one, or the one kept as stored read
    /// leniently (a count sent as a float still counts).
    fn counted_usage(&self) -> Option<std::borrow::Cow<'_, Usage>> {
        match (&self.usage, self.message.extra.get("usage")) {
            (Some(usage), _) => Some(std::borrow::Cow::Borrowed(usage)),
            (None, Some(stored)) => Usage::deserialize(stored).ok().map(std::borrow::Cow::Owned),
            (None, None) => None,
        }
    }
}

/// A modelled field as written: typed, or as it was stored.
#[derive(Serialize)]
#[serde(untagged)]
enum Field<'a, T> {
    Typed(T),
    Stored(&'a Value),
}

impl<'a, T> Field<'a, Option<T>> {
    /// `typed`, else what `extra` kept under `key`, else nothing (`None`).
    fn of(typed: Option<T>, extra: &'a Map<String, Value>, key: &str) -> Option<Self> {
        match (typed, extra.get(key)) {
            (Some(typed), _) => Some(Self::Typed(Some(typed))),
            (None, Some(stored)) => Some(Self::Stored(stored)),
            (None, None) => None,
        }
    }
}

/// The message's fields nobody models (its `extra` less the line's own).
struct Unmodelled<'a>(&'a Map<String, Value>);

impl Serialize for Unmodelled<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            self.0
                .iter()
                .filter(|(key, _)| !LINE_FIELDS.contains(&key.as_str())),
        )
    }
}

/// The JSONL line, in the order the log has always written it.
#[derive(Serialize)]
struct Line<'a> {
    ts: &'a str,
    role: &'a str,
    content: Field<'a, Option<&'a Content>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Field<'a, Option<&'a Vec<ToolCall>>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a String>,
    #[serde(flatten)]
    unmodelled: Unmodelled<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Field<'a, Option<&'a Usage>>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    aborted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    kept_from: Option<u64>,
}

impl Serialize for LogMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let message = &self.message;
        let extra = &message.extra;
        Line {
            ts: &self.ts,
            role: self.role_name(),
            // Always written: `null` when there is none.
            content: Field::of(message.content.as_ref(), extra, "content").unwrap_or(Field::Typed(None)),
            name: message.name.as_ref(),
            tool_calls: Field::of(message.tool_calls.as_ref(), extra, "tool_calls"),
            tool_call_id: message.tool_call_id.as_ref(),
            unmodelled: Unmodelled(extra),
            model: self.model.as_ref(),
            usage: Field::of(self.usage.as_ref(), extra, "usage"),
            aborted: self.aborted,
            kept_from: self.kept_from,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for LogMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut line = Map::<String, Value>::deserialize(deserializer)?;
        let ts: String = take(&mut line, "ts")?.ok_or_else(|| D::Error::missing_field("ts"))?;
        let role: String = take(&mut line, "role")?.ok_or_else(|| D::Error::missing_field("role"))?;
        let (kind, role) = match role.as_str() {
            COMPACTION_ROLE => (LineKind::Compaction, Role::System),
            other => (
                LineKind::Message,
                Role::parse(other).ok_or_else(|| D::Error::custom(format!("unknown role `{other}`")))?,
            ),
        };
        let model = take(&mut line, "model")?;
        let aborted = take(&mut line, "aborted")?.unwrap_or(false);
        let kept_from = take(&mut line, "kept_from")?;
        let name = take(&mut line, "name")?;
        let tool_call_id = take(&mut line, "tool_call_id")?;
        let content = take_exact::<Content>(&mut line, "content");
        let tool_calls = take_exact::<Vec<ToolCall>>(&mut line, "tool_calls");
        let usage = take_exact::<Usage>(&mut line, "usage");
        Ok(Self {
            ts,
            kind,
            message: Message {
                role,
                content,
                name,
                tool_calls,
                tool_call_id,
                extra: line,
            },
            model,
            usage,
            aborted,
            kept_from,
        })
    }
}

/// Takes `key` out of `line` as a `T` (`null` or absent: `None`); a value
/// of another type refuses the line, as the log always has.
fn take<T: serde::de::DeserializeOwned, E: serde::de::Error>(
    line: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<T>, E> {
    match line.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|err| E::custom(format!("`{key}`: {err}"))),
    }
}

/// Takes `key` out of `line` as a `T` if the `T` writes back exactly what
/// is stored (`null` or absent: `None`); otherwise the value stays in
/// `line`, to be kept as it came.
fn take_exact<T: serde::de::DeserializeOwned + Serialize>(
    line: &mut Map<String, Value>,
    key: &str,
) -> Option<T> {
    let stored = line.get(key)?;
    if stored.is_null() {
        line.remove(key);
        return None;
    }
    let typed = T::deserialize(stored).ok()?;
    if serde_json::to_value(&typed).ok().as_ref() != Some(stored) {
        return None;
    }
    line.remove(key);
    Some(typed)
}

// The line's JSON shape, as the API documents it (`LogMessage`'s schema) and
// the UI's types read it (`SessionDetail`'s messages).
/// One message of a session log, as a JSONL line.
#[derive(schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "LogMessage"))]
#[schemars(rename = "LogMessage")]
#[expect(dead_code, reason = "describes the JSON; never built")]
pub struct LogMessageShape {
    /// RFC 3339 UTC.
    ts: String,
    role: String,
    #[serde(default)]
    content: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Value>,
    /// Set on an assistant message cut short by the client going away.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    aborted: bool,
    /// On a compaction record: the log segment the history restarts at (so
    /// a reindex restores where the history starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(skip))]
    kept_from: Option<u64>,
}

impl schemars::JsonSchema for LogMessage {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        LogMessageShape::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        LogMessageShape::json_schema(generator)
    }
}

#[cfg(test)]
#[path = "log_message_tests.rs"]
mod tests;
