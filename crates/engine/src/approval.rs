//! Which approval, if any, lets the current run pass a manual stage (DESIGN D2).
//!
//! The controller never writes to git, so `automaticReset` is realised as consumption: an
//! approval event advances at most one stage of one run. With `automaticReset: true` the
//! `approved: true` field counts only if the commit that set it is the run's start commit or later
//! in first-parent history; with `false` it counts whenever present. An annotation
//! `approve.tollgate.dev/<stage>: <snapshot>` approves exactly the snapshot it names.

use tollgate_spec::model::ManualTrigger;
use tollgate_spec::snapshot::{APPROVE_ANNOTATION_PREFIX, ApprovalEvent, ApprovalKind, Snapshot};

use crate::status::{Approver, ConsumedApproval};

/// Shortest snapshot-id prefix an annotation may use.
pub const MIN_SNAPSHOT_ID_PREFIX: usize = 12;
/// Shortest commit-SHA prefix an annotation may use.
pub const MIN_COMMIT_PREFIX: usize = 7;

/// An approval that lets the run pass the stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidApproval {
    pub approver: Approver,
    /// Recorded in status so that the event never serves another run; `None` for
    /// `automaticReset: false`, which by definition approves every run.
    pub consumes: Option<ConsumedApproval>,
}

/// The approval for `stage` in the run of `snapshot` (run key: `snapshot.index`), if any.
/// Annotations come first: they are the more precise statement.
pub fn find(
    snapshot: &Snapshot,
    stage: &str,
    trigger: &ManualTrigger,
    events: &[ApprovalEvent],
    consumed: &[ConsumedApproval],
) -> Option<ValidApproval> {
    let run = snapshot.index;
    let usable = |event: &ApprovalEvent| {
        !consumed
            .iter()
            .any(|c| c.stage == stage && c.commit == event.commit.sha && c.run != run)
    };
    let consumption = |event: &ApprovalEvent| ConsumedApproval {
        stage: stage.to_string(),
        commit: event.commit.sha.clone(),
        run,
    };

    let annotation_key = format!("{APPROVE_ANNOTATION_PREFIX}{stage}");
    if let Some(value) = snapshot.promotion.metadata.annotations.get(&annotation_key)
        && names_snapshot(value, snapshot)
        && let Some(event) = latest(
            events,
            stage,
            |kind| matches!(kind, ApprovalKind::Annotation { value: v } if v == value),
        )
        && usable(event)
    {
        return Some(ValidApproval {
            approver: approver_of("Annotation", Some(event)),
            consumes: Some(consumption(event)),
        });
    }

    if trigger.approved != Some(true) {
        return None;
    }
    let field_event = latest(events, stage, |kind| matches!(kind, ApprovalKind::Field));
    if !trigger.automatic_reset {
        return Some(ValidApproval {
            approver: approver_of("Field", field_event),
            consumes: None,
        });
    }
    let event = field_event?;
    if event.commit.seq < snapshot.commit.seq || !usable(event) {
        return None;
    }
    Some(ValidApproval {
        approver: approver_of("Field", Some(event)),
        consumes: Some(consumption(event)),
    })
}

/// The newest event for `stage` of the given kind.
fn latest<'e>(
    events: &'e [ApprovalEvent],
    stage: &str,
    kind: impl Fn(&ApprovalKind) -> bool,
) -> Option<&'e ApprovalEvent> {
    events
        .iter()
        .filter(|e| e.stage == stage && kind(&e.kind))
        .max_by_key(|e| e.commit.seq)
}

/// Whether an annotation value names this snapshot: a prefix of its snapshot id (12+ hex
/// characters) or of the SHA of the commit that introduced it (7+ hex characters).
pub fn names_snapshot(value: &str, snapshot: &Snapshot) -> bool {
    let value = value.trim().to_ascii_lowercase();
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_hexdigit()) {
        return false;
    }
    (value.len() >= MIN_SNAPSHOT_ID_PREFIX && snapshot.hashes.snapshot_id.starts_with(&value))
        || (value.len() >= MIN_COMMIT_PREFIX
            && snapshot.commit.sha.to_ascii_lowercase().starts_with(&value))
}

fn approver_of(kind: &str, event: Option<&ApprovalEvent>) -> Approver {
    Approver {
        kind: kind.to_string(),
        sha: event.map(|e| e.commit.sha.clone()),
        author: event.map(|e| format!("{} <{}>", e.commit.author, e.commit.author_email)),
        committer: event.map(|e| format!("{} <{}>", e.commit.committer, e.commit.committer_email)),
        time: event.map(|e| e.commit.time),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{approval, commit, promotion, snapshot};

    fn manual_snapshot(approved: bool, reset: bool) -> Snapshot {
        let p = promotion(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {"stages": [{"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}},
                "trigger": {"manual": {"approved": approved, "automaticReset": reset}}}]}
        }));
        snapshot(p, 4, commit(20))
    }

    fn manual(s: &Snapshot) -> &ManualTrigger {
        match s.promotion.spec.stages[0].trigger.as_ref() {
            Some(tollgate_spec::model::Trigger::Manual(m)) => m,
            _ => panic!("manual trigger expected"),
        }
    }

    #[test]
    fn names_snapshot_needs_long_enough_prefixes() {
        let s = manual_snapshot(false, true);
        assert!(names_snapshot(&s.hashes.snapshot_id[..12], &s));
        assert!(!names_snapshot(&s.hashes.snapshot_id[..11], &s));
        assert!(names_snapshot(&s.commit.sha[..7].to_uppercase(), &s));
        assert!(!names_snapshot(&s.commit.sha[..6], &s));
        assert!(!names_snapshot("not-hex-at-all", &s));
    }

    #[test]
    fn field_approval_with_reset_counts_only_from_the_run_start() {
        let s = manual_snapshot(true, true);
        let before = [approval("prod", ApprovalKind::Field, commit(19))];
        assert_eq!(find(&s, "prod", manual(&s), &before, &[]), None);
        let at_start = [approval("prod", ApprovalKind::Field, commit(20))];
        let found = find(&s, "prod", manual(&s), &at_start, &[]).unwrap();
        assert_eq!(found.consumes.unwrap().run, 4);
        // Consumed by another run: never again.
        let consumed = [ConsumedApproval {
            stage: "prod".into(),
            commit: commit(20).sha,
            run: 3,
        }];
        assert_eq!(find(&s, "prod", manual(&s), &at_start, &consumed), None);
    }

    #[test]
    fn field_approval_without_reset_always_counts_and_is_not_consumed() {
        let s = manual_snapshot(true, false);
        let found = find(&s, "prod", manual(&s), &[], &[]).unwrap();
        assert_eq!(found.consumes, None);
        assert_eq!(found.approver.sha, None);
        let s = manual_snapshot(false, false);
        assert_eq!(find(&s, "prod", manual(&s), &[], &[]), None);
    }
}
