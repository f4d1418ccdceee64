//! Which approval, if any, lets the current run pass a manual stage (docs/architecture.md#d2-approvals-are-consumed-never-lost).
//!
//! The controller never writes to git, so `automaticReset` is realised as consumption: an
//! approval event advances at most one stage of one run. With `automaticReset: true` the
//! `approved: true` field counts only if the commit that set it is the run's start commit or later
//! in first-parent history; with `false` it counts whenever present. An annotation
//! `approve.tollgate.dev/<stage>: <snapshot>` approves exactly the snapshot it names, and only if
//! it was set at or after the run's start commit: a value set for an earlier run of the same
//! content (a revert, a promotion removed and restored) never serves a later one, even when the
//! status that recorded its consumption is gone.

use tollgate_model::model::ManualTrigger;
use tollgate_model::snapshot::{
    APPROVE_ANNOTATION_PREFIX, ApprovalEvent, ApprovalKind, Snapshot, short_sha,
};

use crate::status::{Approver, ApproverKind, ConsumedApproval};

pub use tollgate_model::snapshot::{MIN_COMMIT_PREFIX, MIN_SNAPSHOT_ID_PREFIX};

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
    let usable =
        |event: &ApprovalEvent| consumed_by_another_run(consumed, stage, event, run).is_none();
    let consumption = |event: &ApprovalEvent| ConsumedApproval {
        stage: stage.to_string(),
        commit: event.commit.sha.clone(),
        run,
    };

    if let Some(value) = annotation(snapshot, stage)
        && names_snapshot(value, snapshot)
        && let Some(event) = annotation_event(events, stage, value)
        && event.commit.seq >= snapshot.commit.seq
        && is_fresh(event, snapshot)
        && usable(event)
    {
        return Some(ValidApproval {
            approver: approver_of(ApproverKind::Annotation, Some(event)),
            consumes: Some(consumption(event)),
        });
    }

    if trigger.approved != Some(true) {
        return None;
    }
    let field_event = latest(events, stage, |kind| matches!(kind, ApprovalKind::Field));
    if !trigger.automatic_reset {
        return Some(ValidApproval {
            approver: approver_of(ApproverKind::Field, field_event),
            consumes: None,
        });
    }
    let event = field_event?;
    if event.commit.seq < snapshot.commit.seq || !is_fresh(event, snapshot) || !usable(event) {
        return None;
    }
    Some(ValidApproval {
        approver: approver_of(ApproverKind::Field, Some(event)),
        consumes: Some(consumption(event)),
    })
}

/// Why no approval lets the run of `snapshot` pass `stage`, and what would: the hint status gives
/// while the stage waits. Call only when [`find`] found none.
pub fn wanted(
    snapshot: &Snapshot,
    stage: &str,
    trigger: &ManualTrigger,
    events: &[ApprovalEvent],
    consumed: &[ConsumedApproval],
) -> String {
    let key = format!("{APPROVE_ANNOTATION_PREFIX}{stage}");
    let run_start = short_sha(&snapshot.commit.sha);
    let approve_command = format!(
        "run `tollgate approve {} {stage}`",
        snapshot.promotion.name()
    );
    let mut refusals = Vec::new();
    let value = annotation(snapshot, stage);
    if let Some(value) = value {
        refusals.push(if !names_snapshot(value, snapshot) {
            format!(
                "warning: {key}: {value:?} names no snapshot of this run (snapshot #{} is {}, commit {run_start})",
                snapshot.index,
                snapshot.hashes.short()
            )
        } else {
            let event = annotation_event(events, stage, value);
            let used_by =
                event.and_then(|e| consumed_by_another_run(consumed, stage, e, snapshot.index));
            match (event, used_by) {
                (Some(e), Some(c)) => format!(
                    "{key} names this snapshot but was set by commit {} and used by run #{}",
                    short_sha(&e.commit.sha),
                    c.run
                ),
                (Some(e), None) => format!(
                    "{key} names this snapshot but was set by commit {}, before this run started at {run_start}",
                    short_sha(&e.commit.sha)
                ),
                (None, _) => format!("{key} names this snapshot but no commit set it"),
            }
        });
    }
    if trigger.approved == Some(true) {
        let set_by = latest(events, stage, |kind| matches!(kind, ApprovalKind::Field))
            .map(|e| format!(" (set by commit {})", short_sha(&e.commit.sha)))
            .unwrap_or_default();
        refusals.push(format!(
            "`approved: true`{set_by} is from before this run started at {run_start} or was used by an earlier run: commit `approved: false`, then `approved: true`, or {approve_command}"
        ));
        return format!("waiting for approval: {}", refusals.join("; "));
    }
    let annotate = match value {
        // The same value again would be no new approval: name the run's start commit instead.
        Some(value) if names_snapshot(value, snapshot) => format!("{key}: {}", snapshot.commit.sha),
        _ => format!("{key}: {}", snapshot.hashes.short()),
    };
    refusals.push(format!(
        "{approve_command}, commit `approved: true` for stage {stage} (at or after {run_start}), or annotate {annotate}"
    ));
    format!("waiting for approval: {}", refusals.join("; "))
}

/// The note of the event that says an approval was used.
pub fn used_note(stage: &str, snapshot: &Snapshot, approver: &Approver) -> String {
    let who = approver.author.as_deref().unwrap_or("an unknown author");
    let sha = approver.sha.as_deref().map(short_sha).unwrap_or("-");
    format!(
        "Stage {stage} approved for snapshot #{} by {who} (commit {sha}, {})",
        snapshot.index, approver.kind
    )
}

/// Who approved a stage of this run, in the words every view shows: `by Ada (Field, fedcba9)`,
/// or per wave for a waved stage let past inconclusive analyses (`wave 1 by Alice (…), wave 2
/// by Bob (…)`). `None`: not approved, or the approval names no commit.
pub fn approved_words(st: &crate::status::StageStatus) -> Option<String> {
    let who = |approver: &Approver| -> Option<String> {
        let sha = approver.sha.as_deref()?;
        Some(format!(
            "{} ({}, {})",
            approver.author.as_deref().unwrap_or("an unknown author"),
            approver.kind,
            short_sha(sha)
        ))
    };
    match st.wave_approvers.as_deref() {
        Some(waves) if !waves.is_empty() => Some(
            waves
                .iter()
                .filter_map(|w| Some(format!("wave {} by {}", w.wave, who(&w.approver)?)))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        _ => who(st.approver.as_deref()?).map(|who| format!("by {who}")),
    }
}

/// Whether `event` was committed at or after the run's start commit (issue #44): an approval
/// made earlier (signed during an earlier run of the same content, on a branch merged only now)
/// is no approval of this run. Committer times compare: a signature covers them.
pub fn is_fresh(event: &ApprovalEvent, snapshot: &Snapshot) -> bool {
    event.commit.committed >= snapshot.commit.committed
}

/// Why an approval that is not [`is_fresh`] does not count.
pub fn stale_note(event: &ApprovalEvent, snapshot: &Snapshot) -> String {
    format!(
        "made before this run started (committed {}; the run started with commit {} committed {})",
        crate::messages::timestamp(event.commit.committed),
        short_sha(&snapshot.commit.sha),
        crate::messages::timestamp(snapshot.commit.committed)
    )
}

/// The run other than `run` that used `event` to pass `stage`, if one did.
fn consumed_by_another_run<'c>(
    consumed: &'c [ConsumedApproval],
    stage: &str,
    event: &ApprovalEvent,
    run: u64,
) -> Option<&'c ConsumedApproval> {
    consumed
        .iter()
        .find(|c| c.stage == stage && c.commit == event.commit.sha && c.run != run)
}

fn annotation<'s>(snapshot: &'s Snapshot, stage: &str) -> Option<&'s str> {
    let key = format!("{APPROVE_ANNOTATION_PREFIX}{stage}");
    snapshot
        .promotion
        .metadata
        .annotations
        .get(&key)
        .map(String::as_str)
}

/// The newest commit that set the stage's annotation to `value`.
fn annotation_event<'e>(
    events: &'e [ApprovalEvent],
    stage: &str,
    value: &str,
) -> Option<&'e ApprovalEvent> {
    latest(
        events,
        stage,
        |kind| matches!(kind, ApprovalKind::Annotation { value: v } if v == value),
    )
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
    tollgate_model::snapshot::names_snapshot(
        value,
        &snapshot.hashes.snapshot_id,
        &snapshot.commit.sha,
    )
}

fn approver_of(kind: ApproverKind, event: Option<&ApprovalEvent>) -> Approver {
    Approver {
        kind,
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
            Some(tollgate_model::model::Trigger::Manual(m)) => m,
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

    /// `manual_snapshot` with `approve.tollgate.dev/prod: value`.
    fn annotated(value: &str, index: u64, seq: u64) -> Snapshot {
        let p = promotion(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "annotations": {"approve.tollgate.dev/prod": value}},
            "spec": {"stages": [{"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}},
                "trigger": {"manual": {"approved": false}}}]}
        }));
        snapshot(p, index, commit(seq))
    }

    fn annotation_set(value: &str, seq: u64) -> ApprovalEvent {
        approval(
            "prod",
            ApprovalKind::Annotation {
                value: value.to_string(),
            },
            commit(seq),
        )
    }

    #[test]
    fn annotation_set_before_the_run_started_is_not_reused() {
        // Run 1 started at commit 20 and was approved by the annotation at commit 21. The promotion
        // was then removed and restored: run 2 (same content, so the same snapshot id) started at
        // commit 30, and the status that recorded the consumption is gone with the removal.
        let first = annotated("", 1, 20);
        let id = first.hashes.snapshot_id[..12].to_string();
        let run_1 = annotated(&id, 1, 20);
        let events = [annotation_set(&id, 21)];
        assert!(find(&run_1, "prod", manual(&run_1), &events, &[]).is_some());
        let restored = annotated(&id, 2, 30);
        assert_eq!(
            find(&restored, "prod", manual(&restored), &events, &[]),
            None
        );
        let hint = wanted(&restored, "prod", manual(&restored), &events, &[]);
        assert!(
            hint.contains("names this snapshot but was set by commit")
                && hint.contains("before this run"),
            "{hint}"
        );
        // The fresh approval the hint offers (the run's start commit) is accepted.
        assert!(hint.contains(&restored.commit.sha), "{hint}");
        let fresh = annotated(&restored.commit.sha, 2, 30);
        let events = [
            annotation_set(&id, 21),
            annotation_set(&restored.commit.sha, 31),
        ];
        assert!(find(&fresh, "prod", manual(&fresh), &events, &[]).is_some());
    }

    #[test]
    fn hints_say_why_an_approval_in_the_file_does_not_count() {
        // Consumed by another run.
        let first = annotated("", 3, 20);
        let id = first.hashes.snapshot_id[..12].to_string();
        let s = annotated(&id, 3, 20);
        let events = [annotation_set(&id, 21)];
        let consumed = [ConsumedApproval {
            stage: "prod".into(),
            commit: commit(21).sha,
            run: 2,
        }];
        let hint = wanted(&s, "prod", manual(&s), &events, &consumed);
        assert!(hint.contains("used by run #2"), "{hint}");
        // A value that names no snapshot is a warning, never silence.
        let s = annotated("deadbeefdeadbeef", 3, 20);
        let hint = wanted(&s, "prod", manual(&s), &[], &[]);
        assert!(
            hint.contains("warning:") && hint.contains("names no snapshot"),
            "{hint}"
        );
        // `approved: true` from before the run: say how to approve again.
        let s = manual_snapshot(true, true);
        let before = [approval("prod", ApprovalKind::Field, commit(19))];
        let hint = wanted(&s, "prod", manual(&s), &before, &[]);
        assert!(
            hint.contains("`approved: false`, then `approved: true`"),
            "{hint}"
        );
        assert!(hint.contains("tollgate approve p prod"), "{hint}");
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
