//! Bars of a stage recorded before the engine kept activity spans: read from its transition
//! instants (applied, provisioned, awaiting a window or an approval, failed, restored).

use chrono::{DateTime, Utc};
use tollgate_engine::{RunRecord, StageRecord};

use super::{Bar, BarKind};

/// Each state lasts until the next one starts; the last one until the stage succeeded, failed,
/// the run ended, or (still going) `now`.
pub(super) fn stage_bars(run: &RunRecord, stage: &StageRecord, now: DateTime<Utc>) -> Vec<Bar> {
    let open_until = run.ended_at.unwrap_or(now);
    let stage_end = stage.succeeded_at.or(stage.failed_at).unwrap_or(open_until);
    let marks = [
        (BarKind::Provisioning, Some(stage.applied_at)),
        (BarKind::Soak, stage.provisioned_at),
        (BarKind::Window, stage.awaiting_window_since),
        (BarKind::Approval, stage.awaiting_approval_since),
    ];
    let mut started: Vec<(BarKind, DateTime<Utc>)> = marks
        .into_iter()
        .filter_map(|(kind, at)| at.map(|at| (kind, at)))
        .collect();
    started.sort_by_key(|(_, at)| *at);
    let mut bars: Vec<Bar> = started
        .iter()
        .enumerate()
        .map(|(i, (kind, start))| {
            let end = started.get(i + 1).map_or(stage_end, |(_, next)| *next);
            Bar::new(*kind, *start, end)
        })
        // A state left in the step it was entered (no delay, an approval already there).
        .filter(|bar| bar.end > bar.start || bar.kind == BarKind::Provisioning)
        .collect();
    if let Some(failed_at) = stage.failed_at {
        let until = stage.restored_at.or(run.ended_at).unwrap_or(now);
        bars.push(Bar::new(BarKind::Failed, failed_at, until));
    }
    if let Some(restored_at) = stage.restored_at {
        // The rollback starts when the run failed (its failing stage's failure).
        let failed_at = run
            .stages
            .iter()
            .find_map(|s| s.failed_at)
            .unwrap_or(restored_at);
        let mut bar = Bar::new(BarKind::Rollback, failed_at.min(restored_at), restored_at);
        bar.restored_to = stage.restored_to;
        bars.push(bar);
    }
    bars
}
