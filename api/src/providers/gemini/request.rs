//! OpenAI chat request → Gemini `generateContent` request.
//!
//! System and developer messages become `systemInstruction`; the assistant is
//! the `model` role; its tool calls are `functionCall` parts and tool results
//! `functionResponse` parts in a user turn (named after the call they answer,
//! as Gemini matches results by name; a thinking model's `thoughtSignature`
//! rides in the call's id and goes back with the call); consecutive turns of one role merge;
//! `data:` images become `inlineData`, other image URLs `fileData`. Tools are
//! `functionDeclarations` with their JSON Schema as `parametersJsonSchema`;
//! `tool_choice` is `toolConfig.functionCallingConfig`; sampling settings,
//! stop sequences and JSON output go into `generationConfig`.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::chat::{ChatRequest, Content, ContentPart, Message, Role, ToolChoice};
use crate::providers::ProviderError;

fn invalid(message: String) -> ProviderError {
    ProviderError::InvalidRequest(message)
}

pub fn generate_request(request: &ChatRequest) -> Result<Value, ProviderError> {
    let mut system = Vec::new();
    let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
    // Tool call id → function name, for the results that answer them.
    let mut call_names: HashMap<&str, &str> = HashMap::new();
    for (index, message) in request.messages.iter().enumerate() {
        let (role, parts) = match message.role {
            Role::System | Role::Developer => {
                if let Some(content) = &message.content {
                    system.push(json!({"text": content.text()}));
                }
                continue;
            }
            Role::User => ("user", user_parts(message)),
            Role::Assistant => {
                for call in message.tool_calls.iter().flatten() {
                    call_names.insert(&call.id, &call.function.name);
                }
                ("model", model_parts(message, index)?)
            }
            Role::Tool => ("user", vec![function_response(message, index, &call_names)?]),
            Role::Function => {
                return Err(invalid(format!(
                    "messages[{index}]: role \"function\" is not supported for gemini models; use tools"
                )));
            }
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last_role, last_parts)) if *last_role == role => last_parts.extend(parts),
            _ => contents.push((role, parts)),
        }
    }
    if contents.is_empty() {
        return Err(invalid("messages: at least one user message is required".into()));
    }
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(
            contents
                .into_iter()
                .map(|(role, parts)| json!({"role": role, "parts": parts}))
                .collect(),
        ),
    );
    if !system.is_empty() {
        body.insert("systemInstruction".into(), json!({"parts": system}));
    }
    if let Some(tools) = &request.tools {
        let declarations: Vec<Value> = tools
            .iter()
            .filter(|t| t.kind == "function")
            .map(|t| {
                let mut declaration = json!({"name": t.function.name});
                if let Some(description) = &t.function.description {
                    declaration["description"] = json!(description);
                }
                if let Some(parameters) = &t.function.parameters {
                    declaration["parametersJsonSchema"] = parameters.clone();
                }
                declaration
            })
            .collect();
        if !declarations.is_empty() {
            body.insert("tools".into(), json!([{"functionDeclarations": declarations}]));
        }
    }
    if let Some(config) = tool_config(request)? {
        body.insert("toolConfig".into(), config);
    }
    let generation = generation_config(request)?;
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    Ok(Value::Object(body))
}

fn tool_config(request: &ChatRequest) -> Result<Option<Value>, ProviderError> {
    let config = match &request.tool_choice {
        None => return Ok(None),
        Some(ToolChoice::Mode(mode)) => match mode.as_str() {
            "auto" => json!({"mode": "AUTO"}),
            "required" => json!({"mode": "ANY"}),
            "none" => json!({"mode": "NONE"}),
            other => {
                return Err(invalid(format!(
                    "tool_choice: {other:?} is not \"none\", \"auto\" or \"required\""
                )));
            }
        },
        Some(ToolChoice::Named { function }) => {
            json!({"mode": "ANY", "allowedFunctionNames": [function.name]})
        }
    };
    Ok(Some(json!({"functionCallingConfig": config})))
}

fn generation_config(request: &ChatRequest) -> Result<Map<String, Value>, ProviderError> {
    let mut config = Map::new();
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            config.insert(key.into(), value);
        }
    };
    set("temperature", request.temperature.map(|t| json!(t)));
    set("topP", request.top_p.map(|t| json!(t)));
    set("maxOutputTokens", request.max_output_tokens().map(|t| json!(t)));
    set("candidateCount", request.n.map(|n| json!(n)));
    set("seed", request.seed.map(|s| json!(s)));
    set("presencePenalty", request.presence_penalty.map(|p| json!(p)));
    set("frequencyPenalty", request.frequency_penalty.map(|p| json!(p)));
    let stops = request.stop_sequences();
    set("stopSequences", (!stops.is_empty()).then(|| json!(stops)));
    if let Some(format) = &request.response_format {
        match format.kind.as_str() {
            "text" => {}
            "json_object" => set("responseMimeType", Some(json!("application/json"))),
            "json_schema" => {
                let schema = format
                    .json_schema
                    .as_ref()
                    .and_then(|s| s.schema.clone())
                    .ok_or_else(|| invalid("response_format.json_schema.schema: required".into()))?;
                set("responseMimeType", Some(json!("application/json")));
                set("responseJsonSchema", Some(schema));
            }
            other => {
                return Err(invalid(format!(
                    "response_format.type: {other:?} is not \"text\", \"json_object\" or \"json_schema\""
                )));
            }
        }
    }
    if request.logprobs == Some(true) {
        set("responseLogprobs", Some(json!(true)));
        set("logprobs", request.top_logprobs.map(|n| json!(n)));
    }
    Ok(config)
}

fn user_parts(message: &Message) -> Vec<Value> {
    match &message.content {
        None => Vec::new(),
        Some(Content::Text(text)) => vec![json!({"text": text})],
        Some(Content::Parts(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } => Some(json!({"text": text})),
                ContentPart::ImageUrl { image_url } => Some(image_part(&image_url.url)),
                ContentPart::Other(_) => part.text().map(|text| json!({"text": text})),
            })
            .collect(),
    }
}

fn image_part(url: &str) -> Value {
    // data:image/png;base64,AAAA
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((meta, data)) = rest.split_once(',')
        && let Some(mime_type) = meta.strip_suffix(";base64")
    {
        return json!({"inlineData": {"mimeType": mime_type, "data": data}});
    }
    let mime_type = match url.rsplit('.').next().map(str::to_ascii_lowercase).as_deref() {
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        _ => "image/jpeg",
    };
    json!({"fileData": {"mimeType": mime_type, "fileUri": url}})
}

fn model_parts(message: &Message, index: usize) -> Result<Vec<Value>, ProviderError> {
    let mut parts = Vec::new();
    if let Some(content) = &message.content {
        let text = content.text();
        if !text.is_empty() {
            parts.push(json!({"text": text}));
        }
    }
    for (call_index, call) in message.tool_calls.iter().flatten().enumerate() {
        let arguments = call.function.arguments.trim();
        let args: Value = if arguments.is_empty() {
            json!({})
        } else {
            serde_json::from_str(arguments).map_err(|err| {
                invalid(format!(
                    "messages[{index}].tool_calls[{call_index}].function.arguments: not JSON ({err})"
                ))
            })?
        };
        let mut part = json!({"functionCall": {"name": call.function.name, "args": args}});
        // Thinking models want their signature back with the call it came with.
        if let Some(signature) = super::response::signature_of(&call.id) {
            part["thoughtSignature"] = json!(signature);
        }
        parts.push(part);
    }
    Ok(parts)
}

fn function_response(
    message: &Message,
    index: usize,
    call_names: &HashMap<&str, &str>,
) -> Result<Value, ProviderError> {
    let id = message.tool_call_id.as_deref().ok_or_else(|| {
        invalid(format!(
            "messages[{index}].tool_call_id: required for role \"tool\""
        ))
    })?;
    let name = call_names.get(id).ok_or_else(|| {
        invalid(format!(
            "messages[{index}].tool_call_id: {id:?} answers no tool call of an earlier assistant message"
        ))
    })?;
    let text = message.content.as_ref().map(Content::text).unwrap_or_default();
    // Gemini wants an object: a JSON object result as it is, anything else wrapped.
    let response = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => json!({"content": text}),
    };
    Ok(json!({"functionResponse": {"name": name, "response": response}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(value: Value) -> ChatRequest {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn translates_roles_tools_images_and_settings() {
        let req = request(json!({
            "model": "gemini/g",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [
                    {"type": "text", "text": "what is this, and the weather?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}
                ]},
                {"role": "assistant", "content": "Looking.", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "time", "arguments": ""}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "c2", "content": "{\"hour\": 9}"}
            ],
            "tools": [{"type": "function", "function": {"name": "weather", "description": "w",
                "parameters": {"type": "object", "additionalProperties": false}}}],
            "tool_choice": {"type": "function", "function": {"name": "weather"}},
            "max_tokens": 50, "temperature": 0.2, "stop": ["END"],
            "response_format": {"type": "json_object"}
        }));
        let out = generate_request(&req).unwrap();
        assert_eq!(
            out["systemInstruction"],
            json!({"parts": [{"text": "Be brief."}]})
        );
        let contents = out["contents"].as_array().unwrap();
        assert_eq!(
            contents.len(),
            3,
            "tool results merge into one user turn: {contents:?}"
        );
        assert_eq!(
            contents[0]["parts"][1]["inlineData"],
            json!({"mimeType": "image/png", "data": "iVBO"})
        );
        assert_eq!(contents[1]["role"], "model");
        assert_eq!(contents[1]["parts"][0]["text"], "Looking.");
        assert_eq!(
            contents[1]["parts"][1]["functionCall"],
            json!({"name": "weather", "args": {"city": "Paris"}})
        );
        assert_eq!(contents[1]["parts"][2]["functionCall"]["args"], json!({}));
        assert_eq!(
            contents[2]["parts"][0]["functionResponse"],
            json!({"name": "weather", "response": {"content": "sunny"}})
        );
        assert_eq!(
            contents[2]["parts"][1]["functionResponse"]["response"],
            json!({"hour": 9})
        );
        let declaration = &out["tools"][0]["functionDeclarations"][0];
        assert_eq!(declaration["parametersJsonSchema"]["additionalProperties"], false);
        assert_eq!(
            out["toolConfig"],
            json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}})
        );
        assert_eq!(
            out["generationConfig"],
            json!({"temperature": 0.2, "maxOutputTokens": 50, "stopSequences": ["END"], "responseMimeType": "application/json"})
        );
    }

    #[test]
    fn bad_requests_name_the_field() {
        let orphan = request(json!({"model": "m", "messages": [
            {"role": "user", "content": "x"},
            {"role": "tool", "tool_call_id": "nope", "content": "r"}
        ]}));
        let err = generate_request(&orphan).unwrap_err().to_string();
        assert!(err.starts_with("messages[1].tool_call_id: "), "{err}");
        let only_system = request(json!({"model": "m", "messages": [{"role": "system", "content": "x"}]}));
        assert!(
            generate_request(&only_system)
                .unwrap_err()
                .to_string()
                .starts_with("messages: ")
        );
        let choice = request(
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"}),
        );
        assert!(
            generate_request(&choice)
                .unwrap_err()
                .to_string()
                .starts_with("tool_choice: ")
        );
    }
}
