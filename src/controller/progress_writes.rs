//! Progress-only status writes (counts, waiting texts: see `tollgate_engine::progress`) are sent
//! at most once per [`INTERVAL`] per promotion; a held-back one is sent by the step the controller
//! schedules at the end of the interval (or replaced by a transition's write before that). A
//! stage whose clusters provision within the interval costs one status write, not one per
//! ClusterSummary update, and `tollgate status --watch` still sees counts move every interval.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, TimeDelta, Utc};

pub const INTERVAL: TimeDelta = TimeDelta::seconds(2);

#[derive(Default)]
pub struct ProgressWrites {
    /// When each promotion's status was last written.
    last: Mutex<HashMap<String, DateTime<Utc>>>,
}

impl ProgressWrites {
    /// Until when a progress-only write of `name` is held back; `None`: send it now.
    pub fn held_until(&self, name: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let last = self.lock();
        let until = *last.get(name)? + INTERVAL;
        (now < until).then_some(until)
    }

    /// A status of `name` was written at `now`.
    pub fn written(&self, name: &str, now: DateTime<Utc>) {
        self.lock().insert(name.to_string(), now);
    }

    pub fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, DateTime<Utc>>> {
        self.last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_write_waits_for_the_interval_after_the_last_write() {
        let writes = ProgressWrites::default();
        let t0 = DateTime::UNIX_EPOCH;
        assert_eq!(writes.held_until("p", t0), None, "never written: now");
        writes.written("p", t0);
        let second = t0 + TimeDelta::milliseconds(500);
        assert_eq!(writes.held_until("p", second), Some(t0 + INTERVAL));
        assert_eq!(writes.held_until("p", t0 + INTERVAL), None);
        assert_eq!(writes.held_until("q", second), None, "per promotion");
        writes.forget("p");
        assert_eq!(writes.held_until("p", second), None);
    }
}
