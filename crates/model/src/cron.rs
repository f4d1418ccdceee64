//! Cron schedules as accepted by `github.com/robfig/cron` v1.2.0 `ParseStandard` (what Sveltos uses
//! for `promotionWindow`), plus a `CRON_TZ=<IANA>` / `TZ=<IANA>` prefix (docs/architecture.md#d8-windows-with-time-zones).
//!
//! Syntax: five fields (minute hour day-of-month month day-of-week) made of comma-separated
//! `*`, `?`, `N`, `N-M`, `*/S`, `N/S` (meaning `N-max/S`) and `N-M/S`; month and weekday names
//! (`jan`, `mon`, case-insensitive); descriptors `@yearly`/`@annually`, `@monthly`, `@weekly`,
//! `@daily`/`@midnight`, `@hourly` and `@every <go duration>`. Like robfig, `?` is accepted in any
//! field and means `*`.
//!
//! Day matching follows robfig: when day-of-month or day-of-week is written starting with `*`/`?`
//! (including `*/2`, as in v1.2.0) both must match; otherwise either may match.
//!
//! Searches jump field by field (month, day, hour, minute) instead of minute by minute, so a firing
//! is found in at most a few thousand steps even for schedules that fire once in eight years.

use chrono::{
    DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc,
};
use chrono_tz::Tz;

use crate::duration::{DurationError, parse_go_duration};

/// How far searches look ahead: the sparsest schedule that can fire at all is 29 February, which
/// skips eight years around 2100, so a search of this length never reports a false "never".
pub const SEARCH_HORIZON_DAYS: i64 = 8 * 366 + 31;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error("empty expression")]
    Empty,
    #[error(
        "expected exactly 5 fields (minute hour day-of-month month day-of-week), found {found}"
    )]
    FieldCount { found: usize },
    #[error(
        "unknown descriptor {0:?} (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, @every <duration>)"
    )]
    UnknownDescriptor(String),
    #[error("invalid @every duration: {0}")]
    EveryDuration(DurationError),
    #[error("unknown time zone {0:?} (expected an IANA name such as \"Europe/Berlin\")")]
    UnknownTimeZone(String),
    #[error("time zone prefix {0:?} is not followed by a schedule")]
    MissingScheduleAfterTimeZone(String),
    #[error("{field}: {value:?} is not a number or a known name")]
    NotANumber { field: &'static str, value: String },
    #[error("{field}: {value} is out of range {min}-{max}")]
    OutOfRange {
        field: &'static str,
        value: u32,
        min: u32,
        max: u32,
    },
    #[error("{field}: range start {start} is after its end {end}")]
    ReversedRange {
        field: &'static str,
        start: u32,
        end: u32,
    },
    #[error("{field}: step must be a positive number, found {step:?}")]
    BadStep { field: &'static str, step: String },
    #[error("{field}: too many '{separator}' in {part:?}")]
    TooManySeparators {
        field: &'static str,
        separator: char,
        part: String,
    },
}

/// A parsed cron schedule with its time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    zone: Zone,
    kind: ScheduleKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Zone {
    Utc,
    Named(Tz),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ScheduleKind {
    Fields(Fields),
    /// `@every D`: fires at every whole multiple of D since the Unix epoch. robfig anchors it to
    /// the moment the schedule object was created instead; anchoring to the epoch keeps window
    /// evaluation a pure function of `now`. D is whole seconds, at least one (robfig rounds alike).
    Every {
        seconds: i64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Fields {
    minutes: u64,
    hours: u64,
    days_of_month: u64,
    months: u64,
    days_of_week: u64,
    /// robfig's "star bit": the field was written starting with `*` or `?`.
    dom_star: bool,
    dow_star: bool,
}

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

impl Schedule {
    pub fn parse(expression: &str) -> Result<Schedule, CronError> {
        let trimmed = expression.trim();
        if trimmed.is_empty() {
            return Err(CronError::Empty);
        }
        let (zone, rest) = split_time_zone(trimmed)?;
        let kind = if let Some(descriptor) = rest.strip_prefix('@') {
            parse_descriptor(descriptor)?
        } else {
            ScheduleKind::Fields(parse_fields(rest)?)
        };
        Ok(Schedule { zone, kind })
    }

    /// The first firing strictly after `t`, searching [`SEARCH_HORIZON_DAYS`] ahead.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            ScheduleKind::Every { seconds } => {
                let k = t.timestamp().div_euclid(*seconds) + 1;
                DateTime::from_timestamp(k.checked_mul(*seconds)?, 0)
            }
            ScheduleKind::Fields(fields) => {
                let local = self.zone.to_local(t);
                let limit = local + Duration::days(SEARCH_HORIZON_DAYS);
                let mut candidate = truncate_to_minute(local) + Duration::minutes(1);
                loop {
                    let found = fields.next_match(candidate, limit)?;
                    match self.zone.to_utc(found) {
                        Some(utc) if utc > t => return Some(utc),
                        _ => candidate = found + Duration::minutes(1),
                    }
                }
            }
        }
    }

    /// The latest firing at or before `t`, not earlier than `not_before`.
    pub fn latest_at_or_before(
        &self,
        t: DateTime<Utc>,
        not_before: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        match &self.kind {
            ScheduleKind::Every { seconds } => {
                let k = t.timestamp().div_euclid(*seconds);
                let firing = DateTime::from_timestamp(k.checked_mul(*seconds)?, 0)?;
                (firing >= not_before).then_some(firing)
            }
            ScheduleKind::Fields(fields) => {
                let limit = self.zone.to_local(not_before) - Duration::days(1);
                let mut candidate = truncate_to_minute(self.zone.to_local(t));
                loop {
                    let found = fields.previous_match(candidate, limit)?;
                    match self.zone.to_utc(found) {
                        Some(utc) if utc <= t => {
                            return (utc >= not_before).then_some(utc);
                        }
                        _ => candidate = found - Duration::minutes(1),
                    }
                }
            }
        }
    }
}

fn split_time_zone(text: &str) -> Result<(Zone, &str), CronError> {
    let Some(rest) = text
        .strip_prefix("CRON_TZ=")
        .or_else(|| text.strip_prefix("TZ="))
    else {
        return Ok((Zone::Utc, text));
    };
    let (name, schedule) = match rest.split_once(char::is_whitespace) {
        Some((name, schedule)) if !schedule.trim().is_empty() => (name, schedule.trim()),
        _ => return Err(CronError::MissingScheduleAfterTimeZone(text.to_string())),
    };
    let tz: Tz = name
        .parse()
        .map_err(|_| CronError::UnknownTimeZone(name.to_string()))?;
    Ok((Zone::Named(tz), schedule))
}

fn parse_descriptor(descriptor: &str) -> Result<ScheduleKind, CronError> {
    let standard = match descriptor {
        "yearly" | "annually" => "0 0 1 1 *",
        "monthly" => "0 0 1 * *",
        "weekly" => "0 0 * * 0",
        "daily" | "midnight" => "0 0 * * *",
        "hourly" => "0 * * * *",
        other => {
            let Some(duration_text) = other.strip_prefix("every ") else {
                return Err(CronError::UnknownDescriptor(format!("@{other}")));
            };
            let duration =
                parse_go_duration(duration_text.trim()).map_err(CronError::EveryDuration)?;
            // robfig: at least one second, truncated to whole seconds.
            let seconds = i64::try_from(duration.as_secs()).unwrap_or(i64::MAX).max(1);
            return Ok(ScheduleKind::Every { seconds });
        }
    };
    Ok(ScheduleKind::Fields(parse_fields(standard)?))
}

fn parse_fields(text: &str) -> Result<Fields, CronError> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [minute, hour, dom, month, dow] = parts.as_slice() else {
        return Err(CronError::FieldCount { found: parts.len() });
    };
    Ok(Fields {
        minutes: parse_field(minute, &MINUTE)?,
        hours: parse_field(hour, &HOUR)?,
        days_of_month: parse_field(dom, &DAY_OF_MONTH)?,
        months: parse_field(month, &MONTH)?,
        days_of_week: parse_field(dow, &DAY_OF_WEEK)?,
        dom_star: dom.starts_with('*') || dom.starts_with('?'),
        dow_star: dow.starts_with('*') || dow.starts_with('?'),
    })
}

fn parse_field(text: &str, spec: &FieldSpec) -> Result<u64, CronError> {
    let mut bits = 0u64;
    for part in text.split(',') {
        bits |= parse_range(part, spec)?;
    }
    Ok(bits)
}

fn parse_range(part: &str, spec: &FieldSpec) -> Result<u64, CronError> {
    let too_many = |separator| CronError::TooManySeparators {
        field: spec.name,
        separator,
        part: part.to_string(),
    };
    let mut range_and_step = part.split('/');
    let range = range_and_step.next().unwrap_or("");
    let step_text = range_and_step.next();
    if range_and_step.next().is_some() {
        return Err(too_many('/'));
    }
    let (start, mut end, single) = if range == "*" || range == "?" {
        (spec.min, spec.max, false)
    } else {
        let mut low_high = range.split('-');
        let low = parse_value(low_high.next().unwrap_or(""), spec)?;
        let high = low_high.next().map(|h| parse_value(h, spec)).transpose()?;
        if low_high.next().is_some() {
            return Err(too_many('-'));
        }
        match high {
            Some(high) => (low, high, false),
            None => (low, low, true),
        }
    };
    let step = match step_text {
        None => 1,
        Some(step_text) => {
            // robfig: `N/S` means `N-max/S`.
            if single {
                end = spec.max;
            }
            match step_text.parse::<u32>() {
                Ok(step) if step > 0 => step,
                _ => {
                    return Err(CronError::BadStep {
                        field: spec.name,
                        step: step_text.to_string(),
                    });
                }
            }
        }
    };
    for value in [start, end] {
        if value < spec.min || value > spec.max {
            return Err(CronError::OutOfRange {
                field: spec.name,
                value,
                min: spec.min,
                max: spec.max,
            });
        }
    }
    if start > end {
        return Err(CronError::ReversedRange {
            field: spec.name,
            start,
            end,
        });
    }
    Ok((start..=end)
        .step_by(step as usize)
        .fold(0u64, |bits, v| bits | (1 << v)))
}

fn parse_value(text: &str, spec: &FieldSpec) -> Result<u32, CronError> {
    let lower = text.to_ascii_lowercase();
    if let Some((_, value)) = spec.names.iter().find(|(name, _)| *name == lower) {
        return Ok(*value);
    }
    text.parse::<u32>().map_err(|_| CronError::NotANumber {
        field: spec.name,
        value: text.to_string(),
    })
}

impl Zone {
    fn to_local(self, t: DateTime<Utc>) -> NaiveDateTime {
        match self {
            Zone::Utc => t.naive_utc(),
            Zone::Named(tz) => t.with_timezone(&tz).naive_local(),
        }
    }

    /// A local wall-clock firing as an instant. A time skipped by a DST change does not fire; a
    /// repeated one fires once, at its first occurrence.
    fn to_utc(self, local: NaiveDateTime) -> Option<DateTime<Utc>> {
        match self {
            Zone::Utc => Some(local.and_utc()),
            Zone::Named(tz) => match tz.from_local_datetime(&local) {
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
                    Some(t.with_timezone(&Utc))
                }
                LocalResult::None => None,
            },
        }
    }
}

fn truncate_to_minute(t: NaiveDateTime) -> NaiveDateTime {
    t.date().and_hms_opt(t.hour(), t.minute(), 0).unwrap_or(t)
}

fn has(bits: u64, value: u32) -> bool {
    bits & (1 << value) != 0
}

fn first_of_month(year: i32, month: u32) -> Option<NaiveDateTime> {
    NaiveDate::from_ymd_opt(year, month, 1)?.and_hms_opt(0, 0, 0)
}

impl Fields {
    fn day_matches(&self, date: NaiveDate) -> bool {
        let dom = has(self.days_of_month, date.day());
        let dow = has(self.days_of_week, date.weekday().num_days_from_sunday());
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first matching local minute at or after `t` (a whole minute), up to `limit`.
    fn next_match(&self, mut t: NaiveDateTime, limit: NaiveDateTime) -> Option<NaiveDateTime> {
        while t <= limit {
            if !has(self.months, t.month()) {
                let (year, month) = if t.month() == 12 {
                    (t.year() + 1, 1)
                } else {
                    (t.year(), t.month() + 1)
                };
                t = first_of_month(year, month)?;
            } else if !self.day_matches(t.date()) {
                t = t.date().succ_opt()?.and_hms_opt(0, 0, 0)?;
            } else if !has(self.hours, t.hour()) {
                t = t.date().and_hms_opt(t.hour(), 0, 0)? + Duration::hours(1);
            } else if !has(self.minutes, t.minute()) {
                let later = self.minutes >> t.minute();
                t = if later == 0 {
                    t.date().and_hms_opt(t.hour(), 0, 0)? + Duration::hours(1)
                } else {
                    t + Duration::minutes(i64::from(later.trailing_zeros()))
                };
            } else {
                return Some(t);
            }
        }
        None
    }

    /// The last matching local minute at or before `t` (a whole minute), down to `limit`.
    fn previous_match(&self, mut t: NaiveDateTime, limit: NaiveDateTime) -> Option<NaiveDateTime> {
        while t >= limit {
            if !has(self.months, t.month()) {
                t = first_of_month(t.year(), t.month())? - Duration::minutes(1);
            } else if !self.day_matches(t.date()) {
                t = t.date().and_hms_opt(0, 0, 0)? - Duration::minutes(1);
            } else if !has(self.hours, t.hour()) {
                t = t.date().and_hms_opt(t.hour(), 0, 0)? - Duration::minutes(1);
            } else if !has(self.minutes, t.minute()) {
                let earlier = self.minutes & ((1u64 << t.minute()) - 1);
                t = if earlier == 0 {
                    t.date().and_hms_opt(t.hour(), 0, 0)? - Duration::minutes(1)
                } else {
                    let minute = 63 - earlier.leading_zeros();
                    t.date().and_hms_opt(t.hour(), minute, 0)?
                };
            } else {
                return Some(t);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("test timestamp")
            .with_timezone(&Utc)
    }

    fn next(expr: &str, after: &str) -> Option<DateTime<Utc>> {
        Schedule::parse(expr).expect("valid").next_after(utc(after))
    }

    fn latest(expr: &str, at: &str) -> Option<DateTime<Utc>> {
        let t = utc(at);
        Schedule::parse(expr)
            .expect("valid")
            .latest_at_or_before(t, t - Duration::days(366))
    }

    #[test]
    fn next_is_strictly_after() {
        assert_eq!(
            next("0 10 * * *", "2025-10-07T10:00:00Z"),
            Some(utc("2025-10-08T10:00:00Z"))
        );
        assert_eq!(
            next("0 10 * * *", "2025-10-07T09:59:59Z"),
            Some(utc("2025-10-07T10:00:00Z"))
        );
    }

    #[test]
    fn latest_includes_the_instant_itself() {
        assert_eq!(
            latest("0 10 * * *", "2025-10-07T10:00:00Z"),
            Some(utc("2025-10-07T10:00:00Z"))
        );
        assert_eq!(
            latest("0 10 * * *", "2025-10-07T09:59:59Z"),
            Some(utc("2025-10-06T10:00:00Z"))
        );
    }

    #[test]
    fn lists_ranges_steps_and_names() {
        assert_eq!(
            next("*/15 9-17 * * mon-fri", "2025-10-07T17:50:00Z"),
            Some(utc("2025-10-08T09:00:00Z"))
        );
        assert_eq!(
            next("5/20 * * * *", "2025-10-07T10:30:00Z"),
            Some(utc("2025-10-07T10:45:00Z"))
        );
        assert_eq!(
            next("0 0 1 JAN,jul ?", "2025-10-07T00:00:00Z"),
            Some(utc("2026-01-01T00:00:00Z"))
        );
        assert_eq!(
            latest("30 8,20 * * *", "2025-10-07T19:00:00Z"),
            Some(utc("2025-10-07T08:30:00Z"))
        );
    }

    #[test]
    fn restricted_dom_and_dow_match_either() {
        // The 13th or any Friday: the next after Tue 2025-10-07 is Fri 2025-10-10.
        assert_eq!(
            next("0 0 13 * 5", "2025-10-07T00:00:00Z"),
            Some(utc("2025-10-10T00:00:00Z"))
        );
        // With a star in day-of-week both must match: only the 13th.
        assert_eq!(
            next("0 0 13 * *", "2025-10-07T00:00:00Z"),
            Some(utc("2025-10-13T00:00:00Z"))
        );
    }

    #[test]
    fn descriptors() {
        let after = "2025-10-07T17:30:00Z";
        assert_eq!(next("@yearly", after), Some(utc("2026-01-01T00:00:00Z")));
        assert_eq!(next("@annually", after), Some(utc("2026-01-01T00:00:00Z")));
        assert_eq!(next("@monthly", after), Some(utc("2025-11-01T00:00:00Z")));
        assert_eq!(next("@weekly", after), Some(utc("2025-10-12T00:00:00Z")));
        assert_eq!(next("@daily", after), Some(utc("2025-10-08T00:00:00Z")));
        assert_eq!(next("@midnight", after), Some(utc("2025-10-08T00:00:00Z")));
        assert_eq!(next("@hourly", after), Some(utc("2025-10-07T18:00:00Z")));
    }

    #[test]
    fn every_is_anchored_to_the_epoch() {
        assert_eq!(
            next("@every 1h30m", "2025-10-07T17:30:00Z"),
            Some(utc("2025-10-07T18:00:00Z"))
        );
        assert_eq!(
            latest("@every 1h30m", "2025-10-07T17:30:00Z"),
            Some(utc("2025-10-07T16:30:00Z"))
        );
        // Sub-second durations round up to one second, like robfig.
        assert_eq!(
            next("@every 10ms", "2025-10-07T17:30:00.5Z"),
            Some(utc("2025-10-07T17:30:01Z"))
        );
    }

    #[test]
    fn time_zone_prefix() {
        // 10:00 in Berlin is 08:00 UTC in summer time.
        assert_eq!(
            next("CRON_TZ=Europe/Berlin 0 10 * * *", "2025-10-07T00:00:00Z"),
            Some(utc("2025-10-07T08:00:00Z"))
        );
        assert_eq!(
            next("TZ=America/New_York 0 10 * * *", "2025-10-07T00:00:00Z"),
            Some(utc("2025-10-07T14:00:00Z"))
        );
        assert_eq!(
            next("TZ=UTC @daily", "2025-10-07T01:00:00Z"),
            Some(utc("2025-10-08T00:00:00Z"))
        );
    }

    #[test]
    fn dst_gap_is_skipped_and_repeat_fires_once() {
        // Berlin skipped 02:30 on 2025-03-30 and repeated it on 2025-10-26.
        assert_eq!(
            next("TZ=Europe/Berlin 30 2 * * *", "2025-03-29T12:00:00Z"),
            Some(utc("2025-03-31T00:30:00Z"))
        );
        assert_eq!(
            next("TZ=Europe/Berlin 30 2 * * *", "2025-10-25T12:00:00Z"),
            Some(utc("2025-10-26T00:30:00Z"))
        );
        assert_eq!(
            next("TZ=Europe/Berlin 30 2 * * *", "2025-10-26T00:30:00Z"),
            Some(utc("2025-10-27T01:30:00Z"))
        );
    }

    #[test]
    fn leap_day_is_found_across_2100() {
        assert_eq!(
            next("0 0 29 2 *", "2096-03-01T00:00:00Z"),
            Some(utc("2104-02-29T00:00:00Z"))
        );
        assert_eq!(next("0 0 30 2 *", "2025-01-01T00:00:00Z"), None);
    }

    #[test]
    fn syntax_errors() {
        let cases: [(&str, CronError); 11] = [
            ("", CronError::Empty),
            ("0 10 * *", CronError::FieldCount { found: 4 }),
            ("0 0 10 * * *", CronError::FieldCount { found: 6 }),
            (
                "@fortnightly",
                CronError::UnknownDescriptor("@fortnightly".into()),
            ),
            (
                "60 * * * *",
                CronError::OutOfRange {
                    field: "minute",
                    value: 60,
                    min: 0,
                    max: 59,
                },
            ),
            (
                "0 0 * * 7",
                CronError::OutOfRange {
                    field: "day-of-week",
                    value: 7,
                    min: 0,
                    max: 6,
                },
            ),
            (
                "0 x * * *",
                CronError::NotANumber {
                    field: "hour",
                    value: "x".into(),
                },
            ),
            (
                "0 5-2 * * *",
                CronError::ReversedRange {
                    field: "hour",
                    start: 5,
                    end: 2,
                },
            ),
            (
                "*/0 * * * *",
                CronError::BadStep {
                    field: "minute",
                    step: "0".into(),
                },
            ),
            (
                "TZ=Mars/Olympus 0 0 * * *",
                CronError::UnknownTimeZone("Mars/Olympus".into()),
            ),
            (
                "CRON_TZ=UTC",
                CronError::MissingScheduleAfterTimeZone("CRON_TZ=UTC".into()),
            ),
        ];
        for (expr, expected) in cases {
            assert_eq!(Schedule::parse(expr), Err(expected), "{expr:?}");
        }
        assert!(matches!(
            Schedule::parse("@every 5 minutes"),
            Err(CronError::EveryDuration(_))
        ));
    }
}
