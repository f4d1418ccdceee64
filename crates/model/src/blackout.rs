//! Blackout dates (`RolloutPolicy.spec.blackouts`): intervals in which no stage starts. A stage
//! already running keeps going; the engine wakes exactly at the end.
//!
//! `from` and `to` are ISO 8601 dates or local date-times (`2026-12-20`, `2026-12-20T00:00`,
//! `2026-12-20T00:00:00`) read in `timeZone` (an IANA name, default UTC), or RFC 3339 instants with
//! an offset (`2026-12-20T00:00:00+01:00`), whose offset wins. The interval is `[from, to)`.

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Blackout {
    pub from: String,
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Why a blackout cannot be read; `field` is the blackout's field the error is about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BlackoutError {
    pub field: &'static str,
    pub message: String,
}

/// A blackout in force: until when, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveBlackout {
    pub until: DateTime<Utc>,
    pub reason: Option<String>,
}

impl ActiveBlackout {
    /// `blackout until 2027-01-02T23:00:00Z (year-end freeze)`.
    pub fn describe(&self) -> String {
        let until = self
            .until
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match &self.reason {
            Some(reason) => format!("blackout until {until} ({reason})"),
            None => format!("blackout until {until}"),
        }
    }
}

impl Blackout {
    /// The interval `[from, to)` in UTC.
    pub fn interval(&self) -> Result<(DateTime<Utc>, DateTime<Utc>), BlackoutError> {
        let zone = match self.time_zone.as_deref() {
            None | Some("") => None,
            Some(name) => Some(name.parse::<Tz>().map_err(|_| BlackoutError {
                field: "timeZone",
                message: format!(
                    "unknown time zone {name:?}: expected an IANA name such as \"Europe/Berlin\" or \"UTC\""
                ),
            })?),
        };
        let from = instant(&self.from, zone, "from")?;
        let to = instant(&self.to, zone, "to")?;
        if to <= from {
            return Err(BlackoutError {
                field: "to",
                message: format!(
                    "to ({}) must be after from ({}): a blackout is the interval [from, to)",
                    self.to, self.from
                ),
            });
        }
        Ok((from, to))
    }
}

fn instant(
    text: &str,
    zone: Option<Tz>,
    field: &'static str,
) -> Result<DateTime<Utc>, BlackoutError> {
    let text = text.trim();
    if let Ok(with_offset) = DateTime::parse_from_rfc3339(text) {
        return Ok(with_offset.with_timezone(&Utc));
    }
    let local = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
        .or_else(|| {
            NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
        .ok_or_else(|| BlackoutError {
            field,
            message: format!(
                "invalid {field} {text:?}: expected an ISO date or date-time such as \"2026-12-20\" or \"2026-12-20T00:00:00\""
            ),
        })?;
    let resolved = match zone {
        None => Some(Utc.from_utc_datetime(&local)),
        // A time skipped by a daylight-saving change does not exist there; an ambiguous one (the
        // hour repeated in autumn) is its first occurrence.
        Some(zone) => zone
            .from_local_datetime(&local)
            .earliest()
            .map(|t| t.with_timezone(&Utc)),
    };
    resolved.ok_or_else(|| BlackoutError {
        field,
        message: format!(
            "{field} {text:?} does not exist in the time zone (a daylight-saving gap)"
        ),
    })
}

/// The blackout in force at `now`, if any. Overlapping or touching blackouts count as one, so
/// the end is where stages may start again. Unreadable blackouts are skipped (validation refuses
/// them before they get here).
pub fn active_at(blackouts: &[Blackout], now: DateTime<Utc>) -> Option<ActiveBlackout> {
    let mut intervals: Vec<(DateTime<Utc>, DateTime<Utc>, Option<&str>)> = blackouts
        .iter()
        .filter_map(|b| b.interval().ok().map(|(f, t)| (f, t, b.reason.as_deref())))
        .collect();
    intervals.sort_by_key(|(from, _, _)| *from);
    let (_, mut until, reason) = *intervals
        .iter()
        .find(|(from, to, _)| *from <= now && now < *to)?;
    // Extend over every later interval starting at or before the end reached so far.
    for (from, to, _) in &intervals {
        if *from <= until && *to > until {
            until = *to;
        }
    }
    Some(ActiveBlackout {
        until,
        reason: reason.map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blackout(from: &str, to: &str, zone: Option<&str>) -> Blackout {
        Blackout {
            from: from.into(),
            to: to.into(),
            time_zone: zone.map(str::to_string),
            reason: Some("freeze".into()),
        }
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("instant")
            .with_timezone(&Utc)
    }

    #[test]
    fn local_times_are_read_in_the_time_zone_and_offsets_win() {
        let berlin = blackout(
            "2026-12-20T00:00:00",
            "2027-01-03T00:00:00",
            Some("Europe/Berlin"),
        );
        assert_eq!(
            berlin.interval(),
            Ok((at("2026-12-19T23:00:00Z"), at("2027-01-02T23:00:00Z")))
        );
        let utc = blackout("2026-12-20", "2026-12-21T06:30", None);
        assert_eq!(
            utc.interval(),
            Ok((at("2026-12-20T00:00:00Z"), at("2026-12-21T06:30:00Z")))
        );
        let offset = blackout(
            "2026-12-20T00:00:00+02:00",
            "2026-12-21",
            Some("Asia/Tokyo"),
        );
        assert_eq!(
            offset.interval().map(|i| i.0),
            Ok(at("2026-12-19T22:00:00Z"))
        );
    }

    #[test]
    fn to_not_after_from_unknown_zones_and_bad_dates_are_errors() {
        let backwards = blackout("2026-12-20", "2026-12-20", None);
        assert_eq!(backwards.interval().map_err(|e| e.field), Err("to"));
        let zone = blackout("2026-12-20", "2026-12-21", Some("Mars/Olympus"));
        assert_eq!(zone.interval().map_err(|e| e.field), Err("timeZone"));
        let date = blackout("20.12.2026", "2026-12-21", None);
        assert_eq!(date.interval().map_err(|e| e.field), Err("from"));
        let gap = blackout("2026-03-29T02:30:00", "2026-03-30", Some("Europe/Berlin"));
        assert_eq!(gap.interval().map_err(|e| e.field), Err("from"));
    }

    #[test]
    fn the_active_blackout_ends_where_touching_ones_end() {
        let blackouts = [
            blackout("2026-12-20", "2026-12-24", None),
            blackout("2026-12-24", "2026-12-27", None),
            blackout("2026-12-31", "2027-01-02", None),
        ];
        assert_eq!(active_at(&blackouts, at("2026-12-19T23:59:59Z")), None);
        let active = active_at(&blackouts, at("2026-12-20T00:00:00Z")).expect("active");
        assert_eq!(active.until, at("2026-12-27T00:00:00Z"));
        assert_eq!(
            active.describe(),
            "blackout until 2026-12-27T00:00:00Z (freeze)"
        );
        assert_eq!(active_at(&blackouts, at("2026-12-27T00:00:00Z")), None);
    }
}
