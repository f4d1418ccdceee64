//! What the picture shows, before any geometry: the runs in the period, one lane per stage, and
//! the bars of each run in each lane: one per activity span the engine recorded for the stage
//! (`RunRecord.stages[].activities`), and one per stage start a blackout held. Records written
//! before spans existed are drawn from their transition instants ([`legacy`]).

use chrono::{DateTime, Utc};
use tollgate_engine::activity::{StageActivity, WaveOf};
use tollgate_engine::run_history::{ActivitySpan, HeldStart};
use tollgate_engine::{RunOutcome, RunRecord, StageRecord};

mod legacy;

/// The kinds of bar, in legend order: what the engine says a stage does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarKind {
    Provisioning,
    WavePause,
    Soak,
    HealthChecks,
    Analysis,
    Window,
    Approval,
    Blackout,
    Paused,
    Failed,
    Rollback,
}

impl BarKind {
    pub const ALL: [BarKind; 11] = [
        BarKind::Provisioning,
        BarKind::WavePause,
        BarKind::Soak,
        BarKind::HealthChecks,
        BarKind::Analysis,
        BarKind::Window,
        BarKind::Approval,
        BarKind::Blackout,
        BarKind::Paused,
        BarKind::Failed,
        BarKind::Rollback,
    ];

    /// The bar's CSS class.
    pub fn class(self) -> &'static str {
        match self {
            BarKind::Provisioning => "provisioning",
            BarKind::WavePause => "wave-pause",
            BarKind::Soak => "soak",
            BarKind::HealthChecks => "health-checks",
            BarKind::Analysis => "analysis",
            BarKind::Window => "window",
            BarKind::Approval => "approval",
            BarKind::Blackout => "blackout",
            BarKind::Paused => "paused",
            BarKind::Failed => "failed",
            BarKind::Rollback => "rollback",
        }
    }

    /// The legend's words.
    pub fn caption(self) -> &'static str {
        match self {
            BarKind::Provisioning => "provisioning (a wave)",
            BarKind::WavePause => "pause between waves",
            BarKind::Soak => "soak (the trigger's delay)",
            BarKind::HealthChecks => "health checks",
            BarKind::Analysis => "analysis (measuring)",
            BarKind::Window => "waiting for a promotion window",
            BarKind::Approval => "waiting for approval",
            BarKind::Blackout => "held by a blackout",
            BarKind::Paused => "paused",
            BarKind::Failed => "failed",
            BarKind::Rollback => "rolling back",
        }
    }
}

/// One bar: a stage of a run doing one thing from `start` to `end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bar {
    pub kind: BarKind,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Where a rollback bar restores the stage to (`None`: its profiles are withdrawn).
    pub restored_to: Option<u64>,
    /// The wave it is about (provisioning, the pause after it, a blackout holding it).
    pub wave: Option<WaveOf>,
    /// A blackout held the stage's start (the run had not entered it yet).
    pub held_start: bool,
}

impl Bar {
    fn new(kind: BarKind, start: DateTime<Utc>, end: DateTime<Utc>) -> Self {
        Bar {
            kind,
            start,
            end: end.max(start),
            restored_to: None,
            wave: None,
            held_start: false,
        }
    }

    /// The words drawn inside the bar when it is wide enough: `wave 2/4`.
    pub fn inner_label(&self) -> Option<String> {
        let wave = self.wave?;
        Some(match self.kind {
            BarKind::WavePause => format!("pause {}/{}", wave.wave, wave.of),
            _ => format!("wave {}/{}", wave.wave, wave.of),
        })
    }

    /// What the bar is, for its tooltip.
    pub fn description(&self) -> String {
        let caption = match (self.kind, self.held_start) {
            (BarKind::Blackout, true) => "start held by a blackout",
            (kind, _) => kind.caption(),
        };
        match (self.wave, self.kind) {
            (Some(w), BarKind::WavePause) => format!("pause after wave {}/{}", w.wave, w.of),
            (Some(w), BarKind::Blackout) => format!("wave {}/{} held by a blackout", w.wave, w.of),
            (Some(w), _) => format!("{caption}, wave {}/{}", w.wave, w.of),
            (None, _) => caption.to_string(),
        }
    }
}

/// One run in the picture.
#[derive(Debug)]
pub struct Run<'r> {
    pub record: &'r RunRecord,
    /// Bars per lane: `(lane index, bar)`.
    pub bars: Vec<(usize, Bar)>,
    /// The run that replaced it before it finished.
    pub superseded_by: Option<u64>,
}

impl Run<'_> {
    /// `#3 abc1234`.
    pub fn label(&self) -> String {
        format!("#{} {}", self.record.snapshot_index, self.record.commit)
    }

    /// `rollback to #1` for a run that brings back an earlier snapshot's content.
    pub fn rollback_label(&self) -> Option<String> {
        let fast = match self.record.rollback {
            Some(tollgate_engine::fast_rollback::RollbackMode::Fast) => "fast ",
            _ => "",
        };
        self.record
            .rollback_of
            .map(|to| format!("{fast}rollback to #{to}"))
    }

    /// `superseded by #4`, or `superseded` when the run that replaced it is no longer kept.
    pub fn superseded_label(&self) -> Option<String> {
        if self.record.outcome != RunOutcome::Superseded {
            return None;
        }
        Some(match self.superseded_by {
            Some(next) => format!("superseded by #{next}"),
            None => "superseded".to_string(),
        })
    }

    pub fn is_superseded(&self) -> bool {
        self.record.outcome == RunOutcome::Superseded
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
    let shown: Vec<(usize, &RunRecord)> = history
        .iter()
        .enumerate()
        .filter(|(_, run)| run.ended_at.is_none_or(|end| end >= since) && run.started_at <= now)
        .collect();
    let records: Vec<&RunRecord> = shown.iter().map(|(_, r)| *r).collect();
    let lanes = lanes(&records);
    let runs: Vec<Run<'_>> = shown
        .iter()
        .map(|(index, record)| Run {
            record,
            bars: run_bars(record, &lanes, until_of(history, *index, now)),
            superseded_by: history.get(index + 1).map(|next| next.snapshot_index),
        })
        .collect();
    let first = runs
        .iter()
        .flat_map(|r| {
            let held = r.record.held_starts.iter().map(|h| h.since);
            std::iter::once(r.record.started_at).chain(held)
        })
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

/// Until when the run at `index` shows what it left standing: `now` for the newest run (a
/// stage it failed and did not restore is still failed), else when the next run entered a
/// stage (a run whose start a blackout holds replaces nothing yet).
fn until_of(history: &[RunRecord], index: usize, now: DateTime<Utc>) -> DateTime<Utc> {
    history[index + 1..]
        .iter()
        .find(|next| !next.stages.is_empty())
        .map_or(now, |next| next.started_at.min(now))
}

/// Every bar of one run, with its lane; `now` is until when a failure it left stands.
fn run_bars(record: &RunRecord, lanes: &[String], now: DateTime<Utc>) -> Vec<(usize, Bar)> {
    let lane_of = |stage: &str| lanes.iter().position(|l| l == stage).unwrap_or(0);
    let mut bars: Vec<(usize, Bar)> = record
        .held_starts
        .iter()
        .map(|hold| (lane_of(&hold.stage), held_start_bar(record, hold, now)))
        .collect();
    for stage in &record.stages {
        let lane = lane_of(&stage.name);
        let stage_bars = match stage.activities.is_empty() {
            true => legacy::stage_bars(record, stage, now),
            false => span_bars(record, stage, now),
        };
        bars.extend(stage_bars.into_iter().map(|bar| (lane, bar)));
    }
    bars
}

/// A stage start a blackout held: until the blackout ended, or the stage started, or the run
/// ended (or now).
fn held_start_bar(record: &RunRecord, hold: &HeldStart, now: DateTime<Utc>) -> Bar {
    let entered = record
        .stages
        .iter()
        .find(|s| s.name == hold.stage)
        .map(|s| s.applied_at);
    let end = [Some(hold.until), entered, record.ended_at, Some(now)]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(hold.until);
    Bar {
        held_start: true,
        ..Bar::new(BarKind::Blackout, hold.since, end)
    }
}

/// The bar kind of an activity; `None` for a state that is no bar (done, skipped, restored).
fn kind_of(activity: &StageActivity) -> Option<BarKind> {
    Some(match activity {
        StageActivity::Provisioning { .. } => BarKind::Provisioning,
        StageActivity::WavePause { .. } => BarKind::WavePause,
        StageActivity::Soaking { .. } => BarKind::Soak,
        StageActivity::HealthChecks => BarKind::HealthChecks,
        StageActivity::AwaitingWindow { .. } => BarKind::Window,
        StageActivity::Analyzing { .. } => BarKind::Analysis,
        // Held like a manual gate until approved through git.
        StageActivity::AwaitingApproval | StageActivity::AnalysisInconclusive { .. } => {
            BarKind::Approval
        }
        StageActivity::Blackout { .. } => BarKind::Blackout,
        StageActivity::Paused => BarKind::Paused,
        StageActivity::Failed { .. } => BarKind::Failed,
        StageActivity::RollingBack { .. } => BarKind::Rollback,
        // A held start is shown by the stage ahead (status, the live view), not as a bar.
        StageActivity::Pending
        | StageActivity::AwaitingDependency { .. }
        | StageActivity::Completed
        | StageActivity::Skipped
        | StageActivity::Restored { .. } => return None,
    })
}

/// One bar per activity span: a span lasts until the next one starts, or the run ended (or now).
/// A failed stage stays failed until it is restored; its restore is a rollback bar.
fn span_bars(record: &RunRecord, stage: &StageRecord, now: DateTime<Utc>) -> Vec<Bar> {
    let open_until = record.ended_at.unwrap_or(now);
    // A stage failed and not restored stays failed until another run replaces the run.
    let failed_until = now.max(open_until);
    let spans = &stage.activities;
    let restored = spans.iter().find_map(|span| match span.activity {
        StageActivity::Restored { snapshot } => Some((span.since, snapshot)),
        _ => None,
    });
    let mut bars: Vec<Bar> = Vec::new();
    for (i, span) in spans.iter().enumerate() {
        let end = spans.get(i + 1).map_or(open_until, |next| next.since);
        if let StageActivity::Restored { snapshot } = span.activity {
            restore_bar(&mut bars, record, span, snapshot);
            continue;
        }
        let Some(kind) = kind_of(&span.activity) else {
            continue;
        };
        let mut bar = Bar::new(kind, span.since, end);
        bar.wave = span.activity.wave();
        match kind {
            BarKind::Failed => {
                bar.end = restored.map_or(failed_until, |(at, _)| at).max(span.since)
            }
            BarKind::Rollback => {
                let restoring = match span.activity {
                    StageActivity::RollingBack { snapshot } => snapshot,
                    _ => None,
                };
                bar.restored_to = restored.map_or(restoring, |(_, to)| to);
            }
            _ => {}
        }
        if continues_last_wave(bars.last(), &bar) {
            if let Some(last) = bars.last_mut() {
                last.end = bar.end;
            }
            continue;
        }
        bars.push(bar);
    }
    // A stage that failed and began rolling back in one step shows only the rollback's span.
    if let Some(failed_at) = stage.failed_at
        && !bars.iter().any(|b| b.kind == BarKind::Failed)
    {
        let end = restored.map_or(failed_until, |(at, _)| at);
        let at = bars
            .iter()
            .position(|b| b.kind == BarKind::Rollback)
            .unwrap_or(bars.len());
        bars.insert(at, Bar::new(BarKind::Failed, failed_at, end));
    }
    // A state left in the step it was entered (no delay, an approval already there) is no bar;
    // provisioning and a failure are always shown, however short.
    bars.retain(|bar| {
        bar.end > bar.start || matches!(bar.kind, BarKind::Provisioning | BarKind::Failed)
    });
    bars
}

/// Records from before the engine named the last wave: its provisioning was recorded without a
/// wave right after the wave's own (empty) span.
fn continues_last_wave(last: Option<&Bar>, bar: &Bar) -> bool {
    last.is_some_and(|last| {
        last.kind == BarKind::Provisioning
            && bar.kind == BarKind::Provisioning
            && last.wave.is_some()
            && bar.wave.is_none()
            && last.end == bar.start
    })
}

/// A restore ends the stage's rollback bar, or is one when no `RollingBack` span was recorded
/// (restored in the step the rollback began): from the run's failure.
fn restore_bar(bars: &mut Vec<Bar>, record: &RunRecord, span: &ActivitySpan, to: Option<u64>) {
    if let Some(rolling) = bars.iter_mut().rev().find(|b| b.kind == BarKind::Rollback) {
        rolling.restored_to = to;
        return;
    }
    let failed_at = record
        .stages
        .iter()
        .find_map(|s| s.failed_at)
        .unwrap_or(span.since);
    let mut bar = Bar::new(BarKind::Rollback, failed_at.min(span.since), span.since);
    bar.restored_to = to;
    bars.push(bar);
}

/// Stage names in pipeline order: the newest run's order, with stages only older runs reached
/// put after the stage they followed there; a stage only a held start names goes last.
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
    for hold in runs.iter().flat_map(|r| &r.held_starts) {
        if !lanes.contains(&hold.stage) {
            lanes.push(hold.stage.clone());
        }
    }
    lanes
}

/// Whether the run is marked as a rollback: it brings back an earlier snapshot, or it failed and
/// was rolled back.
pub fn is_rollback(run: &RunRecord) -> bool {
    run.rollback_of.is_some() || run.outcome == RunOutcome::RolledBack
}
