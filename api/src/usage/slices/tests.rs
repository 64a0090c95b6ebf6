use super::*;
use crate::limits::Limits;

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

async fn spent_today(db: &Db, scope: &str) -> f64 {
    budget::spent(db, scope).await.unwrap().today_usd
}

#[tokio::test]
async fn calls_never_exceed_the_budget_and_settle_to_the_real_cost() {
    let db = Db::scratch().await;
    let limiter = Limiter::new(db.clone());
    let scopes = [scope("key:a", daily(1.0))];
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(limiter.admit(&scopes, 0.3, 10).await.unwrap().unwrap());
    }
    // 3 × 0.3 fits in 1.0; a fourth would make 1.2.
    let err = limiter.admit(&scopes, 0.3, 10).await.unwrap_err();
    assert_eq!(err.code, "budget_exceeded");
    assert!(err.message.contains("dailyUsd"), "{}", err.message);
    assert!(err.retry_after >= 1 && err.retry_after <= 86_400);
    // Settling at a tenth of the estimate frees the rest.
    for r in &held {
        limiter.settle(r, 0.03, 5);
    }
    limiter.write_back(false).await;
    assert!((spent_today(&db, "key:a").await - 0.09).abs() < 1e-9);
    assert!(limiter.admit(&scopes, 0.3, 10).await.unwrap().is_some());
}

#[tokio::test]
async fn request_limits_refuse_with_the_minute_left() {
    let db = Db::scratch().await;
    let limiter = Limiter::new(db);
    let limits = Limits {
        rpm: Some(2),
        ..Limits::default()
    };
    let scopes = [scope("agent:main", limits), scope("global", daily(100.0))];
    assert!(limiter.admit(&scopes, 0.0, 1).await.is_ok());
    assert!(limiter.admit(&scopes, 0.0, 1).await.is_ok());
    let err = limiter.admit(&scopes, 0.0, 1).await.unwrap_err();
    assert_eq!(err.code, "rate_limit_exceeded");
    assert!(
        err.message.contains("agent main") && err.message.contains("rpm 2"),
        "{}",
        err.message
    );
    assert!(err.retry_after <= 60);
}

#[tokio::test]
async fn most_calls_need_no_trip_to_the_database() {
    let db = Db::scratch().await;
    let limiter = Limiter::new(db.clone());
    let scopes = [scope("global", daily(100.0))];
    for _ in 0..20 {
        let r = limiter.admit(&scopes, 0.01, 10).await.unwrap().unwrap();
        limiter.settle(&r, 0.01, 10);
    }
    // The first call took a fiftieth of the limit ($2): 200 calls' worth.
    let leases: Vec<serde_json::Value> = db
        .rows("SELECT usd FROM usage_lease", serde_json::json!({}), 0)
        .await
        .unwrap();
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert!(
        (leases[0]["usd"].as_f64().unwrap() - 2.01).abs() < 1e-9,
        "{leases:?}"
    );
    limiter.write_back(false).await;
    assert!((spent_today(&db, "global").await - 0.2).abs() < 1e-9);
}

#[tokio::test]
async fn concurrent_calls_on_two_replicas_stay_within_the_budget() {
    let db = Db::scratch().await;
    let replicas = [
        std::sync::Arc::new(Limiter::new(db.clone())),
        std::sync::Arc::new(Limiter::new(db.clone())),
    ];
    // Ten calls and a half: each replica's spare (a fiftieth, 0.021) fits
    // in the half, so spare held on one replica never refuses the tenth.
    let scopes = [scope("global", daily(1.05))];
    let attempts = (0..30).map(|i| {
        let (limiter, scopes) = (replicas[i % 2].clone(), scopes.clone());
        tokio::spawn(async move { limiter.admit(&scopes, 0.1, 1).await })
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
async fn an_idle_slice_is_given_back_for_other_replicas() {
    let db = Db::scratch().await;
    let (a, b) = (Limiter::new(db.clone()), Limiter::new(db.clone()));
    let scopes = [scope("global", daily(1.0))];
    let r = a.admit(&scopes, 0.6, 1).await.unwrap().unwrap();
    // `a` holds 0.6 and some spare: 0.5 more does not fit on `b`.
    assert!(b.admit(&scopes, 0.5, 1).await.is_err());
    a.settle(&r, 0.1, 1);
    a.write_back(true).await;
    assert!((spent_today(&db, "global").await - 0.1).abs() < 1e-9);
    assert!(b.admit(&scopes, 0.5, 1).await.unwrap().is_some());
    let leases: Vec<serde_json::Value> = db
        .rows("SELECT id FROM usage_lease", serde_json::json!({}), 0)
        .await
        .unwrap();
    assert_eq!(leases.len(), 1, "only b's lease is left: {leases:?}");
}

#[tokio::test]
async fn holds_of_a_replica_that_died_are_given_back_by_the_sweep() {
    let db = Db::scratch().await;
    let (dead, alive) = (Limiter::new(db.clone()), Limiter::new(db.clone()));
    let scopes = [scope("key:b", daily(0.5))];
    dead.admit(&scopes, 0.5, 1).await.unwrap().unwrap();
    assert!(alive.admit(&scopes, 0.1, 1).await.is_err());
    db.execute(
        "UPDATE usage_lease SET expires_at = time::now() - 1s",
        serde_json::json!({}),
    )
    .await
    .unwrap();
    assert_eq!(budget::sweep(&db).await.unwrap(), 1);
    assert!(alive.admit(&scopes, 0.1, 1).await.unwrap().is_some());
}
