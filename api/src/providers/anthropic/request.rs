//! OpenAI chat request → Anthropic Messages request.
//!
//! System and developer messages become `system`; tool results become
//! `tool_result` blocks in a user turn; assistant tool calls become `tool_use`
//! blocks; consecutive turns of one role are merged, as the Messages API wants
//! strictly alternating roles, and a conversation that opens with the
//! assistant gets a short user turn before it (the API wants a user turn
//! first); `data:` image URLs become base64 image sources.
//!
//! A request with OpenAI's `prompt_cache_key` (agent runs send one) gets
//! prompt-cache breakpoints: each system message becomes a `system` block and
//! the first one (Onyx's stable prompt) is marked `cache_control: ephemeral`,
//! as are the ends of the last two turns (the history so far; the previous
//! turn's mark is what the next request's cache lookup finds).

use serde_json::{Map, Value, json};

use crate::chat::{ChatRequest, Content, ContentPart, Message, Role, ToolChoice};
use crate::providers::ProviderError;
use crate::providers::push_turn;

const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The user turn put before a conversation that starts with the assistant.
const LEADING_USER_TEXT: &str = "(conversation start)";
/// Turns from the end whose last block gets a breakpoint (with the system
/// block: 3 of the 4 Anthropic allows).
const HISTORY_BREAKPOINTS: usize = 2;

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

pub fn messages_request(request: &ChatRequest, model: &str, stream: bool) -> Result<Value, ProviderError> {
    if request.n.is_some_and(|n| n > 1) {
        return Err(ProviderError::InvalidRequest(
            "anthropic models return one choice; `n` must be 1".into(),
        ));
    }
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (index, message) in request.messages.iter().enumerate() {
        let (role, blocks) = match message.role {
            Role::System | Role::Developer => {
                if let Some(content) = &message.content {
                    system.push(content.text());
                }
                continue;
            }
            Role::User => ("user", user_blocks(message)),
            Role::Assistant => ("assistant", assistant_blocks(message, index)?),
            Role::Tool => ("user", vec![tool_result_block(message, index)?]),
            Role::Function => {
                return Err(ProviderError::InvalidRequest(format!(
                    "messages[{index}]: role \"function\" is not supported for anthropic models; use tools"
                )));
            }
        };
        if blocks.is_empty() {
            continue;
        }
        push_turn(&mut turns, role, blocks);
    }
    if turns.is_empty() {
        return Err(ProviderError::InvalidRequest(
            "messages: at least one user message is required".into(),
        ));
    }
    // OpenAI takes a conversation that opens with the assistant (a greeting an
    // app shows first); the Messages API wants a user turn first.
    if turns[0].0 == "assistant" {
        turns.insert(
            0,
            ("user", vec![json!({"type": "text", "text": LEADING_USER_TEXT})]),
        );
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(request.max_output_tokens().unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    let cache = request.prompt_cache_key.is_some();
    if cache {
        let marked = turns.len().saturating_sub(HISTORY_BREAKPOINTS);
        for (_, blocks) in &mut turns[marked..] {
            if let Some(last) = blocks.last_mut() {
                last["cache_control"] = ephemeral();
            }
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if cache {
        // Anthropic refuses empty text blocks.
        let mut blocks: Vec<Value> = system
            .iter()
            .filter(|text| !text.is_empty())
            .map(|text| json!({"type": "text", "text": text}))
            .collect();
        if let Some(first) = blocks.first_mut() {
            first["cache_control"] = ephemeral();
            body.insert("system".into(), Value::Array(blocks));
        }
    } else if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    if let Some(temperature) = request.temperature {
        // OpenAI accepts 0–2, Anthropic 0–1.
        body.insert("temperature".into(), json!(temperature.clamp(0.0, 1.0)));
    }
    if let Some(top_p) = request.top_p {
        body.insert("top_p".into(), json!(top_p));
    }
    let stops = request.stop_sequences();
    if !stops.is_empty() {
        body.insert("stop_sequences".into(), json!(stops));
    }
    if let Some(user) = &request.user {
        body.insert("metadata".into(), json!({"user_id": user}));
    }
    if let Some(tools) = &request.tools {
        let tools: Vec<Value> = tools
            .iter()
            .filter(|t| t.kind == "function")
            .map(|t| {
                let schema = t
                    .function
                    .parameters
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                let mut tool = json!({"name": t.function.name, "input_schema": schema});
                if let Some(description) = &t.function.description {
                    tool["description"] = json!(description);
                }
                tool
            })
            .collect();
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
    }
    if let Some(choice) = tool_choice(request)? {
        body.insert("tool_choice".into(), choice);
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(body))
}

fn tool_choice(request: &ChatRequest) -> Result<Option<Value>, ProviderError> {
    let mut choice = match &request.tool_choice {
        None => None,
        Some(ToolChoice::Mode(mode)) => Some(match mode.as_str() {
            "auto" => json!({"type": "auto"}),
            "required" => json!({"type": "any"}),
            "none" => json!({"type": "none"}),
            other => {
                return Err(ProviderError::InvalidRequest(format!(
                    "tool_choice: {other:?} is not \"none\", \"auto\" or \"required\""
                )));
            }
        }),
        Some(ToolChoice::Named { function }) => Some(json!({"type": "tool", "name": function.name})),
    };
    if request.parallel_tool_calls == Some(false) && request.tools.is_some() {
        let choice = choice.get_or_insert_with(|| json!({"type": "auto"}));
        if choice["type"] != "none" {
            choice["disable_parallel_tool_use"] = json!(true);
        }
    }
    Ok(choice)
}

fn user_blocks(message: &Message) -> Vec<Value> {
    match &message.content {
        None => Vec::new(),
        Some(Content::Text(text)) => vec![json!({"type": "text", "text": text})],
        Some(Content::Parts(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
                ContentPart::ImageUrl { image_url } => Some(image_block(&image_url.url)),
                // A text part with fields of its own: its text, and its
                // `cache_control` breakpoint when the client set one.
                ContentPart::Other(value) => part.text().map(|text| {
                    let mut block = json!({"type": "text", "text": text});
                    if let Some(cache) = value.get("cache_control") {
                        block["cache_control"] = cache.clone();
                    }
                    block
                }),
            })
            .collect(),
    }
}

fn image_block(url: &str) -> Value {
    // data:image/png;base64,AAAA
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((meta, data)) = rest.split_once(',')
        && let Some(media_type) = meta.strip_suffix(";base64")
    {
        return json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}});
    }
    json!({"type": "image", "source": {"type": "url", "url": url}})
}

fn assistant_blocks(message: &Message, index: usize) -> Result<Vec<Value>, ProviderError> {
    let mut blocks = Vec::new();
    if let Some(content) = &message.content {
        let text = content.text();
        if !text.is_empty() {
            blocks.push(json!({"type": "text", "text": text}));
        }
    }
    for (call_index, call) in message.tool_calls.iter().flatten().enumerate() {
        let arguments = call.function.arguments.trim();
        let input: Value = if arguments.is_empty() {
            json!({})
        } else {
            serde_json::from_str(arguments).map_err(|err| {
                ProviderError::InvalidRequest(format!(
                    "messages[{index}].tool_calls[{call_index}].function.arguments: not JSON ({err})"
                ))
            })?
        };
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.function.name, "input": input}));
    }
    Ok(blocks)
}

fn tool_result_block(message: &Message, index: usize) -> Result<Value, ProviderError> {
    let id = message.tool_call_id.as_deref().ok_or_else(|| {
        ProviderError::InvalidRequest(format!(
            "messages[{index}].tool_call_id: required for role \"tool\""
        ))
    })?;
    let content = message.content.as_ref().map(Content::text).unwrap_or_default();
    Ok(json!({"type": "tool_result", "tool_use_id": id, "content": content}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(value: Value) -> ChatRequest {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn translates_system_tools_and_merges_tool_results() {
        let req = request(json!({
            "model": "anthropic/claude",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "weather in Paris and Rome?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "c2", "content": "rain"}
            ],
            "tools": [{"type": "function", "function": {"name": "weather", "description": "w", "parameters": {"type": "object"}}}],
            "tool_choice": "required",
            "max_tokens": 50,
            "stop": "END"
        }));
        let out = messages_request(&req, "claude", false).unwrap();
        assert_eq!(out["system"], "Be brief.");
        assert_eq!(out["max_tokens"], 50);
        assert_eq!(out["stop_sequences"], json!(["END"]));
        assert_eq!(out["tool_choice"], json!({"type": "any"}));
        assert_eq!(out["tools"][0]["input_schema"], json!({"type": "object"}));
        let messages = out["messages"].as_array().unwrap();
        assert_eq!(
            messages.len(),
            3,
            "tool results merge into one user turn: {messages:?}"
        );
        assert_eq!(messages[1]["content"][1]["input"], json!({"city": "Rome"}));
        assert_eq!(messages[2]["role"], "user");
        assert_eq!(messages[2]["content"][0]["tool_use_id"], "c1");
        assert_eq!(messages[2]["content"][1]["content"], "rain");
    }

    #[test]
    fn a_prompt_cache_key_marks_the_stable_system_block_and_the_history_end() {
        let messages = json!([
            {"role": "system", "content": "STABLE"},
            {"role": "system", "content": "client"},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"role": "user", "content": "three"}
        ]);
        let plain =
            messages_request(&request(json!({"model": "m", "messages": messages})), "m", false).unwrap();
        assert_eq!(plain["system"], "STABLE\n\nclient");
        assert!(!plain.to_string().contains("cache_control"));

        let cached = request(json!({"model": "m", "messages": messages, "prompt_cache_key": "onyx-s1"}));
        let out = messages_request(&cached, "m", false).unwrap();
        assert_eq!(
            out["system"],
            json!([
                {"type": "text", "text": "STABLE", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "client"}
            ])
        );
        let turns = out["messages"].as_array().unwrap();
        assert!(turns[0]["content"][0].get("cache_control").is_none());
        assert_eq!(turns[1]["content"][0]["cache_control"], ephemeral());
        assert_eq!(turns[2]["content"][0]["cache_control"], ephemeral());
        assert_eq!(
            out.to_string().matches("cache_control").count(),
            3,
            "at most 4 allowed"
        );
        assert!(out.get("prompt_cache_key").is_none(), "not an Anthropic field");
    }

    #[test]
    fn data_urls_become_base64_images() {
        let req = request(json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}
        ]}]}));
        let out = messages_request(&req, "m", true).unwrap();
        let content = &out["messages"][0]["content"];
        assert_eq!(
            content[1]["source"],
            json!({"type": "base64", "media_type": "image/png", "data": "iVBOR"})
        );
        assert_eq!(content[2]["source"]["type"], "url");
        assert_eq!(out["stream"], true);
        assert_eq!(out["max_tokens"], DEFAULT_MAX_TOKENS);
    }

    #[test]
    fn rejects_bad_tool_arguments_and_missing_ids() {
        let bad_args = request(json!({"model": "m", "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{nope"}}]}
        ]}));
        let err = messages_request(&bad_args, "m", false).unwrap_err().to_string();
        assert!(
            err.starts_with("messages[1].tool_calls[0].function.arguments"),
            "{err}"
        );
        let no_id = request(json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}));
        assert!(
            messages_request(&no_id, "m", false)
                .unwrap_err()
                .to_string()
                .contains("tool_call_id")
        );
    }

    #[test]
    fn a_conversation_opening_with_the_assistant_gets_a_user_turn_first() {
        let request: ChatRequest = serde_json::from_value(json!({"model": "m", "messages": [
            {"role": "assistant", "content": "Hi, how can I help?"},
            {"role": "user", "content": "What time is it?"}
        ]}))
        .unwrap();
        let body = messages_request(&request, "claude", false).unwrap();
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(body["messages"][0]["content"][0]["text"], LEADING_USER_TEXT);
    }
}
