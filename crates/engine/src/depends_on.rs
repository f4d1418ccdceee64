//! Order between promotions (`tollgate.dev/depends-on: cert-manager[,other]`): a stage of a
//! dependant starts only after the stage of the same name of each promotion it depends on
//! completed its current run, or when that promotion has no such stage
//! (docs/rollout-policy.md#order-between-promotions).
//!
//! Pure: the controller observes the dependencies (their stages in git, their persisted status)
//! and passes them in; this decides.

use crate::status::PromotionStatus;
use crate::status::activity::StageActivity;

/// One promotion this one depends on, as the controller observes it.
#[derive(Clone, Copy, Debug)]
pub struct Dependency<'a> {
    /// Its `metadata.name`.
    pub promotion: &'a str,
    /// The stage names of its current snapshot in git, in order.
    pub stages: &'a [String],
    /// Its persisted status; `None`: it never ran.
    pub status: Option<&'a PromotionStatus>,
}

impl Dependency<'_> {
    /// Its stage `stage` lets a dependant's stage of that name start: it has no such stage, or
    /// that stage completed (or was skipped) in its current run.
    pub fn lets_start(&self, stage: &str) -> bool {
        if !self.stages.iter().any(|s| s == stage) {
            return true;
        }
        self.status.is_some_and(|status| completed(status, stage))
    }
}

/// `stage` completed (or was skipped) in the current run of the promotion `status` describes.
pub fn completed(status: &PromotionStatus, stage: &str) -> bool {
    status.stage(stage).is_some_and(|st| {
        st.snapshot_index == status.snapshot_index.unwrap_or_default()
            && matches!(
                st.activity,
                StageActivity::Completed | StageActivity::Skipped
            )
    })
}

/// What a dependant's stage waits for, as `promotion/stage` (empty: it may start); a
/// dependency whose run failed says so, and what lets it go on (issue #45: "waits for
/// cert-manager/staging" alone hid that cert-manager had halted).
pub fn waits_for(dependencies: &[Dependency<'_>], stage: &str) -> Vec<String> {
    dependencies
        .iter()
        .filter(|d| !d.lets_start(stage))
        .map(
            |d| match d.status.and_then(|status| stopped(d.promotion, status)) {
                Some(why) => format!("{}/{stage} ({why})", d.promotion),
                None => format!("{}/{stage}", d.promotion),
            },
        )
        .collect()
}

/// Why the current run of `promotion` will not complete another stage by itself: it failed
/// under its policy (halted or rolled back), and what lets it go on.
fn stopped(promotion: &str, status: &PromotionStatus) -> Option<String> {
    let failure = status.failure.as_deref()?;
    let what = match failure.on_failure {
        tollgate_model::policy::OnFailure::Rollback => "rolled back",
        _ => "halted",
    };
    Some(format!(
        "{promotion} {what} at stage {stage}: it goes on after `tollgate retry {promotion} {stage}` or a new commit",
        stage = failure.stage
    ))
}

/// The words every view shows for a held start: `waits for cert-manager/staging`.
pub fn waits_for_text(waits: &[String]) -> String {
    format!("waits for {}", waits.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::StageStatus;

    fn status(stages: &[(&str, StageActivity, u64)], index: u64) -> PromotionStatus {
        let mut status = PromotionStatus::empty();
        status.snapshot_index = Some(index);
        for (name, activity, snapshot_index) in stages {
            let mut st: StageStatus = serde_json::from_value(serde_json::json!({
                "name": name, "snapshotIndex": snapshot_index,
                "appliedAt": "2026-01-01T00:00:00Z", "appliedSpecHash": "h",
                "counts": {"matchingClusters": 0, "summaries": 0, "provisioned": 0, "failed": 0},
            }))
            .expect("stage status");
            st.activity = activity.clone();
            status.stages.push(st);
        }
        status
    }

    #[test]
    fn a_stage_starts_once_the_same_stage_of_each_dependency_completed_its_current_run() {
        let stages = ["dev".to_string(), "staging".into()];
        let running = status(
            &[
                ("dev", StageActivity::Completed, 2),
                ("staging", StageActivity::Provisioning { wave: None }, 2),
            ],
            2,
        );
        let cert = Dependency {
            promotion: "cert-manager",
            stages: &stages,
            status: Some(&running),
        };
        assert!(waits_for(&[cert], "dev").is_empty());
        assert_eq!(waits_for(&[cert], "staging"), ["cert-manager/staging"]);
        assert!(waits_for(&[cert], "production").is_empty(), "no such stage");
        assert_eq!(
            waits_for_text(&waits_for(&[cert], "staging")),
            "waits for cert-manager/staging"
        );
        // Completed by an older run only: the current run has not completed it.
        let restarted = status(&[("dev", StageActivity::Completed, 1)], 2);
        let cert = Dependency {
            status: Some(&restarted),
            ..cert
        };
        assert_eq!(waits_for(&[cert], "dev"), ["cert-manager/dev"]);
        // Never ran: wait; skipped counts as completed.
        let never = Dependency {
            status: None,
            ..cert
        };
        assert_eq!(waits_for(&[never], "dev"), ["cert-manager/dev"]);
        // Halted: the wait says so, and what lets it go on.
        let mut halted = status(
            &[("dev", StageActivity::Failed { reason: "x".into() }, 2)],
            2,
        );
        halted.failure = Some(Box::new(crate::status::RunFailure {
            stage: "dev".into(),
            snapshot_index: 2,
            reason: "1 of 1 clusters failed".into(),
            at: chrono::DateTime::UNIX_EPOCH,
            on_failure: tollgate_model::policy::OnFailure::Halt,
            clusters: Vec::new(),
            rollback: Vec::new(),
        }));
        let cert_halted = Dependency {
            status: Some(&halted),
            ..cert
        };
        assert_eq!(
            waits_for(&[cert_halted], "dev"),
            [
                "cert-manager/dev (cert-manager halted at stage dev: it goes on after `tollgate retry cert-manager dev` or a new commit)"
            ]
        );
        let skipped = status(&[("dev", StageActivity::Skipped, 3)], 3);
        let cert = Dependency {
            status: Some(&skipped),
            ..cert
        };
        assert!(waits_for(&[cert], "dev").is_empty());
    }
}
