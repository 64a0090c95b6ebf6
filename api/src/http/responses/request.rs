//! A Responses API request in chat-completions terms: the `input` items in
//! their stored form (every item typed and named by an id, checked field by
//! field), and the chat body they become when Onyx answers through
//! `inbound_chat` (messages, function tools, `text.format`, reasoning effort).
//! What chat completions cannot express is refused with a 400 naming it.

use serde_json::{Map, Value, json};

use super::ids;
use crate::http::error::ApiError;

fn bad(param: impl Into<String>, message: impl std::fmt::Display) -> ApiError {
    let param = param.into();
    ApiError::BadRequest {
        message: format!("{param}: {message}"),
        param: Some(param),
        code: Some("invalid_value"),
    }
}

fn string_at<'a>(item: &'a Value, field: &str, path: &str) -> Result<&'a str, ApiError> {
    match item.get(field) {
        Some(Value::String(text)) => Ok(text),
        None | Some(Value::Null) => Err(bad(format!("{path}.{field}"), "is required")),
        Some(_) => Err(bad(format!("{path}.{field}"), "must be a string")),
    }
}

/// The request's `input` as stored items: a string is one user message; every
/// message gets content parts, every item an id.
pub fn input_items(input: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    match input {
        None | Some(Value::Null) => Err(bad("input", "is required")),
        Some(Value::String(text)) => Ok(vec![message_item("user", vec![text_part("input_text", text)])]),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| input_item(item, &format!("input[{i}]")))
            .collect(),
        Some(_) => Err(bad("input", "must be a string or an array of input items")),
    }
}

fn text_part(kind: &str, text: &str) -> Value {
    if kind == "output_text" {
        json!({"type": kind, "text": text, "annotations": []})
    } else {
        json!({"type": kind, "text": text})
    }
}

fn message_item(role: &str, content: Vec<Value>) -> Value {
    json!({"id": ids::message(), "type": "message", "role": role, "content": content, "status": "completed"})
}

fn input_item(item: &Value, path: &str) -> Result<Value, ApiError> {
    let Some(object) = item.as_object() else {
        return Err(bad(path, "must be an object"));
    };
    let kind = match object.get("type") {
        None | Some(Value::Null) if object.contains_key("role") => "message",
        Some(Value::String(kind)) => kind.as_str(),
        None | Some(Value::Null) => return Err(bad(format!("{path}.type"), "is required")),
        Some(_) => return Err(bad(format!("{path}.type"), "must be a string")),
    };
    let with_id = |mut item: Value, prefix: fn() -> String| {
        if !item["id"].is_string() {
            item["id"] = Value::String(prefix());
        }
        item
    };
    match kind {
        "message" => message(item, path),
        "function_call" => {
            for field in ["call_id", "name", "arguments"] {
                string_at(item, field, path)?;
            }
            let mut item = with_id(item.clone(), ids::function_call);
            item["status"] = json!("completed");
            Ok(item)
        }
        "function_call_output" => {
            string_at(item, "call_id", path)?;
            match item.get("output") {
                Some(Value::String(_) | Value::Array(_)) => {}
                None | Some(Value::Null) => return Err(bad(format!("{path}.output"), "is required")),
                Some(_) => {
                    return Err(bad(
                        format!("{path}.output"),
                        "must be a string or an array of content parts",
                    ));
                }
            }
            let mut item = with_id(item.clone(), ids::function_call_output);
            item["status"] = json!("completed");
            Ok(item)
        }
        // Kept as sent (passed through, and dropped when translating).
        _ => Ok(item.clone()),
    }
}

fn message(item: &Value, path: &str) -> Result<Value, ApiError> {
    let role = string_at(item, "role", path)?;
    if !matches!(role, "user" | "system" | "developer" | "assistant") {
        return Err(bad(
            format!("{path}.role"),
            format!("'{role}' is not one of 'user', 'system', 'developer', 'assistant'"),
        ));
    }
    let default_kind = if role == "assistant" {
        "output_text"
    } else {
        "input_text"
    };
    let content = match item.get("content") {
        Some(Value::String(text)) => vec![text_part(default_kind, text)],
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, part)| content_part(part, &format!("{path}.content[{j}]")))
            .collect::<Result<_, _>>()?,
        None | Some(Value::Null) => return Err(bad(format!("{path}.content"), "is required")),
        Some(_) => {
            return Err(bad(
                format!("{path}.content"),
                "must be a string or an array of content parts",
            ));
        }
    };
    let mut stored = message_item(role, content);
    if let Some(id) = item.get("id").filter(|id| id.is_string()) {
        stored["id"] = id.clone();
    }
    Ok(stored)
}

fn content_part(part: &Value, path: &str) -> Result<Value, ApiError> {
    let kind = string_at(part, "type", path)?;
    match kind {
        "input_text" | "output_text" => Ok(text_part(kind, string_at(part, "text", path)?)),
        "refusal" => Ok(json!({"type": "refusal", "refusal": string_at(part, "refusal", path)?})),
        "input_image" => {
            if part.get("file_id").is_some_and(|f| !f.is_null()) {
                return Err(bad(
                    format!("{path}.file_id"),
                    "images by file id are not supported; send image_url (a URL or a data URL)",
                ));
            }
            let url = string_at(part, "image_url", path)?;
            let detail = part["detail"].as_str().unwrap_or("auto");
            Ok(json!({"type": "input_image", "image_url": url, "detail": detail}))
        }
        other => Err(bad(
            format!("{path}.type"),
            format!("content part type '{other}' is not supported"),
        )),
    }
}

/// Refuses what only OpenAI's own Responses API can do.
pub fn check_translatable(body: &Map<String, Value>, items: &[Value]) -> Result<(), ApiError> {
    if body.get("background").and_then(Value::as_bool) == Some(true) {
        return Err(bad("background", "background responses are not supported"));
    }
    for field in ["conversation", "prompt"] {
        if body.get(field).is_some_and(|v| !v.is_null()) {
            return Err(bad(field, "is not supported"));
        }
    }
    for (i, item) in items.iter().enumerate() {
        let kind = item["type"].as_str().unwrap_or_default();
        if !matches!(
            kind,
            "message" | "function_call" | "function_call_output" | "reasoning"
        ) {
            return Err(bad(
                format!("input[{i}].type"),
                format!("input item type '{kind}' is not supported"),
            ));
        }
    }
    Ok(())
}

/// The chat-completions body for `conversation` (earlier items, then this
/// request's), with the request's parameters translated, and the types of
/// the built-in tools it had to leave out.
pub fn chat_body(
    body: &Map<String, Value>,
    conversation: &[Value],
    stream: bool,
) -> Result<(Map<String, Value>, Vec<String>), ApiError> {
    let mut chat = Map::new();
    chat.insert("model".into(), body.get("model").cloned().unwrap_or(Value::Null));
    let mut messages = Vec::new();
    match body.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(_) => return Err(bad("instructions", "must be a string")),
    }
    messages.extend(to_messages(conversation));
    chat.insert("messages".into(), Value::Array(messages));
    let mut left_out = Vec::new();
    if let Some(tools) = body.get("tools").filter(|t| !t.is_null()) {
        let (tools, built_in) = function_tools(tools)?;
        left_out = built_in;
        if tools.as_array().is_some_and(|t| !t.is_empty()) {
            chat.insert("tools".into(), tools);
        }
    }
    if let Some(choice) = body.get("tool_choice").filter(|t| !t.is_null()) {
        chat.insert("tool_choice".into(), tool_choice(choice)?);
    }
    for (from, to) in [
        ("parallel_tool_calls", "parallel_tool_calls"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("user", "user"),
        ("max_output_tokens", "max_completion_tokens"),
    ] {
        if let Some(value) = body.get(from).filter(|v| !v.is_null()) {
            chat.insert(to.into(), value.clone());
        }
    }
    if let Some(format) = body.get("text").and_then(|t| t.get("format"))
        && let Some(format) = response_format(format)?
    {
        chat.insert("response_format".into(), format);
    }
    match body.get("reasoning").and_then(|r| r.get("effort")) {
        None | Some(Value::Null) => {}
        Some(effort @ Value::String(_)) => {
            chat.insert("reasoning_effort".into(), effort.clone());
        }
        Some(_) => return Err(bad("reasoning.effort", "must be a string")),
    }
    if stream {
        chat.insert("stream".into(), json!(true));
        chat.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok((chat, left_out))
}

/// Stored items as chat messages: function calls join the assistant message
/// before them, function results become tool messages, reasoning is dropped.
fn to_messages(items: &[Value]) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::new();
    for item in items {
        match item["type"].as_str() {
            Some("message") => {
                let role = item["role"].as_str().unwrap_or("user");
                messages.push(json!({"role": role, "content": chat_content(role, &item["content"])}));
            }
            Some("function_call") => {
                let call = json!({"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}});
                match messages.last_mut() {
                    Some(last) if last["role"] == "assistant" => {
                        if !last["tool_calls"].is_array() {
                            last["tool_calls"] = json!([]);
                        }
                        if let Some(calls) = last["tool_calls"].as_array_mut() {
                            calls.push(call);
                        }
                    }
                    _ => messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            Some("function_call_output") => {
                let output = match &item["output"] {
                    Value::String(text) => text.clone(),
                    parts => joined_text(parts),
                };
                messages.push(json!({"role": "tool", "tool_call_id": item["call_id"], "content": output}));
            }
            _ => {}
        }
    }
    messages
}

fn joined_text(parts: &Value) -> String {
    parts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str().or(p["refusal"].as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A user message keeps its parts (text and images); others become text.
fn chat_content(role: &str, parts: &Value) -> Value {
    let parts = parts.as_array().map(Vec::as_slice).unwrap_or_default();
    let has_image = parts.iter().any(|p| p["type"] == "input_image");
    if role != "user" || !has_image {
        return Value::String(joined_text(&Value::Array(parts.to_vec())));
    }
    Value::Array(
        parts
            .iter()
            .map(|p| match p["type"].as_str() {
                Some("input_image") => {
                    json!({"type": "image_url", "image_url": {"url": p["image_url"], "detail": p["detail"]}})
                }
                _ => json!({"type": "text", "text": p["text"]}),
            })
            .collect(),
    )
}

/// Chat-completions tools for the request's `tools`: function tools as they
/// are, the function tools of a `namespace` (Codex groups tools so) by their
/// own names, and built-in tools (`web_search`, `file_search`, …), which
/// only OpenAI runs, left out: their types come back in the second value.
fn function_tools(tools: &Value) -> Result<(Value, Vec<String>), ApiError> {
    let Some(tools) = tools.as_array() else {
        return Err(bad("tools", "must be an array"));
    };
    let mut out = Vec::with_capacity(tools.len());
    let mut left_out = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let path = format!("tools[{i}]");
        match string_at(tool, "type", &path)? {
            "function" => out.push(function_tool(tool, &path)?),
            "namespace" => {
                let Some(inner) = tool.get("tools").and_then(Value::as_array) else {
                    return Err(bad(format!("{path}.tools"), "must be an array of function tools"));
                };
                for (j, tool) in inner.iter().enumerate() {
                    let path = format!("{path}.tools[{j}]");
                    match string_at(tool, "type", &path)? {
                        "function" => out.push(function_tool(tool, &path)?),
                        kind => left_out.push(kind.to_string()),
                    }
                }
            }
            kind => left_out.push(kind.to_string()),
        }
    }
    Ok((Value::Array(out), left_out))
}

fn function_tool(tool: &Value, path: &str) -> Result<Value, ApiError> {
    let mut function = json!({"name": string_at(tool, "name", path)?});
    for field in ["description", "parameters", "strict"] {
        if let Some(value) = tool.get(field).filter(|v| !v.is_null()) {
            function[field] = value.clone();
        }
    }
    Ok(json!({"type": "function", "function": function}))
}

fn tool_choice(choice: &Value) -> Result<Value, ApiError> {
    match choice {
        Value::String(mode) if matches!(mode.as_str(), "none" | "auto" | "required") => Ok(choice.clone()),
        Value::Object(named) if named.get("type").and_then(Value::as_str) == Some("function") => {
            let name = string_at(choice, "name", "tool_choice")?;
            Ok(json!({"type": "function", "function": {"name": name}}))
        }
        _ => Err(bad(
            "tool_choice",
            "must be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": …}",
        )),
    }
}

fn response_format(format: &Value) -> Result<Option<Value>, ApiError> {
    match format["type"].as_str() {
        None | Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let mut schema = json!({"name": string_at(format, "name", "text.format")?});
            for field in ["schema", "strict", "description"] {
                if let Some(value) = format.get(field).filter(|v| !v.is_null()) {
                    schema[field] = value.clone();
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": schema})))
        }
        Some(other) => Err(bad(
            "text.format.type",
            format!("'{other}' is not a known format"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param_of(result: Result<Vec<Value>, ApiError>) -> String {
        match result {
            Err(ApiError::BadRequest { param, .. }) => param.unwrap_or_default(),
            other => panic!("expected a bad request, got {other:?}"),
        }
    }

    #[test]
    fn a_string_is_one_user_message() {
        let items = input_items(Some(&json!("hi"))).unwrap();
        assert_eq!(items[0]["role"], "user");
        assert_eq!(items[0]["content"], json!([{"type": "input_text", "text": "hi"}]));
        assert!(items[0]["id"].as_str().unwrap().starts_with("msg_"));
    }

    #[test]
    fn malformed_items_name_the_field() {
        let call = json!([{"role": "user", "content": "x"}, {"type": "function_call", "name": "f", "arguments": "{}"}]);
        assert_eq!(param_of(input_items(Some(&call))), "input[1].call_id");
        let role = json!([{"role": "robot", "content": "x"}]);
        assert_eq!(param_of(input_items(Some(&role))), "input[0].role");
        let part = json!([{"role": "user", "content": [{"type": "input_text", "text": 5}]}]);
        assert_eq!(param_of(input_items(Some(&part))), "input[0].content[0].text");
        assert_eq!(param_of(input_items(Some(&json!(5)))), "input");
    }

    #[test]
    fn translates_items_tools_and_formats() {
        let items = input_items(Some(&json!([
            {"role": "user", "content": [{"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "found"},
        ])))
        .unwrap();
        let body = json!({"model": "m", "instructions": "be brief", "max_output_tokens": 9,
            "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}, "strict": true}],
            "tool_choice": {"type": "function", "name": "lookup"},
            "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}}},
            "reasoning": {"effort": "low"}});
        let (chat, _) = chat_body(body.as_object().unwrap(), &items, true).unwrap();
        let messages = chat["messages"].as_array().unwrap();
        assert_eq!(messages[0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(
            messages[1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAAA"
        );
        assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
        assert_eq!(
            messages[3],
            json!({"role": "tool", "tool_call_id": "call_1", "content": "found"})
        );
        assert_eq!(messages.len(), 4);
        assert_eq!(chat["tools"][0]["function"]["name"], "lookup");
        assert_eq!(chat["tool_choice"]["function"]["name"], "lookup");
        assert_eq!(chat["response_format"]["json_schema"]["name"], "out");
        assert_eq!(chat["reasoning_effort"], "low");
        assert_eq!(chat["max_completion_tokens"], 9);
        assert_eq!(chat["stream_options"]["include_usage"], true);
    }

    #[test]
    fn built_in_tools_are_left_out_and_namespaces_flattened() {
        let body = json!({"model": "m", "tools": [
            {"type": "web_search", "external_web_access": false},
            {"type": "namespace", "name": "agents", "tools": [
                {"type": "function", "name": "spawn", "parameters": {"type": "object"}},
            ]},
            {"type": "function", "name": "shell"},
        ]});
        let (chat, left_out) = chat_body(body.as_object().unwrap(), &[], false).unwrap();
        assert_eq!(left_out, ["web_search"]);
        let names: Vec<&str> = chat["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["spawn", "shell"]);
        let only_built_in = json!({"model": "m", "tools": [{"type": "file_search"}]});
        let (chat, left_out) = chat_body(only_built_in.as_object().unwrap(), &[], false).unwrap();
        assert!(chat.get("tools").is_none(), "no empty tools list: {chat:?}");
        assert_eq!(left_out, ["file_search"]);
        let broken = json!({"model": "m", "tools": [{"type": "namespace", "name": "n"}]});
        match chat_body(broken.as_object().unwrap(), &[], false) {
            Err(ApiError::BadRequest { param, .. }) => assert_eq!(param.as_deref(), Some("tools[0].tools")),
            other => panic!("expected a bad request, got {other:?}"),
        }
    }
}
