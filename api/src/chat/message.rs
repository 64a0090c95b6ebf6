//! Chat messages and tools, typed: what clients send, what the agent loop
//! builds, what translating providers read and what a completion answers.
//! Lossless: fields and content parts Onyx does not model (`refusal`,
//! `audio`, `cache_control`, a file part, a tool call's `extra_content`…)
//! are kept beside the typed ones and serialized back as they came, so a
//! message can go through the agent loop to an OpenAI-compatible upstream
//! without losing anything.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    Function,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Developer => "developer",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
            Self::Function => "function",
        }
    }

    /// The role named by `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        Self::deserialize(serde_json::Value::String(text.into())).ok()
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
pub struct Message {
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Fields Onyx does not model, passed on as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Message {
    /// A message with text content.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(Content::Text(text.into())),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            extra: Map::new(),
        }
    }

    pub fn system(text: impl Into<String>) -> Self {
        Self::text(Role::System, text)
    }

    pub fn user(text: impl Into<String>) -> Self {
        Self::text(Role::User, text)
    }

    /// A model's answer, with the tool calls it made (if any).
    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        let mut message = Self::text(Role::Assistant, text);
        message.tool_calls = (!tool_calls.is_empty()).then_some(tool_calls);
        message
    }

    /// An answer as translating providers write it into a completion:
    /// `content` is `null` when there is none, and `refusal` is `null` as
    /// OpenAI writes it.
    pub fn answer(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        let mut extra = Map::new();
        extra.insert("refusal".into(), Value::Null);
        Self {
            role: Role::Assistant,
            content: content.map(Content::Text),
            name: None,
            tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
            tool_call_id: None,
            extra,
        }
    }

    /// The result of the tool call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        let mut message = Self::text(Role::Tool, text);
        message.tool_call_id = Some(call_id.into());
        message
    }

    /// The text of the content (string content, or the text parts joined).
    pub fn text_content(&self) -> String {
        self.content.as_ref().map(Content::text).unwrap_or_default()
    }

    /// Puts `text` before the message's own text (a string stays a string,
    /// so servers that take only string content still work).
    pub fn prepend_text(&mut self, text: &str) {
        self.content = Some(match self.content.take() {
            Some(Content::Text(own)) => Content::Text(format!("{text}\n\n{own}")),
            Some(Content::Parts(mut parts)) => {
                parts.insert(0, ContentPart::Text { text: text.into() });
                Content::Parts(parts)
            }
            None => Content::Text(text.into()),
        });
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl Content {
    /// All text of the content, parts joined by newlines; non-text parts skipped.
    pub fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(ContentPart::text)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// One part of a multi-part content. Parts with fields Onyx does not model
/// (a text part's `cache_control`, audio, files) are `Other`, kept whole.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
    Other(Value),
}

impl ContentPart {
    /// The part's text, if it is a text part (modelled or not).
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::Text { text } => Some(text),
            Self::Other(value) if value["type"] == "text" => value["text"].as_str(),
            _ => None,
        }
    }
}

/// A typed part (`text`, `image_url`) or any other object with a `type`, kept whole.
impl schemars::JsonSchema for ContentPart {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ContentPart".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let image_url = generator.subschema_for::<ImageUrl>();
        schemars::json_schema!({
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": {"type": "string"},
                "text": {"type": "string"},
                "image_url": image_url,
            },
        })
    }
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let Some(part) = value.as_object() else {
            return Err(D::Error::custom("a content part must be an object"));
        };
        let only = |fields: &[&str]| part.keys().all(|k| fields.contains(&k.as_str()));
        match part.get("type").and_then(Value::as_str) {
            Some("text") => match part.get("text") {
                Some(Value::String(text)) if only(&["type", "text"]) => Ok(Self::Text { text: text.clone() }),
                Some(Value::String(_)) => Ok(Self::Other(value)),
                _ => Err(D::Error::custom("a text part needs a string `text`")),
            },
            Some("image_url") => {
                let image_url = ImageUrl::deserialize(part.get("image_url").unwrap_or(&Value::Null))
                    .map_err(|e| D::Error::custom(format!("image_url part: {e}")))?;
                Ok(if only(&["type", "image_url"]) {
                    Self::ImageUrl { image_url }
                } else {
                    Self::Other(value)
                })
            }
            Some(_) => Ok(Self::Other(value)),
            None => Err(D::Error::custom("a content part needs a string `type`")),
        }
    }
}

impl Serialize for ContentPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text { text } => json!({"type": "text", "text": text}).serialize(serializer),
            Self::ImageUrl { image_url } => {
                json!({"type": "image_url", "image_url": image_url}).serialize(serializer)
            }
            Self::Other(value) => value.serialize(serializer),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
pub struct ImageUrl {
    pub url: String,
    /// `detail` and anything else, passed on.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
    /// Fields Onyx does not model (`extra_content` from Gemini's
    /// OpenAI-compatible endpoint…), passed on as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn function_type() -> String {
    "function".into()
}

impl ToolCall {
    /// A function call.
    pub fn function(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            kind: function_type(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
                extra: Map::new(),
            },
            extra: Map::new(),
        }
    }

    /// The call's arguments as JSON (`{}` when empty; `Null` when not JSON).
    pub fn arguments(&self) -> Value {
        let raw = self.function.arguments.trim();
        serde_json::from_str(if raw.is_empty() { "{}" } else { raw }).unwrap_or(Value::Null)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
    /// Anything else, passed on.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
pub struct ToolDef {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionDef,
}

impl ToolDef {
    pub fn function(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            kind: "function".into(),
            function: FunctionDef {
                name: name.into(),
                description: Some(description.into()),
                parameters: Some(parameters),
                extra: Map::new(),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
pub struct FunctionDef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// `strict` and anything else, passed on.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_without_losing_unmodelled_fields() {
        let sent = json!([
            {"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA", "detail": "low"}},
                {"type": "text", "text": "cached", "cache_control": {"type": "ephemeral"}},
                {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}
            ], "name": "ann"},
            {"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}
        ]);
        let messages: Vec<Message> = serde_json::from_value(sent.clone()).unwrap();
        assert_eq!(messages[0].text_content(), "look\ncached");
        let back = serde_json::to_value(&messages).unwrap();
        assert_eq!(back[0], sent[0]);
        assert_eq!(back[1]["refusal"], Value::Null);
        assert_eq!(back[1]["tool_calls"], sent[1]["tool_calls"]);
        assert_eq!(back[2], sent[2]);
    }

    #[test]
    fn malformed_parts_are_refused() {
        for bad in [
            json!({"role": "user", "content": [{"type": "text", "text": 5}]}),
            json!({"role": "user", "content": [{"type": "image_url"}]}),
            json!({"role": "user", "content": [{"text": "no type"}]}),
            json!({"role": "wizard", "content": "hi"}),
        ] {
            assert!(serde_json::from_value::<Message>(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn context_goes_before_the_text_and_strings_stay_strings() {
        let mut plain = Message::user("hi");
        plain.prepend_text("ctx");
        assert_eq!(plain.content, Some(Content::Text("ctx\n\nhi".into())));
        let mut parts: Message =
            serde_json::from_value(json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}))
                .unwrap();
        parts.prepend_text("ctx");
        assert_eq!(parts.text_content(), "ctx\nhi");
    }
}
