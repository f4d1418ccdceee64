//! Exponential retry delay after failed syncs: 1 s, 2 s, 4 s, … capped at 5 minutes, reset by the
//! first success.

use std::time::Duration;

const FIRST: Duration = Duration::from_secs(1);
const CAP: Duration = Duration::from_secs(300);

#[derive(Clone, Debug, Default)]
pub struct Backoff {
    consecutive_failures: u32,
}

impl Backoff {
    pub fn record_failure(&mut self) {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
    }

    pub fn record_success(&mut self) {
        self.consecutive_failures = 0;
    }

    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// `None` after a success; otherwise how long to wait before the next attempt.
    pub fn retry_after(&self) -> Option<Duration> {
        let exponent = self.consecutive_failures.checked_sub(1)?;
        // 2^9 s already exceeds the cap; clamping the exponent avoids overflow.
        let delay = FIRST * 2u32.pow(exponent.min(9));
        Some(delay.min(CAP))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_to_five_minutes_and_resets() {
        let mut backoff = Backoff::default();
        assert_eq!(backoff.retry_after(), None);
        let mut seen = Vec::new();
        for _ in 0..12 {
            backoff.record_failure();
            seen.push(backoff.retry_after().map(|d| d.as_secs()));
        }
        let expected: Vec<Option<u64>> = [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
            .into_iter()
            .map(Some)
            .collect();
        assert_eq!(seen, expected);
        backoff.record_success();
        assert_eq!(backoff.retry_after(), None);
        backoff.record_failure();
        assert_eq!(backoff.retry_after(), Some(Duration::from_secs(1)));
    }
}
