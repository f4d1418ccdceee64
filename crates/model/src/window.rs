//! Promotion windows (`auto.promotionWindow`, docs/architecture.md#the-window-algorithm, #d8-windows-with-time-zones).
//!
//! Let F be the latest firing of `from` at or before now (looking back at most 366 days, like
//! upstream) and T the first firing of `to` strictly after F. The window is open iff
//! `F <= now < T`. Upstream uses `F < now`; we include F because the engine wakes exactly at the
//! opening instant (docs/architecture.md#d6-event-driven-not-polled) and must then see the window open, where upstream polls and is
//! always a little late anyway.
//!
//! A bound that never fires (30 February) is a parse error rather than an endless search.

use std::fmt;

use chrono::{DateTime, Duration, Utc};

use crate::cron::{CronError, SEARCH_HORIZON_DAYS, Schedule};
use crate::model::TimeWindow;

/// How far back the opening firing is looked for (upstream walks forward from now − 366 days).
const LOOK_BACK_DAYS: i64 = 366;

/// A parsed promotion window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    from: Schedule,
    to: Schedule,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowState {
    Open { closes_at: DateTime<Utc> },
    Closed { opens_at: DateTime<Utc> },
}

/// Which end of the window an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    From,
    To,
}

impl Bound {
    pub fn field(self) -> &'static str {
        match self {
            Bound::From => "from",
            Bound::To => "to",
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error(
        "promotionWindow.{bound} must not be empty: expected a cron expression such as \"0 10 * * *\""
    )]
    Empty { bound: Bound },
    #[error("promotionWindow.{bound} {expression:?} is not a valid cron expression: {reason}")]
    Invalid {
        bound: Bound,
        expression: String,
        reason: CronError,
    },
    #[error(
        "promotionWindow.{bound} {expression:?} never fires (no matching date in the next 8 years), so the window would never {}",
        if *bound == Bound::From { "open" } else { "close" }
    )]
    NeverFires { bound: Bound, expression: String },
}

impl WindowError {
    pub fn bound(&self) -> Bound {
        match self {
            WindowError::Empty { bound }
            | WindowError::Invalid { bound, .. }
            | WindowError::NeverFires { bound, .. } => *bound,
        }
    }
}

/// A fixed, arbitrary instant from which "does it ever fire" is decided, so parsing stays pure.
fn never_fires_reference() -> DateTime<Utc> {
    DateTime::from_timestamp(1_704_067_200, 0).unwrap_or(DateTime::<Utc>::MIN_UTC) // 2024-01-01
}

fn parse_bound(expression: &str, bound: Bound) -> Result<Schedule, WindowError> {
    if expression.trim().is_empty() {
        return Err(WindowError::Empty { bound });
    }
    let schedule = Schedule::parse(expression).map_err(|reason| WindowError::Invalid {
        bound,
        expression: expression.to_string(),
        reason,
    })?;
    if schedule.next_after(never_fires_reference()).is_none() {
        return Err(WindowError::NeverFires {
            bound,
            expression: expression.to_string(),
        });
    }
    Ok(schedule)
}

impl Window {
    pub fn parse(window: &TimeWindow) -> Result<Window, WindowError> {
        Ok(Window {
            from: parse_bound(&window.from, Bound::From)?,
            to: parse_bound(&window.to, Bound::To)?,
        })
    }

    pub fn state_at(&self, now: DateTime<Utc>) -> WindowState {
        let opening = self
            .from
            .latest_at_or_before(now, now - Duration::days(LOOK_BACK_DAYS));
        if let Some(opened_at) = opening {
            // A `to` that passed parsing fires within the search horizon of any instant; if it
            // somehow does not, the window stays open rather than closing at a made-up time.
            let closes_at = self
                .to
                .next_after(opened_at)
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            if now < closes_at {
                return WindowState::Open { closes_at };
            }
        }
        // Likewise, a `from` with no firing within the horizon never opens.
        let opens_at = self
            .from
            .next_after(now)
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        WindowState::Closed { opens_at }
    }
}

/// Only there to keep the horizon and the error message ("8 years") in step.
const _: () = assert!(SEARCH_HORIZON_DAYS >= 8 * 366);

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("test timestamp")
            .with_timezone(&Utc)
    }

    fn window(from: &str, to: &str) -> Window {
        Window::parse(&TimeWindow {
            from: from.into(),
            to: to.into(),
        })
        .expect("valid window")
    }

    fn open(closes: &str) -> WindowState {
        WindowState::Open {
            closes_at: utc(closes),
        }
    }

    fn closed(opens: &str) -> WindowState {
        WindowState::Closed {
            opens_at: utc(opens),
        }
    }

    #[test]
    fn upstream_vectors() {
        assert_eq!(
            window("0 10 * * *", "0 11 * * *").state_at(utc("2025-10-07T10:05:00Z")),
            open("2025-10-07T11:00:00Z")
        );
        assert_eq!(
            window("0 20 * * *", "0 22 * * *").state_at(utc("2025-10-07T19:30:00Z")),
            closed("2025-10-07T20:00:00Z")
        );
        assert_eq!(
            window("0 10 * * 6", "0 22 * * 0").state_at(utc("2025-10-07T17:30:00Z")),
            closed("2025-10-11T10:00:00Z")
        );
    }

    #[test]
    fn open_at_the_opening_instant_and_closed_at_the_closing_one() {
        let w = window("0 10 * * *", "0 11 * * *");
        assert_eq!(
            w.state_at(utc("2025-10-07T10:00:00Z")),
            open("2025-10-07T11:00:00Z")
        );
        assert_eq!(
            w.state_at(utc("2025-10-07T10:59:59Z")),
            open("2025-10-07T11:00:00Z")
        );
        assert_eq!(
            w.state_at(utc("2025-10-07T11:00:00Z")),
            closed("2025-10-08T10:00:00Z")
        );
    }

    #[test]
    fn weekend_window_spanning_days() {
        let w = window("0 10 * * 6", "0 22 * * 0");
        assert_eq!(
            w.state_at(utc("2025-10-12T15:00:00Z")),
            open("2025-10-12T22:00:00Z")
        );
        assert_eq!(
            w.state_at(utc("2025-10-12T22:00:00Z")),
            closed("2025-10-18T10:00:00Z")
        );
    }

    #[test]
    fn time_zone_windows() {
        // 09:00–17:00 Berlin time is 07:00–15:00 UTC in October (CEST).
        let w = window(
            "CRON_TZ=Europe/Berlin 0 9 * * mon-fri",
            "CRON_TZ=Europe/Berlin 0 17 * * mon-fri",
        );
        assert_eq!(
            w.state_at(utc("2025-10-07T07:00:00Z")),
            open("2025-10-07T15:00:00Z")
        );
        assert_eq!(
            w.state_at(utc("2025-10-07T06:59:00Z")),
            closed("2025-10-07T07:00:00Z")
        );
    }

    #[test]
    fn every_and_question_mark_and_descriptors() {
        let w = window("@every 2h", "@every 3h");
        // From fires at 16:00 (even hours), to next fires at 18:00 (multiples of 3h).
        assert_eq!(
            w.state_at(utc("2025-10-07T17:30:00Z")),
            open("2025-10-07T18:00:00Z")
        );
        let w = window("0 6 ? * ?", "@daily");
        assert_eq!(
            w.state_at(utc("2025-10-07T23:59:00Z")),
            open("2025-10-08T00:00:00Z")
        );
        assert_eq!(
            w.state_at(utc("2025-10-07T05:00:00Z")),
            closed("2025-10-07T06:00:00Z")
        );
    }

    #[test]
    fn from_older_than_the_look_back_is_not_found() {
        // Fires every 29 February; in 2025 the last one is more than 366 days back.
        let w = window("0 0 29 2 *", "0 1 29 2 *");
        assert_eq!(
            w.state_at(utc("2025-10-07T00:00:00Z")),
            closed("2028-02-29T00:00:00Z")
        );
    }

    #[test]
    fn errors_name_the_bound_and_reason() {
        let parse = |from: &str, to: &str| {
            Window::parse(&TimeWindow {
                from: from.into(),
                to: to.into(),
            })
        };
        assert_eq!(
            parse("", "0 11 * * *"),
            Err(WindowError::Empty { bound: Bound::From })
        );
        assert_eq!(
            parse("0 0 30 2 *", "0 11 * * *"),
            Err(WindowError::NeverFires {
                bound: Bound::From,
                expression: "0 0 30 2 *".into()
            })
        );
        assert_eq!(
            parse("0 10 * * *", "0 0 31 4 *").map_err(|e| e.bound()),
            Err(Bound::To)
        );
        let err = parse("0 10 * * *", "0 25 * * *").expect_err("hour 25");
        assert_eq!(err.bound(), Bound::To);
        assert_eq!(
            err.to_string(),
            "promotionWindow.to \"0 25 * * *\" is not a valid cron expression: hour: 25 is out of range 0-23"
        );
        let err = parse("TZ=Nowhere/Land 0 10 * * *", "0 11 * * *").expect_err("bad tz");
        assert!(
            err.to_string()
                .contains("unknown time zone \"Nowhere/Land\"")
        );
    }
}
