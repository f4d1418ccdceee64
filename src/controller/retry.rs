//! Retries of failed steps: exponential backoff per promotion, and the server's request to hold
//! off (a 429's Retry-After), which no touch may cut short.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// When a failed step is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// How many steps of the promotion failed in a row, this one included.
    pub attempt: u32,
    pub after: Duration,
}

#[derive(Debug, Default)]
pub struct Retries {
    failures: HashMap<String, u32>,
    /// Promotions whose step failed while the server asked clients to hold off: not stepped
    /// before then, whatever touches them meanwhile.
    not_before: HashMap<String, DateTime<Utc>>,
}

impl Retries {
    /// A step of `name` failed at `now`; `hold_off` is what the server asked for (zero if
    /// nothing). Returns when to retry.
    pub fn failed(&mut self, name: &str, transient: bool, hold_off: Duration) -> Retry {
        let attempt = self.failures.entry(name.to_string()).or_insert(0);
        *attempt += 1;
        let after = backoff(*attempt, transient).max(hold_off);
        Retry {
            attempt: *attempt,
            after,
        }
    }

    /// Holds `name` off until `until` (the server's Retry-After).
    pub fn hold_off(&mut self, name: &str, until: DateTime<Utc>) {
        self.not_before.insert(name.to_string(), until);
    }

    /// A step of `name` completed (or it is forgotten): it starts afresh.
    pub fn succeeded(&mut self, name: &str) {
        self.failures.remove(name);
        self.not_before.remove(name);
    }

    /// Whether `name` may be stepped at `now`.
    pub fn allows(&self, name: &str, now: DateTime<Utc>) -> bool {
        self.not_before.get(name).is_none_or(|at| *at <= now)
    }
}

/// Exponential backoff from 200 ms capped at 2 s for errors that may pass on their own (5xx,
/// 429, connection refused, a starting server's 403, conflicts), so a step is retried within
/// seconds of the server answering again rather than at the next unrelated event; from 2 s capped
/// at one minute for errors a human must fix.
fn backoff(attempts: u32, transient: bool) -> Duration {
    let (base_ms, cap_ms): (u64, u64) = if transient {
        (200, 2_000)
    } else {
        (2_000, 60_000)
    };
    let factor = 1u64 << attempts.saturating_sub(1).min(10);
    Duration::from_millis((base_ms * factor).min(cap_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_failures_retry_within_two_seconds_however_long_they_last() {
        let mut retries = Retries::default();
        let afters: Vec<u64> = (0..20)
            .map(|_| retries.failed("p", true, Duration::ZERO).after.as_millis() as u64)
            .collect();
        assert_eq!(&afters[..5], &[200, 400, 800, 1_600, 2_000]);
        assert!(afters.iter().all(|ms| *ms <= 2_000), "{afters:?}");
    }

    #[test]
    fn failures_a_human_must_fix_back_off_to_a_minute_and_a_success_resets() {
        let mut retries = Retries::default();
        let afters: Vec<u64> = (0..10)
            .map(|_| retries.failed("p", false, Duration::ZERO).after.as_secs())
            .collect();
        assert_eq!(&afters[..3], &[2, 4, 8]);
        assert_eq!(afters.last(), Some(&60));
        retries.succeeded("p");
        assert_eq!(retries.failed("p", false, Duration::ZERO).attempt, 1);
    }

    #[test]
    fn the_servers_hold_off_wins_over_a_shorter_backoff() {
        let mut retries = Retries::default();
        let retry = retries.failed("p", true, Duration::from_secs(3));
        assert_eq!(retry.after, Duration::from_secs(3));
        let t0 = DateTime::UNIX_EPOCH;
        retries.hold_off("p", t0 + chrono::Duration::seconds(3));
        assert!(!retries.allows("p", t0 + chrono::Duration::seconds(2)));
        assert!(retries.allows("p", t0 + chrono::Duration::seconds(3)));
        assert!(retries.allows("q", t0), "per promotion");
    }
}
