//! Time as Onyx stores and shows it, on chrono. A leaf module: it imports
//! nothing from the crate.
//!
//! Every stored timestamp (SurrealDB rows, session logs, the API) is RFC 3339
//! UTC with microseconds and a `Z` (`2026-11-22T10:04:00.000000Z`), so text
//! order is time order; stored days are `YYYY-MM-DD` in UTC. What a person
//! calls "today" (daily-log names, the date in a prompt) is the day in their
//! timezone: the `*_in` helpers.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Datelike, NaiveDate, SecondsFormat, Utc};
use chrono_tz::Tz;

/// The current time.
pub fn now() -> DateTime<Utc> {
    Utc::now()
}

/// What time it is, for code whose behaviour turns on time passing (leases
/// lapse, work falls due): tests give it a [`ManualClock`] and move that
/// instead of sleeping.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

pub type SharedClock = Arc<dyn Clock>;

/// The wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The wall clock, shared.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// A clock that stands still until moved.
pub struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    pub fn at(start: DateTime<Utc>) -> Arc<Self> {
        Arc::new(Self(Mutex::new(start)))
    }

    pub fn advance(&self, by: std::time::Duration) {
        let mut now = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *now += chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The current time as stored.
pub fn now_stamp() -> String {
    stamp(now())
}

/// A time as stored: RFC 3339 UTC with microseconds.
pub fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A stored (or any RFC 3339) timestamp, in UTC.
pub fn parse_stamp(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The UTC day of a time, `YYYY-MM-DD`.
pub fn day(at: DateTime<Utc>) -> String {
    // Written out rather than through `format`, which parses its pattern on
    // every call: usage records take a day on every request.
    format!("{:04}-{:02}-{:02}", at.year(), at.month(), at.day())
}

/// The day before `at`'s, `YYYY-MM-DD`.
pub fn day_before(at: DateTime<Utc>) -> String {
    day(at - chrono::Duration::days(1))
}

/// The UTC time of day of a time, `HH:MM`.
pub fn hour_minute(at: DateTime<Utc>) -> String {
    at.format("%H:%M").to_string()
}

/// The day of `at` in `tz`, `YYYY-MM-DD`.
pub fn day_in(at: DateTime<Utc>, tz: Tz) -> String {
    at.with_timezone(&tz).format("%Y-%m-%d").to_string()
}

/// The day before `at`'s day in `tz`, `YYYY-MM-DD` (a calendar day, so a
/// 23- or 25-hour day at a DST change does not skip or repeat one).
pub fn day_before_in(at: DateTime<Utc>, tz: Tz) -> String {
    let today = at.with_timezone(&tz).date_naive();
    today.pred_opt().unwrap_or(today).format("%Y-%m-%d").to_string()
}

/// The time of day of `at` in `tz`, `HH:MM`.
pub fn hour_minute_in(at: DateTime<Utc>, tz: Tz) -> String {
    at.with_timezone(&tz).format("%H:%M").to_string()
}

/// The date and time of `at` in `tz` for a person (and a model) to read:
/// `Monday 2026-11-23 14:39 (America/Los_Angeles, UTC-08:00)`.
pub fn local_time_line(at: DateTime<Utc>, tz: Tz) -> String {
    let local = at.with_timezone(&tz);
    format!(
        "{} ({}, UTC{})",
        local.format("%A %Y-%m-%d %H:%M"),
        tz.name(),
        local.format("%:z")
    )
}

/// The host's timezone: `TZ` when it names an IANA zone, else the system's
/// (`/etc/localtime`), else UTC. Aliases of UTC (`Etc/UTC`, `Zulu`…) are UTC.
pub fn host_timezone() -> Tz {
    let from_env = std::env::var("TZ")
        .ok()
        .and_then(|name| name.trim_start_matches(':').parse::<Tz>().ok());
    let zone = from_env
        .or_else(|| iana_time_zone::get_timezone().ok()?.parse::<Tz>().ok())
        .unwrap_or(chrono_tz::UTC);
    if UTC_ALIASES.contains(&zone.name()) {
        chrono_tz::UTC
    } else {
        zone
    }
}

const UTC_ALIASES: [&str; 18] = [
    "UTC",
    "Etc/UTC",
    "UCT",
    "Etc/UCT",
    "Universal",
    "Etc/Universal",
    "Zulu",
    "Etc/Zulu",
    "GMT",
    "Etc/GMT",
    "GMT0",
    "Etc/GMT0",
    "GMT+0",
    "Etc/GMT+0",
    "GMT-0",
    "Etc/GMT-0",
    "Greenwich",
    "Etc/Greenwich",
];

/// Days since 1970-01-01 of the `YYYY-MM-DD` that `text` starts with
/// (`2026-11-22`, `2026-11-22T10:00:00Z`); `None` if it is not a date.
pub fn day_number(text: &str) -> Option<i64> {
    let date = NaiveDate::parse_from_str(text.get(..10)?, "%Y-%m-%d").ok()?;
    Some(date.signed_duration_since(NaiveDate::default()).num_days())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        parse_stamp(text).unwrap()
    }

    #[test]
    fn stamps_are_rfc3339_utc_with_microseconds() {
        let text = "2026-11-22T10:04:00.000000Z";
        assert_eq!(stamp(at(text)), text);
        assert_eq!(
            stamp(at("2026-11-22T11:04:00.5+01:00")),
            "2026-11-22T10:04:00.500000Z"
        );
        // Same shape as before the move to chrono (humantime's micros format).
        let now = now_stamp();
        assert_eq!(now.len(), text.len(), "{now}");
        assert!(now.ends_with('Z') && now.as_bytes()[10] == b'T', "{now}");
        assert_eq!(parse_stamp("yesterday"), None);
    }

    #[test]
    fn days_and_times_of_day() {
        let t = at("2026-03-01T00:30:00Z");
        assert_eq!(day(t), "2026-03-01");
        assert_eq!(hour_minute(t), "00:30");
        assert_eq!(day_before(t), "2026-02-28");
        assert_eq!(day_before(at("2024-03-01T23:59:59Z")), "2024-02-29");
        assert_eq!(day_before(at("2027-01-01T00:00:00Z")), "2026-12-31");
        assert_eq!(day_before(at("2026-11-22T12:00:00Z")), "2026-11-21");
    }

    #[test]
    fn days_in_a_timezone() {
        let la: Tz = "America/Los_Angeles".parse().unwrap();
        // 23:30 on the 22nd in Los Angeles is already the 23rd in UTC.
        let late = at("2026-11-23T07:30:00Z");
        assert_eq!(day(late), "2026-11-23");
        assert_eq!(day_in(late, la), "2026-11-22");
        assert_eq!(day_before_in(late, la), "2026-11-21");
        assert_eq!(hour_minute_in(late, la), "23:30");
        assert_eq!(
            local_time_line(late, la),
            "Sunday 2026-11-22 23:30 (America/Los_Angeles, UTC-08:00)"
        );
        let kiritimati: Tz = "Pacific/Kiritimati".parse().unwrap();
        assert_eq!(day_in(at("2026-11-22T10:00:00Z"), kiritimati), "2026-11-23");
        assert_eq!(day_in(late, chrono_tz::UTC), day(late));
        // The calendar day before, after the spring-forward night (24 hours
        // back from 00:30 on the 9th is 23:30 on the 7th).
        assert_eq!(day_before_in(at("2026-03-09T07:30:00Z"), la), "2026-03-08");
    }

    #[test]
    fn the_host_timezone_is_an_iana_zone_and_utc_aliases_are_utc() {
        let zone = host_timezone();
        assert!(zone.name().parse::<Tz>().is_ok(), "{}", zone.name());
        assert!(!UTC_ALIASES[1..].contains(&zone.name()), "{}", zone.name());
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let start = at("2026-11-22T10:00:00Z");
        let clock = ManualClock::at(start);
        assert_eq!(Clock::now(&*clock), start);
        clock.advance(std::time::Duration::from_secs(90));
        assert_eq!(stamp(Clock::now(&*clock)), "2026-11-22T10:01:30.000000Z");
        let shared: SharedClock = clock;
        assert_eq!(shared.now(), at("2026-11-22T10:01:30Z"));
        assert!((system().now() - Utc::now()).num_seconds().abs() < 5);
    }

    #[test]
    fn day_numbers() {
        assert_eq!(day_number("1970-01-01"), Some(0));
        assert_eq!(
            day_number("2026-11-22").unwrap() - day_number("2026-10-23").unwrap(),
            30
        );
        assert_eq!(
            day_number("2024-03-01").unwrap() - day_number("2024-02-28").unwrap(),
            2
        );
        assert_eq!(day_number("2026-11-22T10:00:00Z"), day_number("2026-11-22"));
        assert_eq!(day_number("2026-13-01"), None);
        assert_eq!(day_number("2026"), None);
    }
}
