use super::*;
use crate::storage::Db;

fn scope(name: &str, limits: Limits) -> Scope {
    Scope {
        name: name.into(),
        limits,
    }
}

fn daily(usd: f64) -> Limits {
    Limits {
        daily_usd: Some(usd),
        ..Limits::default()
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

#[tokio::test]
async fn reservations_never_exceed_the_budget_and_settle_to_the_real_cost() {
    let db = Db::scratch().await;
    let scopes = [scope("key:a", daily(1.0))];
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(reserve(&db, &scopes, 0.3, 10).await.unwrap().unwrap());
    }
    // 3 × 0.3 fits in 1.0; a fourth would make 1.2.
    let err = reserve(&db, &scopes, 0.3, 10).await.unwrap_err();
    assert_eq!(err.code, "budget_exceeded");
    assert!(err.message.contains("dailyUsd"), "{}", err.message);
    assert!(err.retry_after >= 1 && err.retry_after <= 86_400);
    // Settling at a tenth of the estimate frees the rest.
    for r in &held {
        settle(&db, r, 0.03, 5).await.unwrap();
    }
    let now = spent(&db, "key:a").await.unwrap();
    assert!((now.today_usd - 0.09).abs() < 1e-9, "{now:?}");
    assert!(reserve(&db, &scopes, 0.3, 10).await.unwrap().is_some());
    // A second settle of the same reservation does not give back twice.
    settle(&db, &held[0], 0.0, 0).await.unwrap();
    let after = spent(&db, "key:a").await.unwrap();
    assert!((after.today_usd - 0.09).abs() < 1e-9, "{after:?}");
}

#[tokio::test]
async fn request_limits_refuse_with_the_minute_left() {
    let db = Db::scratch().await;
    let limits = Limits {
        rpm: Some(2),
        ..Limits::default()
    };
    let scopes = [scope("agent:main", limits), scope("global", daily(100.0))];
    assert!(reserve(&db, &scopes, 0.0, 1).await.is_ok());
    assert!(reserve(&db, &scopes, 0.0, 1).await.is_ok());
    let err = reserve(&db, &scopes, 0.0, 1).await.unwrap_err();
    assert_eq!(err.code, "rate_limit_exceeded");
    assert!(
        err.message.contains("agent main") && err.message.contains("rpm 2"),
        "{}",
        err.message
    );
    assert!(err.retry_after <= 60);
}

#[tokio::test]
async fn concurrent_reservations_stay_within_the_budget() {
    let db = Db::scratch().await;
    let scopes = [scope("global", daily(1.0))];
    let attempts = (0..30).map(|_| {
        let (db, scopes) = (db.clone(), scopes.clone());
        tokio::spawn(async move { reserve(&db, &scopes, 0.1, 1).await })
    });
    let mut admitted = 0;
    for attempt in attempts {
        if let Ok(Some(_)) = attempt.await.unwrap() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10);
}

#[tokio::test]
async fn expired_reservations_are_released_by_the_sweep() {
    let db = Db::scratch().await;
    let scopes = [scope("key:b", daily(0.5))];
    let r = reserve(&db, &scopes, 0.5, 1).await.unwrap().unwrap();
    assert!(reserve(&db, &scopes, 0.1, 1).await.is_err());
    db.execute(
        "UPDATE type::record('usage_reservation', $id) SET expires_at = time::now() - 1s",
        serde_json::json!({"id": r.id}),
    )
    .await
    .unwrap();
    assert_eq!(sweep(&db).await.unwrap(), 1);
    assert!(reserve(&db, &scopes, 0.1, 1).await.unwrap().is_some());
}
