use super::*;

fn scope(name: &str, limits: Limits) -> Scope {
    Scope {
        name: name.into(),
        limits,
    }
}

#[test]
fn windows_and_their_ends() {
    let now = Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 30).unwrap();
    let limits = Limits {
        daily_usd: Some(1.0),
        monthly_usd: Some(10.0),
        rpm: Some(5),
        tpm: None,
    };
    let ws = windows(&[scope("key:k", limits)], now);
    let ids: Vec<&str> = ws.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "key:k|d:2026-12-31",
            "key:k|m:2026-12",
            "key:k|min:2026-12-31T23:59"
        ]
    );
    assert_eq!(retry_after(WindowKind::Minute, now), 30);
    assert_eq!(retry_after(WindowKind::Day, now), 30);
    assert_eq!(retry_after(WindowKind::Month, now), 30);
    assert_eq!(
        window_end(
            WindowKind::Month,
            Utc.with_ymd_and_hms(2026, 2, 10, 0, 0, 0).unwrap()
        ),
        Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap()
    );
    assert!(windows(&[scope("global", Limits::default())], now).is_empty());
}

#[test]
fn window_keys_follow_the_minute_and_a_clock_that_jumps_back() {
    let limits = Limits {
        daily_usd: Some(1.0),
        rpm: Some(5),
        ..Limits::default()
    };
    let ids = |at| -> Vec<String> {
        windows(&[scope("agent:a", limits)], at)
            .into_iter()
            .map(|w| w.id)
            .collect()
    };
    let last_second = Utc.with_ymd_and_hms(2026, 11, 26, 23, 59, 59).unwrap();
    let next_day = last_second + chrono::Duration::seconds(1);
    assert_eq!(
        ids(last_second),
        ["agent:a|d:2026-11-26", "agent:a|min:2026-11-26T23:59"]
    );
    assert_eq!(
        ids(next_day),
        ["agent:a|d:2026-11-27", "agent:a|min:2026-11-27T00:00"]
    );
    assert_eq!(
        ids(last_second - chrono::Duration::days(3)),
        ["agent:a|d:2026-11-23", "agent:a|min:2026-11-23T23:59"]
    );
    let minute = windows(&[scope("agent:a", limits)], next_day);
    assert_eq!(
        minute[1].expires,
        Utc.with_ymd_and_hms(2026, 11, 28, 0, 1, 0).unwrap()
    );
}
