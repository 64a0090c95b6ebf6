//! OpenAI chat request → the parts of a Bedrock Converse request.
//!
//! System and developer messages become `system` text blocks; user text and
//! `data:` image URLs become text and image blocks (Converse takes image
//! bytes, not links); assistant tool calls become `toolUse` blocks and tool
//! results `toolResult` blocks in a user turn. Consecutive turns of one role
//! are merged, as Converse wants strictly alternating roles, and a
//! conversation that opens with the assistant gets a short user turn first.
//! `max_tokens`, `temperature`, `top_p` and `stop` go to `inferenceConfig`;
//! tools to `toolConfig` with `tool_choice` as `auto`, `any` (OpenAI's
//! `required`) or `tool` (a named function). Converse has no "none": with
//! `tool_choice: "none"` the tools are left out, unless the conversation
//! already holds tool calls (Converse then wants the tools defined).

use aws_sdk_bedrockruntime::types::{
    AnyToolChoice, AutoToolChoice, ContentBlock, ConversationRole, ImageBlock, ImageFormat, ImageSource,
    InferenceConfiguration, Message as BedrockMessage, SpecificToolChoice, SystemContentBlock, Tool,
    ToolChoice as BedrockToolChoice, ToolConfiguration, ToolInputSchema, ToolResultBlock,
    ToolResultContentBlock, ToolSpecification, ToolUseBlock,
};
use aws_smithy_types::Blob;
use base64::Engine;
use serde_json::{Value, json};

use super::document;
use crate::chat::{ChatRequest, Content, ContentPart, Message, Role, ToolChoice};
use crate::providers::ProviderError;
use crate::providers::push_turn;

/// The user turn put before a conversation that starts with the assistant.
const LEADING_USER_TEXT: &str = "(conversation start)";

/// Everything a `Converse` / `ConverseStream` call takes besides the model.
#[derive(Debug)]
pub struct Converse {
    pub messages: Vec<BedrockMessage>,
    pub system: Vec<SystemContentBlock>,
    pub inference: Option<InferenceConfiguration>,
    pub tools: Option<ToolConfiguration>,
}

fn invalid(message: impl Into<String>) -> ProviderError {
    ProviderError::InvalidRequest(message.into())
}

pub fn converse_request(request: &ChatRequest) -> Result<Converse, ProviderError> {
    if request.n.is_some_and(|n| n > 1) {
        return Err(invalid("bedrock models return one choice; `n` must be 1"));
    }
    let mut system = Vec::new();
    let mut turns: Vec<(ConversationRole, Vec<ContentBlock>)> = Vec::new();
    for (index, message) in request.messages.iter().enumerate() {
        let (role, blocks) = match message.role {
            Role::System | Role::Developer => {
                let text = message.content.as_ref().map(Content::text).unwrap_or_default();
                // Converse refuses empty text blocks.
                if !text.is_empty() {
                    system.push(SystemContentBlock::Text(text));
                }
                continue;
            }
            Role::User => (ConversationRole::User, user_blocks(message, index)?),
            Role::Assistant => (ConversationRole::Assistant, assistant_blocks(message, index)?),
            Role::Tool => (ConversationRole::User, vec![tool_result_block(message, index)?]),
            Role::Function => {
                return Err(invalid(format!(
                    "messages[{index}]: role \"function\" is not supported for bedrock models; use tools"
                )));
            }
        };
        if blocks.is_empty() {
            continue;
        }
        push_turn(&mut turns, role, blocks);
    }
    if turns.is_empty() {
        return Err(invalid("messages: at least one user message is required"));
    }
    if turns[0].0 == ConversationRole::Assistant {
        turns.insert(
            0,
            (
                ConversationRole::User,
                vec![ContentBlock::Text(LEADING_USER_TEXT.into())],
            ),
        );
    }
    let has_tool_blocks = turns
        .iter()
        .flat_map(|(_, blocks)| blocks)
        .any(|b| matches!(b, ContentBlock::ToolUse(_) | ContentBlock::ToolResult(_)));
    let messages = turns
        .into_iter()
        .map(|(role, content)| {
            BedrockMessage::builder()
                .role(role)
                .set_content(Some(content))
                .build()
                .map_err(|err| invalid(format!("messages: {err}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Converse {
        messages,
        system,
        inference: inference_config(request),
        tools: tool_config(request, has_tool_blocks)?,
    })
}

fn inference_config(request: &ChatRequest) -> Option<InferenceConfiguration> {
    let stops = request.stop_sequences();
    let max_tokens = request
        .max_output_tokens()
        .map(|n| i32::try_from(n).unwrap_or(i32::MAX));
    if max_tokens.is_none() && request.temperature.is_none() && request.top_p.is_none() && stops.is_empty() {
        return None;
    }
    Some(
        InferenceConfiguration::builder()
            .set_max_tokens(max_tokens)
            // OpenAI accepts 0–2; Bedrock's models take 0–1.
            .set_temperature(request.temperature.map(|t| t.clamp(0.0, 1.0) as f32))
            .set_top_p(request.top_p.map(|p| p as f32))
            .set_stop_sequences((!stops.is_empty()).then_some(stops))
            .build(),
    )
}

fn tool_config(
    request: &ChatRequest,
    has_tool_blocks: bool,
) -> Result<Option<ToolConfiguration>, ProviderError> {
    let defined: Vec<_> = request
        .tools
        .iter()
        .flatten()
        .filter(|t| t.kind == "function")
        .collect();
    if defined.is_empty() {
        return Ok(None);
    }
    let choice = match &request.tool_choice {
        None => None,
        Some(ToolChoice::Mode(mode)) => match mode.as_str() {
            "auto" => Some(BedrockToolChoice::Auto(AutoToolChoice::builder().build())),
            "required" => Some(BedrockToolChoice::Any(AnyToolChoice::builder().build())),
            "none" if has_tool_blocks => None,
            "none" => return Ok(None),
            other => {
                return Err(invalid(format!(
                    "tool_choice: {other:?} is not \"none\", \"auto\" or \"required\""
                )));
            }
        },
        Some(ToolChoice::Named { function }) => Some(BedrockToolChoice::Tool(
            SpecificToolChoice::builder()
                .name(&function.name)
                .build()
                .map_err(|err| invalid(format!("tool_choice: {err}")))?,
        )),
    };
    let tools = defined
        .into_iter()
        .enumerate()
        .map(|(index, tool)| {
            let schema = tool
                .function
                .parameters
                .clone()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            ToolSpecification::builder()
                .name(&tool.function.name)
                .set_description(tool.function.description.clone())
                .input_schema(ToolInputSchema::Json(document::from_json(&schema)))
                .build()
                .map(Tool::ToolSpec)
                .map_err(|err| invalid(format!("tools[{index}]: {err}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ToolConfiguration::builder()
        .set_tools(Some(tools))
        .set_tool_choice(choice)
        .build()
        .map(Some)
        .map_err(|err| invalid(format!("tools: {err}")))
}

fn user_blocks(message: &Message, index: usize) -> Result<Vec<ContentBlock>, ProviderError> {
    match &message.content {
        None => Ok(Vec::new()),
        Some(Content::Text(text)) if text.is_empty() => Ok(Vec::new()),
        Some(Content::Text(text)) => Ok(vec![ContentBlock::Text(text.clone())]),
        Some(Content::Parts(parts)) => {
            let mut blocks = Vec::new();
            for (part_index, part) in parts.iter().enumerate() {
                match part {
                    ContentPart::ImageUrl { image_url } => {
                        blocks.push(image_block(&image_url.url).map_err(|why| {
                            invalid(format!(
                                "messages[{index}].content[{part_index}].image_url: {why}"
                            ))
                        })?)
                    }
                    other => {
                        if let Some(text) = other.text().filter(|t| !t.is_empty()) {
                            blocks.push(ContentBlock::Text(text.to_string()));
                        }
                    }
                }
            }
            Ok(blocks)
        }
    }
}

/// A `data:image/…;base64,…` URL as an image block.
fn image_block(url: &str) -> Result<ContentBlock, String> {
    let Some((meta, data)) = url.strip_prefix("data:").and_then(|rest| rest.split_once(',')) else {
        return Err("bedrock takes images as base64 data: URLs (data:image/png;base64,…)".into());
    };
    let Some(media_type) = meta.strip_suffix(";base64") else {
        return Err("the data: URL is not base64".into());
    };
    let format = match media_type {
        "image/png" => ImageFormat::Png,
        "image/jpeg" | "image/jpg" => ImageFormat::Jpeg,
        "image/gif" => ImageFormat::Gif,
        "image/webp" => ImageFormat::Webp,
        other => {
            return Err(format!(
                "{other:?} is not an image type bedrock takes (png, jpeg, gif, webp)"
            ));
        }
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|err| format!("not base64 ({err})"))?;
    ImageBlock::builder()
        .format(format)
        .source(ImageSource::Bytes(Blob::new(bytes)))
        .build()
        .map(ContentBlock::Image)
        .map_err(|err| err.to_string())
}

fn assistant_blocks(message: &Message, index: usize) -> Result<Vec<ContentBlock>, ProviderError> {
    let mut blocks = Vec::new();
    if let Some(content) = &message.content {
        let text = content.text();
        if !text.is_empty() {
            blocks.push(ContentBlock::Text(text));
        }
    }
    for (call_index, call) in message.tool_calls.iter().flatten().enumerate() {
        let at = format!("messages[{index}].tool_calls[{call_index}]");
        let arguments = call.function.arguments.trim();
        let input: Value = if arguments.is_empty() {
            json!({})
        } else {
            serde_json::from_str(arguments)
                .map_err(|err| invalid(format!("{at}.function.arguments: not JSON ({err})")))?
        };
        let block = ToolUseBlock::builder()
            .tool_use_id(&call.id)
            .name(&call.function.name)
            .input(document::from_json(&input))
            .build()
            .map_err(|err| invalid(format!("{at}: {err}")))?;
        blocks.push(ContentBlock::ToolUse(block));
    }
    Ok(blocks)
}

fn tool_result_block(message: &Message, index: usize) -> Result<ContentBlock, ProviderError> {
    let id = message.tool_call_id.as_deref().ok_or_else(|| {
        invalid(format!(
            "messages[{index}].tool_call_id: required for role \"tool\""
        ))
    })?;
    let text = message.content.as_ref().map(Content::text).unwrap_or_default();
    ToolResultBlock::builder()
        .tool_use_id(id)
        .content(ToolResultContentBlock::Text(text))
        .build()
        .map(ContentBlock::ToolResult)
        .map_err(|err| invalid(format!("messages[{index}]: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> ChatRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn system_images_and_settings_take_bedrock_shape() {
        let converse = converse_request(&request(
            json!({"model": "m", "max_tokens": 20, "temperature": 1.5,
            "top_p": 0.9, "stop": "END", "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "developer", "content": "No emoji."},
                {"role": "user", "content": [
                    {"type": "text", "text": "what is this"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
                ]}
            ]}),
        ))
        .unwrap();
        assert_eq!(
            converse.system,
            vec![
                SystemContentBlock::Text("Be brief.".into()),
                SystemContentBlock::Text("No emoji.".into())
            ]
        );
        assert_eq!(converse.messages.len(), 1);
        let content = converse.messages[0].content();
        assert_eq!(content[0], ContentBlock::Text("what is this".into()));
        let ContentBlock::Image(image) = &content[1] else {
            panic!("not an image: {content:?}")
        };
        assert_eq!(image.format(), &ImageFormat::Png);
        assert_eq!(
            image.source(),
            Some(&ImageSource::Bytes(Blob::new(b"\x89PNG\r\n\x1a\n".to_vec())))
        );
        let inference = converse.inference.unwrap();
        assert_eq!(inference.max_tokens(), Some(20));
        assert_eq!(inference.temperature(), Some(1.0));
        assert_eq!(inference.top_p(), Some(0.9));
        assert_eq!(inference.stop_sequences(), ["END".to_string()]);
        assert!(converse.tools.is_none());
    }

    #[test]
    fn tool_calls_and_results_alternate_roles() {
        let converse = converse_request(&request(json!({"model": "m", "messages": [
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "weather in lima and oslo"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": "{\"query\":\"lima\"}"}},
                {"id": "t2", "type": "function", "function": {"name": "lookup", "arguments": ""}}
            ]},
            {"role": "tool", "tool_call_id": "t1", "content": "sun"},
            {"role": "tool", "tool_call_id": "t2", "content": "snow"}
        ], "tools": [{"type": "function", "function": {"name": "lookup", "description": "Look up",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}],
            "tool_choice": "none"})))
        .unwrap();
        let roles: Vec<_> = converse.messages.iter().map(|m| m.role().clone()).collect();
        use ConversationRole::{Assistant, User};
        assert_eq!(roles, [User, Assistant, User, Assistant, User]);
        assert_eq!(
            converse.messages[0].content(),
            [ContentBlock::Text(LEADING_USER_TEXT.into())]
        );
        let ContentBlock::ToolUse(call) = &converse.messages[3].content()[0] else {
            panic!("not a tool use")
        };
        assert_eq!(call.tool_use_id(), "t1");
        assert_eq!(document::to_json(call.input()), json!({"query": "lima"}));
        let results = converse.messages[4].content();
        assert_eq!(results.len(), 2);
        let ContentBlock::ToolResult(result) = &results[1] else {
            panic!("not a tool result")
        };
        assert_eq!(result.tool_use_id(), "t2");
        assert_eq!(result.content(), [ToolResultContentBlock::Text("snow".into())]);
        // "none" with tool calls in the history: the tools stay, no choice is forced.
        let tools = converse.tools.unwrap();
        assert_eq!(tools.tool_choice(), None);
        let Tool::ToolSpec(spec) = &tools.tools()[0] else {
            panic!("not a tool spec")
        };
        assert_eq!(spec.name(), "lookup");
        assert_eq!(spec.description(), Some("Look up"));
    }

    #[test]
    fn tool_choice_maps_to_auto_any_tool_or_no_tools() {
        let with = |choice: Value| {
            converse_request(&request(
                json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "lookup"}}], "tool_choice": choice}),
            ))
        };
        let choice = |value: Value| with(value).unwrap().tools.unwrap().tool_choice().cloned();
        assert!(matches!(choice(json!("auto")), Some(BedrockToolChoice::Auto(_))));
        assert!(matches!(
            choice(json!("required")),
            Some(BedrockToolChoice::Any(_))
        ));
        let Some(BedrockToolChoice::Tool(named)) =
            choice(json!({"type": "function", "function": {"name": "lookup"}}))
        else {
            panic!("not a named choice")
        };
        assert_eq!(named.name(), "lookup");
        assert!(with(json!("none")).unwrap().tools.is_none());
        assert!(with(json!("sometimes")).is_err());
    }

    #[test]
    fn refuses_what_converse_cannot_take() {
        let linked = converse_request(&request(
            json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}]}]}),
        ));
        let message = linked.unwrap_err().to_string();
        assert!(message.contains("messages[0].content[0].image_url"), "{message}");
        assert!(message.contains("data: URLs"), "{message}");
        let svg = converse_request(&request(
            json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/svg+xml;base64,PHN2Zz4="}}]}]}),
        ));
        assert!(svg.unwrap_err().to_string().contains("image/svg+xml"));
        let none = converse_request(&request(
            json!({"model": "m", "messages": [{"role": "system", "content": "x"}]}),
        ));
        assert!(
            none.unwrap_err()
                .to_string()
                .contains("at least one user message")
        );
        let n = converse_request(&request(
            json!({"model": "m", "n": 2, "messages": [{"role": "user", "content": "x"}]}),
        ));
        assert!(n.is_err());
    }
}
