//! The `response` object Onyx answers with when it translated the request:
//! the request's parameters echoed as OpenAI echoes them, and a chat
//! completion's choice turned into output items (reasoning, a message with
//! `output_text`, `function_call`s), its finish reason into a status and its
//! usage into Responses usage.

use serde_json::{Map, Value, json};

use super::ids;
use crate::chat::{Completion, FinishReason, Usage};

/// The response to `request` before anything is answered: `in_progress`, no output.
pub fn skeleton(id: &str, request: &Map<String, Value>, conversation_model: &str) -> Value {
    let given = |field: &str, default: Value| {
        request
            .get(field)
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(default)
    };
    let reasoning = request.get("reasoning").cloned().unwrap_or(Value::Null);
    json!({
        "id": id,
        "object": "response",
        "created_at": crate::clock::now().timestamp(),
        "status": "in_progress",
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": given("instructions", Value::Null),
        "max_output_tokens": given("max_output_tokens", Value::Null),
        "max_tool_calls": given("max_tool_calls", Value::Null),
        "metadata": given("metadata", json!({})),
        "model": conversation_model,
        "output": [],
        "parallel_tool_calls": given("parallel_tool_calls", json!(true)),
        "previous_response_id": given("previous_response_id", Value::Null),
        "reasoning": {"effort": reasoning["effort"], "summary": reasoning["summary"]},
        "service_tier": "default",
        "store": given("store", json!(true)),
        "temperature": given("temperature", json!(1.0)),
        "text": given("text", json!({"format": {"type": "text"}})),
        "tool_choice": given("tool_choice", json!("auto")),
        "tools": given("tools", json!([])),
        "top_p": given("top_p", json!(1.0)),
        "truncation": given("truncation", json!("disabled")),
        "usage": null,
        "user": given("user", Value::Null),
    })
}

pub fn reasoning_item(text: &str) -> Value {
    json!({"id": ids::reasoning(), "type": "reasoning", "summary": [],
        "content": [{"type": "reasoning_text", "text": text}]})
}

pub fn message_item(id: &str, text: Option<&str>, status: &str) -> Value {
    let content = match text {
        Some(text) => json!([output_text(text)]),
        None => json!([]),
    };
    json!({"id": id, "type": "message", "status": status, "role": "assistant", "content": content})
}

pub fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

pub fn function_call_item(id: &str, call_id: &str, name: &str, arguments: &str, status: &str) -> Value {
    json!({"id": id, "type": "function_call", "status": status, "call_id": call_id,
        "name": name, "arguments": arguments})
}

/// Chat usage (`prompt_tokens`, …) as Responses usage (`input_tokens`, …).
pub fn usage(chat: &Usage) -> Value {
    json!({
        "input_tokens": chat.prompt_tokens,
        "input_tokens_details": {"cached_tokens": chat.cached_tokens()},
        "output_tokens": chat.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": chat.reasoning_tokens()},
        "total_tokens": chat.prompt_tokens + chat.completion_tokens,
    })
}

/// Sets the final status from the chat finish reason: `length` and
/// `content_filter` leave the response `incomplete`. `usage` is `None` when
/// the upstream reported none (written as `null`).
pub fn finish(response: &mut Value, finish_reason: Option<&FinishReason>, usage: Option<&Usage>) {
    let incomplete = match finish_reason {
        Some(FinishReason::Length) => Some("max_output_tokens"),
        Some(FinishReason::ContentFilter) => Some("content_filter"),
        _ => None,
    };
    match incomplete {
        Some(reason) => {
            response["status"] = json!("incomplete");
            response["incomplete_details"] = json!({"reason": reason});
        }
        None => response["status"] = json!("completed"),
    }
    response["usage"] = usage.map_or(Value::Null, self::usage);
}

/// The whole response for a `chat.completion`.
pub fn from_completion(mut response: Value, completion: &Completion) -> Value {
    let choice = completion.choices.first();
    let message = choice.map(|choice| &choice.message);
    let mut output = Vec::new();
    let reasoning = message
        .and_then(|m| m.extra.get("reasoning_content"))
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty());
    if let Some(reasoning) = reasoning {
        output.push(reasoning_item(reasoning));
    }
    let text = message.map(|m| m.text_content()).unwrap_or_default();
    if !text.is_empty() {
        output.push(message_item(&ids::message(), Some(&text), "completed"));
    }
    for call in message.and_then(|m| m.tool_calls.as_deref()).unwrap_or_default() {
        output.push(function_call_item(
            &ids::function_call(),
            &call.id,
            &call.function.name,
            &call.function.arguments,
            "completed",
        ));
    }
    response["output"] = Value::Array(output);
    finish(
        &mut response,
        choice.and_then(|c| c.finish_reason.as_ref()),
        completion.usage.as_ref(),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_becomes_output_items() {
        let request = json!({"model": "openai/m", "input": "x", "metadata": {"k": "v"}});
        let skeleton = skeleton("resp_1", request.as_object().unwrap(), "openai/m");
        let completion = json!({"choices": [{"message": {"role": "assistant", "content": "hi",
            "reasoning_content": "think", "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 1}}});
        let response = from_completion(skeleton, &serde_json::from_value(completion).unwrap());
        let types: Vec<_> = response["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].clone())
            .collect();
        assert_eq!(
            types,
            [json!("reasoning"), json!("message"), json!("function_call")]
        );
        assert_eq!(response["output"][1]["content"][0]["text"], "hi");
        assert_eq!(response["output"][2]["call_id"], "call_1");
        assert_eq!(response["status"], "incomplete");
        assert_eq!(response["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(response["usage"]["input_tokens_details"]["cached_tokens"], 1);
        assert_eq!(response["usage"]["total_tokens"], 5);
        assert_eq!(response["metadata"]["k"], "v");
    }
}
