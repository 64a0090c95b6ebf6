//! Logging never stalls the gateway: with a stderr pipe nobody reads, requests
//! still answer promptly and the lines that did not fit are counted in `/metrics`.

use crate::harness::*;
use serde_json::json;

/// `onyx_log_lines_dropped_total` from `/metrics`.
async fn dropped(onyx: &Onyx) -> u64 {
    let text = onyx.get("/metrics").send().await.unwrap().text().await.unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("onyx_log_lines_dropped_total "))
        .unwrap_or_else(|| panic!("no drop counter in {text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_stderr_nobody_reads_drops_lines_and_never_blocks_requests() {
    let fakes = Fakes::start().await;
    // Debug logging writes several lines per request; a short queue fills fast
    // once the 64 KiB pipe is full.
    let env = [("ONYX_LOG", "debug"), ("ONYX_LOG_BUFFER_LINES", "64")];
    let onyx = Onyx::start_with_unread_stderr(Some(&fakes.config()), &env).await;
    assert_eq!(dropped(&onyx).await, 0, "nothing dropped before the pipe is full");
    let chat =
        json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "fill the pipe"}]});
    let first = wait_until(secs(120), "log lines are dropped", async || {
        for _ in 0..20 {
            let (status, body) = onyx.chat(chat.clone()).await;
            assert_eq!(status, 200, "{body}");
        }
        let n = dropped(&onyx).await;
        (n > 0).then_some(n)
    })
    .await;
    // stderr is full and stays full: chats and /health still answer, promptly.
    for _ in 0..10 {
        let started = std::time::Instant::now();
        let (status, body) = tokio::time::timeout(secs(10), onyx.chat(chat.clone()))
            .await
            .expect("a chat answered while stderr was blocked");
        assert_eq!(status, 200, "{body}");
        let health = tokio::time::timeout(secs(10), onyx.health())
            .await
            .expect("/health answered while stderr was blocked");
        assert_eq!(health["status"], "ok", "{health}");
        assert!(started.elapsed() < secs(10), "{:?}", started.elapsed());
    }
    let later = dropped(&onyx).await;
    assert!(later > first, "the counter grows: {first} then {later}");
    // The process still stops on SIGTERM (the log writer gets a bounded flush).
    let (status, _) = tokio::time::timeout(secs(30), onyx.stop_and_logs())
        .await
        .expect("onyx stopped with stderr blocked");
    assert!(status.success(), "{status:?}");
}
