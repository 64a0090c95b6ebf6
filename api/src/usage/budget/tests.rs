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
