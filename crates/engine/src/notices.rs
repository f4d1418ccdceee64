//! What a step tells people (issue #19): the notices a status transition carries.
//!
//! Derived from two persisted statuses only, so the controller never restates a rollout rule: the
//! notices of a step are `notices(before, after)`. Each has a stable id (a hash of promotion,
//! snapshot index, run start, stage and kind), so a transition seen twice (a drift correction
//! after completion, a restart, a new leader) is recognised as the same notice.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use tollgate_model::hash::hash_value;
use tollgate_model::policy::NotifyEvent;

use crate::status::{Phase, PromotionStatus, StageCounts, StageStatus};

/// Characters of the base64 SHA-256 kept as a notice id (96 bits).
const ID_CHARS: usize = 16;

/// One thing worth telling about a promotion's rollout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// Stable across restarts and replicas: hash of (promotion, snapshot index, run start,
    /// stage, kind), URL-safe base64.
    pub id: String,
    pub kind: NotifyEvent,
    pub promotion: String,
    /// The stage it is about (for `Completed`, the last stage; for `RolledBack`, the failed one).
    pub stage: String,
    pub snapshot_index: u64,
    /// Full SHA of the commit that introduced the run's snapshot.
    pub snapshot_commit: Option<String>,
    /// The promotion's phase after the step.
    pub phase: &'static str,
    /// Why, in plain words (the failure reason, the waiting reason, the status message).
    pub reason: Option<String>,
    /// The stage's cluster counts after the step.
    pub counts: StageCounts,
    /// When the transition happened (from status, never a clock read).
    pub time: DateTime<Utc>,
}

/// The run a status belongs to: its snapshot and when its first stage started.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Run {
    snapshot_index: u64,
    start: DateTime<Utc>,
}

fn run_of(status: &PromotionStatus) -> Option<Run> {
    let first = status.stages.first()?;
    Some(Run {
        snapshot_index: status.snapshot_index?,
        start: first.last_update_reconciled_time?,
    })
}

/// The notices of the transition from `previous` to `next` (`None`: nothing persisted before).
/// No transition, no notice: a step at steady state tells nothing.
pub fn notices(
    promotion: &str,
    previous: Option<&PromotionStatus>,
    next: &PromotionStatus,
) -> Vec<Notice> {
    let Some(run) = run_of(next) else {
        return Vec::new();
    };
    // The same run before, or nothing of it: every transition of `next` is then new.
    let before = previous.filter(|p| run_of(p) == Some(run));
    let notice = Builder {
        promotion,
        run,
        next,
    };
    let mut out = Vec::new();
    for stage in &next.stages {
        let old = before.and_then(|b| b.stage(&stage.name));
        if old.is_none()
            && let Some(at) = stage.last_update_reconciled_time
        {
            let reason = stage.current_status_description.clone();
            out.push(notice.about(NotifyEvent::StageStarted, stage, reason, at));
        }
        if let Some(at) = stage.awaiting_approval_since
            && old.is_none_or(|o| o.awaiting_approval_since.is_none())
        {
            let reason = stage.waiting_reason.clone();
            out.push(notice.about(NotifyEvent::ApprovalNeeded, stage, reason, at));
        }
        if let Some(at) = stage.succeeded_at
            && old.is_none_or(|o| o.succeeded_at.is_none())
        {
            let reason = stage
                .provisioned_message
                .clone()
                .or_else(|| stage.current_status_description.clone());
            out.push(notice.about(NotifyEvent::StageCompleted, stage, reason, at));
        }
    }
    if let Some(failure) = &next.failure
        && let Some(stage) = next.stage(&failure.stage)
    {
        if before.is_none_or(|b| b.failure.is_none()) {
            let reason = Some(failure.reason.clone());
            out.push(notice.about(NotifyEvent::StageFailed, stage, reason, failure.at));
        }
        if next.phase == Phase::RolledBack && before.is_none_or(|b| b.phase != Phase::RolledBack) {
            let at = failure
                .rollback
                .iter()
                .filter_map(|r| r.restored_at)
                .max()
                .unwrap_or(failure.at);
            out.push(notice.about(NotifyEvent::RolledBack, stage, next.message.clone(), at));
        }
    }
    if next.phase == Phase::Completed
        && before.is_none_or(|b| b.phase != Phase::Completed)
        && let Some(last) = next.stages.last()
    {
        let at = last.succeeded_at.unwrap_or(run.start);
        out.push(notice.about(NotifyEvent::Completed, last, next.message.clone(), at));
    }
    out
}

struct Builder<'a> {
    promotion: &'a str,
    run: Run,
    next: &'a PromotionStatus,
}

impl Builder<'_> {
    fn about(
        &self,
        kind: NotifyEvent,
        stage: &StageStatus,
        reason: Option<String>,
        time: DateTime<Utc>,
    ) -> Notice {
        Notice {
            id: notice_id(self.promotion, self.run, &stage.name, kind),
            kind,
            promotion: self.promotion.to_string(),
            stage: stage.name.clone(),
            snapshot_index: self.run.snapshot_index,
            snapshot_commit: self.next.snapshot_commit.clone(),
            phase: self.next.phase.as_str(),
            reason,
            counts: stage.counts.clone(),
            time,
        }
    }
}

fn notice_id(promotion: &str, run: Run, stage: &str, kind: NotifyEvent) -> String {
    let key = json!([
        promotion,
        run.snapshot_index,
        run.start.to_rfc3339(),
        stage,
        kind.as_str()
    ]);
    hash_value(&key)
        .chars()
        .take(ID_CHARS)
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect()
}
