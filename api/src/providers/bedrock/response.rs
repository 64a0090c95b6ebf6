//! Converse answers and errors → OpenAI shapes: text blocks joined as the
//! message's content, `toolUse` blocks as tool calls (their ids kept, so
//! results find their way back), reasoning blocks left out, `stopReason` as
//! `finish_reason`, `usage` as usage (cache reads as cached prompt tokens,
//! cache writes as written ones). AWS errors keep the meaning of their
//! exception name: throttling is 429, validation 400, access and signature
//! problems 403, a model that is not ready or a service that is down 503.

use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse::ConverseOutput;
use aws_sdk_bedrockruntime::types::{ContentBlock, ConverseOutput as Output, StopReason, TokenUsage};

use super::document;
use crate::chat::{Completion, FinishReason, Message, ToolCall, Usage};
use crate::error_chain::root_cause;
use crate::providers::ProviderError;

pub fn finish_reason(reason: &StopReason) -> FinishReason {
    match reason {
        StopReason::MaxTokens | StopReason::ModelContextWindowExceeded => FinishReason::Length,
        StopReason::ToolUse => FinishReason::ToolCalls,
        StopReason::ContentFiltered | StopReason::GuardrailIntervened => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    }
}

pub fn usage(usage: &TokenUsage) -> Usage {
    let non_negative = |n: i32| u64::try_from(n).unwrap_or_default();
    let read = usage.cache_read_input_tokens().map_or(0, non_negative);
    let written = usage.cache_write_input_tokens().map_or(0, non_negative);
    // Bedrock counts cached input apart from `inputTokens`; OpenAI's prompt tokens include it.
    let mut out = Usage::new(
        non_negative(usage.input_tokens()) + read + written,
        non_negative(usage.output_tokens()),
    );
    if read > 0 || written > 0 {
        out = out.with_cache(read, written);
    }
    out
}

pub fn tool_call(id: &str, name: &str, input: &aws_smithy_types::Document) -> ToolCall {
    let arguments = match document::to_json(input) {
        serde_json::Value::Null => "{}".to_string(),
        value => value.to_string(),
    };
    ToolCall::function(id, name, arguments)
}

pub fn to_completion(output: &ConverseOutput, model: &str) -> Completion {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    if let Some(Output::Message(message)) = output.output() {
        for block in message.content() {
            match block {
                ContentBlock::Text(t) => text.push_str(t),
                ContentBlock::ToolUse(call) => {
                    tool_calls.push(tool_call(call.tool_use_id(), call.name(), call.input()))
                }
                _ => {}
            }
        }
    }
    let content = (!text.is_empty() || tool_calls.is_empty()).then_some(text);
    Completion::single(
        crate::providers::completion_id(),
        model.to_string(),
        Message::answer(content, tool_calls),
        finish_reason(output.stop_reason()),
        output.usage().map(usage).unwrap_or_default(),
    )
}

/// The status an AWS exception means for an OpenAI client.
fn status_of(code: &str, http: Option<u16>) -> u16 {
    match code {
        "ThrottlingException" | "ServiceQuotaExceededException" | "TooManyRequestsException" => 429,
        "ValidationException" | "SerializationException" => 400,
        "AccessDeniedException"
        | "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "IncompleteSignatureException"
        | "ExpiredTokenException"
        | "MissingAuthenticationTokenException" => 403,
        "ResourceNotFoundException" => 404,
        "ModelNotReadyException" | "ServiceUnavailableException" => 503,
        "ModelTimeoutException" => 504,
        "ModelErrorException" | "ModelStreamErrorException" => 502,
        "InternalServerException" => 500,
        _ => http.filter(|s| *s >= 400).unwrap_or(500),
    }
}

fn kind_of(status: u16) -> Option<String> {
    match status {
        400 => Some("invalid_request_error".into()),
        403 => Some("permission_error".into()),
        404 => Some("not_found_error".into()),
        429 => Some("rate_limit_error".into()),
        _ => None,
    }
}

/// An AWS exception by name (from a response or a stream's exception event).
pub fn exception(provider: &str, code: &str, message: Option<&str>, http: Option<u16>) -> ProviderError {
    let status = status_of(code, http);
    let detail = message.filter(|m| !m.is_empty()).unwrap_or("no detail");
    ProviderError::Upstream {
        provider: provider.to_string(),
        status,
        message: format!("{code}: {detail}"),
        kind: kind_of(status),
        code: Some(match status {
            404 => "model_not_found".to_string(),
            _ => code.to_string(),
        }),
        param: None,
    }
}

/// Any failure of an SDK call.
pub fn sdk_error<E, R>(
    provider: &str,
    err: SdkError<E, R>,
    timeout: std::time::Duration,
    http: Option<u16>,
) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match &err {
        SdkError::ServiceError(_) => {
            let code = err.code().unwrap_or("UnknownError").to_string();
            exception(provider, &code, err.message(), http)
        }
        SdkError::TimeoutError(_) => ProviderError::Timeout {
            provider: provider.into(),
            after: timeout,
        },
        SdkError::DispatchFailure(failure) if failure.is_io() || failure.is_timeout() => {
            ProviderError::Connect {
                provider: provider.into(),
                detail: root_cause(&err),
            }
        }
        // Before anything was sent: no credentials, no region, a signing failure.
        SdkError::DispatchFailure(_) | SdkError::ConstructionFailure(_) => ProviderError::Upstream {
            provider: provider.into(),
            status: 500,
            message: format!("the request could not be signed or sent: {}", root_cause(&err)),
            kind: Some("authentication_error".into()),
            code: Some("aws_credentials".into()),
            param: None,
        },
        _ => ProviderError::BadResponse {
            provider: provider.into(),
            detail: root_cause(&err),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_bedrockruntime::types::{ConversationRole, Message, ToolUseBlock};
    use serde_json::json;

    #[test]
    fn text_tool_calls_stop_reason_and_usage() {
        let message = Message::builder()
            .role(ConversationRole::Assistant)
            .content(ContentBlock::Text("Let me ".into()))
            .content(ContentBlock::Text("check.".into()))
            .content(ContentBlock::ToolUse(
                ToolUseBlock::builder()
                    .tool_use_id("tooluse_1")
                    .name("lookup")
                    .input(document::from_json(&json!({"query": "lima"})))
                    .build()
                    .unwrap(),
            ))
            .build()
            .unwrap();
        let output = ConverseOutput::builder()
            .output(Output::Message(message))
            .stop_reason(StopReason::ToolUse)
            .usage(
                TokenUsage::builder()
                    .input_tokens(10)
                    .output_tokens(4)
                    .total_tokens(20)
                    .cache_read_input_tokens(6)
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        let out = serde_json::to_value(to_completion(&output, "anthropic.claude")).unwrap();
        let choice = &out["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(choice["message"]["content"], "Let me check.");
        assert_eq!(choice["message"]["tool_calls"][0]["id"], "tooluse_1");
        assert_eq!(
            choice["message"]["tool_calls"][0]["function"]["arguments"],
            "{\"query\":\"lima\"}"
        );
        assert_eq!(out["model"], "anthropic.claude");
        assert_eq!(
            out["usage"],
            json!({"prompt_tokens": 16, "completion_tokens": 4, "total_tokens": 20,
                "prompt_tokens_details": {"cached_tokens": 6}})
        );
    }

    #[test]
    fn stop_reasons_and_exceptions() {
        assert_eq!(finish_reason(&StopReason::EndTurn), FinishReason::Stop);
        assert_eq!(finish_reason(&StopReason::StopSequence), FinishReason::Stop);
        assert_eq!(finish_reason(&StopReason::MaxTokens), FinishReason::Length);
        assert_eq!(
            finish_reason(&StopReason::GuardrailIntervened),
            FinishReason::ContentFilter
        );
        assert_eq!(
            finish_reason(&StopReason::ContentFiltered),
            FinishReason::ContentFilter
        );
        for (code, status) in [
            ("ThrottlingException", 429),
            ("ValidationException", 400),
            ("AccessDeniedException", 403),
            ("InvalidSignatureException", 403),
            ("UnrecognizedClientException", 403),
            ("ModelNotReadyException", 503),
            ("ServiceUnavailableException", 503),
            ("ResourceNotFoundException", 404),
            ("InternalServerException", 500),
        ] {
            let err = exception("bedrock", code, Some("why"), Some(400));
            let ProviderError::Upstream {
                status: got, message, ..
            } = &err
            else {
                panic!("{err:?}")
            };
            assert_eq!((code, *got), (code, status));
            assert_eq!(message, &format!("{code}: why"));
        }
        let ProviderError::Upstream { status, .. } = exception("bedrock", "SomethingNew", None, Some(409))
        else {
            panic!()
        };
        assert_eq!(status, 409);
    }
}
