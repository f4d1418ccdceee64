//! The fast rollback path (RolloutPolicy `rollback.strategy: Fast`, the default): a run that
//! restores content known good (see `lineage`) skips, in each stage where that content
//! *completed*, the stage's soak, post-delay checks, pre-verification, window, approval, analyses
//! and waves, and only waits for its clusters; stages still go in order. A stage where the content
//! never completed goes the staged way. `Staged`, and a promotion no policy governs (upstream's
//! behaviour), go through every gate. `onFailure: Rollback` is another path (`rollback`).

use tollgate_model::policy::{RollbackStrategy, RolloutPolicy};

use crate::status::PromotionStatus;
pub use crate::status::rollback_mode::RollbackMode;
use crate::status::verdict::Verdict;

/// The mode of a run that restores snapshot `rollback_of` (`None`: not a rollback, or no policy).
pub(crate) fn mode(
    rollback_of: Option<u64>,
    policy: Option<&RolloutPolicy>,
) -> Option<RollbackMode> {
    rollback_of?;
    Some(match policy?.spec.rollback.strategy {
        RollbackStrategy::Fast => RollbackMode::Fast,
        RollbackStrategy::Staged => RollbackMode::Staged,
    })
}

/// Whether `stage` of the run in `status` takes the fast path: the run is a fast rollback and
/// the content it restores completed in that stage.
pub(crate) fn applies(status: &PromotionStatus, stage: &str) -> bool {
    let (Some(RollbackMode::Fast), Some(to)) = (status.rollback, status.rollback_of) else {
        return false;
    };
    completed_in_stage(status, to, stage)
}

/// Whether snapshot `to` completed in `stage`: its run completed (every stage did), or the run
/// history records the stage succeeding with it.
pub fn completed_in_stage(status: &PromotionStatus, to: u64, stage: &str) -> bool {
    let run_completed = status
        .verdicts
        .iter()
        .any(|v| v.snapshot_index == to && v.verdict == Verdict::Completed);
    run_completed
        || status.runs.iter().any(|run| {
            run.snapshot_index == to
                && run
                    .stages
                    .iter()
                    .any(|s| s.name == stage && s.succeeded_at.is_some())
        })
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::status::run_history::{RunOutcome, RunRecord, StageRecord};
    use crate::status::verdict::ContentVerdict;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(s)
    }

    fn policy(strategy: Option<&str>) -> RolloutPolicy {
        let mut spec = serde_json::json!({});
        if let Some(strategy) = strategy {
            spec["rollback"] = serde_json::json!({"strategy": strategy});
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": "p"}, "spec": spec
        }))
        .expect("policy")
    }

    #[test]
    fn a_rollback_is_fast_by_default_staged_on_request_and_never_without_a_policy() {
        assert_eq!(mode(Some(2), Some(&policy(None))), Some(RollbackMode::Fast));
        assert_eq!(
            mode(Some(2), Some(&policy(Some("Staged")))),
            Some(RollbackMode::Staged)
        );
        assert_eq!(mode(Some(2), None), None);
        assert_eq!(mode(None, Some(&policy(None))), None);
    }

    fn stage_record(name: &str, succeeded: bool) -> StageRecord {
        StageRecord {
            name: name.into(),
            applied_at: at(0),
            provisioned_at: None,
            awaiting_approval_since: None,
            awaiting_window_since: None,
            succeeded_at: succeeded.then(|| at(5)),
            failed_at: None,
            restored_at: None,
            restored_to: None,
            activities: Vec::new(),
            comparisons: Vec::new(),
        }
    }

    #[test]
    fn a_fast_rollback_only_targets_snapshots_that_completed_in_that_stage() {
        let mut status = PromotionStatus::empty();
        status.rollback = Some(RollbackMode::Fast);
        status.rollback_of = Some(2);
        // Snapshot #2 reached staging and was superseded there: it completed dev only.
        status.runs = crate::status::run_history::RunHistory::new(vec![RunRecord {
            snapshot_index: 2,
            commit: "abc1234".into(),
            committed_at: None,
            rollback_of: None,
            started_at: at(0),
            trace_id: None,
            ended_at: Some(at(9)),
            outcome: RunOutcome::Superseded,
            stages: vec![stage_record("dev", true), stage_record("staging", false)],
            held_starts: Vec::new(),
            rollback: None,
        }]);
        assert!(applies(&status, "dev"));
        assert!(!applies(&status, "staging"));
        assert!(!applies(&status, "production"));
        // A completed run: every stage.
        status.verdicts.push(ContentVerdict {
            snapshot_id: "id".into(),
            snapshot_index: 2,
            verdict: Verdict::Completed,
            at: at(9),
            reason: None,
        });
        assert!(applies(&status, "production"));
        // Staged, or not a rollback: never.
        status.rollback = Some(RollbackMode::Staged);
        assert!(!applies(&status, "dev"));
        status.rollback = Some(RollbackMode::Fast);
        status.rollback_of = None;
        assert!(!applies(&status, "dev"));
    }
}
