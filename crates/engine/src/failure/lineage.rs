//! What a snapshot's content did before: the rule that tells a rollback from a forward change.
//!
//! A commit whose content equals an earlier snapshot is a *rollback* only when that content is
//! known good here: it completed a run of this promotion, or the stages run it now (a revert of a
//! run still going, or of a rejected one that was rolled back). Content equal to a *rejected*
//! snapshot (halted or rolled back), or to one that never ran (the middle of a fast-forwarded
//! pull request), is a forward change: it obeys blackouts, `onNewSnapshot`, gates and approvals
//! like any other, and rejected content is said so (`RejectedContentRecommitted`).
//!
//! The facts are kept in status as [`ContentVerdict`]s (bounded), written when a run completes or
//! fails; the run history is read too, for statuses written before verdicts existed.

use chrono::{DateTime, Utc};
use tollgate_model::snapshot::Snapshot;

pub use crate::status::verdict::{ContentVerdict, VERDICTS_KEPT, Verdict};

use crate::status::PromotionStatus;
use crate::status::run_history::RunOutcome;

/// How a snapshot about to start relates to content that ran here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lineage {
    /// New content, or content that never ran: a forward change.
    Forward,
    /// Content known good (completed, or what the stages run now): restored at once.
    Rollback { to: u64 },
    /// Content that was rejected: a forward change, warned about.
    RejectedContent {
        of: u64,
        at: DateTime<Utc>,
        reason: String,
    },
}

impl Lineage {
    /// The earlier snapshot a rollback restores.
    pub fn rollback_to(&self) -> Option<u64> {
        match self {
            Lineage::Rollback { to } => Some(*to),
            _ => None,
        }
    }

    /// The sentence status, `history` and the warning event use for recommitted rejected
    /// content (`None` for other lineages). `halted`: the status still holds the rejected run
    /// (same content, so the same run), which is not applied again.
    pub fn rejected_note(&self, snapshot: &Snapshot, halted: bool) -> Option<String> {
        let Lineage::RejectedContent { of, at, reason } = self else {
            return None;
        };
        let then = match halted {
            true => {
                "it is the rejected run's content, which is not applied again: commit a fix or revert"
            }
            false => "it rolls out as a new change, not as a rollback",
        };
        Some(format!(
            "snapshot #{} has the content of snapshot #{of}, rejected at {}: {reason}; {then}",
            snapshot.index,
            at.format("%Y-%m-%d %H:%M:%S UTC"),
        ))
    }
}

/// Judges `snapshot` (about to start a run) against what this promotion's status knows.
pub fn judge(
    status: Option<&PromotionStatus>,
    history: &[Snapshot],
    snapshot: &Snapshot,
) -> Lineage {
    let Some(status) = status else {
        return Lineage::Forward;
    };
    let id = snapshot.id();
    if let Some(verdict) = status
        .verdicts
        .iter()
        .rev()
        .find(|v| v.snapshot_id == id && v.snapshot_index != snapshot.index)
    {
        return match verdict.verdict {
            Verdict::Completed => Lineage::Rollback {
                to: verdict.snapshot_index,
            },
            Verdict::Rejected => Lineage::RejectedContent {
                of: verdict.snapshot_index,
                at: verdict.at,
                reason: verdict.reason.clone().unwrap_or_default(),
            },
        };
    }
    let same_content = |index: u64| {
        index != snapshot.index
            && history
                .iter()
                .any(|s| s.index == index && s.hashes == snapshot.hashes)
    };
    match running_now(status).find(|&index| same_content(index)) {
        Some(to) => Lineage::Rollback { to },
        None => completed_before_verdicts(status, &same_content),
    }
}

/// The snapshots the stages run now: the current run's, those later stages still carry, and
/// those a failure rollback restored.
fn running_now(status: &PromotionStatus) -> impl Iterator<Item = u64> + '_ {
    let restored = status
        .failure
        .iter()
        .flat_map(|f| f.rollback.iter().filter_map(|r| r.to_snapshot));
    let rejected = status.failure.as_ref().map(|f| f.snapshot_index);
    let current = status.snapshot_index.filter(|&i| Some(i) != rejected);
    current
        .into_iter()
        .chain(status.stages_ahead.iter().filter_map(|a| a.snapshot_index))
        .chain(restored)
}

/// Statuses persisted before verdicts existed: a completed run in the run history counts.
fn completed_before_verdicts(
    status: &PromotionStatus,
    same_content: &dyn Fn(u64) -> bool,
) -> Lineage {
    status
        .runs
        .iter()
        .rev()
        .find(|run| run.outcome == RunOutcome::Completed && same_content(run.snapshot_index))
        .map_or(Lineage::Forward, |run| Lineage::Rollback {
            to: run.snapshot_index,
        })
}

/// Records what the run of `status` concluded, replacing an older verdict on the same content.
pub(crate) fn record(status: &mut PromotionStatus, verdict: Verdict, at: DateTime<Utc>) {
    let (Some(id), Some(index)) = (status.snapshot_id.clone(), status.snapshot_index) else {
        return;
    };
    let reason = match verdict {
        Verdict::Completed => None,
        Verdict::Rejected => status.failure.as_ref().map(|f| f.reason.clone()),
    };
    let known = status
        .verdicts
        .iter()
        .any(|v| v.snapshot_id == id && v.verdict == verdict && v.snapshot_index == index);
    if known {
        return;
    }
    status.verdicts.retain(|v| v.snapshot_id != id);
    status.verdicts.push(ContentVerdict {
        snapshot_id: id,
        snapshot_index: index,
        verdict,
        at,
        reason,
    });
    let excess = status.verdicts.len().saturating_sub(VERDICTS_KEPT);
    status.verdicts.drain(..excess);
}

/// What the status tells of one snapshot's run (for `tollgate history`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotRun {
    /// It is the current run's snapshot, still going.
    Running,
    /// Its run completed every stage.
    Completed { at: DateTime<Utc> },
    /// A stage failed under the policy: halted or rolled back.
    Rejected { at: DateTime<Utc>, reason: String },
    /// A newer snapshot started before its run finished.
    Superseded,
    /// Newer than the current run: it has not started yet (queued, held, or in a blackout).
    Waiting,
    /// Newer than the current run, older than the queued snapshot that runs next in its stead
    /// (every `onNewSnapshot` but `Queue`): it will not run.
    Skipped { next: u64 },
    /// No run of it is recorded although newer runs are: it was skipped (superseded while it
    /// waited, or never at the branch head when the controller looked).
    NeverRan,
    /// Older than what the status keeps.
    Unknown,
}

/// What the status tells of the run of snapshot `index`, and whether that run was a rollback.
pub fn snapshot_run(status: &PromotionStatus, index: u64) -> (SnapshotRun, Option<u64>) {
    let record = status.runs.iter().rev().find(|r| r.snapshot_index == index);
    let rollback_of = record.and_then(|r| r.rollback_of).or_else(|| {
        (status.snapshot_index == Some(index))
            .then_some(status.rollback_of)
            .flatten()
    });
    if let Some(verdict) = status.verdicts.iter().find(|v| v.snapshot_index == index) {
        let run = match verdict.verdict {
            Verdict::Completed => SnapshotRun::Completed { at: verdict.at },
            Verdict::Rejected => SnapshotRun::Rejected {
                at: verdict.at,
                reason: verdict.reason.clone().unwrap_or_default(),
            },
        };
        return (run, rollback_of);
    }
    let run = match record.map(|r| r.outcome) {
        Some(RunOutcome::Running) => SnapshotRun::Running,
        Some(RunOutcome::Superseded) => SnapshotRun::Superseded,
        Some(RunOutcome::Completed) => SnapshotRun::Completed {
            at: record.and_then(|r| r.ended_at).unwrap_or_default(),
        },
        Some(RunOutcome::Failed | RunOutcome::RolledBack) => SnapshotRun::Rejected {
            at: record.and_then(|r| r.ended_at).unwrap_or_default(),
            reason: String::new(),
        },
        None if status.snapshot_index == Some(index) => SnapshotRun::Running,
        None if status.snapshot_index.is_none_or(|current| index > current) => {
            match status.queued_snapshot {
                Some(next) if index < next && !status.queued_in_order => {
                    SnapshotRun::Skipped { next }
                }
                _ => SnapshotRun::Waiting,
            }
        }
        None => {
            let oldest = status.runs.iter().map(|r| r.snapshot_index).min();
            match oldest {
                Some(oldest) if index > oldest => SnapshotRun::NeverRan,
                _ => SnapshotRun::Unknown,
            }
        }
    };
    (run, rollback_of)
}
