//! Property tests (fuzzing) of schedule parsing: arbitrary text and near-valid
//! cron, interval and once values, in several timezones and at many "now"s.
//! Parsing never panics; an accepted schedule's next occurrences never panic
//! and are never in the past.

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;

use super::schedule::{SHORTHANDS, Schedule, ScheduleType};

fn kind() -> impl Strategy<Value = ScheduleType> {
    prop_oneof![
        Just(ScheduleType::Cron),
        Just(ScheduleType::Interval),
        Just(ScheduleType::Once)
    ]
}

/// Zones with DST gaps, half-hour offsets and a 30-minute DST shift.
fn zone() -> impl Strategy<Value = Tz> {
    prop_oneof![
        Just(chrono_tz::UTC),
        Just(chrono_tz::Europe::Berlin),
        Just(chrono_tz::America::New_York),
        Just(chrono_tz::Asia::Kolkata),
        Just(chrono_tz::Australia::Lord_Howe),
        Just(chrono_tz::Pacific::Chatham),
        Just(chrono_tz::Antarctica::Troll),
    ]
}

/// A "now" between 1970 and 9999 (mostly near today).
fn now() -> impl Strategy<Value = DateTime<Utc>> {
    prop_oneof![
        3 => 1_700_000_000i64..1_900_000_000,
        1 => 0i64..253_402_300_799,
    ]
    .prop_map(|secs| Utc.timestamp_opt(secs, 0).single().unwrap_or_default())
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..70).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        Just("-1".to_string()),
        Just("99999999999999999999999".to_string()),
    ]
}

fn cron_field() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        Just("*"),
        Just("?"),
        Just("L"),
        Just("W"),
        Just("#"),
        Just("MON"),
        Just("sun"),
        Just("JAN"),
        Just("Dec"),
        Just(""),
    ]
    .prop_map(String::from);
    let atom = prop_oneof![word, number()];
    (
        atom.clone(),
        prop::option::of(atom.clone()),
        prop::option::of(atom),
        1usize..3,
    )
        .prop_map(|(a, range, step, repeat)| {
            let mut item = a;
            if let Some(to) = range {
                item = format!("{item}-{to}");
            }
            if let Some(step) = step {
                item = format!("{item}/{step}");
            }
            vec![item; repeat].join(",")
        })
}

fn cron() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(cron_field(), 4..8).prop_map(|fields| fields.join(" ")),
        prop::sample::select([SHORTHANDS, &["@reboot", "@", "@daily "]].concat()).prop_map(String::from),
    ]
}

fn unit() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "", "ns", "us", "ms", "s", "sec", "m", "min", "h", "hr", "d", "day", "w", "M", "month", "y", "years",
    ])
}

fn duration() -> impl Strategy<Value = String> {
    prop::collection::vec((number(), unit()), 1..4).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(n, u)| format!("{n}{u}"))
            .collect::<Vec<_>>()
            .join(" ")
    })
}

fn timestamp() -> impl Strategy<Value = String> {
    (
        (0u32..100_000, 0u32..14, 0u32..33),
        (0u32..26, 0u32..61, 0u32..62),
        prop::sample::select(vec!["Z", "+00:00", "-05:30", "+14:00", "+99:99", "", "z"]),
        prop::sample::select(vec!["T", " ", "t"]),
        any::<bool>(),
    )
        .prop_map(|((y, mo, d), (h, mi, s), offset, sep, seconds)| {
            let time = if seconds {
                format!("{h:02}:{mi:02}:{s:02}")
            } else {
                format!("{h:02}:{mi:02}")
            };
            format!("{y:04}-{mo:02}-{d:02}{sep}{time}{offset}")
        })
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        cron(),
        number(),
        duration(),
        duration().prop_map(|d| format!("+{d}")),
        duration().prop_map(|d| format!("in {d}")),
        timestamp(),
    ]
}

proptest! {
    #![proptest_config(crate::fuzzing::config(256))]

    #[test]
    fn schedules_never_panic_and_never_fire_in_the_past(
        kind in kind(),
        value in value(),
        tz in zone(),
        now in now(),
        late_secs in 0i64..10_000_000,
    ) {
        let Ok(schedule) = Schedule::parse(kind, &value, tz, now) else {
            return Ok(());
        };
        if let Some(first) = schedule.first(now, tz) {
            prop_assert!(first >= now, "{value:?}: first {first} before now {now}");
        }
        if let Some(next) = schedule.next_after(now, tz) {
            prop_assert!(next > now, "{value:?}: next {next} is not after {now}");
        }
        let due = schedule.first(now, tz).unwrap_or(now);
        let later = now + chrono::Duration::seconds(late_secs);
        if let Some(following) = schedule.following(due, later, tz) {
            prop_assert!(following > due, "{value:?}: following {following} not after due {due}");
        }
    }

    #[test]
    fn schedule_errors_name_the_schedule_value(kind in kind(), value in value(), now in now()) {
        if let Err(err) = Schedule::parse(kind, &value, chrono_tz::UTC, now) {
            prop_assert_eq!(err.param(), "schedule_value");
            prop_assert!(err.to_string().starts_with("schedule_value: "), "{}", err);
        }
    }
}
