//! Which transition writes may wait for the first measurements (issue #32, API-server economy).
//!
//! A step whose only news is that a stage was provisioned and its analyses started, asking for
//! their first measurements now, decides nothing yet: the results decide. The controller may
//! hold its status write (and its events) until those results are in, for a bounded moment, and
//! then write once what the step with the results says: a stage gated by one measurement then
//! costs what an ungated handoff costs (one status write, one profile apply), not a write (and
//! two Events) more.
//!
//! Holding is safe: the step has no actions, so nothing was done that status must remember, and
//! the next step recomputes the same transition from the same persisted state, with times moved
//! later, never earlier (the stage is provisioned, and its runs start, at that step's `now`; a
//! delay or an interval counted from there ends later). Results are keyed without times, so the
//! ones taken during the hold are recorded by that step.

use crate::measurement::MeasurementDue;
use crate::output::{EventReason, EventType, StepOutput};
use crate::status::{Phase, PromotionStatus};

/// The step (`output`, from `before`) only started analyses that ask for their first
/// measurements now; see the module documentation.
pub fn awaits_first_measurements(before: Option<&PromotionStatus>, output: &StepOutput) -> bool {
    let Some(before) = before else {
        return false;
    };
    let after = &output.status;
    output.actions.is_empty()
        && asks_only_first_measurements(&output.measurements)
        && before.snapshot_index == after.snapshot_index
        && in_progress(&before.phase)
        && in_progress(&after.phase)
        && measurements_recorded(before) == measurements_recorded(after)
        && output.events.iter().all(|e| {
            e.event_type == EventType::Normal
                && matches!(
                    e.reason,
                    EventReason::Provisioned
                        | EventReason::Provisioning
                        | EventReason::WaveStarted
                        | EventReason::WaveCompleted
                )
        })
}

fn asks_only_first_measurements(due: &[MeasurementDue]) -> bool {
    !due.is_empty() && due.iter().all(|d| d.index == 0)
}

/// A run going on: nothing failed, held or finished.
fn in_progress(phase: &Phase) -> bool {
    matches!(phase, Phase::Progressing | Phase::Waiting)
}

/// Every result recorded in the status's runs (errors included).
fn measurements_recorded(status: &PromotionStatus) -> u64 {
    status
        .stages
        .iter()
        .flat_map(|stage| stage.analyses.iter().flat_map(|runs| runs.iter()))
        .map(|run| u64::from(run.successful + run.failed + run.inconclusive + run.errors))
        .sum()
}
