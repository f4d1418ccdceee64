//! What happened to each stage between two persisted statuses: `transitions(before, after)`, the
//! one place a transition (a stage started, provisioned, a wave, waiting for approval, completed,
//! failed, restored by a rollback) is detected. Notices, the metrics (fed by the controller) and
//! the Kubernetes Events that announce a transition (`run/transition_events`) read it; none
//! compares two statuses for a stage transition itself. (What is not a stage
//! transition stays where it is told: a blackout's or a rewind's notice, the promotion completed
//! or rolled back, analysis verdicts, clusters newly timed out.)
//!
//! Typed fields only, never messages. A transition belongs to a run (its snapshot and the start
//! of its first stage): `before` counts only when it describes the same run, so a restart that
//! lost the status tells every transition of the run again (notices have stable ids for that),
//! and a run superseded mid-stage tells nothing more about the old run. Tested in
//! `tests/transitions.rs`.

use chrono::{DateTime, Utc};

use crate::status::activity::WaveOf;
use crate::status::{PromotionStatus, RestoredStage, StageStatus, WaveProgress};

/// What happened to a stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransitionKind {
    /// The run entered the stage: its profile applied with the run's snapshot.
    Started,
    /// A wave of a waved stage started (its clusters targeted).
    WaveStarted { wave: WaveOf },
    /// Every cluster of a wave provisioned (the last wave's: when the stage provisioned).
    WaveCompleted { wave: WaveOf },
    /// Every cluster of the stage provisioned: its soak starts.
    Provisioned,
    /// Its manual gate began waiting for an approval.
    AwaitingApproval,
    /// Its trigger held (or no cluster matched): the pipeline moved on, or finished.
    Completed,
    /// The stage failed under the run's policy (again, after a retry cleared a failure).
    Failed,
    /// A failure rollback applied the stage's restore: it is being rolled back now.
    RestoreStarted { to: Option<u64> },
    /// A failure rollback restored the stage to `to` (`None`: its profiles withdrawn).
    Restored { to: Option<u64> },
}

/// One transition of one stage of the run of `snapshot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub stage: String,
    pub kind: TransitionKind,
    /// The run's snapshot.
    pub snapshot: u64,
    /// When it happened (from status).
    pub at: DateTime<Utc>,
}

/// The run a status describes: its snapshot and when its first stage started.
pub(crate) fn run_of(status: &PromotionStatus) -> Option<(u64, DateTime<Utc>)> {
    let first = status.stages.first()?;
    Some((status.snapshot_index?, first.last_update_reconciled_time?))
}

/// The transitions from `before` (`None`: nothing persisted) to `after`, per stage in the order
/// the run started them, each stage's in the order they happened; then the failure and the
/// restores of a rollback, in restore order.
pub fn transitions(before: Option<&PromotionStatus>, after: &PromotionStatus) -> Vec<Transition> {
    let Some(run) = run_of(after) else {
        return Vec::new();
    };
    let before = before.filter(|b| run_of(b) == Some(run));
    let mut out = Vec::new();
    for stage in &after.stages {
        let old = before.and_then(|b| b.stage(&stage.name));
        let mut push = |kind: TransitionKind, at: DateTime<Utc>| {
            out.push(Transition {
                stage: stage.name.clone(),
                kind,
                snapshot: run.0,
                at,
            });
        };
        stage_transitions(stage, old, &mut push);
    }
    failure_transitions(before, after, run.0, &mut out);
    out
}

/// A stage's own transitions: started, its waves, provisioned, approval, completed.
fn stage_transitions(
    stage: &StageStatus,
    old: Option<&StageStatus>,
    push: &mut impl FnMut(TransitionKind, DateTime<Utc>),
) {
    let newly = |now: Option<DateTime<Utc>>, then: fn(&StageStatus) -> Option<DateTime<Utc>>| {
        now.filter(|_| old.and_then(then).is_none())
    };
    if old.is_none()
        && let Some(at) = stage.last_update_reconciled_time
    {
        push(TransitionKind::Started, at);
    }
    if let Some(waves) = stage.waves.as_deref() {
        wave_transitions(stage, waves, old, push);
    }
    if let Some(at) = newly(stage.provisioned_at, |o| o.provisioned_at) {
        push(TransitionKind::Provisioned, at);
    }
    if let Some(at) = newly(stage.awaiting_approval_since, |o| o.awaiting_approval_since) {
        push(TransitionKind::AwaitingApproval, at);
    }
    if let Some(at) = newly(stage.succeeded_at, |o| o.succeeded_at) {
        push(TransitionKind::Completed, at);
    }
}

/// A wave started; a wave's clusters all provisioned (the previous wave's when the next one
/// started in the same step, without a pause; the last wave's when its stage provisioned).
fn wave_transitions(
    stage: &StageStatus,
    waves: &WaveProgress,
    old: Option<&StageStatus>,
    push: &mut impl FnMut(TransitionKind, DateTime<Utc>),
) {
    let of = waves.total();
    let wave = |wave: u32| WaveOf { wave, of };
    let reached = waves.reached;
    let old_waves = old.and_then(|o| o.waves.as_deref());
    let old_reached = old_waves.map_or(0, |o| o.reached);
    if reached > old_reached {
        if old_waves.is_some_and(|o| o.wave_done_at.is_none()) {
            let done = wave(old_reached);
            push(
                TransitionKind::WaveCompleted { wave: done },
                waves.wave_started_at,
            );
        }
        let started = wave(reached);
        push(
            TransitionKind::WaveStarted { wave: started },
            waves.wave_started_at,
        );
    }
    let newly_done = old_waves.is_none_or(|o| o.reached != reached || o.wave_done_at.is_none());
    if let Some(at) = waves.wave_done_at.filter(|_| newly_done) {
        push(
            TransitionKind::WaveCompleted {
                wave: wave(reached),
            },
            at,
        );
    }
    if reached == of
        && let Some(at) = stage.provisioned_at
        && old.is_none_or(|o| o.provisioned_at.is_none())
    {
        push(
            TransitionKind::WaveCompleted {
                wave: wave(reached),
            },
            at,
        );
    }
}

/// The run's failure, newly (or again, after a retry cleared one), and each restore of its
/// rollback as it starts and ends.
fn failure_transitions(
    before: Option<&PromotionStatus>,
    after: &PromotionStatus,
    snapshot: u64,
    out: &mut Vec<Transition>,
) {
    let Some(failure) = after.failure.as_deref() else {
        return;
    };
    let old = before.and_then(|b| b.failure.as_deref());
    let at = |stage: &str, kind: TransitionKind, at: DateTime<Utc>| Transition {
        stage: stage.to_string(),
        kind,
        snapshot,
        at,
    };
    if old.is_none_or(|o| o.at != failure.at || o.stage != failure.stage) {
        out.push(at(&failure.stage, TransitionKind::Failed, failure.at));
    }
    let old_entry = |entry: &RestoredStage| -> Option<RestoredStage> {
        old.filter(|o| o.at == failure.at)
            .and_then(|o| o.rollback.iter().find(|r| r.name == entry.name))
            .cloned()
    };
    for entry in &failure.rollback {
        let was = old_entry(entry);
        let to = entry.to_snapshot;
        if let Some(applied) = entry.applied_at
            && was.as_ref().is_none_or(|w| w.applied_at.is_none())
        {
            out.push(at(
                &entry.name,
                TransitionKind::RestoreStarted { to },
                applied,
            ));
        }
        if let Some(restored) = entry.restored_at
            && was.as_ref().is_none_or(|w| w.restored_at.is_none())
        {
            out.push(at(&entry.name, TransitionKind::Restored { to }, restored));
        }
    }
}
