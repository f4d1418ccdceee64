//! Approval provenance (docs/architecture.md#d2-approvals-are-consumed-never-lost): which commit approved which stage, found by comparing a
//! promotion's content before and after each commit that changed it.

use std::sync::Arc;

use tollgate_manifest::model::{ManualTrigger, Trigger};
use tollgate_manifest::snapshot::APPROVE_ANNOTATION_PREFIX;
use tollgate_manifest::{ApprovalEvent, ApprovalKind, ClusterPromotion, CommitInfo};

use crate::attribution::Attribution;

fn manual<'a>(promotion: &'a ClusterPromotion, stage: &str) -> Option<&'a ManualTrigger> {
    match promotion.stage(stage)?.trigger.as_ref()? {
        Trigger::Manual(manual) => Some(manual),
        Trigger::Auto(_) => None,
    }
}

/// Events in `new` relative to `old` (the previous valid content, `None` if there is none):
/// `approved` flipping from not-true to true on a manual stage, and `approve.tollgate.dev/<stage>`
/// annotations added or changed. All are kept; the engine judges validity per run. Each event
/// is `commit`'s, unless `attributions` credit it to the commit that introduced it.
pub(crate) fn approval_events(
    old: Option<&ClusterPromotion>,
    new: &ClusterPromotion,
    commit: &Arc<CommitInfo>,
    attributions: &[Attribution],
) -> Vec<ApprovalEvent> {
    let mut events = found_events(old, new, commit);
    for event in &mut events {
        if let Some(credited) = attributions.iter().find(|a| {
            a.promotion == new.metadata.name && a.stage == event.stage && a.kind == event.kind
        }) {
            event.commit = Arc::clone(&credited.commit);
        }
    }
    events
}

fn found_events(
    old: Option<&ClusterPromotion>,
    new: &ClusterPromotion,
    commit: &Arc<CommitInfo>,
) -> Vec<ApprovalEvent> {
    let mut events = Vec::new();
    for stage in &new.spec.stages {
        let approved_now = manual(new, &stage.name).and_then(|m| m.approved) == Some(true);
        let approved_before = old
            .and_then(|o| manual(o, &stage.name))
            .and_then(|m| m.approved)
            == Some(true);
        if approved_now && !approved_before {
            events.push(ApprovalEvent {
                stage: stage.name.clone(),
                kind: ApprovalKind::Field,
                commit: Arc::clone(commit),
            });
        }
    }
    for (key, value) in &new.metadata.annotations {
        let Some(stage) = key.strip_prefix(APPROVE_ANNOTATION_PREFIX) else {
            continue;
        };
        if stage.is_empty() {
            continue;
        }
        let before = old.and_then(|o| o.metadata.annotations.get(key));
        if before != Some(value) {
            events.push(ApprovalEvent {
                stage: stage.to_string(),
                kind: ApprovalKind::Annotation {
                    value: value.clone(),
                },
                commit: Arc::clone(commit),
            });
        }
    }
    events
}
