//! Analyses end when their stage does (issue #45): a run still measuring when its stage completed
//! (a dry run, which never holds the stage) or when the run failed (a halt, a rollback: say a
//! `scope: Cluster` failure spent the budget while the other clusters were still measured) is
//! `Cancelled`, saying why. Nothing measures it any more, so leaving it `Running` would tell
//! status readers, `tollgate status` and the metrics of a measurement that never comes.
//!
//! A stage held by a fixable problem (a foreign profile, a bad window) is not ended: its runs go
//! on once it is fixed. A retry of a halted stage starts its analyses anew (`retry`).

use crate::status::PromotionStatus;
use crate::status::analysis_run::{AnalysisPhase, AnalysisRun};

/// Cancels the runs still `Running` in stages that ended. Whether any was.
pub(crate) fn cancel_ended(status: &mut PromotionStatus) -> bool {
    let failed = status
        .failure
        .as_deref()
        .map(|f| format!("the run failed at stage {}: {}", f.stage, f.reason));
    let mut cancelled = false;
    for stage in &mut status.stages {
        let why = match (&failed, stage.succeeded_at) {
            (Some(failed), _) => failed.clone(),
            (None, Some(_)) => format!("stage {} completed first", stage.name),
            (None, None) => continue,
        };
        let Some(runs) = stage.analyses.as_mut() else {
            continue;
        };
        if !runs.iter().any(|r| r.phase == AnalysisPhase::Running) {
            continue;
        }
        for run in std::sync::Arc::make_mut(runs).iter_mut() {
            cancelled |= cancel(run, &why);
        }
    }
    cancelled
}

fn cancel(run: &mut AnalysisRun, why: &str) -> bool {
    if run.phase != AnalysisPhase::Running {
        return false;
    }
    run.phase = AnalysisPhase::Cancelled;
    run.message = Some(format!(
        "cancelled after {} of {} measurements: {why}",
        run.taken, run.count
    ));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::RunFailure;
    use chrono::{TimeZone, Utc};
    use tollgate_model::policy::OnFailure;

    fn status(phases: &[AnalysisPhase], succeeded: bool) -> PromotionStatus {
        let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let runs: Vec<serde_json::Value> = phases
            .iter()
            .enumerate()
            .map(|(i, phase)| {
                serde_json::json!({"name": format!("a{i}"), "query": "q", "startedAt": at,
                    "count": 3, "taken": 1, "phase": phase.as_str()})
            })
            .collect();
        let mut stage = serde_json::json!({"name": "prod", "snapshotIndex": 1, "appliedAt": at,
            "appliedSpecHash": "h", "analyses": runs});
        if succeeded {
            stage["succeededAt"] = serde_json::json!(at);
        }
        serde_json::from_value(serde_json::json!({"hashScheme": 1, "phase": "Progressing",
            "stages": [stage]}))
        .expect("a status")
    }

    fn phases(status: &PromotionStatus) -> Vec<(&str, Option<&str>)> {
        status.stages[0]
            .analyses
            .as_deref()
            .into_iter()
            .flatten()
            .map(|r| (r.phase.as_str(), r.message.as_deref()))
            .collect()
    }

    use AnalysisPhase::*;

    #[test]
    fn a_running_stage_keeps_its_runs() {
        let mut running = status(&[Running], false);
        assert!(!cancel_ended(&mut running));
        assert_eq!(phases(&running), [("Running", None)]);
    }

    #[test]
    fn a_completed_stage_cancels_what_still_runs_and_keeps_verdicts() {
        let mut done = status(&[Running, Failed], true);
        assert!(cancel_ended(&mut done));
        assert_eq!(
            phases(&done),
            [
                (
                    "Cancelled",
                    Some("cancelled after 1 of 3 measurements: stage prod completed first")
                ),
                ("Failed", None)
            ]
        );
    }

    #[test]
    fn a_failed_run_cancels_what_still_runs_saying_why() {
        let mut halted = status(&[Running, Failed], false);
        halted.failure = Some(Box::new(RunFailure {
            stage: "prod".into(),
            snapshot_index: 1,
            reason: "1 of 2 clusters failed".into(),
            at: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
            on_failure: OnFailure::Halt,
            clusters: Vec::new(),
            rollback: Vec::new(),
        }));
        assert!(cancel_ended(&mut halted));
        assert_eq!(
            phases(&halted)[0],
            (
                "Cancelled",
                Some(
                    "cancelled after 1 of 3 measurements: the run failed at stage prod: 1 of 2 clusters failed"
                )
            )
        );
    }
}
