//! A Messages API request → a chat-completions body, for upstreams that do
//! not speak the Messages API and for agents. `system` becomes a system
//! message, `tool_use` blocks assistant tool calls, `tool_result` blocks
//! `tool` messages, images `image_url` parts; thinking blocks are dropped
//! (only the model that wrote them can read them) and what chat completions
//! cannot carry (documents, server tools) is refused with the field's path.

use serde_json::{Map, Value, json};

use super::errors::invalid;
use crate::http::ApiError;

type Object = Map<String, Value>;

/// The chat-completions body for a Messages API request.
pub fn to_chat(body: &Object) -> Result<Object, ApiError> {
    let mut chat = Object::new();
    let model = match body.get("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        Some(_) => return Err(invalid("model", "Input should be a valid string")),
        None => return Err(invalid("model", "Field required")),
    };
    chat.insert("model".into(), Value::String(model));
    let max_tokens = match body.get("max_tokens") {
        None => return Err(invalid("max_tokens", "Field required")),
        Some(value) => value
            .as_u64()
            .filter(|n| *n >= 1)
            .ok_or_else(|| invalid("max_tokens", "Input should be an integer of at least 1"))?,
    };
    chat.insert("max_tokens".into(), json!(max_tokens));
    let mut messages = Vec::new();
    if let Some(system) = body.get("system") {
        let text = text_of(system, "system")?;
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    let Some(Value::Array(turns)) = body.get("messages") else {
        return Err(invalid("messages", "Field required; a list of messages"));
    };
    for (i, turn) in turns.iter().enumerate() {
        messages.extend(message(turn, &format!("messages.{i}"))?);
    }
    chat.insert("messages".into(), Value::Array(messages));
    let has_tools = match body.get("tools") {
        None | Some(Value::Null) => false,
        Some(Value::Array(tools)) => {
            let tools = tools
                .iter()
                .enumerate()
                .map(|(i, tool)| function_tool(tool, &format!("tools.{i}")))
                .collect::<Result<Vec<_>, _>>()?;
            let any = !tools.is_empty();
            if any {
                chat.insert("tools".into(), Value::Array(tools));
            }
            any
        }
        Some(_) => return Err(invalid("tools", "Input should be a valid list")),
    };
    if let Some(choice) = body.get("tool_choice").filter(|c| !c.is_null()) {
        let (choice, parallel) = tool_choice(choice)?;
        chat.insert("tool_choice".into(), choice);
        if has_tools && parallel == Some(false) {
            chat.insert("parallel_tool_calls".into(), Value::Bool(false));
        }
    }
    if let Some(stops) = body.get("stop_sequences").filter(|s| !s.is_null()) {
        let stops = stops
            .as_array()
            .filter(|s| s.iter().all(Value::is_string))
            .ok_or_else(|| invalid("stop_sequences", "Input should be a list of strings"))?;
        if !stops.is_empty() {
            chat.insert("stop".into(), Value::Array(stops.clone()));
        }
    }
    for field in ["temperature", "top_p"] {
        if let Some(value) = body.get(field).filter(|v| !v.is_null()) {
            if !value.is_number() {
                return Err(invalid(field, "Input should be a valid number"));
            }
            chat.insert(field.into(), value.clone());
        }
    }
    if let Some(user) = body
        .get("metadata")
        .and_then(|m| m.get("user_id"))
        .and_then(Value::as_str)
    {
        chat.insert("user".into(), Value::String(user.into()));
    }
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        chat.insert("stream".into(), Value::Bool(true));
        chat.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(chat)
}

/// A string, or a list of text blocks joined by newlines.
fn text_of(value: &Value, path: &str) -> Result<String, ApiError> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Array(blocks) => {
            let mut texts = Vec::new();
            for (i, block) in blocks.iter().enumerate() {
                let path = format!("{path}.{i}");
                match block_type(block, &path)? {
                    "text" => texts.push(block_text(block, &path)?),
                    other => return Err(unsupported_block(&path, other)),
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(invalid(
            path,
            "Input should be a valid string or a list of text blocks",
        )),
    }
}

fn block_type<'a>(block: &'a Value, path: &str) -> Result<&'a str, ApiError> {
    if !block.is_object() {
        return Err(invalid(path, "Input should be a content block object"));
    }
    block["type"]
        .as_str()
        .ok_or_else(|| invalid(format!("{path}.type"), "Field required"))
}

fn block_text(block: &Value, path: &str) -> Result<String, ApiError> {
    block["text"]
        .as_str()
        .map(String::from)
        .ok_or_else(|| invalid(format!("{path}.text"), "Field required; a string"))
}

fn unsupported_block(path: &str, kind: &str) -> ApiError {
    let known = [
        "text",
        "image",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
    ];
    if known.contains(&kind) {
        invalid(
            format!("{path}.type"),
            format!("a {kind:?} block is not supported here"),
        )
    } else {
        invalid(
            format!("{path}.type"),
            format!("{kind:?} is not a content block type Onyx can translate for this model"),
        )
    }
}

/// One Messages API turn → one or more chat messages (tool results first, as
/// `tool` messages must follow the assistant's calls directly).
fn message(turn: &Value, path: &str) -> Result<Vec<Value>, ApiError> {
    let role = match turn["role"].as_str() {
        Some(role @ ("user" | "assistant")) => role,
        // Mid-conversation system turns (a beta Claude Code uses).
        Some("system") => {
            let text = text_of(&turn["content"], &format!("{path}.content"))?;
            return Ok(vec![json!({"role": "system", "content": text})]);
        }
        Some(_) => {
            return Err(invalid(
                format!("{path}.role"),
                "Input should be 'user', 'assistant' or 'system'",
            ));
        }
        None => return Err(invalid(format!("{path}.role"), "Field required")),
    };
    let blocks = match &turn["content"] {
        Value::String(text) => return Ok(vec![json!({"role": role, "content": text})]),
        Value::Array(blocks) => blocks,
        Value::Null => return Err(invalid(format!("{path}.content"), "Field required")),
        _ => {
            return Err(invalid(
                format!("{path}.content"),
                "Input should be a valid string or a list of content blocks",
            ));
        }
    };
    let mut out = Vec::new();
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let path = format!("{path}.content.{i}");
        match (role, block_type(block, &path)?) {
            (_, "text") => parts.push(json!({"type": "text", "text": block_text(block, &path)?})),
            (_, "thinking" | "redacted_thinking") => {}
            ("user", "image") => parts.push(image(block, &path)?),
            ("user", "tool_result") => out.push(tool_result(block, &path)?),
            ("assistant", "tool_use") => calls.push(tool_use(block, &path)?),
            (_, kind) => return Err(unsupported_block(&path, kind)),
        }
    }
    if role == "assistant" {
        let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        let mut message = json!({"role": "assistant", "content": text.concat()});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        out.push(message);
    } else if !parts.is_empty() {
        out.push(json!({"role": "user", "content": parts}));
    }
    Ok(out)
}

fn image(block: &Value, path: &str) -> Result<Value, ApiError> {
    let source = &block["source"];
    let url = match source["type"].as_str() {
        Some("base64") => {
            let media = source["media_type"]
                .as_str()
                .ok_or_else(|| invalid(format!("{path}.source.media_type"), "Field required"))?;
            let data = source["data"]
                .as_str()
                .ok_or_else(|| invalid(format!("{path}.source.data"), "Field required"))?;
            format!("data:{media};base64,{data}")
        }
        Some("url") => source["url"]
            .as_str()
            .ok_or_else(|| invalid(format!("{path}.source.url"), "Field required"))?
            .to_string(),
        Some(other) => {
            return Err(invalid(
                format!("{path}.source.type"),
                format!("image source {other:?} is not supported here; use \"base64\" or \"url\""),
            ));
        }
        None => return Err(invalid(format!("{path}.source.type"), "Field required")),
    };
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

fn tool_result(block: &Value, path: &str) -> Result<Value, ApiError> {
    let id = block["tool_use_id"]
        .as_str()
        .ok_or_else(|| invalid(format!("{path}.tool_use_id"), "Field required"))?;
    let text = match &block["content"] {
        Value::Null => String::new(),
        content => text_of(content, &format!("{path}.content"))?,
    };
    let text = if block["is_error"].as_bool() == Some(true) {
        format!("Error: {text}")
    } else {
        text
    };
    Ok(json!({"role": "tool", "tool_call_id": id, "content": text}))
}

fn tool_use(block: &Value, path: &str) -> Result<Value, ApiError> {
    let id = block["id"]
        .as_str()
        .ok_or_else(|| invalid(format!("{path}.id"), "Field required"))?;
    let name = block["name"]
        .as_str()
        .ok_or_else(|| invalid(format!("{path}.name"), "Field required"))?;
    let input = match &block["input"] {
        Value::Object(input) => Value::Object(input.clone()).to_string(),
        Value::Null => "{}".to_string(),
        _ => {
            return Err(invalid(
                format!("{path}.input"),
                "Input should be a valid dictionary",
            ));
        }
    };
    Ok(json!({"id": id, "type": "function", "function": {"name": name, "arguments": input}}))
}

fn function_tool(tool: &Value, path: &str) -> Result<Value, ApiError> {
    if let Some(kind) = tool["type"].as_str().filter(|k| *k != "custom") {
        return Err(invalid(
            format!("{path}.type"),
            format!("server tool {kind:?} is only available with Anthropic models"),
        ));
    }
    let name = tool["name"]
        .as_str()
        .ok_or_else(|| invalid(format!("{path}.name"), "Field required"))?;
    let schema = match &tool["input_schema"] {
        schema @ Value::Object(_) => schema.clone(),
        Value::Null => return Err(invalid(format!("{path}.input_schema"), "Field required")),
        _ => {
            return Err(invalid(
                format!("{path}.input_schema"),
                "Input should be a valid dictionary",
            ));
        }
    };
    let mut function = json!({"name": name, "parameters": schema});
    if let Some(description) = tool["description"].as_str() {
        function["description"] = Value::String(description.into());
    }
    Ok(json!({"type": "function", "function": function}))
}

/// The chat `tool_choice`, and `Some(false)` when parallel calls are disabled.
fn tool_choice(choice: &Value) -> Result<(Value, Option<bool>), ApiError> {
    let parallel = choice["disable_parallel_tool_use"].as_bool().map(|d| !d);
    let mapped = match choice["type"].as_str() {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => {
            let name = choice["name"]
                .as_str()
                .ok_or_else(|| invalid("tool_choice.name", "Field required"))?;
            json!({"type": "function", "function": {"name": name}})
        }
        Some(other) => {
            return Err(invalid(
                "tool_choice.type",
                format!("{other:?} is not one of 'auto', 'any', 'tool', 'none'"),
            ));
        }
        None => return Err(invalid("tool_choice.type", "Field required")),
    };
    Ok((mapped, parallel))
}

#[cfg(test)]
mod tests;
