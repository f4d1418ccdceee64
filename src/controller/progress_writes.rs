//! Progress-only status writes (counts, waiting texts: see `tollgate_engine::progress`) are
//! best-effort and paced twice:
//! - per promotion, at most once per [`INTERVAL`] after its last status write, so a stage whose
//!   clusters provision within the interval costs one status write, not one per ClusterSummary
//!   update, and `tollgate status --watch` still sees counts move every interval;
//! - across promotions, at most [`RATE_PER_SECOND`] in all: each held-back write reserves the
//!   next free slot, so with thousands of promotions rolling at once progress reports spread out
//!   (a count lags by `promotions / RATE_PER_SECOND` seconds) instead of taking the API server's
//!   write capacity from stage transitions, which are never paced.
//!
//! A held-back write is sent by the step the controller schedules at the reserved time, or
//! replaced by a transition's write before that.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, TimeDelta, Utc};

pub const INTERVAL: TimeDelta = TimeDelta::seconds(2);

/// Progress-only status writes per second across all promotions (a real API server takes a few
/// hundred writes per second; transitions get the rest).
pub const RATE_PER_SECOND: i64 = 25;

#[derive(Default)]
pub struct ProgressWrites {
    inner: Mutex<Pacing>,
}

#[derive(Default)]
struct Pacing {
    /// When each promotion's status was last written.
    last: HashMap<String, DateTime<Utc>>,
    /// The slot each held-back promotion reserved.
    reserved: HashMap<String, DateTime<Utc>>,
    /// The first rate slot not handed out yet.
    next_slot: Option<DateTime<Utc>>,
}

impl ProgressWrites {
    /// Until when a progress-only write of `name` is held back; `None`: send it now.
    pub fn held_until(&self, name: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut pacing = self.lock();
        if let Some(slot) = pacing.reserved.get(name).copied() {
            return (now < slot).then_some(slot);
        }
        // Rate slots are handed out in the order of asking, from now on; the interval may then
        // hold a write past its slot.
        let rate_slot = pacing.next_slot.map_or(now, |next| next.max(now));
        pacing.next_slot = Some(rate_slot + slot_width());
        let slot = match pacing.last.get(name) {
            Some(last) => rate_slot.max(*last + INTERVAL),
            None => rate_slot,
        };
        if slot <= now {
            return None;
        }
        pacing.reserved.insert(name.to_string(), slot);
        Some(slot)
    }

    /// A status of `name` was written at `now` (its reservation, if any, is used or moot).
    pub fn written(&self, name: &str, now: DateTime<Utc>) {
        let mut pacing = self.lock();
        pacing.reserved.remove(name);
        pacing.last.insert(name.to_string(), now);
    }

    pub fn forget(&self, name: &str) {
        let mut pacing = self.lock();
        pacing.reserved.remove(name);
        pacing.last.remove(name);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pacing> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn slot_width() -> TimeDelta {
    TimeDelta::microseconds(1_000_000 / RATE_PER_SECOND)
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
        assert_eq!(
            writes.held_until("p", second),
            Some(t0 + INTERVAL),
            "asking again keeps the reservation"
        );
        assert_eq!(writes.held_until("p", t0 + INTERVAL), None);
        writes.written("p", t0 + INTERVAL);
        assert_eq!(
            writes.held_until("q", t0 + INTERVAL + TimeDelta::seconds(1)),
            None,
            "per promotion"
        );
        writes.forget("p");
        assert_eq!(writes.held_until("p", t0 + TimeDelta::seconds(9)), None);
    }

    #[test]
    fn progress_writes_of_many_promotions_share_one_rate() {
        let writes = ProgressWrites::default();
        let t0 = DateTime::UNIX_EPOCH;
        let promotions = RATE_PER_SECOND * 4;
        let held: Vec<Option<DateTime<Utc>>> = (0..promotions)
            .map(|i| writes.held_until(&format!("p{i}"), t0))
            .collect();
        assert_eq!(held[0], None, "the first goes now");
        let last = held.last().copied().flatten().expect("the last is held");
        assert_eq!(last, t0 + slot_width() * (promotions as i32 - 1));
        let sent_in_first_second = held
            .iter()
            .filter(|slot| slot.is_none_or(|at| at < t0 + TimeDelta::seconds(1)))
            .count();
        assert_eq!(sent_in_first_second as i64, RATE_PER_SECOND);
    }

    #[test]
    fn a_transition_write_frees_a_reservation_and_restarts_the_interval() {
        let writes = ProgressWrites::default();
        let t0 = DateTime::UNIX_EPOCH;
        writes.written("p", t0);
        let reserved = writes.held_until("p", t0).expect("held");
        writes.written("p", t0 + TimeDelta::milliseconds(100));
        assert_eq!(
            writes.held_until("p", reserved),
            Some(t0 + TimeDelta::milliseconds(100) + INTERVAL)
        );
    }
}
