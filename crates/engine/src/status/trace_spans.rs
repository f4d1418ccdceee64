//! The spans of a run's trace that end in a step: a stage's when it completed, failed or was
//! restored, a wave's when its clusters all provisioned, the run's own when it ended. Read from
//! the persisted statuses before and after the step and the step's [`Transition`]s, so that a
//! span is told once, with its real start and end, whichever controller process saw it end; and
//! [`live_parent`]: which span an operation of a step (an apply, a status write) belongs under.

use chrono::{DateTime, Utc};

use crate::status::PromotionStatus;
use crate::status::run_history::{RunOutcome, RunRecord};
use crate::status::trace_ids::{SpanId, TraceId};
use crate::status::transitions::{Transition, TransitionKind};

/// What a finished span covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpanOf {
    /// The whole run: the trace's root.
    Run,
    /// A stage, from its entry (profile applied) to its completion or failure.
    Stage { stage: String },
    /// One wave of a waved stage, from its start until its clusters all provisioned.
    Wave { stage: String, wave: u32, of: u32 },
    /// A failure rollback restoring a stage, from the stage's failure until restored.
    Restore { stage: String, to: Option<u64> },
}

/// A span that ended, with the ids it has in every process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedSpan {
    pub trace: TraceId,
    pub id: SpanId,
    /// `None` for the run's root span.
    pub parent: Option<SpanId>,
    pub of: SpanOf,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// `completed`, `failed`, `restored`, `rolled-back` or `superseded`.
    pub outcome: &'static str,
    pub snapshot: u64,
    /// The commit of the run's snapshot (the full SHA when the status has it).
    pub commit: String,
}

/// The spans that ended between `before` and `after`, given the step's transitions `told`.
pub fn finished_spans(
    before: Option<&PromotionStatus>,
    after: &PromotionStatus,
    told: &[Transition],
) -> Vec<FinishedSpan> {
    let mut out = Vec::new();
    for transition in told {
        if let Some(span) = transition_span(before, after, transition) {
            out.push(span);
        }
    }
    out.extend(ended_runs(before, after));
    out
}

/// The run of snapshot `snapshot` in `status`'s history (the newest of that snapshot).
fn run_of(status: &PromotionStatus, snapshot: u64) -> Option<&RunRecord> {
    status
        .runs
        .iter()
        .rev()
        .find(|run| run.snapshot_index == snapshot)
}

fn commit_of(status: &PromotionStatus, run: &RunRecord) -> String {
    match &status.snapshot_commit {
        Some(full) if status.snapshot_index == Some(run.snapshot_index) => full.clone(),
        _ => run.commit.clone(),
    }
}

fn transition_span(
    before: Option<&PromotionStatus>,
    after: &PromotionStatus,
    transition: &Transition,
) -> Option<FinishedSpan> {
    let run = run_of(after, transition.snapshot)?;
    let trace = run.trace_id?;
    let stage = &transition.stage;
    let record = run.stages.iter().rev().find(|s| &s.name == stage)?;
    let applied_at = record.applied_at;
    let stage_span = trace.stage_span(stage, applied_at);
    let (id, parent, of, start, outcome) = match transition.kind {
        TransitionKind::Completed | TransitionKind::Failed => (
            stage_span,
            trace.run_span(),
            SpanOf::Stage {
                stage: stage.clone(),
            },
            applied_at,
            if transition.kind == TransitionKind::Completed {
                "completed"
            } else {
                "failed"
            },
        ),
        TransitionKind::WaveCompleted { wave } => (
            trace.wave_span(stage, applied_at, wave.wave),
            stage_span,
            SpanOf::Wave {
                stage: stage.clone(),
                wave: wave.wave,
                of: wave.of,
            },
            wave_start(before, after, stage, wave.wave).unwrap_or(applied_at),
            "completed",
        ),
        TransitionKind::Restored { to } => (
            trace.restore_span(stage, applied_at),
            trace.run_span(),
            SpanOf::Restore {
                stage: stage.clone(),
                to,
            },
            record.failed_at.unwrap_or(transition.at),
            "restored",
        ),
        _ => return None,
    };
    Some(FinishedSpan {
        trace,
        id,
        parent: Some(parent),
        of,
        start: start.min(transition.at),
        end: transition.at,
        outcome,
        snapshot: run.snapshot_index,
        commit: commit_of(after, run),
    })
}

/// When wave `wave` of `stage` started: the status keeps the latest wave's start only, so an
/// earlier wave's comes from the status before the step.
fn wave_start(
    before: Option<&PromotionStatus>,
    after: &PromotionStatus,
    stage: &str,
    wave: u32,
) -> Option<DateTime<Utc>> {
    [Some(after), before]
        .into_iter()
        .flatten()
        .filter_map(|status| status.stage(stage)?.waves.as_deref())
        .find(|waves| waves.reached == wave)
        .map(|waves| waves.wave_started_at)
}

/// The root spans of the runs `after` records as ended that `before` did not, each after the
/// spans of its stages that the end cut short (a superseded run's stage in progress): no span
/// is left without its parent.
fn ended_runs<'a>(
    before: Option<&'a PromotionStatus>,
    after: &'a PromotionStatus,
) -> impl Iterator<Item = FinishedSpan> + 'a {
    after.runs.iter().flat_map(move |run| {
        let (Some(end), Some(trace)) = (run.ended_at, run.trace_id) else {
            return Vec::new();
        };
        let was_ended = before.is_some_and(|b| {
            b.runs
                .iter()
                .any(|old| old.trace_id == run.trace_id && old.ended_at.is_some())
        });
        if was_ended {
            return Vec::new();
        }
        let outcome = run_outcome(run.outcome);
        let commit = commit_of(after, run);
        let span = |id, parent, of, start: DateTime<Utc>| FinishedSpan {
            trace,
            id,
            parent,
            of,
            start: start.min(end),
            end,
            outcome,
            snapshot: run.snapshot_index,
            commit: commit.clone(),
        };
        let cut_short = run
            .stages
            .iter()
            .filter(|stage| stage.succeeded_at.is_none() && stage.failed_at.is_none());
        let mut spans: Vec<FinishedSpan> = cut_short
            .map(|stage| {
                span(
                    trace.stage_span(&stage.name, stage.applied_at),
                    Some(trace.run_span()),
                    SpanOf::Stage {
                        stage: stage.name.clone(),
                    },
                    stage.applied_at,
                )
            })
            .collect();
        spans.push(span(trace.run_span(), None, SpanOf::Run, run.started_at));
        spans
    })
}

fn run_outcome(outcome: RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Running => "running",
        RunOutcome::Completed => "completed",
        RunOutcome::Failed => "failed",
        RunOutcome::RolledBack => "rolled-back",
        RunOutcome::Superseded => "superseded",
    }
}

/// Where an operation of a step on `status` (the status the step will write) belongs: under the
/// span of `stage` when the run entered it, else under the run's root span. `None` when no run
/// with a trace id is in progress.
pub fn live_parent(status: &PromotionStatus, stage: Option<&str>) -> Option<(TraceId, SpanId)> {
    let snapshot = status.snapshot_index?;
    let run = run_of(status, snapshot)?;
    let trace = run.trace_id?;
    let entered = stage
        .and_then(|name| status.stage(name))
        .and_then(|s| Some((s.name.as_str(), s.last_update_reconciled_time?)));
    Some(match entered {
        Some((name, applied_at)) => (trace, trace.stage_span(name, applied_at)),
        None => (trace, trace.run_span()),
    })
}

/// The stage a step's operations belong to when they name none (a status write): the newest
/// stage the run entered.
pub fn current_stage(status: &PromotionStatus) -> Option<&str> {
    status
        .stages
        .iter()
        .filter(|s| s.last_update_reconciled_time.is_some())
        .max_by_key(|s| s.last_update_reconciled_time)
        .map(|s| s.name.as_str())
}
