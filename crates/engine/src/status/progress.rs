//! Which status changes are progress only: how far a stage's clusters got (counts, the clusters
//! not yet provisioned, upstream's description and check time, the waiting text). A transition
//! (a stage started, provisioned, passed or failed, a phase or run change, an approval used, a
//! wave started) is everything else.
//!
//! The controller may hold back a progress-only status write for a moment and send the latest
//! one (API-server economy): the engine never decides from these fields, so a held-back write
//! changes no decision, and the safety rule (status only after the step's actions succeeded) is
//! untouched, since a progress-only step has no actions.

use crate::status::{PromotionStatus, StageStatus};

/// `after` differs from `before` in progress fields only (and differs at all).
pub fn only_progress_differs(before: Option<&PromotionStatus>, after: &PromotionStatus) -> bool {
    let Some(before) = before else {
        return false;
    };
    before != after && without_progress(before) == without_progress(after)
}

fn without_progress(status: &PromotionStatus) -> PromotionStatus {
    let mut status = status.clone();
    status.message = None;
    for stage in &mut status.stages {
        clear_stage_progress(stage);
    }
    status
}

fn clear_stage_progress(stage: &mut StageStatus) {
    stage.counts = Default::default();
    stage.not_provisioned.clear();
    stage.not_provisioned_unlisted = 0;
    stage.current_status_description = None;
    stage.last_status_check_time = None;
    stage.failure_message = None;
    stage.waiting_reason = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Phase;

    fn status() -> PromotionStatus {
        serde_json::from_value(serde_json::json!({
            "hashScheme": 1, "phase": "Progressing", "snapshotIndex": 1,
            "stages": [{"name": "dev", "snapshotIndex": 1, "appliedAt": "2026-01-01T00:00:00Z",
                "appliedSpecHash": "h", "counts": {"matchingClusters": 2, "summaries": 0,
                "provisioned": 0, "failed": 0}}],
        }))
        .expect("status")
    }

    #[test]
    fn counts_and_texts_are_progress_and_a_phase_is_not() {
        let before = status();
        let mut after = before.clone();
        after.stages[0].counts.provisioned = 1;
        after.message = Some("stage dev: 1 of 2".into());
        assert!(only_progress_differs(Some(&before), &after));
        assert!(
            !only_progress_differs(Some(&before), &before),
            "no change at all"
        );
        assert!(!only_progress_differs(None, &after), "the first write");
        after.phase = Phase::Waiting;
        assert!(!only_progress_differs(Some(&before), &after));
        let mut provisioned = before.clone();
        provisioned.stages[0].provisioned_at = provisioned.stages[0].applied_at.into();
        assert!(!only_progress_differs(Some(&before), &provisioned));
    }
}
