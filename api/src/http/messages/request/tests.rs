use super::*;

fn translate(body: Value) -> Result<Object, ApiError> {
    match body {
        Value::Object(map) => to_chat(&map),
        _ => unreachable!(),
    }
}

fn param_of(body: Value) -> String {
    match translate(body) {
        Err(ApiError::BadRequest { param, message, .. }) => {
            let param = param.unwrap_or_default();
            assert!(message.starts_with(&param), "{message} names {param}");
            param
        }
        other => panic!("expected a bad request, got {other:?}"),
    }
}

#[test]
fn a_full_conversation_translates() {
    let chat = translate(json!({
        "model": "openai/gpt-4o-mini", "max_tokens": 100, "stream": true,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"q": "x"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a cat"}]},
                {"type": "text", "text": "and now?"}
            ]}
        ],
        "tools": [{"name": "look", "description": "Looks", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "stop_sequences": ["END"], "temperature": 0.5, "top_k": 3,
        "metadata": {"user_id": "u-1"}
    }))
    .unwrap();
    assert_eq!(
        Value::Object(chat),
        json!({
            "model": "openai/gpt-4o-mini", "max_tokens": 100,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}
                ]},
                {"role": "assistant", "content": "Let me check.", "tool_calls": [
                    {"id": "toolu_1", "type": "function", "function": {"name": "look", "arguments": "{\"q\":\"x\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "toolu_1", "content": "a cat"},
                {"role": "user", "content": [{"type": "text", "text": "and now?"}]}
            ],
            "tools": [{"type": "function", "function": {"name": "look", "description": "Looks", "parameters": {"type": "object"}}}],
            "tool_choice": "required", "parallel_tool_calls": false,
            "stop": ["END"], "temperature": 0.5, "user": "u-1",
            "stream": true, "stream_options": {"include_usage": true}
        })
    );
}

#[test]
fn tool_errors_and_named_tool_choice() {
    let chat = translate(json!({
        "model": "m", "max_tokens": 5,
        "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "boom", "is_error": true}
        ]}],
        "tool_choice": {"type": "tool", "name": "look"}
    }))
    .unwrap();
    assert_eq!(chat["messages"][0]["content"], "Error: boom");
    assert_eq!(chat["tool_choice"]["function"]["name"], "look");
    let chat = translate(json!({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "hi"}, {"role": "system", "content": [{"type": "text", "text": "now be brief"}]}
    ]}))
    .unwrap();
    assert_eq!(
        chat["messages"][1],
        json!({"role": "system", "content": "now be brief"})
    );
}

#[test]
fn errors_name_the_field_path() {
    assert_eq!(param_of(json!({"model": "m", "messages": []})), "max_tokens");
    assert_eq!(
        param_of(json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"text": "no type"}]}
        ]})),
        "messages.1.content.0.type"
    );
    assert_eq!(
        param_of(json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": [{"type": "document", "source": {}}]}
        ]})),
        "messages.0.content.0.type"
    );
    assert_eq!(
        param_of(
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]})
        ),
        "tools.0.type"
    );
    assert_eq!(
        param_of(json!({"model": "m", "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]})),
        "messages.0.role"
    );
}
