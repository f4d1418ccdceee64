//! The Kubernetes Events that announce a stage transition (a stage started, a wave started or
//! provisioned, a stage provisioned or skipped, the run failed, a stage restored, the rollback
//! done), derived in this one place from `transitions(before, after)` over the status a run's
//! step persists, their notes built from the typed status after it. The rules record the
//! transition in status and tell nothing themselves (`tests/one_transition_teller.rs` checks that
//! no other file makes such an event); what is no stage transition (a blackout, a pause, an approval
//! used, a policy problem, a retry, …) is told by the rule that decides it.
//!
//! Derived, so announced exactly when the status that carries the transition is written: a step
//! whose write waits (`write_hold`) or fails announces nothing, and the next step derives the same
//! transition again from the same persisted status. A restart that lost the status tells the
//! run's transitions again, as notices do (a notice's stable id makes it the same notice; an
//! Event is a new one, as it was before events were derived); a superseded run tells nothing more.
//!
//! Also here, for the same economy (issue #20): the stage-progress events of an automatic handoff
//! inside a Progressing run are dropped, and a stage provisioned with the next started in the same
//! step is one event.

use crate::messages;
use crate::output::{EngineEvent, EventReason, StepOutput};
use crate::stage::lowercase_first;
use crate::status::activity::WaveOf;
use crate::status::transitions::{self, Transition, TransitionKind, transitions};
use crate::status::{PromotionStatus, RunFailure, StageStatus};

/// The events announcing the transitions from `before` (the status the run's step read; `None`:
/// nothing persisted) to `after` (the status it persists), in the order they happened.
pub(crate) fn announce(
    before: Option<&PromotionStatus>,
    after: &PromotionStatus,
) -> Vec<EngineEvent> {
    let mut events = Vec::new();
    for transition in transitions(before, after) {
        let stage = after.stage(&transition.stage);
        match (&transition.kind, stage) {
            (TransitionKind::Started, Some(stage)) => {
                events.push(started(before, after, stage));
            }
            (TransitionKind::WaveStarted { wave }, Some(stage)) => {
                events.extend(wave_started(stage, *wave));
            }
            (TransitionKind::WaveCompleted { wave }, _) => {
                events.extend(wave_completed(&transition.stage, *wave));
            }
            (TransitionKind::Provisioned, Some(stage)) => provisioned(stage, &mut events),
            (TransitionKind::Failed, _) => {
                if let Some(failure) = after.failure.as_deref() {
                    failed(failure, &mut events);
                }
            }
            (TransitionKind::Restored { to }, _) => {
                events.push(restored(&transition, *to));
                if let Some(done) = rolled_back(after, &transition) {
                    events.push(done);
                }
            }
            // No Event of their own: a gate's wait is in status (and the `ApprovalNeeded`
            // notice), a stage completed hands over (`Provisioning` of the next, or the phase), a
            // restore's start follows `RollingBack` or the previous restore.
            (
                TransitionKind::AwaitingApproval
                | TransitionKind::Completed
                | TransitionKind::RestoreStarted { .. },
                _,
            ) => {}
            // `transitions` names only stages of `after`.
            (
                TransitionKind::Started
                | TransitionKind::WaveStarted { .. }
                | TransitionKind::Provisioned,
                None,
            ) => {}
        }
    }
    events
}

/// `Provisioning`: the run entered the stage. The first stage of a run that replaced another
/// says it restarted.
fn started(
    before: Option<&PromotionStatus>,
    after: &PromotionStatus,
    stage: &StageStatus,
) -> EngineEvent {
    let first = after.stages.first().is_some_and(|s| s.name == stage.name);
    let replaced = before.is_some_and(|b| {
        b.snapshot_index.is_some() && transitions::run_of(b) != transitions::run_of(after)
    });
    let note = match first && replaced {
        true => messages::provisioning_stage_restart(&stage.name),
        false => messages::provisioning_stage(&stage.name),
    };
    EngineEvent::normal(EventReason::Provisioning, note)
}

/// `WaveStarted`, naming the first five clusters of the wave. The first wave starts with its
/// stage, which `Provisioning` tells.
fn wave_started(stage: &StageStatus, wave: WaveOf) -> Option<EngineEvent> {
    if wave.wave <= 1 {
        return None;
    }
    let index = usize::try_from(wave.wave - 1).unwrap_or(usize::MAX);
    let started = stage
        .waves
        .as_deref()
        .and_then(|w| w.clusters.get(index))
        .map_or(&[][..], Vec::as_slice);
    let shown = started
        .iter()
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = match started.len().saturating_sub(5) {
        0 => String::new(),
        more => format!(" and {more} more"),
    };
    Some(EngineEvent::normal(
        EventReason::WaveStarted,
        format!(
            "Stage {}: wave {}/{} started: {shown}{more}",
            stage.name, wave.wave, wave.of
        ),
    ))
}

/// `WaveCompleted`. The last wave is provisioned with its stage, which `Provisioned` tells.
fn wave_completed(stage: &str, wave: WaveOf) -> Option<EngineEvent> {
    (wave.wave < wave.of).then(|| {
        EngineEvent::normal(
            EventReason::WaveCompleted,
            format!("Stage {stage}: wave {}/{} provisioned", wave.wave, wave.of),
        )
    })
}

/// `Provisioned`, after a Warning `StageSkipped` when no cluster matched.
fn provisioned(stage: &StageStatus, events: &mut Vec<EngineEvent>) {
    if stage.skipped {
        events.push(EngineEvent::warning(
            EventReason::StageSkipped,
            messages::stage_skipped(&stage.name),
        ));
    }
    events.push(EngineEvent::normal(
        EventReason::Provisioned,
        messages::stage_provisioned(&stage.name),
    ));
}

/// The run failed: its budget exceeded, the stage failed, and (`onFailure: Rollback`) the
/// rollback begins.
fn failed(failure: &RunFailure, events: &mut Vec<EngineEvent>) {
    let (stage, index) = (&failure.stage, failure.snapshot_index);
    events.push(EngineEvent::warning(
        EventReason::BudgetExceeded,
        format!("Stage {stage}: {}", failure.reason),
    ));
    events.push(EngineEvent::warning(
        EventReason::StageFailed,
        format!(
            "Stage {stage} failed with snapshot #{index}; onFailure: {}",
            failure.on_failure.as_str()
        ),
    ));
    if failure.on_failure == tollgate_model::policy::OnFailure::Rollback {
        events.push(EngineEvent::normal(
            EventReason::RollingBack,
            format!("Rolling back snapshot #{index}, stage {stage} first"),
        ));
    }
}

/// `StageRestored`: a failure rollback restored the stage.
fn restored(transition: &Transition, to: Option<u64>) -> EngineEvent {
    let stage = &transition.stage;
    EngineEvent::normal(
        EventReason::StageRestored,
        match to {
            Some(index) => format!("Stage {stage} restored to snapshot #{index}"),
            None => format!("Stage {stage} withdrawn (it had no profile before)"),
        },
    )
}

/// `RolledBack`, when `restored` is the rollback's last restore.
fn rolled_back(after: &PromotionStatus, restored: &Transition) -> Option<EngineEvent> {
    let failure = after.failure.as_deref()?;
    let last = failure.rollback.last()?;
    if last.name != restored.stage || !failure.rollback_done() {
        return None;
    }
    Some(EngineEvent::warning(
        EventReason::RolledBack,
        failure.rolled_back_words(),
    ))
}

/// The step's stage-progress events, as few as tell it: see the module documentation.
pub(crate) fn economize(before: Option<&PromotionStatus>, output: &mut StepOutput) {
    coalesce_handoffs(&mut output.events);
    drop_unphased_stage_events(before, output);
}

/// Stage-progress events (Provisioning, Provisioned) only when the promotion's phase or run
/// changed: an automatic handoff inside a Progressing run is in status (and told to
/// notification endpoints), not worth an Event write each (API-server economy, issue #20).
fn drop_unphased_stage_events(before: Option<&PromotionStatus>, output: &mut StepOutput) {
    let Some(before) = before else {
        return;
    };
    let after = &output.status;
    if before.phase != after.phase || before.snapshot_index != after.snapshot_index {
        return;
    }
    output
        .events
        .retain(|e| e.reason != EventReason::Provisioning && e.reason != EventReason::Provisioned);
}

/// A stage provisioned and the next one started in the same step is one transition: one event
/// ("Stage dev provisioned; provisioning stage staging"), not two (API-server economy).
fn coalesce_handoffs(events: &mut Vec<EngineEvent>) {
    while let Some(done) = events
        .iter()
        .position(|e| e.reason == EventReason::Provisioned)
    {
        let Some(next) = events
            .iter()
            .skip(done + 1)
            .position(|e| e.reason == EventReason::Provisioning)
            .map(|offset| done + 1 + offset)
        else {
            return;
        };
        let provisioned = events.remove(done);
        let started = &mut events[next - 1];
        started.note = format!("{}; {}", provisioned.note, lowercase_first(&started.note));
    }
}
