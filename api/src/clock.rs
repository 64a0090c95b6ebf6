//! Time as Onyx stores and shows it, on chrono. A leaf module: it imports
//! nothing from the crate.
//!
//! Every stored timestamp (SurrealDB rows, session logs, the API) is RFC 3339
//! UTC with microseconds and a `Z` (`2026-11-22T10:04:00.000000Z`), so text
//! order is time order; days are `YYYY-MM-DD` in UTC.

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};

/// The current time.
pub fn now() -> DateTime<Utc> {
    Utc::now()
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
    at.format("%Y-%m-%d").to_string()
}

/// The day before `at`'s, `YYYY-MM-DD`.
pub fn day_before(at: DateTime<Utc>) -> String {
    day(at - chrono::Duration::days(1))
}

/// The UTC time of day of a time, `HH:MM`.
pub fn hour_minute(at: DateTime<Utc>) -> String {
    at.format("%H:%M").to_string()
}

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
