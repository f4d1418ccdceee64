//! Durations in the few characters a status line has: "1m12s" where a countdown ticks,
//! "3m" where only the order of magnitude matters.

use chrono::{DateTime, SecondsFormat, Utc};

/// `from` to `to`, to the second below an hour ("45s", "1m12s"), else to the minute ("2h05m"),
/// or the hour past a day ("3d04h"). Negative spans read as zero.
pub fn precise(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let seconds = (to - from).num_seconds().max(0);
    let (minutes, seconds) = (seconds / 60, seconds % 60);
    match minutes {
        0 => format!("{seconds}s"),
        1..60 => format!("{minutes}m{seconds:02}s"),
        _ => coarse_minutes(minutes),
    }
}

/// `from` to `to`, to the second below a minute ("45s"), to the minute below an hour ("3m"),
/// else as [`precise`] does.
pub fn coarse(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let seconds = (to - from).num_seconds().max(0);
    match seconds / 60 {
        0 => format!("{seconds}s"),
        minutes @ 1..60 => format!("{minutes}m"),
        minutes => coarse_minutes(minutes),
    }
}

fn coarse_minutes(minutes: i64) -> String {
    let (hours, minutes) = (minutes / 60, minutes % 60);
    if hours < 24 {
        format!("{hours}h{minutes:02}m")
    } else {
        format!("{}d{:02}h", hours / 24, hours % 24)
    }
}

/// A timestamp as RFC 3339 to the second (never nanoseconds).
pub fn time(at: Option<DateTime<Utc>>) -> String {
    at.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    fn at(seconds: i64) -> (DateTime<Utc>, DateTime<Utc>) {
        let from = DateTime::from_timestamp(1_700_000_000, 0).expect("valid");
        (from, from + Duration::seconds(seconds))
    }

    #[test]
    fn a_countdown_keeps_its_seconds_below_an_hour() {
        for (seconds, text) in [
            (0, "0s"),
            (45, "45s"),
            (72, "1m12s"),
            (3599, "59m59s"),
            (3600, "1h00m"),
            (7500, "2h05m"),
            (90_000, "1d01h"),
        ] {
            let (from, to) = at(seconds);
            assert_eq!(precise(from, to), text, "{seconds}s");
        }
    }

    #[test]
    fn an_age_drops_the_seconds_past_a_minute() {
        for (seconds, text) in [(9, "9s"), (72, "1m"), (180, "3m"), (7500, "2h05m")] {
            let (from, to) = at(seconds);
            assert_eq!(coarse(from, to), text, "{seconds}s");
        }
    }

    #[test]
    fn a_time_already_past_reads_as_zero_not_negative() {
        let (from, to) = at(-30);
        assert_eq!(precise(from, to), "0s");
        assert_eq!(coarse(from, to), "0s");
    }
}
