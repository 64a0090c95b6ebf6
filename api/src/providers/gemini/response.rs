//! Gemini `GenerateContentResponse`s and errors → OpenAI shapes: each
//! candidate a choice, `functionCall` parts tool calls (a thinking model's
//! `thoughtSignature` kept in the call's id), thought parts left out,
//! `usageMetadata` as usage (thinking tokens are completion tokens, reported
//! as reasoning tokens; cached content as cached prompt tokens) and
//! `finishReason` as `finish_reason`.

use serde::Deserialize;
use serde_json::Value;

use crate::chat::{Choice, Completion, FinishReason, Message, ToolCall, Usage};

/// Between a tool call's own id and the thought signature it carries.
const SIGNATURE_MARK: &str = "~sig~";

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    pub usage_metadata: Option<UsageMetadata>,
    pub model_version: Option<String>,
    pub response_id: Option<String>,
    pub prompt_feedback: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    #[serde(default)]
    pub content: Option<CandidateContent>,
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub index: u32,
}

#[derive(Debug, Default, Deserialize)]
pub struct CandidateContent {
    #[serde(default)]
    pub parts: Vec<Part>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    pub text: Option<String>,
    #[serde(default)]
    pub thought: bool,
    pub function_call: Option<FunctionCall>,
    pub thought_signature: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub args: Value,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    #[serde(default)]
    pub prompt_token_count: u64,
    #[serde(default)]
    pub candidates_token_count: u64,
    #[serde(default)]
    pub thoughts_token_count: u64,
    #[serde(default)]
    pub cached_content_token_count: u64,
}

impl UsageMetadata {
    pub fn to_usage(self) -> Usage {
        let mut usage = Usage::new(
            self.prompt_token_count,
            self.candidates_token_count + self.thoughts_token_count,
        );
        if self.cached_content_token_count > 0 {
            usage = usage.with_cache(self.cached_content_token_count, 0);
        }
        if self.thoughts_token_count > 0 {
            usage = usage.with_reasoning(self.thoughts_token_count);
        }
        usage
    }
}

/// A tool call's id, carrying the thought signature that came with it.
pub fn call_id(signature: Option<&str>) -> String {
    let id = format!("call_{}", uuid::Uuid::new_v4().simple());
    match signature {
        Some(signature) => format!("{id}{SIGNATURE_MARK}{signature}"),
        None => id,
    }
}

/// The thought signature a tool call's id carries, if any.
pub fn signature_of(call_id: &str) -> Option<&str> {
    call_id.split_once(SIGNATURE_MARK).map(|(_, signature)| signature)
}

pub fn finish_reason(reason: Option<&str>, called_tools: bool) -> FinishReason {
    match reason {
        Some("MAX_TOKENS") => FinishReason::Length,
        Some(
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY"
            | "LANGUAGE",
        ) => FinishReason::ContentFilter,
        _ if called_tools => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    }
}

/// A part's tool call, in OpenAI's shape.
pub fn tool_call(part: &Part) -> Option<ToolCall> {
    let call = part.function_call.as_ref()?;
    let args = if call.args.is_null() {
        "{}".to_string()
    } else {
        call.args.to_string()
    };
    Some(ToolCall::function(
        call_id(part.thought_signature.as_deref()),
        call.name.clone(),
        args,
    ))
}

pub fn to_completion(response: Response, model: &str) -> Completion {
    let mut choices: Vec<Choice> = response
        .candidates
        .iter()
        .map(|candidate| {
            let mut text = String::new();
            let mut tool_calls = Vec::new();
            for part in candidate.content.iter().flat_map(|c| &c.parts) {
                if let Some(call) = tool_call(part) {
                    tool_calls.push(call);
                } else if let Some(t) = &part.text
                    && !part.thought
                {
                    text.push_str(t);
                }
            }
            let finish = finish_reason(candidate.finish_reason.as_deref(), !tool_calls.is_empty());
            let content = (!text.is_empty() || tool_calls.is_empty()).then_some(text);
            Choice::new(candidate.index, Message::answer(content, tool_calls), finish)
        })
        .collect();
    if choices.is_empty() {
        // The prompt itself was blocked (`promptFeedback.blockReason`).
        let mut message = Message::answer(None, Vec::new());
        if let Some(reason) = response
            .prompt_feedback
            .as_ref()
            .and_then(|f| f["blockReason"].as_str())
        {
            message.extra.insert(
                "refusal".into(),
                format!("the prompt was blocked ({reason})").into(),
            );
        }
        choices.push(Choice::new(0, message, FinishReason::ContentFilter));
    }
    Completion::new(
        response
            .response_id
            .map_or_else(crate::providers::completion_id, |id| format!("chatcmpl-{id}")),
        response.model_version.unwrap_or_else(|| model.to_string()),
        choices,
        response.usage_metadata.unwrap_or_default().to_usage(),
    )
}

/// Google's error body: `{"error": {"code", "message", "status"}}`.
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
pub struct ErrorDetail {
    pub message: String,
    pub status: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn function_calls_become_tool_calls_with_their_signature() {
        let response: Response = serde_json::from_value(json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"text": "thinking…", "thought": true},
                {"text": "Let me check."},
                {"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"}
            ]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 7, "thoughtsTokenCount": 5,
                "cachedContentTokenCount": 4, "totalTokenCount": 24},
            "modelVersion": "gemini-2.5-flash", "responseId": "r1"
        }))
        .unwrap();
        let out = serde_json::to_value(to_completion(response, "g")).unwrap();
        let choice = &out["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(choice["message"]["content"], "Let me check.");
        let call = &choice["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "weather");
        assert_eq!(call["function"]["arguments"], "{\"city\":\"Paris\"}");
        assert_eq!(signature_of(call["id"].as_str().unwrap()), Some("c2ln"));
        assert_eq!(out["id"], "chatcmpl-r1");
        assert_eq!(out["model"], "gemini-2.5-flash");
        assert_eq!(
            out["usage"],
            json!({"prompt_tokens": 12, "completion_tokens": 12, "total_tokens": 24,
                "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 5}})
        );
    }

    #[test]
    fn finish_reasons_and_blocked_prompts() {
        assert_eq!(finish_reason(Some("STOP"), false), FinishReason::Stop);
        assert_eq!(finish_reason(Some("MAX_TOKENS"), true), FinishReason::Length);
        assert_eq!(finish_reason(Some("SAFETY"), false), FinishReason::ContentFilter);
        let blocked: Response =
            serde_json::from_value(json!({"promptFeedback": {"blockReason": "SAFETY"}})).unwrap();
        let out = serde_json::to_value(to_completion(blocked, "g")).unwrap();
        assert_eq!(out["choices"][0]["finish_reason"], "content_filter");
        assert_eq!(
            out["choices"][0]["message"]["refusal"],
            "the prompt was blocked (SAFETY)"
        );
        assert_eq!(out["model"], "g");
    }
}
