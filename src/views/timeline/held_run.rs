//! A run a blackout holds before its first stage: the engine records runs from their first
//! stage on, so a snapshot whose start is held (the first run, or a new snapshot while or after
//! another runs) has no record yet; the picture shows its held start as a run of its own, from the status'
//! `blackoutHolds`.

use chrono::{DateTime, Utc};
use tollgate_engine::activity::StageActivity;
use tollgate_engine::run_history::HeldStart;
use tollgate_engine::{PromotionStatus, RunOutcome, RunRecord};
use tollgate_manifest::snapshot::short_sha;

/// The run whose start a blackout holds now, when no recorded run is that snapshot's.
pub(super) fn held_run(status: &PromotionStatus, now: DateTime<Utc>) -> Option<RunRecord> {
    let held = status.blackout_holds.as_deref()?;
    let until = status.blackout_until?;
    if status
        .runs
        .last()
        .is_some_and(|run| run.snapshot_index == held.snapshot_index)
    {
        return None;
    }
    let reason = match &held.activity {
        StageActivity::Blackout { reason, .. } => reason.clone(),
        _ => None,
    };
    // Held since the engine says (a status written before it said: since the newest run ended,
    // as it was free to start then).
    let since = held
        .since
        .or_else(|| status.runs.last().and_then(|run| run.ended_at))
        .unwrap_or(now)
        .min(now);
    Some(RunRecord {
        snapshot_index: held.snapshot_index,
        commit: short_sha(&held.snapshot_commit).to_string(),
        committed_at: None,
        rollback_of: None,
        started_at: since,
        trace_id: None,
        ended_at: None,
        outcome: RunOutcome::Running,
        stages: Vec::new(),
        held_starts: vec![HeldStart {
            stage: held.stage.clone(),
            since,
            until,
            reason,
        }],
        rollback: None,
    })
}
