//! Recording runs into the bounded [`RunHistory`](crate::status::run_history::RunHistory) after every
//! step, from the persisted status and the next one ([`record`]), never from messages.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tollgate_model::policy::OnFailure;
use tollgate_model::snapshot::{Snapshot, short_sha};

use crate::status::activity::StageActivity;
use crate::status::run_history::{
    ActivitySpan, HOLDS_KEPT, HeldStart, RUNS_KEPT, RunOutcome, RunRecord, SPANS_KEPT,
    STAGE_RECORDS_KEPT, StageRecord,
};
use crate::status::trace_ids::TraceId;
use crate::status::{PromotionStatus, RunFailure, StageStatus};

/// Bring `next.runs` up to date with the run `next` describes. `previous` is the status persisted
/// before the step (`None`: the promotion never ran); `now` is the step's time, used only for the
/// instant a run is first seen when its first stage has no start time. `history` (the
/// promotion's snapshots in git) gives a new run the time of its snapshot's commit.
pub fn record(
    previous: Option<&PromotionStatus>,
    next: &mut PromotionStatus,
    now: DateTime<Utc>,
    history: &[Snapshot],
) {
    // A restart resets the status to empty: the history is then the previous step's.
    if next.runs.is_empty()
        && let Some(previous) = previous
    {
        next.runs = previous.runs.clone();
    }
    let Some(index) = next.snapshot_index else {
        return;
    };
    let recorded = next.runs.last().filter(|run| run.snapshot_index == index);
    let mut run = match recorded {
        Some(run) => run.clone(),
        None => new_run(next, index, now, history),
    };
    update(&mut run, next);
    if recorded == Some(&run) {
        return;
    }
    let is_new = recorded.is_none();
    let runs = Arc::make_mut(&mut next.runs.0);
    if is_new {
        supersede(runs.last_mut(), run.started_at);
        runs.push(run);
    } else if let Some(last) = runs.last_mut() {
        *last = run;
    }
    bound(runs);
}

/// The record of the run `status` starts: it starts when its first stage was entered.
fn new_run(
    status: &PromotionStatus,
    index: u64,
    now: DateTime<Utc>,
    history: &[Snapshot],
) -> RunRecord {
    let snapshot = history.iter().find(|snapshot| snapshot.index == index);
    let started_at = status
        .stages
        .first()
        .and_then(|s| s.last_update_reconciled_time)
        .unwrap_or(now);
    RunRecord {
        snapshot_index: index,
        commit: status
            .snapshot_commit
            .as_deref()
            .map(|sha| short_sha(sha).to_string())
            .unwrap_or_default(),
        committed_at: snapshot.map(|snapshot| snapshot.commit.time),
        rollback_of: status.rollback_of,
        started_at,
        trace_id: snapshot.map(|s| TraceId::of_run(&s.promotion.metadata.name, index, started_at)),
        ended_at: None,
        outcome: RunOutcome::Running,
        stages: Vec::new(),
        held_starts: Vec::new(),
        rollback: status.rollback,
    }
}

/// A run replaced before it ended ends when its successor starts.
fn supersede(run: Option<&mut RunRecord>, at: DateTime<Utc>) {
    if let Some(run) = run
        && run.ended_at.is_none()
    {
        run.outcome = RunOutcome::Superseded;
        run.ended_at = Some(at);
    }
}

/// Copy the current run's transitions into its record.
fn update(run: &mut RunRecord, status: &PromotionStatus) {
    for stage in &status.stages {
        let position = run.stages.iter().position(|s| s.name == stage.name);
        let record = match position {
            Some(at) => &mut run.stages[at],
            None => {
                run.stages.push(StageRecord::entered(stage));
                let last = run.stages.len() - 1;
                &mut run.stages[last]
            }
        };
        record.observe(stage, status.failure.as_deref());
    }
    note_held_starts(run, status);
    let (outcome, ended_at) = outcome(status);
    // A finished run stays finished: a completed run that corrects drift, or whose file turns
    // invalid, did complete.
    // A halted run a retry re-drives (its failure cleared) runs again.
    let retried = run.outcome == RunOutcome::Failed && status.failure.is_none();
    if run.outcome == RunOutcome::Running || outcome != RunOutcome::Running || retried {
        run.outcome = outcome;
        run.ended_at = ended_at;
    }
}

/// Stage starts a blackout holds now, once per hold.
fn note_held_starts(run: &mut RunRecord, status: &PromotionStatus) {
    for ahead in &status.stages_ahead {
        let StageActivity::Blackout { until, reason, .. } = &ahead.activity else {
            continue;
        };
        let since = ahead.activity_since.unwrap_or(*until);
        let known = run
            .held_starts
            .iter()
            .any(|h| h.stage == ahead.name && h.since == since);
        if known {
            continue;
        }
        run.held_starts.push(HeldStart {
            stage: ahead.name.clone(),
            since,
            until: *until,
            reason: reason.clone(),
        });
        let excess = run.held_starts.len().saturating_sub(HOLDS_KEPT);
        run.held_starts.drain(..excess);
    }
}

/// How the run `status` describes stands, and when it ended.
fn outcome(status: &PromotionStatus) -> (RunOutcome, Option<DateTime<Utc>>) {
    if let Some(failure) = &status.failure {
        if failure.on_failure != OnFailure::Rollback {
            return (RunOutcome::Failed, Some(failure.at));
        }
        let restored: Option<Vec<DateTime<Utc>>> =
            failure.rollback.iter().map(|r| r.restored_at).collect();
        return match restored {
            Some(times) => (
                RunOutcome::RolledBack,
                Some(times.into_iter().max().unwrap_or(failure.at)),
            ),
            None => (RunOutcome::Failed, None),
        };
    }
    // Only the last stage stays current once it succeeded (see `step`); a stage whose start
    // waits (a dependency, a blackout) keeps the one before it current, with stages ahead.
    let finished = status
        .current_stage_name
        .as_deref()
        .and_then(|current| status.stage(current))
        .and_then(|current| current.succeeded_at)
        .filter(|_| status.stages_ahead.is_empty());
    match finished {
        Some(at) => (RunOutcome::Completed, Some(at)),
        None => (RunOutcome::Running, None),
    }
}

impl StageRecord {
    /// A stage first seen entered: it started provisioning when it was applied (a status from
    /// before the history, or whose history was lost, shows a later activity already).
    fn entered(stage: &StageStatus) -> Self {
        let applied_at = stage
            .last_update_reconciled_time
            .unwrap_or(stage.applied_at);
        let mut record = StageRecord::new(stage.name.clone(), applied_at);
        let provisioning = match &stage.activity {
            StageActivity::Provisioning { wave } => StageActivity::Provisioning { wave: *wave },
            _ => StageActivity::Provisioning { wave: None },
        };
        record.activities.push(ActivitySpan {
            activity: provisioning,
            since: applied_at,
        });
        record
    }

    /// Keep the first instant of every transition `stage` shows.
    fn observe(&mut self, stage: &StageStatus, failure: Option<&RunFailure>) {
        keep_first(&mut self.provisioned_at, stage.provisioned_at);
        keep_first(
            &mut self.awaiting_approval_since,
            stage.awaiting_approval_since,
        );
        keep_first(&mut self.awaiting_window_since, stage.awaiting_window_since);
        keep_first(&mut self.succeeded_at, stage.succeeded_at);
        self.note_activity(stage);
        self.note_comparisons(stage);
        let Some(failure) = failure else {
            return;
        };
        if failure.stage == self.name {
            keep_first(&mut self.failed_at, Some(failure.at));
        }
        if let Some(restore) = failure.rollback.iter().find(|r| r.name == self.name)
            && self.restored_at.is_none()
            && restore.restored_at.is_some()
        {
            self.restored_at = restore.restored_at;
            self.restored_to = restore.to_snapshot;
        }
    }
}

impl StageRecord {
    /// The newest comparison of each comparative analysis the stage runs now; what an earlier
    /// wave compared stays when this one has not measured yet.
    fn note_comparisons(&mut self, stage: &StageStatus) {
        let runs = stage
            .analyses
            .as_deref()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for run in runs {
            let Some(line) = run.newest_comparison() else {
                continue;
            };
            let prefix = format!("{}: ", run.name);
            match self.comparisons.iter_mut().find(|c| c.starts_with(&prefix)) {
                Some(kept) if *kept != line => *kept = line,
                Some(_) => {}
                None => self.comparisons.push(line),
            }
        }
    }

    /// Appends the stage's activity when it is a new one; the same one (a soak whose end
    /// moved) is updated in place.
    fn note_activity(&mut self, stage: &StageStatus) {
        if stage.activity == StageActivity::Pending {
            return;
        }
        match self.activities.last_mut() {
            Some(span) if span.activity.same_kind(&stage.activity) => {
                if span.activity != stage.activity {
                    span.activity = stage.activity.clone();
                }
            }
            _ => {
                self.activities.push(ActivitySpan {
                    activity: stage.activity.clone(),
                    since: stage.activity_since,
                });
                if self.activities.len() > SPANS_KEPT {
                    self.activities.remove(1);
                }
            }
        }
    }
}

fn keep_first(kept: &mut Option<DateTime<Utc>>, seen: Option<DateTime<Utc>>) {
    if kept.is_none() {
        *kept = seen;
    }
}

/// Drop the oldest runs beyond [`RUNS_KEPT`] and [`STAGE_RECORDS_KEPT`]; the newest run stays.
fn bound(runs: &mut Vec<RunRecord>) {
    let mut kept_runs = 0;
    let mut kept_stages = 0;
    for run in runs.iter().rev() {
        let stages = kept_stages + run.stages.len();
        if kept_runs > 0 && (kept_runs == RUNS_KEPT || stages > STAGE_RECORDS_KEPT) {
            break;
        }
        kept_runs += 1;
        kept_stages = stages;
    }
    let excess = runs.len() - kept_runs;
    runs.drain(..excess);
}
