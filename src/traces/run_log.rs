//! The run's log lines carry its trace id: one line per stage transition a persisted step made,
//! so that a log search and a trace search meet (whether or not traces are exported).

use tollgate_engine::status::PromotionStatus;
use tollgate_engine::transitions::Transition;
use tracing::info;

/// Logs `told`, the transitions of the step that persisted `status`.
pub fn log_transitions(promotion: &str, status: &PromotionStatus, told: &[Transition]) {
    for transition in told {
        let trace_id = status
            .runs
            .iter()
            .rev()
            .find(|run| run.snapshot_index == transition.snapshot)
            .and_then(|run| run.trace_id)
            .map(|id| id.to_string())
            .unwrap_or_default();
        info!(
            promotion,
            stage = %transition.stage,
            snapshot = transition.snapshot,
            transition = ?transition.kind,
            trace_id,
            "stage transition"
        );
    }
}
