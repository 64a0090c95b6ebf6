//! Log lines in every shape the log has written read and write back as
//! they were stored.

use serde_json::{Value, json};

use super::*;
use crate::chat::FinishReason;

/// Lines as the log has written them over time (the old writer's key order:
/// `ts`, `role`, `content`, `name`, `tool_calls`, `tool_call_id`, `model`,
/// `usage`, `aborted`, `kept_from`; usage objects as upstreams sent them).
const STORED: &[&str] = &[
    // A client's message with string content.
    r#"{"ts":"2026-11-20T10:00:00.000Z","role":"user","content":"hi"}"#,
    // A named message with parts: text, an image with its detail, a part with
    // `cache_control`, audio.
    r#"{"ts":"2026-11-20T10:00:00.000Z","role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA","detail":"low"}},{"type":"text","text":"cached","cache_control":{"type":"ephemeral"}},{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}}],"name":"ann"}"#,
    // An answer that only called tools (the streaming recorder's shape).
    r#"{"ts":"2026-11-20T10:00:01.000Z","role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"time","arguments":"{}"}}],"model":"openai/gpt-4o-mini"}"#,
    // The agent loop's shape: empty text beside the calls.
    r#"{"ts":"2026-11-20T10:00:01.000Z","role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"exec","arguments":"{}"}}]}"#,
    // Tool results.
    r#"{"ts":"2026-11-20T10:00:02.000Z","role":"tool","content":"18 °C","tool_call_id":"call_1"}"#,
    r#"{"ts":"2026-11-20T10:00:02.000Z","role":"tool","content":"(cancelled before this tool finished)","tool_call_id":"call_2"}"#,
    // Answers cut short.
    r#"{"ts":"2026-11-20T10:00:03.000Z","role":"assistant","content":"half an ans","model":"openai/gpt-4o-mini","aborted":true}"#,
    r#"{"ts":"2026-11-20T10:00:03.000Z","role":"assistant","content":"(interrupted: the server working on this answer stopped before it finished)","aborted":true}"#,
    // Compaction records, before and after they carried `kept_from`.
    r#"{"ts":"2026-11-24T08:00:00.000Z","role":"compaction","content":"we planned a trip"}"#,
    r#"{"ts":"2026-11-25T08:00:00.000Z","role":"compaction","content":"we planned a trip","kept_from":7}"#,
    // A function-role message (the legacy function calling).
    r#"{"ts":"2026-11-20T10:00:00.000Z","role":"function","content":"42","name":"answer"}"#,
];

/// Lines with usage, as upstreams reported it (the recorder stored it raw;
/// the agent loop stores Onyx's own).
const STORED_WITH_USAGE: &[&str] = &[
    // Onyx's own (the agent loop), with cache reads and writes and reasoning.
    r#"{"ts":"t","role":"assistant","content":"ok","model":"anthropic/claude-sonnet-4-5","usage":{"completion_tokens":4,"completion_tokens_details":{"reasoning_tokens":2},"prompt_tokens":30,"prompt_tokens_details":{"cache_write_tokens":5,"cached_tokens":20},"total_tokens":34}}"#,
    // OpenAI: details with audio and prediction counts.
    r#"{"ts":"t","role":"assistant","content":"ok","model":"openai/gpt-4o","usage":{"completion_tokens":9,"completion_tokens_details":{"accepted_prediction_tokens":0,"audio_tokens":0,"reasoning_tokens":0,"rejected_prediction_tokens":0},"prompt_tokens":19,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":0},"total_tokens":28}}"#,
    // OpenRouter: its price, BYOK flag and a reported zero of cache writes.
    r#"{"ts":"t","role":"assistant","content":"ok","model":"openrouter/x","usage":{"completion_tokens":3,"cost":0.00042,"is_byok":false,"prompt_tokens":5,"prompt_tokens_details":{"cache_write_tokens":0,"cached_tokens":0},"total_tokens":8}}"#,
    // vLLM: `null` details.
    r#"{"ts":"t","role":"assistant","content":"ok","model":"vllm/q","usage":{"completion_tokens":3,"prompt_tokens":5,"prompt_tokens_details":null,"total_tokens":8}}"#,
    // Groq: timings beside the counts.
    r#"{"ts":"t","role":"assistant","content":"ok","model":"groq/l","usage":{"completion_time":0.01,"completion_tokens":3,"prompt_time":0.002,"prompt_tokens":5,"queue_time":0.03,"total_tokens":8}}"#,
];

/// Lines with values the types do not read today (or would write back
/// differently), and fields nobody models: kept as they came.
const STORED_ODD: &[&str] = &[
    // Fields of a message Onyx does not model, and one nobody knows.
    r#"{"ts":"t","role":"assistant","content":"ok","refusal":null,"reasoning_content":"thinking","x_client":{"a":[1,2]}}"#,
    // Parts Onyx refuses today, and content that is no content shape at all.
    r#"{"ts":"t","role":"user","content":[{"type":"text","text":5}]}"#,
    r#"{"ts":"t","role":"assistant","content":{"text":"an object"},"model":"m"}"#,
    // A tool call without its `type`, one with arguments as an object.
    r#"{"ts":"t","role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}"#,
    r#"{"ts":"t","role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{"a":1}}}]}"#,
    // Counts as floats and strings, a count missing, details that are no object.
    r#"{"ts":"t","role":"assistant","content":"ok","usage":{"completion_tokens":3.0,"prompt_tokens":"5","total_tokens":8}}"#,
    r#"{"ts":"t","role":"assistant","content":"ok","usage":{"prompt_tokens":5,"total_tokens":5}}"#,
    r#"{"ts":"t","role":"assistant","content":"ok","usage":{"completion_tokens":1,"prompt_tokens":1,"prompt_tokens_details":7,"total_tokens":2}}"#,
    // Usage that is no object.
    r#"{"ts":"t","role":"assistant","content":"ok","usage":"lots"}"#,
    // A field the log knows on a line it does not belong to.
    r#"{"ts":"t","role":"user","content":"hi","kept_from":3}"#,
];

fn read(line: &str) -> LogMessage {
    serde_json::from_str(line).unwrap_or_else(|err| panic!("{line} refused: {err}"))
}

fn value(line: &str) -> Value {
    serde_json::from_str(line).unwrap()
}

#[test]
fn every_shape_the_log_has_written_reads_and_writes_back_as_stored() {
    for line in STORED.iter().chain(STORED_WITH_USAGE).chain(STORED_ODD) {
        let read = read(line);
        assert_eq!(serde_json::to_value(&read).unwrap(), value(line), "{line}");
        // And through JSON text, as the log and the API write it.
        let written = serde_json::to_string(&read).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&written).unwrap(),
            value(line),
            "{line}"
        );
    }
}

#[test]
fn lines_without_usage_write_back_byte_for_byte() {
    for line in STORED {
        assert_eq!(serde_json::to_string(&read(line)).unwrap(), *line);
    }
}

#[test]
fn stored_lines_read_as_typed_messages() {
    let parts = read(STORED[1]);
    assert_eq!((parts.role(), parts.kind), (Role::User, LineKind::Message));
    assert_eq!(parts.message.name.as_deref(), Some("ann"));
    assert_eq!(parts.text(), "look cached");
    assert!(matches!(parts.message.content, Some(Content::Parts(ref p)) if p.len() == 4));

    let calls = read(STORED[2]);
    assert_eq!(calls.message.content, None);
    assert_eq!(calls.tool_call_ids().collect::<Vec<_>>(), ["call_1", "call_2"]);
    assert_eq!(
        calls.message.tool_calls.as_ref().unwrap()[0].arguments(),
        json!({"city": "Paris"})
    );
    assert_eq!(calls.model.as_deref(), Some("openai/gpt-4o-mini"));

    let result = read(STORED[4]);
    assert_eq!(result.role(), Role::Tool);
    assert_eq!(result.message.tool_call_id.as_deref(), Some("call_1"));

    assert!(read(STORED[6]).aborted);

    let old_compaction = read(STORED[8]);
    let compaction = read(STORED[9]);
    assert!(old_compaction.is_compaction() && compaction.is_compaction());
    assert_eq!((old_compaction.kept_from, compaction.kept_from), (None, Some(7)));
    assert_eq!(compaction.text(), "we planned a trip");
    assert_eq!(compaction.role_name(), "compaction");
    assert_eq!(compaction.to_message(), None);

    assert_eq!(read(STORED[10]).role(), Role::Function);
}

#[test]
fn usage_reads_typed_with_what_upstreams_added() {
    let own = read(STORED_WITH_USAGE[0]);
    let usage = own.usage.as_ref().unwrap();
    assert_eq!((own.tokens(), own.cached_tokens()), (34, 20));
    assert_eq!((usage.cache_write_tokens(), usage.reasoning_tokens()), (5, 2));
    let openrouter = read(STORED_WITH_USAGE[2]);
    assert_eq!(openrouter.usage.as_ref().unwrap().extra["cost"], json!(0.00042));
    assert_eq!(openrouter.tokens(), 8);
    let vllm = read(STORED_WITH_USAGE[3]);
    assert_eq!((vllm.tokens(), vllm.cached_tokens()), (8, 0));
    assert_eq!(vllm.usage.as_ref().unwrap().prompt_tokens_details, Some(None));
}

#[test]
fn values_the_types_would_change_stay_as_stored_and_replay_as_text() {
    let unknown = read(STORED_ODD[0]);
    assert_eq!(unknown.message.extra["reasoning_content"], "thinking");
    // Replayed to a model: only the modelled fields.
    let replayed = serde_json::to_value(unknown.to_message().unwrap()).unwrap();
    assert_eq!(replayed, json!({"role": "assistant", "content": "ok"}));

    let refused_parts = read(STORED_ODD[1]);
    assert_eq!(refused_parts.message.content, None);
    assert_eq!(
        refused_parts.to_message().unwrap().content,
        Some(Content::Text(String::new()))
    );
    let object = read(STORED_ODD[2]);
    assert_eq!(
        object.to_message().unwrap().content,
        Some(Content::Text(String::new()))
    );

    let untyped_call = read(STORED_ODD[3]);
    assert_eq!(untyped_call.message.tool_calls, None);
    assert_eq!(untyped_call.to_message().unwrap().tool_calls, None);

    // Usage the types would write back otherwise stays as stored, and
    // still counts.
    let floats = read(STORED_ODD[5]);
    assert_eq!((floats.usage.as_ref(), floats.tokens()), (None, 8));
    let missing = read(STORED_ODD[6]);
    assert_eq!((missing.usage.as_ref(), missing.tokens()), (None, 5));
    assert_eq!(read(STORED_ODD[8]).tokens(), 0);
}

#[test]
fn a_line_without_content_writes_null_as_the_log_always_has() {
    let read = read(
        r#"{"ts":"t","role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}"#,
    );
    assert_eq!(serde_json::to_value(&read).unwrap()["content"], Value::Null);
}

#[test]
fn lines_the_log_never_wrote_are_refused() {
    for line in [
        r#"{"role":"user","content":"no ts"}"#,
        r#"{"ts":"t","content":"no role"}"#,
        r#"{"ts":"t","role":"wizard","content":"hi"}"#,
        r#"{"ts":"t","role":"user","content":"hi","aborted":"yes"}"#,
        r#"{"ts":"t","role":"user","content":"hi","name":5}"#,
        r#"["ts","role"]"#,
    ] {
        assert!(serde_json::from_str::<LogMessage>(line).is_err(), "{line}");
    }
}

#[test]
fn a_message_cannot_pose_as_the_log_s_metadata() {
    let sent: Message = serde_json::from_value(json!({
        "role": "user", "content": "hi", "ts": "1999-01-01T00:00:00Z", "kept_from": 0,
        "aborted": true, "model": "spoofed", "usage": {"total_tokens": 1_000_000}, "x_kept": 1
    }))
    .unwrap();
    let line = serde_json::to_value(LogMessage::new(sent)).unwrap();
    assert_ne!(line["ts"], "1999-01-01T00:00:00Z");
    for key in ["kept_from", "aborted", "model", "usage"] {
        assert_eq!(line.get(key), None, "{key}");
    }
    assert_eq!(line["x_kept"], 1);
    // A message read back with its own role, never a compaction.
    let back: LogMessage = serde_json::from_value(line).unwrap();
    assert_eq!((back.kind, back.tokens()), (LineKind::Message, 0));
}

#[test]
fn new_lines_keep_the_whole_message_and_its_metadata() {
    let answer = crate::chat::Completion::single(
        "c".into(),
        "m".into(),
        Message::answer(Some("ok".into()), Vec::new()),
        FinishReason::Stop,
        Usage::new(3, 4).with_cache(1, 0),
    );
    let line = LogMessage::new(answer.message().unwrap().clone())
        .with_model("openai/m")
        .with_usage(answer.usage.clone());
    let written = serde_json::to_value(&line).unwrap();
    assert_eq!(written["refusal"], Value::Null);
    assert_eq!(
        written["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
               "prompt_tokens_details": {"cached_tokens": 1}})
    );
    let compaction = serde_json::to_value(LogMessage::compaction("sum", 3)).unwrap();
    assert_eq!(
        (
            &compaction["role"],
            &compaction["content"],
            &compaction["kept_from"]
        ),
        (&json!("compaction"), &json!("sum"), &json!(3))
    );
    assert_eq!(read(&compaction.to_string()).kind, LineKind::Compaction);
}
