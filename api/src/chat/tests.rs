//! The vocabulary against the shapes upstreams send: every chunk, completion
//! and usage Onyx reads is written back as it came, extras included.

use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::*;

/// `value` read as `T` (from its text, as answers arrive) and written again.
fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, TestCaseError> {
    let typed: T = serde_json::from_str(&value.to_string())
        .map_err(|err| TestCaseError::fail(format!("{value} refused: {err}")))?;
    serde_json::to_value(&typed).map_err(|err| TestCaseError::fail(err.to_string()))
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![0.5, -1.25, 1e-7, 3.0e10]).prop_map(Value::from),
        "[a-zé \"\\\\]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,5}", inner, 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Fields an upstream adds that Onyx does not model (named so they never
/// collide with modelled ones).
fn extras() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("x_[a-z]{1,6}", json_value(), 0..3).prop_map(|map| map.into_iter().collect())
}

fn with_extras(mut value: Value, extras: Map<String, Value>) -> Value {
    if let Value::Object(map) = &mut value {
        map.extend(extras);
    }
    value
}

/// Puts `value` in `map` under `key` when there is one.
fn maybe(map: &mut Value, key: &str, value: Option<Value>) {
    if let (Value::Object(map), Some(value)) = (map, value) {
        map.insert(key.into(), value);
    }
}

fn usage() -> impl Strategy<Value = Value> {
    // OpenRouter reports a zero of cache writes; vLLM sends `null` details.
    let prompt_details =
        (0..1000u64, prop::option::of(0..1000u64), extras()).prop_map(|(read, written, extras)| {
            let mut details = json!({"cached_tokens": read});
            maybe(&mut details, "cache_write_tokens", written.map(Value::from));
            with_extras(details, extras)
        });
    let prompt_details = prop_oneof![Just(Value::Null), prompt_details];
    let completion_details = (0..1000u64, extras())
        .prop_map(|(reasoning, extras)| with_extras(json!({"reasoning_tokens": reasoning}), extras));
    let completion_details = prop_oneof![Just(Value::Null), completion_details];
    (
        (0..100_000u64, 0..100_000u64),
        prop::option::of(prompt_details),
        prop::option::of(completion_details),
        extras(),
        prop::option::of(prop::sample::select(vec![0.0, 0.00042, 1.5])),
    )
        .prop_map(
            |((prompt, completion), prompt_details, completion_details, extras, cost)| {
                let mut usage = json!({"prompt_tokens": prompt, "completion_tokens": completion,
                                   "total_tokens": prompt + completion});
                maybe(&mut usage, "prompt_tokens_details", prompt_details);
                maybe(&mut usage, "completion_tokens_details", completion_details);
                // OpenRouter's price of the call.
                maybe(&mut usage, "cost", cost.map(Value::from));
                with_extras(usage, extras)
            },
        )
}

fn finish_reason() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        Value::Null,
        json!("stop"),
        json!("length"),
        json!("tool_calls"),
        json!("content_filter"),
        json!("function_call"),
        json!("eos"),
        json!("error"),
    ])
}

fn tool_call_delta() -> impl Strategy<Value = Value> {
    (
        prop::option::of(0..4u32),
        prop::option::of("call_[a-z0-9]{1,6}"),
        prop::option::of(Just("function")),
        prop::option::of("[a-z_]{1,8}"),
        prop::option::of("[{}\":a-z0-9 ]{0,12}"),
        extras(),
        extras(),
    )
        .prop_map(|(index, id, kind, name, arguments, function_extras, extras)| {
            let mut function = json!({});
            maybe(&mut function, "name", name.map(Value::from));
            maybe(&mut function, "arguments", arguments.map(Value::from));
            let mut call = json!({"function": with_extras(function, function_extras)});
            maybe(&mut call, "index", index.map(Value::from));
            maybe(&mut call, "id", id.map(Value::from));
            maybe(&mut call, "type", kind.map(Value::from));
            with_extras(call, extras)
        })
}

fn delta() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop::sample::select(vec!["assistant", "user", "tool"])),
        prop::option::of(".{0,12}"),
        prop::option::of("[a-z .]{0,12}"),
        prop::option::of(prop::collection::vec(tool_call_delta(), 0..3)),
        extras(),
    )
        .prop_map(|(role, content, reasoning, tool_calls, extras)| {
            let mut delta = json!({});
            maybe(&mut delta, "role", role.map(Value::from));
            maybe(&mut delta, "content", content.map(Value::from));
            maybe(&mut delta, "reasoning_content", reasoning.map(Value::from));
            maybe(&mut delta, "tool_calls", tool_calls.map(Value::Array));
            with_extras(delta, extras)
        })
}

fn logprobs() -> impl Strategy<Value = Value> {
    prop_oneof![Just(Value::Null), json_value()]
}

/// A choice of a chunk (`part` is `"delta"`) or of a completion (`"message"`).
fn choice(part: &'static str, inner: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    (0..3u32, inner, finish_reason(), logprobs(), extras()).prop_map(
        move |(index, inner, finish, logprobs, extras)| {
            with_extras(
                json!({"index": index, part: inner, "finish_reason": finish, "logprobs": logprobs}),
                extras,
            )
        },
    )
}

/// A chunk or completion (`object`) with `choices`.
fn answer(object: &'static str, choice: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    (
        "[a-zA-Z0-9-]{0,12}",
        any::<u32>(),
        "[a-z0-9./-]{0,12}",
        prop::collection::vec(choice, 0..3),
        prop::option::of(usage()),
        extras(),
    )
        .prop_map(move |(id, created, model, choices, usage, extras)| {
            let mut answer =
                json!({"id": id, "object": object, "created": created, "model": model, "choices": choices});
            maybe(&mut answer, "usage", usage);
            with_extras(answer, extras)
        })
}

fn chunk() -> impl Strategy<Value = Value> {
    answer("chat.completion.chunk", choice("delta", delta()))
}

fn tool_call() -> impl Strategy<Value = Value> {
    (
        "call_[a-z0-9]{1,6}",
        "[a-z_]{1,8}",
        "[{}\":a-z0-9 ]{0,12}",
        extras(),
        extras(),
    )
        .prop_map(|(id, name, arguments, function_extras, extras)| {
            let function = with_extras(json!({"name": name, "arguments": arguments}), function_extras);
            with_extras(
                json!({"id": id, "type": "function", "function": function}),
                extras,
            )
        })
}

fn completion() -> impl Strategy<Value = Value> {
    let content = prop_oneof![
        Just(Value::Null),
        ".{0,12}".prop_map(Value::from),
        Just(json!([{"type": "text", "text": "a part"}, {"type": "text", "text": "b", "cache_control": {}}])),
    ];
    let message = (
        content,
        prop::option::of(prop::collection::vec(tool_call(), 1..3)),
        extras(),
    )
        .prop_map(|(content, tool_calls, extras)| {
            let mut message = json!({"role": "assistant", "content": content});
            maybe(&mut message, "tool_calls", tool_calls.map(Value::Array));
            with_extras(message, extras)
        });
    answer("chat.completion", choice("message", message))
}

proptest! {
    #![proptest_config(crate::fuzzing::config(512))]

    /// Chunks, completions and usage as upstreams send them (the fakes'
    /// shapes, with fields Onyx does not model at every level) are written
    /// back exactly as they came.
    #[test]
    fn chunks_completions_and_usage_round_trip_losslessly(
        chunk in chunk(), completion in completion(), usage in usage()
    ) {
        prop_assert_eq!(round_trip::<ChatChunk>(&chunk)?, chunk);
        prop_assert_eq!(round_trip::<Completion>(&completion)?, completion);
        prop_assert_eq!(round_trip::<Usage>(&usage)?, usage);
    }

    /// Whatever JSON object an upstream streams, a chunk reads (it is never
    /// refused for its shape).
    #[test]
    fn any_object_reads_as_a_chunk(fields in prop::collection::btree_map(
        prop::sample::select(vec!["id", "object", "created", "model", "choices", "usage", "x"]),
        json_value(), 0..5,
    )) {
        let object = Value::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
        let read = serde_json::from_str::<ChatChunk>(&object.to_string());
        prop_assert!(read.is_ok() || structurally_odd(&object), "{} refused: {:?}", object, read.err());
    }
}

/// The one kind of chunk refused: a list or object that is something else
/// (`choices` not a list, a choice or its `delta` or the `usage` not an object).
fn structurally_odd(chunk: &Value) -> bool {
    let not =
        |value: Option<&Value>, kind: fn(&Value) -> bool| value.is_some_and(|v| !v.is_null() && !kind(v));
    not(chunk.get("choices"), Value::is_array)
        || not(chunk.get("usage"), Value::is_object)
        || chunk["choices"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|choice| !choice.is_object() || not(choice.get("delta"), Value::is_object))
}

#[test]
fn odd_but_valid_shapes_read() {
    let chunk: ChatChunk = serde_json::from_value(json!({
        "choices": [{"delta": null, "finish_reason": "eos"}, {"index": 1.0, "delta": {"tool_calls": [{"function": null}]}}],
        "created": 1.7e9, "usage": {"prompt_tokens": "12", "completion_tokens": null, "total_tokens": 12.0}
    }))
    .unwrap();
    assert_eq!(chunk.object, "chat.completion.chunk");
    assert_eq!(chunk.created, 1_700_000_000);
    assert_eq!(
        chunk.choices[0].finish_reason,
        Some(FinishReason::Other("eos".into()))
    );
    assert_eq!(chunk.choices[1].index, 1);
    let usage = chunk.usage.unwrap();
    assert_eq!(
        (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens),
        (12, 0, 12)
    );
    let empty: ChatChunk = serde_json::from_value(json!({"choices": null})).unwrap();
    assert!(empty.choices.is_empty() && !empty.is_usage_only());
}

#[test]
fn a_completion_without_content_writes_null_and_translated_answers_keep_their_shape() {
    let call = ToolCall::function("c1", "weather", "{}");
    let completion = Completion::single(
        "chatcmpl-1".into(),
        "m".into(),
        Message::answer(None, vec![call]),
        FinishReason::ToolCalls,
        Usage::new(3, 4).with_cache(1, 0),
    );
    let value = serde_json::to_value(&completion).unwrap();
    assert_eq!(
        value["choices"][0],
        json!({"index": 0, "finish_reason": "tool_calls", "logprobs": null,
               "message": {"role": "assistant", "content": null, "refusal": null,
                           "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}})
    );
    assert_eq!(
        value["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7, "prompt_tokens_details": {"cached_tokens": 1}})
    );
    assert_eq!(value["object"], "chat.completion");
}

#[test]
fn an_error_inside_a_stream_is_found() {
    let chunk: ChatChunk =
        serde_json::from_value(json!({"error": {"message": "overloaded", "code": 502}})).unwrap();
    assert_eq!(
        chunk.error().and_then(|e| e["message"].as_str()),
        Some("overloaded")
    );
    let plain: ChatChunk = serde_json::from_value(json!({"choices": [], "error": null})).unwrap();
    assert_eq!(plain.error(), None);
}

#[test]
fn usage_sums_counts_and_keeps_the_first_details() {
    let mut sum = Usage::new(1, 2).with_cache(1, 0);
    sum += Usage::new(10, 20).with_reasoning(5);
    sum += &Usage::new(100, 200).with_cache(50, 7);
    assert_eq!(
        (sum.prompt_tokens, sum.completion_tokens, sum.total_tokens),
        (111, 222, 333)
    );
    assert_eq!(
        (
            sum.cached_tokens(),
            sum.cache_write_tokens(),
            sum.reasoning_tokens()
        ),
        (51, 7, 5)
    );
}
