//! A step that only started analyses asking for their first measurements is not written at once
//! (`tollgate_engine::write_hold`): the step with the results writes the transition, so a stage
//! gated by one measurement costs what an ungated handoff costs. The hold is bounded by [`HOLD`]
//! from the first held step: a slow measurement never hides for longer that the stage is being
//! analysed.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, TimeDelta, Utc};

/// The longest a promotion's write waits for its first measurements (as long as a progress
/// write waits; a measurement within the runner's timeout may take longer, then the start is
/// written and the result after it).
pub const HOLD: TimeDelta = TimeDelta::seconds(2);

#[derive(Default)]
pub struct MeasurementHolds {
    since: Mutex<HashMap<String, DateTime<Utc>>>,
}

impl MeasurementHolds {
    /// Until when the write of `name`'s step may still wait; `None`: write it now.
    pub fn held_until(&self, name: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut since = self.lock();
        let until = *since.entry(name.to_string()).or_insert(now) + HOLD;
        (now < until).then_some(until)
    }

    /// `name`'s step did not wait (written, or nothing to wait for): the next hold starts anew.
    pub fn release(&self, name: &str) {
        self.lock().remove(name);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, DateTime<Utc>>> {
        self.since
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_ends_at_its_bound_and_starts_anew_once_released() {
        let holds = MeasurementHolds::default();
        let t0 = DateTime::UNIX_EPOCH;
        assert_eq!(holds.held_until("p", t0), Some(t0 + HOLD));
        let later = t0 + TimeDelta::milliseconds(1500);
        assert_eq!(
            holds.held_until("p", later),
            Some(t0 + HOLD),
            "bounded from the first held step"
        );
        assert_eq!(holds.held_until("p", t0 + HOLD), None, "the bound passed");
        assert_eq!(
            holds.held_until("q", later),
            Some(later + HOLD),
            "per promotion"
        );
        holds.release("p");
        let next = t0 + TimeDelta::seconds(9);
        assert_eq!(holds.held_until("p", next), Some(next + HOLD));
    }
}
