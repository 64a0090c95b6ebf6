//! OpenAI chat requests → ollama-rs requests, and Ollama's replies → OpenAI
//! completions and chunks. Ollama has no tool-call ids, so Onyx makes them.

use ollama_rs::generation::chat::request::ChatMessageRequest;
use ollama_rs::generation::chat::{ChatMessage, ChatMessageResponse};
use ollama_rs::generation::images::Image;
use ollama_rs::generation::parameters::{FormatType, JsonStructure};
use ollama_rs::generation::tools::{
    ToolCall as OllamaToolCall, ToolCallFunction, ToolFunctionInfo, ToolInfo, ToolType,
};
use ollama_rs::models::ModelOptions;
use serde_json::Value;

use crate::chat::{
    ChatRequest, Completion, Content, ContentPart, Delta, FinishReason, Message, Role, ToolCall,
    ToolCallDelta, ToolDef, Usage,
};
use crate::providers::ProviderError;

pub fn chat_request(request: &ChatRequest, model: &str) -> Result<ChatMessageRequest, ProviderError> {
    if request.n.is_some_and(|n| n > 1) {
        return Err(ProviderError::InvalidRequest(
            "ollama models return one choice; `n` must be 1".into(),
        ));
    }
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| message(m, i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = ChatMessageRequest::new(model.to_string(), messages);
    if let Some(tools) = &request.tools {
        out = out.tools(
            tools
                .iter()
                .enumerate()
                .filter(|(_, t)| t.kind == "function")
                .map(|(i, t)| tool_info(t, i))
                .collect::<Result<Vec<_>, _>>()?,
        );
    }
    let mut options = ModelOptions::default();
    if let Some(t) = request.temperature {
        options = options.temperature(t as f32);
    }
    if let Some(p) = request.top_p {
        options = options.top_p(p as f32);
    }
    if let Some(seed) = request.seed {
        options = options.seed(seed as i32);
    }
    if let Some(max) = request.max_output_tokens() {
        options = options.num_predict(i32::try_from(max).unwrap_or(i32::MAX));
    }
    let stops = request.stop_sequences();
    if !stops.is_empty() {
        options = options.stop(stops);
    }
    out = out.options(options);
    if let Some(format) = &request.response_format {
        match format.kind.as_str() {
            "json_object" => out = out.format(FormatType::Json),
            "json_schema" => {
                let schema = format
                    .json_schema
                    .as_ref()
                    .and_then(|s| s.schema.clone())
                    .ok_or_else(|| {
                        ProviderError::InvalidRequest("response_format.json_schema.schema: required".into())
                    })?;
                let schema = schemars::Schema::try_from(schema).map_err(|_| {
                    ProviderError::InvalidRequest(
                        "response_format.json_schema.schema: not a JSON schema".into(),
                    )
                })?;
                out = out.format(FormatType::StructuredJson(Box::new(
                    JsonStructure::new_for_schema(schema),
                )));
            }
            _ => {}
        }
    }
    Ok(out)
}

fn tool_info(tool: &ToolDef, index: usize) -> Result<ToolInfo, ProviderError> {
    let parameters = tool
        .function
        .parameters
        .clone()
        .unwrap_or_else(|| serde_json::json!({"type": "object"}));
    let parameters = schemars::Schema::try_from(parameters).map_err(|_| {
        ProviderError::InvalidRequest(format!("tools[{index}].function.parameters: not a JSON schema"))
    })?;
    Ok(ToolInfo {
        tool_type: ToolType::Function,
        function: ToolFunctionInfo {
            name: tool.function.name.clone(),
            description: tool.function.description.clone().unwrap_or_default(),
            parameters,
        },
    })
}

fn message(message: &Message, index: usize) -> Result<ChatMessage, ProviderError> {
    let text = message.content.as_ref().map(Content::text).unwrap_or_default();
    Ok(match message.role {
        Role::System | Role::Developer => ChatMessage::system(text),
        Role::User => ChatMessage::user(text).with_images(images(message, index)?),
        Role::Assistant => {
            let mut out = ChatMessage::assistant(text);
            for (call_index, call) in message.tool_calls.iter().flatten().enumerate() {
                let arguments: Value = if call.function.arguments.trim().is_empty() {
                    Value::Object(Default::default())
                } else {
                    serde_json::from_str(&call.function.arguments).map_err(|err| {
                        ProviderError::InvalidRequest(format!(
                            "messages[{index}].tool_calls[{call_index}].function.arguments: not JSON ({err})"
                        ))
                    })?
                };
                out.tool_calls.push(OllamaToolCall {
                    function: ToolCallFunction {
                        name: call.function.name.clone(),
                        arguments,
                    },
                });
            }
            out
        }
        Role::Tool | Role::Function => ChatMessage::tool(text),
    })
}

fn images(message: &Message, index: usize) -> Result<Vec<Image>, ProviderError> {
    let Some(Content::Parts(parts)) = &message.content else {
        return Ok(Vec::new());
    };
    let mut images = Vec::new();
    for part in parts {
        if let ContentPart::ImageUrl { image_url } = part {
            let data = image_url
                .url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"));
            match data {
                Some((_, base64)) => images.push(Image::from_base64(base64)),
                None => {
                    return Err(ProviderError::InvalidRequest(format!(
                        "messages[{index}].content: ollama accepts images only as data: URLs"
                    )));
                }
            }
        }
    }
    Ok(images)
}

fn tool_calls(message: &ChatMessage) -> Vec<ToolCall> {
    message
        .tool_calls
        .iter()
        .map(|call| {
            ToolCall::function(
                format!("call_{}", uuid::Uuid::new_v4().simple()),
                call.function.name.clone(),
                call.function.arguments.to_string(),
            )
        })
        .collect()
}

pub fn usage(response: &ChatMessageResponse) -> Usage {
    response
        .final_data
        .as_ref()
        .map(|d| Usage::new(d.prompt_eval_count, d.eval_count))
        .unwrap_or_default()
}

pub fn completion(response: ChatMessageResponse, id: String) -> Completion {
    let calls = tool_calls(&response.message);
    let usage = usage(&response);
    let finish = if calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    };
    Completion::single(
        id,
        response.model,
        Message::answer(Some(response.message.content), calls),
        finish,
        usage,
    )
}

/// The delta of one streamed Ollama message; tool calls arrive whole, so each
/// gets its id, name and complete arguments in one delta.
pub fn delta(response: &ChatMessageResponse, first: bool, tools_so_far: &mut u32) -> Delta {
    let calls: Vec<ToolCallDelta> = tool_calls(&response.message)
        .into_iter()
        .map(|call| {
            let index = *tools_so_far;
            *tools_so_far += 1;
            ToolCallDelta::start(index, call.id, call.function.name, call.function.arguments)
        })
        .collect();
    Delta {
        role: first.then_some(Role::Assistant),
        content: (!response.message.content.is_empty() || first).then(|| response.message.content.clone()),
        tool_calls: (!calls.is_empty()).then_some(calls),
        ..Delta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn translates_tools_options_and_history() {
        let request: ChatRequest = serde_json::from_value(json!({
            "model": "ollama/llama3.2",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"}
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
            "temperature": 0.5, "max_tokens": 10, "stop": ["x"],
            "response_format": {"type": "json_object"}
        }))
        .unwrap();
        let out = serde_json::to_value(chat_request(&request, "llama3.2").unwrap()).unwrap();
        assert_eq!(out["model"], "llama3.2");
        assert_eq!(
            out["messages"][2]["tool_calls"][0]["function"]["arguments"],
            json!({"a": 1})
        );
        assert_eq!(out["messages"][3]["role"], "tool");
        assert_eq!(
            out["tools"][0]["function"]["parameters"]["properties"]["a"]["type"],
            "integer"
        );
        assert_eq!(out["options"]["num_predict"], 10);
        assert_eq!(out["format"], "json");
    }

    #[test]
    fn remote_images_are_refused() {
        let request: ChatRequest =
            serde_json::from_value(json!({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://x/cat.png"}}
            ]}]}))
            .unwrap();
        assert!(chat_request(&request, "m").is_err());
    }
}
