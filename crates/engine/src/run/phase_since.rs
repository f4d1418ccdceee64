//! Since when the promotion has been in its phase: what a view's "Waiting for 3m" counts from
//! (a stage's activity has its own `activitySince`; a phase spans several activities, and
//! several stages).

use chrono::{DateTime, Utc};

use crate::status::PromotionStatus;

/// `after.phase_since`: `now` when the step changed the phase (or wrote the first status),
/// else what it was.
pub(crate) fn keep(
    before: Option<&PromotionStatus>,
    after: &mut PromotionStatus,
    now: DateTime<Utc>,
) {
    after.phase_since = match before {
        Some(before) if before.phase == after.phase => before.phase_since,
        _ => Some(now),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Phase;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + chrono::Duration::seconds(seconds)
    }

    #[test]
    fn the_phase_keeps_its_start_while_it_lasts_and_restarts_when_it_changes() {
        let mut first = PromotionStatus::empty();
        keep(None, &mut first, at(10));
        assert_eq!(first.phase_since, Some(at(10)));
        let mut same = first.clone();
        keep(Some(&first), &mut same, at(20));
        assert_eq!(same.phase_since, Some(at(10)), "the phase did not change");
        let mut changed = same.clone();
        changed.phase = Phase::Waiting;
        keep(Some(&same), &mut changed, at(30));
        assert_eq!(changed.phase_since, Some(at(30)));
    }

    #[test]
    fn a_status_written_before_the_field_gets_no_invented_start() {
        let old = PromotionStatus::empty();
        let mut next = old.clone();
        keep(Some(&old), &mut next, at(40));
        assert_eq!(next.phase_since, None);
    }
}
