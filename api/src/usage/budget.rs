//! Budgets and rate limits, enforced with reservations in SurrealDB so that
//! any number of replicas and concurrent requests cannot overspend.
//!
//! Each limited scope (a key, an agent, the whole gateway) has counters per
//! window (`usage_window`: the UTC day, the UTC month, the minute). Admitting
//! a call is one transaction: every window is updated only if the call's
//! estimated cost (or one more request, or its estimated tokens) still fits
//! — `UPDATE … WHERE spent + reserved + $est <= $limit` — and a failed
//! condition throws, rolling all of them back. The reservation is a
//! `usage_reservation` row; settling it moves the estimate from `reserved`
//! to the real spend. A reservation whose request died (the replica crashed)
//! is released by any replica after its lease.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use serde::Deserialize;
use serde_json::json;

use crate::limits::Limits;
use crate::providers::{Refusal, Reservation};
use crate::storage::{Db, DbError};

/// How long a reservation holds before a sweeper gives it back.
pub const LEASE: Duration = Duration::from_secs(15 * 60);

const CONFLICT_ROUNDS: u32 = 8;

fn is_conflict(message: &str) -> bool {
    !message.contains("limit:") && (message.contains("can be retried") || message.contains("onflict"))
}

/// A limited scope: `key:<id>`, `agent:<id>` or `global`, with its limits.
#[derive(Debug, Clone)]
pub struct Scope {
    pub name: String,
    pub limits: Limits,
}

/// One counter window with the conditions that must hold after the call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Window {
    pub id: String,
    pub kind: WindowKind,
    /// The limit in USD (day, month) or requests/tokens (minute).
    pub usd: Option<f64>,
    pub rpm: Option<u64>,
    pub tpm: Option<u64>,
    pub scope: String,
    pub expires: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindowKind {
    Day,
    Month,
    Minute,
}

/// The windows `scopes` need at `now`.
pub(crate) fn windows(scopes: &[Scope], now: DateTime<Utc>) -> Vec<Window> {
    let mut out = Vec::new();
    for scope in scopes {
        let l = &scope.limits;
        let mut push = |kind, suffix: String, usd, rpm, tpm| {
            out.push(Window {
                id: format!("{}|{suffix}", scope.name),
                kind,
                usd,
                rpm,
                tpm,
                scope: scope.name.clone(),
                expires: window_end(kind, now) + chrono::Duration::days(1),
            });
        };
        if l.daily_usd.is_some() {
            push(
                WindowKind::Day,
                now.format("d:%Y-%m-%d").to_string(),
                l.daily_usd,
                None,
                None,
            );
        }
        if l.monthly_usd.is_some() {
            push(
                WindowKind::Month,
                now.format("m:%Y-%m").to_string(),
                l.monthly_usd,
                None,
                None,
            );
        }
        if l.rpm.is_some() || l.tpm.is_some() {
            push(
                WindowKind::Minute,
                now.format("min:%Y-%m-%dT%H:%M").to_string(),
                None,
                l.rpm,
                l.tpm,
            );
        }
    }
    out
}

/// When the window containing `now` ends.
pub(crate) fn window_end(kind: WindowKind, now: DateTime<Utc>) -> DateTime<Utc> {
    let start_of_minute = now
        .with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(now);
    match kind {
        WindowKind::Minute => start_of_minute + chrono::Duration::minutes(1),
        WindowKind::Day => {
            let day = now
                .date_naive()
                .and_hms_opt(0, 0, 0)
                .map_or(now, |d| Utc.from_utc_datetime(&d));
            day + chrono::Duration::days(1)
        }
        WindowKind::Month => {
            let (year, month) = if now.month() == 12 {
                (now.year() + 1, 1)
            } else {
                (now.year(), now.month() + 1)
            };
            Utc.with_ymd_and_hms(year, month, 1, 0, 0, 0)
                .single()
                .unwrap_or(now + chrono::Duration::days(31))
        }
    }
}

/// Seconds until the window ends (at least 1).
pub(crate) fn retry_after(kind: WindowKind, now: DateTime<Utc>) -> u64 {
    (window_end(kind, now) - now).num_seconds().max(1) as u64
}

/// The admission transaction for `windows` (statement per window, each
/// throwing `limit:<index>` when its condition fails).
fn admit_query(windows: &[Window]) -> String {
    let mut sql = String::from("BEGIN TRANSACTION;\n");
    for (i, w) in windows.iter().enumerate() {
        let _ = writeln!(
            sql,
            "UPSERT type::record('usage_window', $w{i}) SET usd = usd ?? 0, reserved_usd = reserved_usd ?? 0, \
             requests = requests ?? 0, tokens = tokens ?? 0, reserved_tokens = reserved_tokens ?? 0, \
             scope = $s{i}, expires_at = <datetime>$e{i};"
        );
        let (set, condition) = match w.kind {
            WindowKind::Day | WindowKind::Month => (
                "reserved_usd += $usd".to_string(),
                format!("usd + reserved_usd + $usd <= $l{i}"),
            ),
            WindowKind::Minute => {
                let mut conditions = Vec::new();
                if w.rpm.is_some() {
                    conditions.push(format!("requests + 1 <= $r{i}"));
                }
                if w.tpm.is_some() {
                    conditions.push(format!("tokens + reserved_tokens + $tokens <= $t{i}"));
                }
                (
                    "requests += 1, reserved_tokens += $tokens".to_string(),
                    conditions.join(" AND "),
                )
            }
        };
        let _ = writeln!(
            sql,
            "IF array::len(UPDATE type::record('usage_window', $w{i}) SET {set} WHERE {condition} RETURN AFTER) = 0 \
             {{ THROW 'limit:{i}' }};"
        );
    }
    sql.push_str(
        "CREATE type::record('usage_reservation', $rid) SET windows = $windows, usd = $usd, tokens = $tokens, \
         expires_at = <datetime>$lease;\nCOMMIT TRANSACTION;",
    );
    sql
}

/// Reserves `usd` and `tokens` in every window of `scopes`, or says which limit refused.
pub async fn reserve(
    db: &Db,
    scopes: &[Scope],
    usd: f64,
    tokens: u64,
) -> Result<Option<Reservation>, Refusal> {
    let now = crate::clock::now();
    let windows = windows(scopes, now);
    if windows.is_empty() {
        return Ok(None);
    }
    let id = uuid::Uuid::now_v7().simple().to_string();
    let mut vars = serde_json::Map::new();
    for (i, w) in windows.iter().enumerate() {
        vars.insert(format!("w{i}"), json!(w.id));
        vars.insert(format!("s{i}"), json!(w.scope));
        vars.insert(format!("e{i}"), json!(crate::clock::stamp(w.expires)));
        if let Some(l) = w.usd {
            vars.insert(format!("l{i}"), json!(l));
        }
        if let Some(r) = w.rpm {
            vars.insert(format!("r{i}"), json!(r));
        }
        if let Some(t) = w.tpm {
            vars.insert(format!("t{i}"), json!(t));
        }
    }
    let ids: Vec<String> = windows.iter().map(|w| w.id.clone()).collect();
    let lease = now + chrono::Duration::from_std(LEASE).unwrap_or_default();
    vars.insert("rid".into(), json!(id));
    vars.insert("windows".into(), json!(ids));
    vars.insert("usd".into(), json!(usd));
    vars.insert("tokens".into(), json!(tokens));
    vars.insert("lease".into(), json!(crate::clock::stamp(lease)));
    let sql = admit_query(&windows);
    let vars = serde_json::Value::Object(vars);
    let mut rounds = 0;
    // Many callers on one budget conflict often; past the database's own
    // retries, a few more rounds with a longer, jittered pause.
    let result = loop {
        let result = db.execute_retrying(&sql, vars.clone()).await;
        match &result {
            Err(DbError::Surreal(message)) if is_conflict(message) && rounds < CONFLICT_ROUNDS => {
                rounds += 1;
                let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0] % 50);
                tokio::time::sleep(Duration::from_millis(20 * u64::from(rounds) + jitter)).await;
            }
            _ => break result,
        }
    };
    match result {
        Ok(_) => Ok(Some(Reservation {
            id,
            windows: ids,
            usd,
            tokens,
        })),
        Err(DbError::Surreal(message)) if message.contains("limit:") => Err(refusal(&windows, &message, now)),
        Err(err) => {
            // Fail closed: a budget that cannot be checked is not spent.
            tracing::error!(error = %err, "could not check budgets and rate limits");
            Err(Refusal {
                code: "budget_unavailable",
                message: "budgets and rate limits cannot be checked right now; try again shortly".into(),
                retry_after: 5,
            })
        }
    }
}

/// The refusal for the window whose condition threw.
fn refusal(windows: &[Window], message: &str, now: DateTime<Utc>) -> Refusal {
    let index = message
        .split("limit:")
        .nth(1)
        .map(|rest| rest.chars().take_while(char::is_ascii_digit).collect::<String>())
        .and_then(|digits| digits.parse::<usize>().ok())
        .unwrap_or(0);
    let Some(w) = windows.get(index) else {
        return Refusal {
            code: "rate_limit_exceeded",
            message: "a limit was reached".into(),
            retry_after: 60,
        };
    };
    let (code, what) = match w.kind {
        WindowKind::Day => (
            "budget_exceeded",
            format!("dailyUsd ({} USD)", w.usd.unwrap_or(0.0)),
        ),
        WindowKind::Month => (
            "budget_exceeded",
            format!("monthlyUsd ({} USD)", w.usd.unwrap_or(0.0)),
        ),
        WindowKind::Minute => {
            let parts: Vec<String> = [
                w.rpm.map(|r| format!("rpm {r}")),
                w.tpm.map(|t| format!("tpm {t}")),
            ]
            .into_iter()
            .flatten()
            .collect();
            ("rate_limit_exceeded", parts.join(" / "))
        }
    };
    Refusal {
        code,
        message: format!("{} limit {what} reached", describe(&w.scope)),
        retry_after: retry_after(w.kind, now),
    }
}

fn describe(scope: &str) -> String {
    match scope.split_once(':') {
        Some(("key", id)) => format!("API key {id}:"),
        Some(("agent", id)) => format!("agent {id}:"),
        _ => "global".to_string(),
    }
}

/// Moves a reservation's estimate to the real spend (0 and 0 for a failed
/// call). The real spend counts even when the lease already expired.
pub async fn settle(db: &Db, reservation: &Reservation, usd: f64, tokens: u64) -> Result<(), DbError> {
    let sql = "BEGIN TRANSACTION;
        LET $held = IF array::len(DELETE type::record('usage_reservation', $rid) RETURN BEFORE) > 0 { 1 } ELSE { 0 };
        FOR $w IN $windows {
            UPDATE type::record('usage_window', $w) SET usd += $usd, tokens += $tokens,
                reserved_usd -= $rusd * $held, reserved_tokens -= $rtokens * $held;
        };
        COMMIT TRANSACTION;";
    db.execute_retrying(
        sql,
        json!({
            "rid": reservation.id, "windows": reservation.windows, "usd": usd, "tokens": tokens,
            "rusd": reservation.usd, "rtokens": reservation.tokens,
        }),
    )
    .await
    .map(|_| ())
}

/// Releases reservations past their lease and deletes windows that ended.
pub async fn sweep(db: &Db) -> Result<usize, DbError> {
    #[derive(Deserialize)]
    struct Expired {
        id: String,
        windows: Vec<String>,
        usd: f64,
        tokens: u64,
    }
    let expired: Vec<Expired> = db
        .rows(
            "SELECT record::id(id) AS id, windows, usd, tokens FROM usage_reservation WHERE expires_at < time::now() LIMIT 500",
            json!({}),
            0,
        )
        .await?;
    let count = expired.len();
    for e in expired {
        let reservation = Reservation {
            id: e.id,
            windows: e.windows,
            usd: e.usd,
            tokens: e.tokens,
        };
        settle(db, &reservation, 0.0, 0).await?;
    }
    db.execute("DELETE usage_window WHERE expires_at < time::now()", json!({}))
        .await?;
    Ok(count)
}

/// What a scope has spent and reserved in its current windows (for the UI).
#[derive(Debug, Clone, Default, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Spent {
    pub today_usd: f64,
    pub month_usd: f64,
    pub minute_requests: u64,
    pub minute_tokens: u64,
}

/// Current spend of `scope` (`key:<id>`, `agent:<id>`, `global`).
pub async fn spent(db: &Db, scope: &str) -> Result<Spent, DbError> {
    #[derive(Deserialize)]
    struct Row {
        usd: Option<f64>,
        requests: Option<u64>,
        tokens: Option<u64>,
    }
    let now = crate::clock::now();
    let ids = [
        format!("{scope}|{}", now.format("d:%Y-%m-%d")),
        format!("{scope}|{}", now.format("m:%Y-%m")),
        format!("{scope}|{}", now.format("min:%Y-%m-%dT%H:%M")),
    ];
    let mut response = db
        .execute(
            "SELECT usd, requests, tokens FROM type::record('usage_window', $a);
             SELECT usd, requests, tokens FROM type::record('usage_window', $b);
             SELECT usd, requests, tokens FROM type::record('usage_window', $c);",
            json!({"a": ids[0], "b": ids[1], "c": ids[2]}),
        )
        .await?;
    let mut take = |i| -> Result<Option<Row>, DbError> {
        Ok(Db::take_rows::<Row>(&mut response, i)?.into_iter().next())
    };
    let (day, month, minute) = (take(0)?, take(1)?, take(2)?);
    Ok(Spent {
        today_usd: day.and_then(|r| r.usd).unwrap_or(0.0),
        month_usd: month.and_then(|r| r.usd).unwrap_or(0.0),
        minute_requests: minute.as_ref().and_then(|r| r.requests).unwrap_or(0),
        minute_tokens: minute.and_then(|r| r.tokens).unwrap_or(0),
    })
}

#[cfg(test)]
mod tests;
