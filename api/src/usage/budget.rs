//! Budgets and rate limits in SurrealDB: the windows every replica shares
//! and the transactions that move them, so that any number of replicas and
//! concurrent requests cannot overspend.
//!
//! Each limited scope (a key, an agent, the whole gateway) has counters per
//! window (`usage_window`: the UTC day, the UTC month, the minute): real use
//! (`usd`, `requests`, `tokens`) and what replicas hold (`reserved_*`). A
//! replica takes a hold with [`grow`] (all windows or none, each only if it
//! fits under its limit), spends it in memory (`slices`), and writes real
//! use back with [`write_back`]. Each hold has a `usage_lease` row; a
//! replica that dies stops renewing it, and [`sweep`] on any replica gives
//! it back.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use serde::Deserialize;
use serde_json::json;

use crate::limits::Limits;
use crate::providers::Refusal;
use crate::storage::{Db, DbError};

/// How long a reservation holds before a sweeper gives it back.
pub const LEASE: Duration = Duration::from_secs(15 * 60);

const CONFLICT_ROUNDS: u32 = 8;

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
    with_stamp(now, |stamp| {
        let mut out = Vec::new();
        for scope in scopes {
            let l = &scope.limits;
            let mut push = |kind, usd, rpm, tpm| {
                out.push(Window {
                    id: stamp.id(&scope.name, kind),
                    kind,
                    usd,
                    rpm,
                    tpm,
                    scope: scope.name.clone(),
                    expires: stamp.expires(kind),
                });
            };
            if l.daily_usd.is_some() {
                push(WindowKind::Day, l.daily_usd, None, None);
            }
            if l.monthly_usd.is_some() {
                push(WindowKind::Month, l.monthly_usd, None, None);
            }
            if l.rpm.is_some() || l.tpm.is_some() {
                push(WindowKind::Minute, None, l.rpm, l.tpm);
            }
        }
        out
    })
}

/// The time part of each window's key (`d:2026-12-31`, `m:2026-12`,
/// `min:2026-12-31T23:59`) and when its row may be dropped, for one UTC
/// minute. Made once a minute on each thread rather than on every call:
/// chrono's `strftime` was ~4,700 instructions per limited request
/// (bench/README.md).
struct MinuteStamp {
    minute: i64,
    day: StampPart,
    month: StampPart,
    min: StampPart,
}

struct StampPart {
    key: String,
    /// The window's end plus a day of grace.
    expires: DateTime<Utc>,
}

impl MinuteStamp {
    fn at(now: DateTime<Utc>) -> Self {
        let part = |kind, pattern| StampPart {
            key: now.format(pattern).to_string(),
            expires: window_end(kind, now) + chrono::Duration::days(1),
        };
        Self {
            minute: now.timestamp().div_euclid(60),
            day: part(WindowKind::Day, "d:%Y-%m-%d"),
            month: part(WindowKind::Month, "m:%Y-%m"),
            min: part(WindowKind::Minute, "min:%Y-%m-%dT%H:%M"),
        }
    }

    fn part(&self, kind: WindowKind) -> &StampPart {
        match kind {
            WindowKind::Day => &self.day,
            WindowKind::Month => &self.month,
            WindowKind::Minute => &self.min,
        }
    }

    fn expires(&self, kind: WindowKind) -> DateTime<Utc> {
        self.part(kind).expires
    }

    /// `<scope>|<time part>`: the `usage_window` row's key.
    fn id(&self, scope: &str, kind: WindowKind) -> String {
        let suffix = &self.part(kind).key;
        let mut id = String::with_capacity(scope.len() + 1 + suffix.len());
        id.push_str(scope);
        id.push('|');
        id.push_str(suffix);
        id
    }
}

/// Runs `f` with the stamp for `now`'s minute, made afresh when the minute
/// (or the clock) moved.
fn with_stamp<R>(now: DateTime<Utc>, f: impl FnOnce(&MinuteStamp) -> R) -> R {
    thread_local! {
        static STAMP: std::cell::RefCell<Option<MinuteStamp>> = const { std::cell::RefCell::new(None) };
    }
    let minute = now.timestamp().div_euclid(60);
    STAMP.with_borrow_mut(|stamp| {
        let current = match stamp {
            Some(s) if s.minute == minute => s,
            _ => stamp.insert(MinuteStamp::at(now)),
        };
        f(current)
    })
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

/// A quantity in every dimension a window counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Amount {
    pub usd: f64,
    pub requests: u64,
    pub tokens: u64,
}

impl Amount {
    pub fn is_zero(&self) -> bool {
        self.usd == 0.0 && self.requests == 0 && self.tokens == 0
    }

    pub fn add(&mut self, other: Amount) {
        self.usd += other.usd;
        self.requests += other.requests;
        self.tokens += other.tokens;
    }

    /// `self - other`, never below zero.
    pub fn minus(self, other: Amount) -> Amount {
        Amount {
            usd: (self.usd - other.usd).max(0.0),
            requests: self.requests.saturating_sub(other.requests),
            tokens: self.tokens.saturating_sub(other.tokens),
        }
    }

    /// The smaller of each dimension.
    pub fn min(self, other: Amount) -> Amount {
        Amount {
            usd: self.usd.min(other.usd),
            requests: self.requests.min(other.requests),
            tokens: self.tokens.min(other.tokens),
        }
    }
}

impl Window {
    /// `amount` with the dimensions this window does not limit set to 0.
    pub fn limited(&self, amount: Amount) -> Amount {
        Amount {
            usd: if self.usd.is_some() { amount.usd } else { 0.0 },
            requests: if self.rpm.is_some() { amount.requests } else { 0 },
            tokens: if self.tpm.is_some() { amount.tokens } else { 0 },
        }
    }

    /// A fiftieth of each limit: how much more than it needs a replica
    /// takes when it goes to the database, so most calls need no trip.
    pub fn headroom(&self) -> Amount {
        Amount {
            usd: self.usd.map_or(0.0, |l| l / 50.0),
            requests: self.rpm.map_or(0, |l| l / 50),
            tokens: self.tpm.map_or(0, |l| l / 50),
        }
    }
}

/// Why [`grow`] took nothing.
#[derive(Debug)]
pub(crate) enum GrowError {
    /// The window at this index has no room for its grant.
    Limit(usize),
    Db(DbError),
}

/// The lease row of `replica` on window `window`.
fn lease_id(replica: &str, window: &str) -> String {
    format!("{replica}|{window}")
}

/// Adds each grant to what `replica` holds (`reserved_*`) in its window, all
/// or nothing: every window is updated only if the grant still fits —
/// `UPDATE … WHERE usd + reserved_usd + $usd <= $limit` — and a failed
/// condition throws, rolling all of them back. The lease row says how much
/// the replica holds, so a sweep can give it back if the replica dies.
/// `spare`: each window must also keep ten times its headroom free after
/// the grant (a generous grant is only for when much is left).
pub(crate) async fn grow(
    db: &Db,
    replica: &str,
    grants: &[(&Window, Amount)],
    spare: bool,
) -> Result<(), GrowError> {
    let lease = crate::clock::now() + chrono::Duration::from_std(LEASE).unwrap_or_default();
    let mut sql = String::from("BEGIN TRANSACTION;\n");
    let mut vars = serde_json::Map::new();
    vars.insert("lease".into(), json!(crate::clock::stamp(lease)));
    for (i, (w, grant)) in grants.iter().enumerate() {
        let room = if spare {
            let h = w.headroom();
            Amount {
                usd: h.usd * 10.0,
                requests: h.requests * 10,
                tokens: h.tokens * 10,
            }
        } else {
            Amount::default()
        };
        let mut conditions = Vec::new();
        if let Some(l) = w.usd {
            conditions.push(format!("usd + reserved_usd + $u{i} <= $lu{i}"));
            vars.insert(format!("lu{i}"), json!(l - room.usd));
        }
        if let Some(r) = w.rpm {
            conditions.push(format!("requests + reserved_requests + $r{i} <= $lr{i}"));
            vars.insert(format!("lr{i}"), json!(r.saturating_sub(room.requests)));
        }
        if let Some(t) = w.tpm {
            conditions.push(format!("tokens + reserved_tokens + $t{i} <= $lt{i}"));
            vars.insert(format!("lt{i}"), json!(t.saturating_sub(room.tokens)));
        }
        let _ = writeln!(
            sql,
            "UPSERT type::record('usage_window', $w{i}) SET usd = usd ?? 0, reserved_usd = reserved_usd ?? 0, \
             requests = requests ?? 0, reserved_requests = reserved_requests ?? 0, tokens = tokens ?? 0, \
             reserved_tokens = reserved_tokens ?? 0, scope = $s{i}, expires_at = <datetime>$e{i};\n\
             IF array::len(UPDATE type::record('usage_window', $w{i}) SET reserved_usd += $u{i}, \
             reserved_requests += $r{i}, reserved_tokens += $t{i} WHERE {} RETURN AFTER) = 0 {{ THROW 'limit:{i}' }};\n\
             UPSERT type::record('usage_lease', $l{i}) SET window = $w{i}, usd = (usd ?? 0) + $u{i}, \
             requests = (requests ?? 0) + $r{i}, tokens = (tokens ?? 0) + $t{i}, expires_at = <datetime>$lease;",
            conditions.join(" AND ")
        );
        vars.insert(format!("w{i}"), json!(w.id));
        vars.insert(format!("l{i}"), json!(lease_id(replica, &w.id)));
        vars.insert(format!("s{i}"), json!(w.scope));
        vars.insert(format!("e{i}"), json!(crate::clock::stamp(w.expires)));
        vars.insert(format!("u{i}"), json!(grant.usd));
        vars.insert(format!("r{i}"), json!(grant.requests));
        vars.insert(format!("t{i}"), json!(grant.tokens));
    }
    sql.push_str("COMMIT TRANSACTION;");
    let vars = serde_json::Value::Object(vars);
    let mut rounds = 0;
    // Many replicas on one budget conflict often; past the database's own
    // retries, a few more rounds with a longer, jittered pause.
    loop {
        match db.execute_retrying(&sql, vars.clone()).await {
            Ok(_) => return Ok(()),
            Err(DbError::Surreal(message)) if message.contains("limit:") => {
                return Err(GrowError::Limit(limit_index(&message)));
            }
            Err(err) if err.is_conflict() && rounds < CONFLICT_ROUNDS => {
                rounds += 1;
                let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0] % 50);
                tokio::time::sleep(Duration::from_millis(20 * u64::from(rounds) + jitter)).await;
            }
            Err(err) => return Err(GrowError::Db(err)),
        }
    }
}

fn limit_index(message: &str) -> usize {
    message
        .split("limit:")
        .nth(1)
        .map(|rest| rest.chars().take_while(char::is_ascii_digit).collect::<String>())
        .and_then(|digits| digits.parse::<usize>().ok())
        .unwrap_or(0)
}

/// What a replica writes back for one window: real use to count, and how
/// much of its hold to give back (`release`: all of it, so the lease row
/// goes once empty). Writes add up, so a failed one can be retried later.
#[derive(Debug, Clone)]
pub(crate) struct Writeback {
    pub window: String,
    pub spent: Amount,
    pub give_back: Amount,
    pub release: bool,
}

/// Counts the spend and shrinks the holds of `replica`, in one transaction.
/// A hold a sweep already gave back is not given back twice. Every lease
/// written is renewed.
pub(crate) async fn write_back(db: &Db, replica: &str, writes: &[Writeback]) -> Result<(), DbError> {
    if writes.is_empty() {
        return Ok(());
    }
    let lease = crate::clock::now() + chrono::Duration::from_std(LEASE).unwrap_or_default();
    let mut sql = String::from("BEGIN TRANSACTION;\n");
    let mut vars = serde_json::Map::new();
    vars.insert("lease".into(), json!(crate::clock::stamp(lease)));
    for (i, write) in writes.iter().enumerate() {
        // A lease is an accumulator: subtracting and deleting it only once
        // empty keeps a hold another call of this replica took meanwhile.
        let finish = if write.release {
            format!(
                "DELETE type::record('usage_lease', $l{i}) WHERE usd <= 0.000000001 AND requests <= 0 AND tokens <= 0;"
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            sql,
            "LET $h{i} = IF record::exists(type::record('usage_lease', $l{i})) {{ 1 }} ELSE {{ 0 }};\n\
             UPDATE type::record('usage_window', $w{i}) SET usd += $su{i}, requests += $sr{i}, tokens += $st{i}, \
             reserved_usd -= $gu{i} * $h{i}, reserved_requests -= $gr{i} * $h{i}, reserved_tokens -= $gt{i} * $h{i};\n\
             UPDATE type::record('usage_lease', $l{i}) SET usd -= $gu{i}, requests -= $gr{i}, tokens -= $gt{i}, \
             expires_at = <datetime>$lease;\n\
             {finish}"
        );
        vars.insert(format!("w{i}"), json!(write.window));
        vars.insert(format!("l{i}"), json!(lease_id(replica, &write.window)));
        vars.insert(format!("su{i}"), json!(write.spent.usd));
        vars.insert(format!("sr{i}"), json!(write.spent.requests));
        vars.insert(format!("st{i}"), json!(write.spent.tokens));
        vars.insert(format!("gu{i}"), json!(write.give_back.usd));
        vars.insert(format!("gr{i}"), json!(write.give_back.requests));
        vars.insert(format!("gt{i}"), json!(write.give_back.tokens));
    }
    sql.push_str("COMMIT TRANSACTION;");
    db.execute_retrying(&sql, serde_json::Value::Object(vars))
        .await
        .map(|_| ())
}

/// The refusal naming window `w`'s limit.
pub(crate) fn refusal(w: Option<&Window>, now: DateTime<Utc>) -> Refusal {
    let Some(w) = w else {
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

/// Gives back the holds of replicas that stopped renewing them (they died),
/// and deletes windows that ended.
pub async fn sweep(db: &Db) -> Result<usize, DbError> {
    #[derive(Deserialize)]
    struct Expired {
        id: String,
        window: String,
        usd: f64,
        requests: u64,
        tokens: u64,
    }
    let expired: Vec<Expired> = db
        .rows(
            "SELECT record::id(id) AS id, window, usd, requests, tokens FROM usage_lease WHERE expires_at < time::now() LIMIT 500",
            json!({}),
            0,
        )
        .await?;
    let count = expired.len();
    for e in expired {
        let Some(replica) = e.id.strip_suffix(&format!("|{}", e.window)) else {
            continue;
        };
        let write = Writeback {
            window: e.window,
            spent: Amount::default(),
            give_back: Amount {
                usd: e.usd,
                requests: e.requests,
                tokens: e.tokens,
            },
            release: true,
        };
        write_back(db, replica, &[write]).await?;
    }
    db.execute("DELETE usage_window WHERE expires_at < time::now()", json!({}))
        .await?;
    Ok(count)
}

/// What a scope has spent and reserved in its current windows (for the UI).
#[derive(Debug, Clone, Default, serde::Serialize, schemars::JsonSchema)]
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
    let ids = with_stamp(now, |stamp| {
        [WindowKind::Day, WindowKind::Month, WindowKind::Minute].map(|kind| stamp.id(scope, kind))
    });
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
