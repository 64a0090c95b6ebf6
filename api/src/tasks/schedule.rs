//! When a task runs: parsing `cron`, `interval` and `once` schedules (with
//! messages that say what is wrong) and computing the next occurrence in the
//! task's timezone.
//!
//! Cron takes standard 5-field crontab (`min hour day month weekday`), the
//! same with a seconds field first, and `@hourly`/`@daily`/`@weekly`/
//! `@monthly`/`@yearly`. Weekdays follow crontab: 0 or 7 is Sunday. (The
//! `cron` crate counts 1 = Sunday, so numeric weekdays are shifted here.)

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

/// A schedule Onyx cannot use; the message starts with the field it names.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error("schedule_type: {0:?} is not \"cron\", \"interval\" or \"once\"")]
    Type(String),
    #[error("schedule_value: {0}")]
    Value(String),
}

impl ScheduleError {
    /// The request field at fault.
    pub fn param(&self) -> &'static str {
        match self {
            Self::Type(_) => "schedule_type",
            Self::Value(_) => "schedule_value",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum ScheduleType {
    Cron,
    Interval,
    Once,
}

impl ScheduleType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cron => "cron",
            Self::Interval => "interval",
            Self::Once => "once",
        }
    }

    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        match text {
            "cron" => Ok(Self::Cron),
            "interval" => Ok(Self::Interval),
            "once" => Ok(Self::Once),
            other => Err(ScheduleError::Type(other.into())),
        }
    }
}

#[derive(Debug, Clone)]
pub enum Schedule {
    Cron(Box<cron::Schedule>),
    Interval(Duration),
    Once(DateTime<Utc>),
}

/// A `ScheduleError::Value` with a formatted message.
macro_rules! bad {
    ($($message:tt)*) => {
        ScheduleError::Value(format!($($message)*))
    };
}

/// Interval tasks may not run more often than this.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

impl Schedule {
    /// Parses a schedule; `now` anchors relative `once` values (`+10m`).
    pub fn parse(kind: ScheduleType, value: &str, tz: Tz, now: DateTime<Utc>) -> Result<Self, ScheduleError> {
        let value = value.trim();
        match kind {
            ScheduleType::Cron => parse_cron(value).map(|s| Self::Cron(Box::new(s))),
            ScheduleType::Interval => {
                let every = parse_interval(value)?;
                // Past the calendar's end (year 262143) it can never fire.
                chrono::Duration::from_std(every)
                    .ok()
                    .and_then(|d| now.checked_add_signed(d))
                    .ok_or_else(|| bad!("{value:?} is too long an interval"))?;
                Ok(Self::Interval(every))
            }
            ScheduleType::Once => parse_once(value, tz, now).map(Self::Once),
        }
    }

    /// The first occurrence strictly after `after` (`None`: there is none).
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match self {
            Self::Cron(schedule) => schedule
                .after(&after.with_timezone(&tz))
                .next()
                .map(|t| t.with_timezone(&Utc)),
            Self::Interval(every) => after.checked_add_signed(chrono::Duration::from_std(*every).ok()?),
            Self::Once(at) => (*at > after).then_some(*at),
        }
    }

    /// The occurrence a new (or edited) task waits for first.
    pub fn first(&self, now: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match self {
            // A once-task set a moment in the past (clock skew, a slow client) runs now.
            Self::Once(at) => Some((*at).max(now)),
            other => other.next_after(now, tz),
        }
    }

    /// The next regular occurrence after a run that was due at `due`:
    /// interval tasks keep their rhythm, skipping beats that passed meanwhile.
    pub fn following(&self, due: DateTime<Utc>, now: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match self {
            Self::Interval(every) => {
                let every = chrono::Duration::from_std(*every).ok()?;
                let mut next = due.checked_add_signed(every)?;
                if next <= now {
                    let behind = (now - next).num_milliseconds() / every.num_milliseconds().max(1) + 1;
                    next = next.checked_add_signed(every.checked_mul(i32::try_from(behind).ok()?)?)?;
                }
                Some(next)
            }
            Self::Cron(_) => self.next_after(due.max(now), tz),
            Self::Once(_) => None,
        }
    }
}

/// The `@` shorthands cron accepts.
pub(super) const SHORTHANDS: &[&str] = &[
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

fn parse_cron(value: &str) -> Result<cron::Schedule, ScheduleError> {
    const SHAPE: &str = "use 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or @hourly/@daily/@weekly/@monthly/@yearly";
    if value.starts_with('@') {
        let normalized = match value {
            "@annually" => "@yearly",
            "@midnight" => "@daily",
            other => other,
        };
        if !SHORTHANDS.contains(&value) {
            return Err(bad!("{value:?} is not a known shorthand; {SHAPE}"));
        }
        return cron::Schedule::from_str(normalized).map_err(|e| bad!("{value:?}: {e}"));
    }
    let fields: Vec<&str> = value.split_whitespace().collect();
    let with_seconds: Vec<String> = match fields.len() {
        5 => std::iter::once("0")
            .chain(fields.iter().copied())
            .map(String::from)
            .collect(),
        6 => fields.iter().map(|f| (*f).to_string()).collect(),
        n => {
            return Err(bad!(
                "{value:?} has {n} field{}; {SHAPE}",
                if n == 1 { "" } else { "s" }
            ));
        }
    };
    let mut with_seconds = with_seconds;
    with_seconds[5] = crontab_weekdays(&with_seconds[5]).map_err(|e| bad!("{value:?}: day-of-week {e}"))?;
    let schedule = cron::Schedule::from_str(&with_seconds.join(" "))
        .map_err(|e| bad!("{value:?} is not a valid cron expression ({e}); {SHAPE}"))?;
    if schedule.upcoming(Utc).next().is_none() {
        return Err(bad!("{value:?} never fires"));
    }
    Ok(schedule)
}

/// Rewrites crontab weekday numbers (0–7, Sunday = 0 or 7) into the `cron`
/// crate's (1–7, Sunday = 1). Names, `*` and `?` pass through.
fn crontab_weekdays(field: &str) -> Result<String, String> {
    let shift = |n: &str| -> Result<u32, String> {
        match n.parse::<u32>() {
            Ok(n) if n <= 7 => Ok(n % 7 + 1),
            Ok(n) => Err(format!("{n} is out of range (0-7, Sunday is 0 or 7)")),
            Err(_) => Err(format!("{n:?} is not a weekday")),
        }
    };
    let is_number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mut parts = Vec::new();
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        let step = step.map(|s| format!("/{s}")).unwrap_or_default();
        match range.split_once('-') {
            Some((from, to)) if is_number(from) && is_number(to) => {
                let (from_n, to_n) = (shift(from)?, shift(to)?);
                if to == "7" && from != "0" && from != "7" && step.is_empty() {
                    // `5-7` is Friday to Sunday: Sunday wraps to the front.
                    parts.push(format!("{from_n}-7"));
                    parts.push("1".into());
                } else if to == "7" && step.is_empty() {
                    parts.push("1-7".into());
                } else {
                    parts.push(format!("{from_n}-{to_n}{step}"));
                }
            }
            None if is_number(range) => parts.push(format!("{}{step}", shift(range)?)),
            _ => parts.push(item.to_string()),
        }
    }
    Ok(parts.join(","))
}

fn parse_interval(value: &str) -> Result<Duration, ScheduleError> {
    let every = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        value
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|e| bad!("{value:?}: {e}"))?
    } else {
        humantime::parse_duration(value).map_err(|_| {
            bad!("{value:?} is not an interval: give milliseconds (\"3600000\") or a duration (\"30s\", \"15m\", \"2h\")")
        })?
    };
    if every < MIN_INTERVAL {
        return Err(bad!("{value:?} is shorter than the minimum interval of 1s"));
    }
    Ok(every)
}

fn parse_once(value: &str, tz: Tz, now: DateTime<Utc>) -> Result<DateTime<Utc>, ScheduleError> {
    let relative = value.strip_prefix('+').or_else(|| value.strip_prefix("in "));
    if let Some(delay) = relative {
        let delay = humantime::parse_duration(delay.trim())
            .map_err(|_| bad!("{value:?}: expected a delay like \"+10m\""))?;
        return chrono::Duration::from_std(delay)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .ok_or_else(|| bad!("{value:?} is too far away"));
    }
    let at = if let Ok(at) = DateTime::parse_from_rfc3339(value) {
        at.with_timezone(&Utc)
    } else {
        let naive = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(value, f).ok())
            .ok_or_else(|| {
                bad!("{value:?} is not a time: use ISO 8601 (\"2026-02-03T15:30:00Z\", or without an offset for the task's timezone) or a delay like \"+10m\"")
            })?;
        tz.from_local_datetime(&naive)
            .earliest()
            .ok_or_else(|| bad!("{value:?} does not exist in {tz} (a daylight-saving gap)"))?
            .with_timezone(&Utc)
    };
    // A little slack for clocks and slow clients; anything older is a mistake.
    if at < now - chrono::Duration::minutes(1) {
        return Err(bad!("{value:?} is in the past"));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{parse_stamp, stamp};

    fn at(text: &str) -> DateTime<Utc> {
        parse_stamp(text).unwrap()
    }

    fn next(kind: ScheduleType, value: &str, tz: &str, after: &str) -> String {
        let tz: Tz = tz.parse().unwrap();
        let schedule = Schedule::parse(kind, value, tz, at(after)).unwrap();
        stamp(schedule.next_after(at(after), tz).unwrap())
    }

    #[test]
    fn five_field_crontab_runs_in_the_tasks_timezone() {
        // 09:00 in Berlin (UTC+1 in November) is 08:00 UTC.
        assert_eq!(
            next(
                ScheduleType::Cron,
                "0 9 * * *",
                "Europe/Berlin",
                "2026-11-22T10:00:00Z"
            ),
            "2026-11-23T08:00:00.000000Z"
        );
        assert_eq!(
            next(ScheduleType::Cron, "@daily", "UTC", "2026-11-22T10:00:00Z"),
            "2026-11-23T00:00:00.000000Z"
        );
        // Six fields: seconds first.
        assert_eq!(
            next(ScheduleType::Cron, "*/5 * * * * *", "UTC", "2026-11-22T10:00:01Z"),
            "2026-11-22T10:00:05.000000Z"
        );
    }

    #[test]
    fn crontab_weekdays_count_sunday_as_zero_or_seven() {
        // 2026-11-22 is a Sunday.
        let monday_to_friday = next(ScheduleType::Cron, "0 9 * * 1-5", "UTC", "2026-11-22T10:00:00Z");
        assert_eq!(monday_to_friday, "2026-11-23T09:00:00.000000Z");
        let sunday = next(ScheduleType::Cron, "0 9 * * 0", "UTC", "2026-11-21T10:00:00Z");
        assert_eq!(sunday, "2026-11-22T09:00:00.000000Z");
        assert_eq!(
            next(ScheduleType::Cron, "0 9 * * 7", "UTC", "2026-11-21T10:00:00Z"),
            sunday
        );
        // Friday to Sunday, from a Saturday evening: Sunday next.
        assert_eq!(
            next(ScheduleType::Cron, "0 9 * * 5-7", "UTC", "2026-11-21T10:00:00Z"),
            "2026-11-22T09:00:00.000000Z"
        );
        assert_eq!(
            next(ScheduleType::Cron, "0 9 * * MON", "UTC", "2026-11-22T10:00:00Z"),
            "2026-11-23T09:00:00.000000Z"
        );
    }

    #[test]
    fn bad_schedules_say_why() {
        let now = at("2026-11-22T10:00:00Z");
        let err = |kind, value| {
            let err = Schedule::parse(kind, value, chrono_tz::UTC, now).unwrap_err();
            assert_eq!(err.param(), "schedule_value");
            err.to_string()
        };
        assert!(err(ScheduleType::Cron, "0 9 * *").contains("4 fields"));
        assert!(err(ScheduleType::Cron, "0 25 * * *").contains("not a valid cron expression"));
        assert!(err(ScheduleType::Cron, "0 9 * * 8").contains("out of range"));
        assert!(err(ScheduleType::Cron, "@sometimes").contains("shorthand"));
        assert!(err(ScheduleType::Interval, "soon").contains("not an interval"));
        assert!(err(ScheduleType::Interval, "500").contains("minimum"));
        assert!(err(ScheduleType::Once, "tomorrow").contains("not a time"));
        assert!(err(ScheduleType::Once, "2020-01-01T00:00:00Z").contains("in the past"));
    }

    #[test]
    fn intervals_and_once() {
        assert_eq!(
            next(ScheduleType::Interval, "90s", "UTC", "2026-11-22T10:00:00Z"),
            "2026-11-22T10:01:30.000000Z"
        );
        assert_eq!(
            next(ScheduleType::Interval, "3600000", "UTC", "2026-11-22T10:00:00Z"),
            "2026-11-22T11:00:00.000000Z"
        );
        // A local time without offset is read in the task's timezone.
        assert_eq!(
            next(
                ScheduleType::Once,
                "2026-11-23T09:00",
                "Europe/Berlin",
                "2026-11-22T10:00:00Z"
            ),
            "2026-11-23T08:00:00.000000Z"
        );
        assert_eq!(
            next(ScheduleType::Once, "+10m", "UTC", "2026-11-22T10:00:00Z"),
            "2026-11-22T10:10:00.000000Z"
        );
    }

    #[test]
    fn schedules_past_the_calendars_end_are_refused_not_a_panic() {
        // Found by the fuzzer: a 130,000-year interval's second beat overflowed
        // chrono's calendar and panicked.
        let now = at("2027-09-14T11:26:19Z");
        let long = Schedule::parse(ScheduleType::Interval, "4104222977810500", chrono_tz::UTC, now).unwrap();
        let first = long.first(now, chrono_tz::UTC).unwrap();
        assert_eq!(long.following(first, first, chrono_tz::UTC), None);
        assert_eq!(long.next_after(first, chrono_tz::UTC), None);
        let err =
            Schedule::parse(ScheduleType::Interval, "8000000000000000000", chrono_tz::UTC, now).unwrap_err();
        assert!(err.to_string().contains("too long an interval"), "{err}");
        let err = Schedule::parse(ScheduleType::Once, "+100000000y", chrono_tz::UTC, now).unwrap_err();
        assert!(err.to_string().contains("too far away"), "{err}");
    }

    #[test]
    fn an_interval_keeps_its_rhythm_after_a_late_run() {
        let schedule = Schedule::Interval(Duration::from_secs(60));
        let due = at("2026-11-22T10:00:00Z");
        let following = schedule.following(due, at("2026-11-22T10:03:30Z"), chrono_tz::UTC);
        assert_eq!(stamp(following.unwrap()), "2026-11-22T10:04:00.000000Z");
        let on_time = schedule.following(due, at("2026-11-22T10:00:02Z"), chrono_tz::UTC);
        assert_eq!(stamp(on_time.unwrap()), "2026-11-22T10:01:00.000000Z");
    }
}
