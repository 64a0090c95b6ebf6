//! What Onyx's one upstream HTTP stack does on the wire, against upstreams
//! written here byte by byte: TLS to `https://` upstreams, redirects not
//! followed (the upstream's key never goes to another host), and streamed
//! answers passed on without losing what an upstream adds (usage extras such
//! as OpenRouter's `cost`, a tool call's `extra_content`), with an error an
//! upstream sends inside its stream ending the stream as an error.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::harness::*;

/// An upstream that answers every request on a connection with `answer`,
/// keeping each request's bytes.
struct RawUpstream {
    url: String,
    requests: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl RawUpstream {
    async fn start(answer: impl Fn() -> Vec<u8> + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = requests.clone();
        let answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (seen, answer) = (seen.clone(), answer.clone());
                tokio::spawn(async move {
                    while let Some(request) = read_request(&mut socket).await {
                        seen.lock().unwrap().push(request);
                        if socket.write_all(&answer()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { url, requests }
    }

    /// The chat requests it got (other calls, such as the model list the
    /// health check asks for, left out), as text.
    fn chat_requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|request| String::from_utf8_lossy(request).into_owned())
            .filter(|request| request.starts_with("POST /v1/chat/completions"))
            .collect()
    }
}

/// Reads one request (head and `content-length` body); its bytes, or `None`
/// at the end of the connection or on bytes that are not HTTP.
async fn read_request(socket: &mut TcpStream) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |n| n.trim().parse().unwrap_or(0));
            while bytes.len() < end + 4 + length {
                let n = socket.read(&mut buf).await.ok().filter(|n| *n > 0)?;
                bytes.extend_from_slice(&buf[..n]);
            }
            return Some(bytes);
        }
        let n = socket.read(&mut buf).await.ok().filter(|n| *n > 0)?;
        bytes.extend_from_slice(&buf[..n]);
        if !bytes.starts_with(b"POST") && !bytes.starts_with(b"GET") {
            return None;
        }
    }
}

fn http_answer(status: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.into_bytes()
}

/// A server-sent event stream of `events` (each a `data:` line), then `[DONE]`.
fn sse_answer(events: &[Value]) -> Vec<u8> {
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    http_answer("200 OK", &[("content-type", "text/event-stream")], &body)
}

async fn onyx_with(upstream_url: &str) -> Onyx {
    let config = TestConfig::empty()
        .set("gateway.auth.apiKeys", json!([ONYX_KEY]))
        .set(
            "providers.up",
            json!({ "type": "openai", "baseUrl": format!("{upstream_url}/v1"), "apiKey": "sk-upstream-secret", "maxRetries": 0 }),
        )
        .build();
    Onyx::start(Some(&config), &[]).await
}

fn chunk(delta: Value, finish: Value) -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
           "system_fingerprint": "fp_x", "obfuscation": "abc",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}]})
}

#[tokio::test]
async fn https_upstreams_are_spoken_to_in_tls_and_a_failed_handshake_is_a_502() {
    // A server that reads what Onyx sends first and hangs up.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let first = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 5];
        socket.read_exact(&mut head).await.unwrap();
        head
    });
    let onyx = onyx_with(&format!("https://{address}")).await;
    let (status, body) = onyx
        .chat(json!({"model": "up/m", "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_unreachable", "{body}");
    let head = first.await.unwrap();
    // A TLS record of type handshake (22), version 3.x: a ClientHello.
    assert_eq!((head[0], head[1]), (22, 3), "{head:?}");
}

#[tokio::test]
async fn upstream_redirects_are_not_followed_and_the_key_stays_with_the_upstream() {
    let elsewhere = RawUpstream::start(|| http_answer("200 OK", &[], "{}")).await;
    let location = format!("{}/v1/chat/completions", elsewhere.url);
    let upstream =
        RawUpstream::start(move || http_answer("307 Temporary Redirect", &[("location", &location)], ""))
            .await;
    let onyx = onyx_with(&upstream.url).await;
    for stream in [false, true] {
        let response = onyx
            .post("/v1/chat/completions")
            .json(&json!({"model": "up/m", "stream": stream, "messages": [{"role": "user", "content": "x"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 502, "stream: {stream}");
    }
    let sent = upstream.chat_requests();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[0]
            .to_ascii_lowercase()
            .contains("authorization: bearer sk-upstream-secret"),
        "{}",
        sent[0]
    );
    assert!(
        elsewhere.requests.lock().unwrap().is_empty(),
        "the redirect was followed"
    );
}

#[tokio::test]
async fn streamed_answers_keep_what_the_upstream_added() {
    let events = vec![
        chunk(
            json!({"role": "assistant", "content": "", "refusal": null}),
            Value::Null,
        ),
        chunk(json!({"reasoning_content": "thinking"}), Value::Null),
        chunk(json!({"content": "Hi"}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                   "function": {"name": "f", "arguments": "{}"},
                   "extra_content": {"google": {"thought_signature": "c2ln"}}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
               "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12, "cost": 0.00042,
                         "prompt_tokens_details": {"cached_tokens": 2, "audio_tokens": 0}}}),
    ];
    let upstream = RawUpstream::start(move || sse_answer(&events)).await;
    let onyx = onyx_with(&upstream.url).await;
    let response = onyx
        .post("/v1/chat/completions")
        .json(
            &json!({"model": "up/m", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "x"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = sse_events(response).await;
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks = chunks(&events);
    assert_eq!(chunks.len(), 6, "{chunks:?}");
    assert_eq!(chunks[0]["system_fingerprint"], "fp_x");
    assert_eq!(chunks[0]["obfuscation"], "abc");
    assert_eq!(chunks[0]["choices"][0]["delta"]["refusal"], Value::Null);
    assert_eq!(chunks[1]["choices"][0]["delta"]["reasoning_content"], "thinking");
    assert_eq!(streamed_text(&chunks), "Hi");
    assert_eq!(
        chunks[3]["choices"][0]["delta"]["tool_calls"][0]["extra_content"],
        json!({"google": {"thought_signature": "c2ln"}})
    );
    assert_eq!(chunks[4]["choices"][0]["finish_reason"], "tool_calls");
    let usage = &chunks[5]["usage"];
    assert_eq!(
        (usage["total_tokens"].as_u64(), usage["cost"].as_f64()),
        (Some(12), Some(0.00042))
    );
    assert_eq!(
        usage["prompt_tokens_details"],
        json!({"cached_tokens": 2, "audio_tokens": 0})
    );
}

#[tokio::test]
async fn an_error_inside_an_upstreams_stream_ends_it_as_an_error() {
    let events = vec![
        chunk(json!({"role": "assistant", "content": "Part"}), Value::Null),
        json!({"error": {"message": "Provider returned error: overloaded", "code": 502}}),
        chunk(json!({"content": " never seen"}), Value::Null),
    ];
    let upstream = RawUpstream::start(move || sse_answer(&events)).await;
    let onyx = onyx_with(&upstream.url).await;
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "up/m", "stream": true, "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the stream had begun");
    let events = sse_events(response).await;
    let chunks = chunks(&events);
    assert_eq!(streamed_text(&chunks), "Part", "{chunks:?}");
    let error = chunks
        .iter()
        .find(|c| c.get("error").is_some())
        .expect("an error event");
    assert!(
        error["error"]["message"].as_str().unwrap().contains("overloaded"),
        "{error}"
    );
    assert!(!events.iter().any(|e| e.contains("never seen")), "{events:?}");
}
