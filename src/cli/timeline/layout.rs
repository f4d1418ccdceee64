//! What the picture shows, before any geometry: the runs in the period, one lane per stage, and
//! the bars of each run in each lane, read from the run history the engine keeps in status.

use chrono::{DateTime, Utc};
use tollgate_engine::{RunOutcome, RunRecord, StageRecord};

/// The kinds of bar, in legend order. A run's stage goes provisioning → soak (delay, post-delay
/// checks) → waiting for a promotion window or an approval; `Failed` marks the stage that failed
/// under its RolloutPolicy, `Rollback` a stage being restored after that failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarKind {
    Provisioning,
    Soak,
    Window,
    Approval,
    Failed,
    Rollback,
}

impl BarKind {
    pub const ALL: [BarKind; 6] = [
        BarKind::Provisioning,
        BarKind::Soak,
        BarKind::Window,
        BarKind::Approval,
        BarKind::Failed,
        BarKind::Rollback,
    ];

    /// The bar's CSS class.
    pub fn class(self) -> &'static str {
        match self {
            BarKind::Provisioning => "provisioning",
            BarKind::Soak => "soak",
            BarKind::Window => "window",
            BarKind::Approval => "approval",
            BarKind::Failed => "failed",
            BarKind::Rollback => "rollback",
        }
    }

    /// The legend's words.
    pub fn caption(self) -> &'static str {
        match self {
            BarKind::Provisioning => "provisioning",
            BarKind::Soak => "soak (delay, post-delay checks)",
            BarKind::Window => "waiting for a promotion window",
            BarKind::Approval => "waiting for approval",
            BarKind::Failed => "failed",
            BarKind::Rollback => "rolling back",
        }
    }
}

/// One bar: a stage of a run in one state from `start` to `end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bar {
    pub kind: BarKind,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Where a rollback bar restores the stage to (`None`: its profiles are withdrawn).
    pub restored_to: Option<u64>,
}

/// One run in the picture.
#[derive(Debug)]
pub struct Run<'r> {
    pub record: &'r RunRecord,
    /// Bars per lane: `(lane index, bar)`.
    pub bars: Vec<(usize, Bar)>,
}

impl Run<'_> {
    /// `#3 abc1234`.
    pub fn label(&self) -> String {
        format!("#{} {}", self.record.snapshot_index, self.record.commit)
    }

    /// `rollback to #1` for a run that brings back an earlier snapshot's content.
    pub fn rollback_label(&self) -> Option<String> {
        self.record
            .rollback_of
            .map(|to| format!("rollback to #{to}"))
    }
}

/// The whole picture's content.
#[derive(Debug)]
pub struct Timeline<'r> {
    pub lanes: Vec<String>,
    pub runs: Vec<Run<'r>>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// The runs of `history` that overlap `[since, now]`, laid out in lanes. `from`/`to` span what is
/// shown: from the first shown instant (not before `since`) to the last (`now` while a run is
/// still open).
pub fn lay_out(history: &[RunRecord], since: DateTime<Utc>, now: DateTime<Utc>) -> Timeline<'_> {
    let shown: Vec<&RunRecord> = history
        .iter()
        .filter(|run| run.ended_at.is_none_or(|end| end >= since) && run.started_at <= now)
        .collect();
    let lanes = lanes(&shown);
    let runs: Vec<Run<'_>> = shown
        .iter()
        .map(|record| Run {
            record,
            bars: record
                .stages
                .iter()
                .flat_map(|stage| {
                    let lane = lanes.iter().position(|l| *l == stage.name).unwrap_or(0);
                    stage_bars(record, stage, now)
                        .into_iter()
                        .map(move |bar| (lane, bar))
                })
                .collect(),
        })
        .collect();
    let first = runs
        .iter()
        .map(|r| r.record.started_at)
        .min()
        .unwrap_or(since);
    let last = runs
        .iter()
        .flat_map(|r| r.bars.iter().map(|(_, bar)| bar.end))
        .chain(runs.iter().map(|r| r.record.started_at))
        .max()
        .unwrap_or(now);
    let from = first.max(since);
    let to = last.min(now).max(from);
    Timeline {
        lanes,
        runs,
        from,
        // A little room after the last bar, so that it and its label stay readable.
        to: to + (to - from) / 20,
    }
}

/// Stage names in pipeline order: the newest run's order, with stages only older runs reached
/// put after the stage they followed there.
fn lanes(runs: &[&RunRecord]) -> Vec<String> {
    let mut lanes: Vec<String> = Vec::new();
    for run in runs.iter().rev() {
        let mut after: Option<usize> = None;
        for stage in &run.stages {
            match lanes.iter().position(|l| *l == stage.name) {
                Some(at) => after = Some(at),
                None => {
                    let at = after.map_or(0, |a| a + 1);
                    lanes.insert(at, stage.name.clone());
                    after = Some(at);
                }
            }
        }
    }
    lanes
}

/// The bars of one stage in one run. Each state lasts until the next one starts; the last one
/// until the stage succeeded, failed, the run ended, or (still going) `now`.
fn stage_bars(run: &RunRecord, stage: &StageRecord, now: DateTime<Utc>) -> Vec<Bar> {
    let open_until = run.ended_at.unwrap_or(now);
    let stage_end = stage.succeeded_at.or(stage.failed_at).unwrap_or(open_until);
    let marks = [
        (BarKind::Provisioning, Some(stage.applied_at)),
        (BarKind::Soak, stage.provisioned_at),
        (BarKind::Window, stage.awaiting_window_since),
        (BarKind::Approval, stage.awaiting_approval_since),
    ];
    let mut started: Vec<(BarKind, DateTime<Utc>)> = marks
        .into_iter()
        .filter_map(|(kind, at)| at.map(|at| (kind, at)))
        .collect();
    started.sort_by_key(|(_, at)| *at);
    let mut bars: Vec<Bar> = started
        .iter()
        .enumerate()
        .map(|(i, (kind, start))| {
            let end = started.get(i + 1).map_or(stage_end, |(_, next)| *next);
            Bar {
                kind: *kind,
                start: *start,
                end: end.max(*start),
                restored_to: None,
            }
        })
        // A state left in the step it was entered (no delay, an approval already there).
        .filter(|bar| bar.end > bar.start || bar.kind == BarKind::Provisioning)
        .collect();
    if let Some(failed_at) = stage.failed_at {
        let until = stage.restored_at.or(run.ended_at).unwrap_or(now);
        bars.push(Bar {
            kind: BarKind::Failed,
            start: failed_at,
            end: until.max(failed_at),
            restored_to: None,
        });
    }
    if let Some(restored_at) = stage.restored_at {
        // The rollback starts when the run failed (its failing stage's failure).
        let failed_at = run
            .stages
            .iter()
            .find_map(|s| s.failed_at)
            .unwrap_or(restored_at);
        bars.push(Bar {
            kind: BarKind::Rollback,
            start: failed_at.min(restored_at),
            end: restored_at,
            restored_to: stage.restored_to,
        });
    }
    bars
}

/// Whether the run is marked as a rollback: it brings back an earlier snapshot, or it failed and
/// was rolled back.
pub fn is_rollback(run: &RunRecord) -> bool {
    run.rollback_of.is_some() || run.outcome == RunOutcome::RolledBack
}
