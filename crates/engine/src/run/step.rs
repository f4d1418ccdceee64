//! `step`: one pure evaluation of a promotion's pipeline.
//!
//! The controller executes the returned actions in order and persists the returned status only if
//! all succeed. So every decision is re-derived from (desired, observed, status, now): state that
//! records an apply is only ever persisted together with that apply (docs/architecture.md#the-engine-contract), and running
//! `step` again once the actions took effect yields no actions and the same status.

use tollgate_model::hash::HASH_SCHEME;
use tollgate_model::policy::OnNewSnapshot;
use tollgate_model::snapshot::Snapshot;

use crate::effects::{Effects, Outgoing};
use crate::failure::lineage::Lineage;
use crate::gates::new_snapshot::{self, Choice};
use crate::gates::start_gate::{self, NewRunsHeld};
use crate::input::{Desired, StepInput};
use crate::messages::capitalized;
use crate::output::{EngineEvent, EventReason, StepOutput};
use crate::run::never_valid;
use crate::run::removal;
use crate::run::{Run, judge};
use crate::status::conditions;
use crate::status::{Phase, PromotionStatus, runs_content_of};

/// Evaluate the promotion once. See the module documentation for the contract.
pub fn step(input: &StepInput<'_>) -> StepOutput {
    let mut output = match input.desired {
        Desired::Removed { promotion, last } => removal::step_removed(input, promotion, last),
        Desired::NeverValid { error, .. } => never_valid::step_never_valid(input, error),
        Desired::Snapshot { current, invalid } => run_snapshot(input, current, invalid),
        Desired::RemovalHeld { reason, .. } => removal::step_held(input, reason),
    };
    crate::run::analysis_end::cancel_ended(&mut output.status);
    conditions::set_watch_health(&mut output.status, input.watch_problem, input.now);
    if conditions::set_commit_verified(&mut output.status, input.unverified, input.now)
        && let Some(refusal) = input.unverified
    {
        output.events.push(EngineEvent::warning(
            EventReason::CommitNotVerified,
            refusal.to_string(),
        ));
    }
    tell_rewind(input, &mut output);
    crate::run::run_recording::record(input.status, &mut output.status, input.now, input.history);
    crate::run::phase_since::keep(input.status, &mut output.status, input.now);
    crate::run::transition_events::economize(input.status, &mut output);
    output
}

/// A rewritten branch (issue #44): the `BranchRewound` condition, and a Warning event when it
/// is new, saying what the promotion does about it (`onRewind`).
fn tell_rewind(input: &StepInput<'_>, output: &mut StepOutput) {
    let hold = input
        .policy
        .is_some_and(|p| p.spec.on_rewind == tollgate_model::policy::OnRewind::Hold);
    let note = input.rewound.map(|rewound| match hold {
        true => format!("{rewound}; nothing new starts until the branch moves on from its rewritten tip (onRewind: Hold)"),
        false => format!("{rewound}; rolling out what the branch now says (onRewind: Follow)"),
    });
    if conditions::set_branch_rewound(&mut output.status, note.as_deref(), input.now)
        && let Some(note) = note
    {
        output
            .events
            .push(EngineEvent::warning(EventReason::BranchRewound, note));
    }
}

/// Runs the snapshot `onNewSnapshot` chooses. When that run finishes in this step and a newer
/// snapshot waits, the next run starts in the same step (after the first one's actions, if any,
/// took effect: then the engine asks to be woken at once).
fn run_snapshot(input: &StepInput<'_>, newest: &Snapshot, invalid: Option<&str>) -> StepOutput {
    let newest_lineage = judge(input.status, input.history, newest);
    let choice = new_snapshot::choose(input, newest, newest_lineage.rollback_to().is_some());
    let mut output = match choice.run {
        Some(run) => run_chosen(input, newest, run, &choice, invalid),
        None => held_without_run(input, newest, invalid),
    };
    tell_conditions(input, newest, &newest_lineage, &mut output);
    output
}

/// The conditions beside the phase: the governing policy, and recommitted rejected content;
/// each told once by a Warning event when it appears or changes.
fn tell_conditions(
    input: &StepInput<'_>,
    newest: &Snapshot,
    newest_lineage: &Lineage,
    output: &mut StepOutput,
) {
    let problem = input.policy_problem;
    let unapproved = input.policy_unapproved;
    if conditions::set_policy_valid(&mut output.status, problem, unapproved, input.now)
        && let Some(problem) = problem
    {
        let reason = match unapproved {
            true => EventReason::PolicyChangeUnapproved,
            false => EventReason::PolicyInvalid,
        };
        output
            .events
            .push(EngineEvent::warning(reason, problem.to_string()));
    }
    if unapproved
        && let Some(problem) = problem
        && output.status.queued_snapshot.is_none()
    {
        held_for_admins(&mut output.status, problem);
    }
    let status = &output.status;
    let halted = status.failure.is_some()
        && runs_content_of(
            status.profile_spec_hash.as_deref(),
            status.stages_hash.as_deref(),
            newest,
        );
    let note = newest_lineage.rejected_note(newest, halted);
    if conditions::set_rejected_content(&mut output.status, note.as_deref(), input.now)
        && let Some(note) = &note
    {
        output.events.push(EngineEvent::warning(
            EventReason::RejectedContentRecommitted,
            capitalized(note),
        ));
    }
    if let Some(note) = note
        && output.status.snapshot_index != Some(newest.index)
    {
        append_message(&mut output.status, &note);
    }
}

/// Nothing runs and nothing may start (a policy problem before any run): say why.
fn held_without_run(input: &StepInput<'_>, newest: &Snapshot, invalid: Option<&str>) -> StepOutput {
    let mut status = input.status.cloned().unwrap_or_else(PromotionStatus::empty);
    status.hash_scheme = HASH_SCHEME;
    status.invalid_spec = invalid.map(str::to_string);
    status.message = None;
    let output = Effects::default().into_output(status, Outgoing::EventsOnly);
    match start_gate::new_runs_held(input) {
        // No run to finish: the newest is the only one that can start.
        Some(hold) => held_by_policy(output, newest, hold, OnNewSnapshot::Restart),
        None => output,
    }
}

/// Runs `run` (the snapshot [`new_snapshot::choose`] picked); when that run finishes in this step
/// and a newer snapshot waits, the next run starts in the same step.
fn run_chosen<'a>(
    input: &StepInput<'a>,
    newest: &'a Snapshot,
    run: &'a Snapshot,
    choice: &Choice<'a>,
    invalid: Option<&str>,
) -> StepOutput {
    // An older run that goes on reads the file's current metadata: its pause annotation, and the
    // approval annotations people write at HEAD for it.
    let running = choice.waiting.map(|_| run.with_metadata_of(newest));
    let run = running.as_ref().unwrap_or(run);
    let mut first = Run::new(input, run, choice, invalid).run();
    let Some(waiting) = choice.waiting else {
        return first;
    };
    if let Some(hold) = start_gate::new_runs_held(input) {
        return held_by_policy(first, waiting, hold, choice.policy);
    }
    if !new_snapshot::finished(&first.status, run) {
        return queued(first, waiting, choice.policy, input.history);
    }
    if !first.actions.is_empty() {
        first.wake_at = Some(input.now);
        first.status.next_wake_up = first.wake_at;
        return queued(first, waiting, choice.policy, input.history);
    }
    // The finished run's record is closed before the next run starts (the history is carried).
    crate::run::run_recording::record(input.status, &mut first.status, input.now, input.history);
    let then = StepInput {
        status: Some(&first.status),
        ..*input
    };
    let next = new_snapshot::choose(&then, newest, judge_rollback(&then, newest));
    let Some(next_run) = next.run.filter(|next| next.index != run.index) else {
        return queued(first, waiting, choice.policy, input.history);
    };
    let mut second = Run::new(&then, next_run, &next, invalid).run();
    let mut events = first.events;
    events.append(&mut second.events);
    second.events = events;
    match next.waiting {
        Some(waiting) => queued(second, waiting, next.policy, input.history),
        None => second,
    }
}

fn judge_rollback(input: &StepInput<'_>, snapshot: &Snapshot) -> bool {
    judge(input.status, input.history, snapshot)
        .rollback_to()
        .is_some()
}

/// Says in status that `waiting` waits for the running run.
fn queued(
    mut output: StepOutput,
    waiting: &Snapshot,
    policy: OnNewSnapshot,
    history: &[Snapshot],
) -> StepOutput {
    output.status.queued_snapshot = Some(waiting.index);
    output.status.queued_in_order = policy == OnNewSnapshot::Queue;
    let running = output.status.snapshot_index.unwrap_or(0);
    // Queue runs every one of them in turn; FinishCurrent only the newest.
    let mut waits: Vec<u64> = match policy {
        OnNewSnapshot::Queue => history
            .iter()
            .map(|s| s.index)
            .filter(|&i| i > running && i <= waiting.index)
            .collect(),
        _ => Vec::new(),
    };
    if waits.is_empty() {
        waits.push(waiting.index);
    }
    let named = waits
        .iter()
        .map(|i| format!("#{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let (noun, verb) = match waits.len() {
        1 => ("snapshot", "waits"),
        _ => ("snapshots", "wait"),
    };
    let note = format!(
        "{noun} {named} {verb} for this run to finish (onNewSnapshot: {})",
        policy.as_str()
    );
    append_message(&mut output.status, &note);
    output
}

/// Says in status that `waiting` is held by a policy problem: phase `Held`, unless the run that
/// goes on failed or is paused (that phase says more), and the problem first in the message.
/// `waiting` waits: the policy cannot be resolved, a change waits for an admin, or the branch
/// was rewritten under `onRewind: Hold`.
fn held_by_policy(
    mut output: StepOutput,
    waiting: &Snapshot,
    hold: NewRunsHeld<'_>,
    policy: OnNewSnapshot,
) -> StepOutput {
    let status = &mut output.status;
    status.queued_snapshot = Some(waiting.index);
    status.queued_in_order = policy == OnNewSnapshot::Queue;
    // A finished run (rolled back, halted) is no reason to hide the hold: the newest snapshot
    // waits, and `Held` says so (issue #45).
    let quiet = matches!(
        status.phase,
        Phase::Progressing
            | Phase::Waiting
            | Phase::Completed
            | Phase::Invalid
            | Phase::RolledBack
            | Phase::Failed
    );
    if quiet {
        status.phase = Phase::Held;
    }
    let held = format!(
        "snapshot #{} is held until {}: {}",
        waiting.index,
        hold.until(),
        hold.why
    );
    prepend_held(status, held);
    output
}

/// A change no admin approved yet holds the promotion even with no newer snapshot waiting: the
/// run in progress goes on under the version in force, which the message says.
fn held_for_admins(status: &mut PromotionStatus, problem: &str) {
    if matches!(
        status.phase,
        Phase::Progressing | Phase::Waiting | Phase::Completed
    ) {
        status.phase = Phase::Held;
    }
    prepend_held(status, format!("held: {problem}"));
}

/// `held` first in the message; what the run in progress does goes on after it.
fn prepend_held(status: &mut PromotionStatus, held: String) {
    status.message = Some(match status.message.take() {
        Some(running) => format!("{held}; meanwhile {running}"),
        None => held,
    });
}

fn append_message(status: &mut PromotionStatus, note: &str) {
    status.message = Some(match status.message.take() {
        Some(message) => format!("{message}; {note}"),
        None => note.to_string(),
    });
}
