//! The UI login under attack: a burst of guesses past the limit is refused
//! before any is hashed (the attempt is counted first, atomically), many
//! logins at once take turns at the hash (argon2 allocates 19 MiB each), and
//! the client's address comes from a proxy's header only when that proxy is
//! configured and the request comes from it.

use serde_json::{Value, json};

use crate::harness::*;

const PASSWORD: &str = "right horse";

fn with_password(fakes: &Fakes, proxy: Option<Value>) -> String {
    let hash = onyx::auth::hash_password(PASSWORD).unwrap();
    let mut config = TestConfig::new(fakes).set("gateway.auth.passwordHash", json!(hash));
    if let Some(proxy) = proxy {
        config = config.set("gateway.trustedProxy", proxy);
    }
    config.build()
}

/// `onyx_login_password_checks_total` from `/metrics`.
async fn password_checks(onyx: &Onyx) -> u64 {
    let text = onyx.get("/metrics").send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("onyx_login_password_checks_total "))
        .unwrap_or_else(|| panic!("no password check counter in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Logins with `password`, all at once, each from `from(n)` (an `X-Forwarded-For`), if any.
async fn logins(onyx: &Onyx, n: usize, password: &str, from: impl Fn(usize) -> Option<String>) -> Vec<u16> {
    let sends = (0..n).map(|i| {
        let mut request = onyx
            .anonymous("POST", "/auth/login")
            .json(&json!({"password": password}));
        if let Some(address) = from(i) {
            request = request.header("x-forwarded-for", address);
        }
        request.send()
    });
    futures::future::join_all(sends)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect()
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|s| **s == status).count()
}

#[tokio::test]
async fn parallel_guesses_past_the_limit_are_refused_without_hashing() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&with_password(&fakes, None)), &[]).await;
    // Issue 37: checked, hashed, then counted, so N parallel guesses all passed.
    let statuses = logins(&onyx, 20, "wrong horse", |_| None).await;
    assert_eq!(count(&statuses, 401), 5, "{statuses:?}");
    assert_eq!(count(&statuses, 429), 15, "{statuses:?}");
    assert_eq!(
        password_checks(&onyx).await,
        5,
        "only the five counted were hashed"
    );
    // The right password waits its turn like any other.
    let (status, body) = reply(
        onyx.anonymous("POST", "/auth/login")
            .json(&json!({"password": PASSWORD})),
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "too_many_logins", "{body}");
    assert_eq!(password_checks(&onyx).await, 5);
    // Without a trusted proxy configured, a forwarded address is not believed.
    let statuses = logins(&onyx, 3, "wrong horse", |n| Some(format!("203.0.113.{n}"))).await;
    assert_eq!(count(&statuses, 429), 3, "{statuses:?}");
}

/// Resident memory of a process, in KiB: now (`VmRSS`) and at its peak (`VmHWM`).
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tokio::test]
async fn many_logins_at_once_take_turns_at_the_hash() {
    let fakes = Fakes::start().await;
    let proxy = json!({"header": "X-Forwarded-For", "from": ["127.0.0.1", "::1"]});
    let onyx = Onyx::start(Some(&with_password(&fakes, Some(proxy))), &[]).await;
    // A warm-up login, so what the first hash sets up once is not counted below.
    let (status, _) = reply(
        onyx.anonymous("POST", "/auth/login")
            .header("x-forwarded-for", "198.51.100.1")
            .json(&json!({"password": PASSWORD})),
    )
    .await;
    assert_eq!(status, 200);
    let (_, peak_before) = memory_kib(onyx.pid());
    // Each from its own address (behind the trusted proxy), so none is throttled.
    const AT_ONCE: usize = 16;
    let statuses = logins(&onyx, AT_ONCE, "wrong horse", |n| {
        Some(format!("192.0.2.9, 203.0.113.{n}"))
    })
    .await;
    assert_eq!(count(&statuses, 401), AT_ONCE, "{statuses:?}");
    assert_eq!(password_checks(&onyx).await, AT_ONCE as u64 + 1);
    let (rss, peak_after) = memory_kib(onyx.pid());
    let growth_mib = peak_after.saturating_sub(peak_before) / 1024;
    println!(
        "{AT_ONCE} logins at once: peak RSS {} -> {} MiB (+{growth_mib} MiB), RSS after {} MiB",
        peak_before / 1024,
        peak_after / 1024,
        rss / 1024
    );
    // Unbounded, each check holds its own 19 MiB at once: 16 × 19 ≈ 300 MiB
    // (and with two checks at a time but argon2 allocating per check, the
    // allocator kept ≈ 155 MiB). Two checker threads keep 19 MiB each.
    assert!(growth_mib < 80, "peak RSS grew {growth_mib} MiB");

    // The audit log has each client's own address, the one the proxy saw last.
    let audit = onyx.get_json("/v1/audit?limit=100").await;
    let ips: Vec<String> = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["ip"].as_str().map(String::from))
        .collect();
    for n in 0..AT_ONCE {
        assert!(ips.contains(&format!("203.0.113.{n}")), "{ips:?}");
    }
    assert!(
        !ips.contains(&"192.0.2.9".to_string()),
        "not an address the client wrote itself: {ips:?}"
    );
}
