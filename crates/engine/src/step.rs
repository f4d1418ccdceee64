//! `step`: one pure evaluation of a promotion's pipeline.
//!
//! The controller executes the returned actions in order and persists the returned status only if
//! all succeed. So every decision is re-derived from (desired, observed, status, now): state that
//! records an apply is only ever persisted together with that apply (docs/architecture.md#the-engine-contract), and running
//! `step` again once the actions took effect yields no actions and the same status.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_model::blackout::{self, ActiveBlackout};
use tollgate_model::hash::HASH_SCHEME;
use tollgate_model::model::{ClusterPromotion, Stage};
use tollgate_model::policy::{OnFailure, OnNewSnapshot};
use tollgate_model::snapshot::{PAUSED_ANNOTATION, Snapshot};
use tollgate_render::{
    preverification_profile_name, snapshot_digest, spec_hash, stage_profile_name,
};

use crate::activity::{self, StageActivity, WaveOf};
use crate::conditions;
use crate::depends_on;
use crate::drift;
use crate::effects::Effects;
use crate::features::fresh_after_apply;
use crate::input::{Desired, StartHold, StepInput};
use crate::lineage::{self, Lineage, Verdict};
use crate::messages;
use crate::never_valid;
use crate::new_snapshot::{self, Choice};
use crate::observed::{Observed, ObservedProfile};
use crate::output::{Action, EngineEvent, EventReason, StepOutput};
use crate::removal;
use crate::rollback;
use crate::stage::{Exceeded, Hold, StageProfiles, StageRun, lowercase_first};
use crate::status::{
    HeldStart, Phase, PolicyRef, PromotionStatus, RunFailure, StageAhead, StageStatus,
    runs_content_of,
};
use crate::waves;

/// Evaluate the promotion once. See the module documentation for the contract.
pub fn step(input: &StepInput<'_>) -> StepOutput {
    let mut output = match input.desired {
        Desired::Removed { promotion, last } => removal::step_removed(input, promotion, last),
        Desired::NeverValid { error, .. } => never_valid::step_never_valid(input, error),
        Desired::Snapshot { current, invalid } => run_snapshot(input, current, invalid),
        Desired::RemovalHeld { reason, .. } => removal::step_held(input, reason),
    };
    crate::analysis_end::cancel_ended(&mut output.status);
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
    crate::run_recording::record(input.status, &mut output.status, input.now);
    coalesce_handoffs(&mut output.events);
    drop_unphased_stage_events(input.status, &mut output);
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

/// [`lineage::judge`], skipped for content git has not seen before (most steps).
fn judge(status: Option<&PromotionStatus>, history: &[Snapshot], snapshot: &Snapshot) -> Lineage {
    match snapshot.same_content_as {
        Some(_) => lineage::judge(status, history, snapshot),
        None => Lineage::Forward,
    }
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
    status.next_wake_up = None;
    status.message = None;
    let output = StepOutput {
        actions: Vec::new(),
        status,
        events: Vec::new(),
        wake_at: None,
        measurements: Vec::new(),
    };
    match input.start_hold() {
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
    if let Some(hold) = input.start_hold() {
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
    crate::run_recording::record(input.status, &mut first.status, input.now);
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
    hold: StartHold<'_>,
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

/// How a stage is entered: as the first stage of a new run (which may replace an earlier run),
/// or because the pipeline advanced to it.
#[derive(Clone, Copy)]
enum StageEntry {
    NewRun { restart: bool },
    Advance,
}

/// Whether the pipeline may go on after a stage was looked at.
enum Flow {
    /// The current stage moved on; look at the new current stage in the same step.
    Advanced,
    /// Waiting for something (Sveltos, time, a person) or finished.
    Hold,
}

struct Run<'i, 'a> {
    input: &'i StepInput<'a>,
    snapshot: &'a Snapshot,
    /// How the snapshot relates to content that ran here (used when its run starts).
    lineage: Lineage,
    /// The newest snapshot in git: its annotations (pause) hold whichever snapshot runs.
    newest: &'a Snapshot,
    on_new_snapshot: OnNewSnapshot,
    promotion: &'a ClusterPromotion,
    status: PromotionStatus,
    effects: Effects,
    /// A blackout holding the next stage's start in this step (the stage ahead shows it).
    blackout_hold: Option<ActiveBlackout>,
    /// The stage whose start the promotions this one depends on hold, and what it waits for.
    dependency_hold: Option<(String, String)>,
}

/// What holds a stage start among the promotions this one depends on.
enum DependencyHold {
    /// Their stages of that name, `promotion/stage`, that did not complete their current run.
    Waits(Vec<String>),
    /// The `tollgate.dev/depends-on` annotation is refused (a cycle, an unknown name): why.
    Refused(String),
}

impl<'i, 'a> Run<'i, 'a> {
    fn new(
        input: &'i StepInput<'a>,
        snapshot: &'a Snapshot,
        choice: &Choice<'a>,
        invalid: Option<&str>,
    ) -> Self {
        let mut status = input.status.cloned().unwrap_or_else(PromotionStatus::empty);
        status.hash_scheme = HASH_SCHEME;
        crate::pipeline::name_unnamed(&mut status);
        status.queued_snapshot = None;
        status.queued_in_order = false;
        status.blackout_until = None;
        status.blackout_holds = None;
        let mut effects = Effects::default();
        // Once per distinct error, as for a never-valid promotion.
        if let Some(error) = invalid
            && status.invalid_spec.as_deref() != Some(error)
        {
            effects.events.push(EngineEvent::warning(
                never_valid::INVALID_SPEC,
                error.to_string(),
            ));
        }
        status.invalid_spec = invalid.map(str::to_string);
        let starts = !runs_content_of(
            status.profile_spec_hash.as_deref(),
            status.stages_hash.as_deref(),
            snapshot,
        );
        let lineage = match starts {
            true => judge(input.status, input.history, snapshot),
            false => Lineage::Forward,
        };
        Run {
            input,
            snapshot,
            lineage,
            newest: choice.waiting.unwrap_or(snapshot),
            on_new_snapshot: choice.policy,
            promotion: &snapshot.promotion,
            status,
            effects,
            blackout_hold: None,
            dependency_hold: None,
        }
    }

    fn name(&self) -> &'a str {
        self.promotion.name()
    }

    fn observed(&self) -> &'a Observed {
        self.input.observed
    }

    /// `profile` as observed, when this promotion owns it and it is not being deleted.
    fn own_live_profile(&self, profile: &str) -> Option<&'a ObservedProfile> {
        self.observed()
            .profiles
            .get(profile)
            .filter(|p| p.is_owned_by(self.name()) && !p.deleting)
    }

    fn now(&self) -> DateTime<Utc> {
        self.input.now
    }

    /// The run restores known-good content (see `lineage`): it passes blackouts and queues.
    fn is_rollback(&self) -> bool {
        match self.same_run() {
            true => self.status.rollback_of.is_some(),
            false => self.lineage.rollback_to().is_some(),
        }
    }

    /// The status describes a run of the current snapshot.
    fn same_run(&self) -> bool {
        runs_content_of(
            self.status.profile_spec_hash.as_deref(),
            self.status.stages_hash.as_deref(),
            self.snapshot,
        )
    }

    /// A profile of this name exists and is not tollgate's: never apply over it (upstream Q12).
    fn foreign(&self, profile: &str) -> bool {
        self.observed()
            .profiles
            .get(profile)
            .is_some_and(|p| !p.is_owned_by(self.name()))
    }

    fn run(mut self) -> StepOutput {
        let paused = self
            .newest
            .promotion
            .metadata
            .annotations
            .get(PAUSED_ANNOTATION)
            .is_some_and(|v| v == "true");
        if paused {
            return self.hold_paused();
        }
        if self.status.paused_since.take().is_some() {
            self.effects.events.push(EngineEvent::normal(
                EventReason::Resumed,
                "Pipeline resumed: tollgate.dev/paused removed".to_string(),
            ));
        }

        // A retry refused below names the phase the run was in, not the one set while looking.
        let previous = std::mem::replace(&mut self.status.phase, Phase::Progressing);
        let run_phase = match self.same_run() {
            true => previous,
            false => Phase::Progressing,
        };
        if !self.same_run() {
            if let Some(blackout) = self.blackout() {
                let waits = format!("snapshot #{} waits to start", self.snapshot.index);
                let first = self.promotion.spec.stages.first().map(|s| s.name.clone());
                self.hold_for_blackout(&blackout, first, waits);
                return self.held_output_waking();
            }
            let first = self.promotion.spec.stages.first().map(|s| s.name.clone());
            if let Some(first) = first
                && let Some(held) = self.dependency_hold(&first)
            {
                let waits = format!("snapshot #{} waits to start", self.snapshot.index);
                self.hold_for_dependency(first, held, &waits);
                return self.held_output();
            }
            if let Err(blocked) = self.start_run() {
                return self.blocked(blocked);
            }
        }
        self.status.policy = self.input.policy.map(|p| PolicyRef {
            name: p.name().to_string(),
            version: p.version(),
        });
        let (snapshot, history, observed, now) = (
            self.snapshot,
            self.input.history,
            self.observed(),
            self.now(),
        );
        crate::retry::act(
            &mut self.status,
            (snapshot, &run_phase),
            history,
            observed,
            now,
            &mut self.effects,
        );
        while self.status.failure.is_none()
            && let Flow::Advanced = self.progress_current_stage()
        {
            let stages = &self.promotion.spec.stages;
            let next = self
                .status
                .current_stage_name
                .as_ref()
                .and_then(|c| stages.iter().position(|s| &s.name == c))
                .and_then(|i| stages.get(i + 1));
            match next {
                Some(next) => {
                    if let Some(blackout) = self.blackout() {
                        let waits = format!("stage {} waits to start", next.name);
                        self.hold_for_blackout(&blackout, Some(next.name.clone()), waits);
                        break;
                    }
                    if let Some(held) = self.dependency_hold(&next.name) {
                        self.hold_for_dependency(next.name.clone(), held, "");
                        break;
                    }
                    self.enter_stage(next, StageEntry::Advance)
                }
                None => {
                    self.status.phase = Phase::Completed;
                    self.status.message = Some(completed_message(self.snapshot, stages.len()));
                    break;
                }
            }
        }
        if self.status.failure.is_some() {
            return self.failed_run();
        }
        self.follow_completed_stages();
        self.correct_drift();
        self.finish()
    }

    /// A stage failed under the run's policy. Halt: nothing further is applied, not even drift
    /// corrections. Rollback: restore the stages, then hold like a halt.
    fn failed_run(mut self) -> StepOutput {
        self.note_stages_ahead();
        let Some(mut failure) = self.status.failure.take() else {
            return self.finish();
        };
        let rejected = format!(
            "snapshot #{} rejected: stage {} failed: {}",
            failure.snapshot_index, failure.stage, failure.reason
        );
        self.effects.applies.clear();
        if failure.on_failure != OnFailure::Rollback {
            crate::retry::note_late_failures(
                &mut failure,
                self.name(),
                self.observed(),
                self.now(),
            );
            self.status.phase = Phase::Failed;
            self.status.message = Some(format!(
                "{rejected}; the run is halted: `tollgate retry {} {}` re-drives its failed clusters once their cause is fixed, or commit a fix or revert to start a new run",
                self.name(),
                failure.stage
            ));
            self.status.failure = Some(failure);
            return self.held_output();
        }
        let progress = rollback::Restore {
            promotion: self.name(),
            rejected: self.snapshot,
            history: self.input.history,
            observed: self.observed(),
            now: self.now(),
        }
        .progress(&mut failure, &mut self.effects);
        self.note_rollback_activities(&failure);
        match progress {
            rollback::Progress::Waiting(what) => {
                self.status.phase = Phase::RollingBack;
                self.status.message = Some(format!("{rejected}; rolling back: {what}"));
            }
            rollback::Progress::Done => {
                let was_done = self
                    .input
                    .status
                    .is_some_and(|s| s.phase == Phase::RolledBack);
                if !was_done {
                    self.effects.events.push(EngineEvent::warning(
                        EventReason::RolledBack,
                        format!(
                            "Snapshot #{} rolled back after stage {} failed; {}",
                            failure.snapshot_index,
                            failure.stage,
                            rollback::running_after(&failure)
                        ),
                    ));
                }
                self.status.phase = Phase::RolledBack;
                self.status.message = Some(format!(
                    "{rejected}; {}; commit a fix or revert to acknowledge",
                    rollback::running_after(&failure)
                ));
            }
        }
        self.status.failure = Some(failure);
        let deletes = std::mem::take(&mut self.effects.deletes);
        let mut actions: Vec<Action> = deletes
            .into_iter()
            .map(|name| Action::DeleteProfile { name })
            .collect();
        actions.extend(std::mem::take(&mut self.effects.applies));
        self.status.next_wake_up = None;
        StepOutput {
            actions,
            status: self.status,
            events: self.effects.events,
            wake_at: None,
            measurements: Vec::new(),
        }
    }

    /// Each stage a failure rollback restores: rolling back until restored, then restored to
    /// the snapshot it runs again.
    fn note_rollback_activities(&mut self, failure: &RunFailure) {
        let now = self.now();
        for entry in &failure.rollback {
            let Some(st) = self.status.stage_mut(&entry.name) else {
                continue;
            };
            let restoring = match entry.restored_at {
                Some(at) => (
                    StageActivity::Restored {
                        snapshot: entry.to_snapshot,
                    },
                    at,
                ),
                None => (StageActivity::RollingBack, now),
            };
            activity::set(
                &mut st.activity,
                &mut st.activity_since,
                restoring.0,
                restoring.1,
            );
        }
    }

    /// The blackout in force now, if it holds stage starts of this run (a rollback's are not held:
    /// restoring known-good content is what a freeze is for).
    fn blackout(&self) -> Option<ActiveBlackout> {
        if self.is_rollback() {
            return None;
        }
        let policy = self.input.policy?;
        blackout::active_at(&policy.spec.blackouts, self.now())
    }

    /// A stage start is held until the blackout ends: say so (an event when it begins) and wake
    /// at its end.
    fn hold_for_blackout(
        &mut self,
        blackout: &ActiveBlackout,
        stage: Option<String>,
        waits: String,
    ) {
        let held_before = self
            .input
            .status
            .is_some_and(|s| s.blackout_until == Some(blackout.until));
        if !held_before {
            self.effects.events.push(EngineEvent::normal(
                EventReason::Blackout,
                format!("{}: {waits}", capitalized(&blackout.describe())),
            ));
        }
        self.status.phase = Phase::Waiting;
        self.status.message = Some(format!("{}: {waits}", blackout.describe()));
        self.status.blackout_until = Some(blackout.until);
        self.status.blackout_holds = stage.map(|stage| {
            Box::new(HeldStart {
                stage,
                snapshot_index: self.snapshot.index,
                snapshot_commit: self.snapshot.commit.sha.clone(),
            })
        });
        self.effects.wake(blackout.until);
        self.blackout_hold = Some(blackout.clone());
    }

    /// What holds the start of `stage` among the promotions this one depends on
    /// (`tollgate.dev/depends-on`): their unfinished stages of that name, or the refusal of
    /// the annotation itself (a cycle, an unknown name), which holds every start.
    fn dependency_hold(&self, stage: &str) -> Option<DependencyHold> {
        if let Some(problem) = self.input.dependency_problem {
            return Some(DependencyHold::Refused(problem.to_string()));
        }
        let waits = depends_on::waits_for(self.input.dependencies, stage);
        (!waits.is_empty()).then_some(DependencyHold::Waits(waits))
    }

    /// A stage start is held by the promotions this one depends on: say so (the stage ahead shows
    /// it); the controller steps again when one of them changes.
    fn hold_for_dependency(&mut self, stage: String, held: DependencyHold, waits: &str) {
        let run = match waits {
            "" => String::new(),
            waits => format!(" ({waits})"),
        };
        let (phase, message, dependency) = match held {
            DependencyHold::Waits(waits) => {
                let text = depends_on::waits_for_text(&waits);
                (
                    Phase::Waiting,
                    format!("stage {stage} {text}{run}"),
                    waits.join(", "),
                )
            }
            DependencyHold::Refused(problem) => (
                Phase::Held,
                format!(
                    "stage {stage} does not start{run}: {} refused: {problem}",
                    tollgate_model::snapshot::DEPENDS_ON_ANNOTATION
                ),
                "a fix of tollgate.dev/depends-on".to_string(),
            ),
        };
        if self.input.status.and_then(|s| s.message.as_deref()) != Some(message.as_str())
            && phase == Phase::Held
        {
            self.effects
                .events
                .push(EngineEvent::warning(EventReason::Blocked, message.clone()));
        }
        self.status.phase = phase;
        self.status.message = Some(message);
        self.dependency_hold = Some((stage, dependency));
    }

    /// No actions; woken when a time-based hold ends.
    fn held_output_waking(mut self) -> StepOutput {
        self.note_stages_ahead();
        let wake_at = self.effects.wake_at;
        self.status.next_wake_up = wake_at;
        StepOutput {
            actions: Vec::new(),
            status: self.status,
            events: self.effects.events,
            wake_at,
            measurements: Vec::new(),
        }
    }

    /// No actions: the status and events only.
    fn held_output(mut self) -> StepOutput {
        self.note_stages_ahead();
        self.status.next_wake_up = None;
        StepOutput {
            actions: Vec::new(),
            status: self.status,
            events: self.effects.events,
            wake_at: None,
            measurements: Vec::new(),
        }
    }

    /// The current stage spent its failure budget: the run fails (halt or rollback).
    fn fail_run(&mut self, stage: &str, exceeded: Exceeded) {
        let now = self.now();
        let index = self.snapshot.index;
        self.effects.events.push(EngineEvent::warning(
            EventReason::BudgetExceeded,
            format!("Stage {stage}: {}", exceeded.reason),
        ));
        self.effects.events.push(EngineEvent::warning(
            EventReason::StageFailed,
            format!(
                "Stage {stage} failed with snapshot #{index}; onFailure: {}",
                exceeded.on_failure.as_str()
            ),
        ));
        if let Some(st) = self.status.stage_mut(stage) {
            st.set_failure(Some(exceeded.reason.clone()), now);
            let failed = StageActivity::Failed {
                reason: exceeded.reason.clone(),
            };
            activity::set(&mut st.activity, &mut st.activity_since, failed, now);
        }
        let rollback = match exceeded.on_failure {
            OnFailure::Rollback => {
                self.effects.events.push(EngineEvent::normal(
                    EventReason::RollingBack,
                    format!("Rolling back snapshot #{index}, stage {stage} first"),
                ));
                rollback::plan(&self.status.stages, index)
            }
            OnFailure::Halt => Vec::new(),
        };
        self.status.failure = Some(Box::new(RunFailure {
            stage: stage.to_string(),
            snapshot_index: index,
            reason: exceeded.reason,
            at: now,
            on_failure: exceeded.on_failure,
            clusters: exceeded.clusters,
            rollback,
        }));
        lineage::record(&mut self.status, Verdict::Rejected, now);
    }

    /// Re-apply the main profile of every stage this run applied in an earlier step (its apply is
    /// in the persisted status) whose profile no longer carries what tollgate set: a hand edit or
    /// delete. A promotion is not Completed while one of its profiles is being corrected.
    fn correct_drift(&mut self) {
        let Some(persisted) = self.input.status else {
            return;
        };
        let snapshot_annotations = snapshot_digest(self.snapshot);
        let mut drifted = Vec::new();
        for st in &self.status.stages {
            let applied_before = persisted.stage(&st.name).is_some_and(|p| {
                p.snapshot_index == st.snapshot_index
                    && p.applied_spec_hash == st.applied_spec_hash
                    && p.applied_at == st.applied_at
            });
            let Some(stage) = self.promotion.stage(&st.name) else {
                continue;
            };
            let profile = stage_profile_name(self.name(), &st.name);
            let retrying = st.retry.as_deref().is_some_and(|r| r.withdrawing());
            if !applied_before
                || st.snapshot_index != self.snapshot.index
                || self.foreign(&profile)
                || retrying
            {
                continue;
            }
            let checks = match (&stage.trigger, st.post_delay_checks_applied) {
                (Some(trigger), true) => trigger.post_delay_health_checks(),
                _ => &[],
            };
            let expected = drift::Expected {
                promotion: self.name(),
                stage: &st.name,
                spec_hash: &st.applied_spec_hash,
                snapshot_annotations,
            };
            let observed = self.observed().profiles.get(&profile);
            // Without appended checks the spec is pinned by the run's hashes, so the recorded
            // hash is its hash: a profile carrying that hash is untouched, without rendering.
            // With them, a trigger edit within the run may have changed the checks, and then
            // what was applied is not known.
            if !st.post_delay_checks_applied && drift::untouched(&expected, observed) {
                continue;
            }
            let spec = waves::main_spec(self.snapshot, stage, checks, st.waves.as_deref());
            if st.post_delay_checks_applied && spec_hash(&spec) != st.applied_spec_hash {
                continue;
            }
            let fields = drift::drifted_fields(&expected, &spec, observed);
            if !fields.is_empty() {
                let object = waves::main_object(self.snapshot, stage, checks, st.waves.as_deref());
                drifted.push((profile, object, fields));
            }
        }
        for (profile, object, fields) in drifted {
            let fields = fields.join(", ");
            self.effects.events.push(EngineEvent::warning(
                EventReason::DriftCorrected,
                format!("ClusterProfile {profile} drifted from what tollgate applied ({fields}): re-applied"),
            ));
            if self.status.phase == Phase::Completed {
                self.status.phase = Phase::Progressing;
                self.status.message = Some(format!(
                    "correcting drift on ClusterProfile {profile} ({fields})"
                ));
            }
            self.effects.apply(profile, object);
        }
    }

    /// Hold everything where it is: no apply, no delete, not even a restart's stage-1 apply.
    fn hold_paused(mut self) -> StepOutput {
        let now = self.now();
        if self.status.paused_since.is_none() {
            self.status.paused_since = Some(now);
            self.effects.events.push(EngineEvent::normal(
                EventReason::Paused,
                "Pipeline paused by tollgate.dev/paused".to_string(),
            ));
        }
        let message = if self.same_run() {
            "paused by tollgate.dev/paused".to_string()
        } else {
            format!(
                "paused by tollgate.dev/paused; restart pending for snapshot #{}",
                self.snapshot.index
            )
        };
        self.status.phase = Phase::Paused;
        self.status.message = Some(message);
        if let Some(current) = self.status.current_stage_name.clone()
            && let Some(st) = self.status.stage_mut(&current)
            && !st.activity.is_final()
        {
            activity::set(
                &mut st.activity,
                &mut st.activity_since,
                StageActivity::Paused,
                now,
            );
        }
        self.held_output()
    }

    /// A new run could not start: keep the previous run's state (so the restart is retried) and
    /// say why.
    fn blocked(mut self, reason: String) -> StepOutput {
        if self.status.message.as_deref() != Some(reason.as_str()) {
            self.effects
                .events
                .push(EngineEvent::warning(EventReason::Blocked, reason.clone()));
        }
        self.status.phase = Phase::Failed;
        self.status.message = Some(reason);
        self.held_output()
    }

    /// First run or restart (docs/architecture.md#the-restart-rule): the run state is reset and stage 1's profile is
    /// applied with the new snapshot. Later stages keep their profiles until the pipeline reaches
    /// them. The new hashes reach the persisted status only with this apply (D1).
    fn start_run(&mut self) -> Result<(), String> {
        let Some(first) = self.promotion.spec.stages.first() else {
            return Err("the promotion has no stages".to_string());
        };
        let profile = stage_profile_name(self.name(), &first.name);
        if self.foreign(&profile) {
            return Err(format!(
                "cannot start snapshot #{}: {}",
                self.snapshot.index,
                messages::foreign_profile(&profile)
            ));
        }
        let previous = std::mem::replace(&mut self.status, PromotionStatus::empty());
        let snapshot = self.snapshot;
        self.status.profile_spec_hash = Some(snapshot.hashes.profile_spec.clone());
        self.status.stages_hash = Some(snapshot.hashes.stages.clone());
        self.status.snapshot_index = Some(snapshot.index);
        self.status.snapshot_commit = Some(snapshot.commit.sha.clone());
        self.status.snapshot_id = Some(snapshot.hashes.snapshot_id.clone());
        let rollback_to = self.lineage.rollback_to();
        self.status.rollback_of = rollback_to;
        self.status.rollback = crate::fast_rollback::mode(rollback_to, self.input.policy);
        self.status.retries = previous.retries;
        self.status.invalid_spec = previous.invalid_spec;
        self.status.verdicts = previous.verdicts;
        self.status.conditions = previous.conditions;
        self.status.consumed_approvals = previous.consumed_approvals;
        // Only this run's: the ones it skips over (FinishCurrent), not every earlier run's.
        self.status.runs = previous.runs;
        if self.on_new_snapshot == OnNewSnapshot::FinishCurrent {
            self.record_superseded(previous.snapshot_index);
        }
        if let (Some(failure), Some(earlier)) = (&previous.failure, rollback_to)
            && !failure.rollback.is_empty()
        {
            self.effects.events.push(EngineEvent::normal(
                EventReason::RollbackAcknowledged,
                format!(
                    "Snapshot #{} (commit {}) brings back the content of #{earlier}: acknowledges the rollback of #{}",
                    snapshot.index,
                    short_sha(&snapshot.commit.sha),
                    failure.snapshot_index
                ),
            ));
        }
        if let Some(earlier) = rollback_to {
            let mode = match self.status.rollback {
                Some(mode) => format!(", rollback: {}", mode.as_str()),
                None => String::new(),
            };
            self.effects.events.push(EngineEvent::normal(
                EventReason::Rollback,
                format!(
                    "Rolling back to the content of snapshot #{earlier} (snapshot #{}, commit {}{mode})",
                    snapshot.index,
                    short_sha(&snapshot.commit.sha)
                ),
            ));
        }
        // The first run ever is no restart: only a run that replaces another says so.
        let entry = StageEntry::NewRun {
            restart: previous.snapshot_index.is_some(),
        };
        self.enter_stage(first, entry);
        Ok(())
    }

    /// The snapshots this run skips over (FinishCurrent), in status and an event.
    fn record_superseded(&mut self, ran: Option<u64>) {
        let skipped = new_snapshot::superseded(self.input.history, ran, self.snapshot);
        if skipped.is_empty() {
            return;
        }
        let list = skipped
            .iter()
            .map(|i| format!("#{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        self.effects.events.push(EngineEvent::normal(
            EventReason::SnapshotsSuperseded,
            format!(
                "Snapshot(s) {list} superseded by #{} (onNewSnapshot: FinishCurrent)",
                self.snapshot.index
            ),
        ));
        let kept = &mut self.status.superseded_snapshots;
        kept.extend(skipped);
        let excess = kept.len().saturating_sub(crate::status::SUPERSEDED_KEPT);
        kept.drain(..excess);
    }

    /// Start `stage` in this run: record and queue the apply of its main profile.
    fn enter_stage(&mut self, stage: &Stage, entry: StageEntry) {
        let new_run = matches!(entry, StageEntry::NewRun { .. });
        let now = self.now();
        let profile = stage_profile_name(self.name(), &stage.name);
        let members = self
            .input
            .policy
            .map(|_| crate::clusters::selected(&stage.cluster_selector, self.observed()));
        // A fast rollback restores content that completed here: all clusters at once.
        let fast_rollback = crate::fast_rollback::applies(&self.status, &stage.name);
        let waves = self
            .input
            .policy
            .filter(|_| !fast_rollback)
            .and_then(|p| p.for_stage(&stage.name).waves)
            .zip(members.as_deref())
            .and_then(|(spec, members)| waves::start(members, self.observed(), &spec, now));
        let spec = waves::main_spec(self.snapshot, stage, &[], waves.as_ref());
        let hash = spec_hash(&spec);
        let fresh_features = self.fresh_features(&profile, &spec, &hash);
        let replaced_snapshot = self.replaced_snapshot(&stage.name, &profile);
        let first_wave = waves.as_ref().filter(|w| w.in_progress()).map(|w| WaveOf {
            wave: w.reached,
            of: w.total(),
        });
        self.status.stages.push(StageStatus {
            name: stage.name.clone(),
            activity: StageActivity::Provisioning { wave: first_wave },
            activity_since: now,
            last_update_reconciled_time: Some(now),
            last_successful_applied_time: None,
            last_status_check_time: None,
            failure_message: None,
            current_status_description: new_run
                .then(|| messages::with_time(messages::CLUSTERS_BEING_PROVISIONED, now)),
            snapshot_index: self.snapshot.index,
            applied_at: now,
            applied_spec_hash: hash,
            fresh_features,
            provisioned_at: None,
            delay_ends_at: None,
            provisioned_message: None,
            post_delay_checks_applied: false,
            preverification: None,
            succeeded_at: None,
            counts: Default::default(),
            approver: None,
            wave_approvers: None,
            approvals: None,
            approvals_needed: None,
            waiting_reason: None,
            awaiting_approval_since: None,
            awaiting_window_since: None,
            replaced_snapshot,
            members,
            allowed_failures: None,
            deadline: None,
            paused_clusters: None,
            not_provisioned: Vec::new(),
            not_provisioned_unlisted: 0,
            skipped: false,
            waves: waves.map(Box::new),
            analyses: None,
            retry: None,
            fast_rollback,
        });
        self.status.current_stage_name = Some(stage.name.clone());
        self.status.last_promotion_time = Some(now);
        let note = match entry {
            StageEntry::NewRun { restart: true } => {
                messages::provisioning_stage_restart(&stage.name)
            }
            _ => messages::provisioning_stage(&stage.name),
        };
        self.effects
            .events
            .push(EngineEvent::normal(EventReason::Provisioning, note));
        // The apply itself is queued by `progress_current_stage`, which sees the observed
        // profile does not carry this spec yet.
    }

    /// Features whose ClusterSummary status must be newer than an apply of `spec` to `profile`.
    fn fresh_features(&self, profile: &str, spec: &Value, hash: &str) -> Vec<String> {
        fresh_after_apply(self.own_live_profile(profile), spec, hash)
    }

    /// Runs `f` on stage `index` of the promotion, as [`StageRun`] sees it (`None`: the stage
    /// has no status in this run).
    fn with_stage_run<R>(&mut self, index: usize, f: impl FnOnce(&mut StageRun) -> R) -> Option<R> {
        let now = self.now();
        let stages = &self.promotion.spec.stages;
        let stage = &stages[index];
        let (profiles, checks) = self.stage_profiles(stage, stages.get(index + 1));
        let blackout = self.blackout();
        let (snapshot, observed, approvals) =
            (self.snapshot, self.observed(), self.input.approvals);
        let PromotionStatus {
            stages: statuses,
            consumed_approvals,
            ..
        } = &mut self.status;
        let st = statuses.iter_mut().find(|s| s.name == stage.name)?;
        let mut run = StageRun {
            snapshot,
            stage,
            observed,
            approvals,
            consumed: consumed_approvals,
            now,
            st,
            effects: &mut self.effects,
            checks,
            profiles,
            spec: None,
            main_applied_now: false,
            preverification: None,
            policy: self.input.policy.map(|p| p.for_stage(&stage.name)),
            blackout,
            measurements: self.input.measurements,
        };
        Some(f(&mut run))
    }

    /// The run's completed stages keep following the members they completed without (paused
    /// by Sveltos under `pausedClusters: Skip`): see `StageRun::follow_paused_members`.
    fn follow_completed_stages(&mut self) {
        let run = self.status.snapshot_index;
        let following: Vec<usize> = (0..self.promotion.spec.stages.len())
            .filter(|&i| {
                let name = &self.promotion.spec.stages[i].name;
                self.status.stage(name).is_some_and(|st| {
                    Some(st.snapshot_index) == run
                        && st.succeeded_at.is_some()
                        && crate::stage::follows_members(st)
                })
            })
            .collect();
        for index in following {
            self.with_stage_run(index, |run| run.follow_paused_members());
        }
    }

    /// Look at the current stage and run its steps ([`crate::stage`]); the outcome becomes the
    /// promotion's phase and message.
    fn progress_current_stage(&mut self) -> Flow {
        let now = self.now();
        let Some(current) = self.status.current_stage_name.clone() else {
            return Flow::Hold;
        };
        let stages = &self.promotion.spec.stages;
        let Some(index) = stages.iter().position(|s| s.name == current) else {
            // Cannot happen within a run (the stages hash pins the names); say so rather than guess.
            self.status.phase = Phase::Failed;
            self.status.message = Some(format!("current stage {current} is not in the spec"));
            return Flow::Hold;
        };
        let stage = &stages[index];
        if self.status.stage(&current).is_none() {
            self.enter_stage(stage, StageEntry::Advance);
        }
        if self
            .status
            .stage(&current)
            .is_some_and(|s| s.succeeded_at.is_some())
        {
            // A stage that succeeded while its successor could not start (a blackout): try the
            // successor again.
            if index + 1 < stages.len() {
                return Flow::Advanced;
            }
            // The last stage stays current after succeeding: the pipeline is complete.
            self.status.phase = Phase::Completed;
            self.status.message = Some(completed_message(self.snapshot, stages.len()));
            return Flow::Hold;
        }
        let Some(outcome) = self.with_stage_run(index, |run| run.progress()) else {
            return Flow::Hold;
        };
        for consumed in std::mem::take(&mut self.effects.consumed) {
            self.status.record_consumed(consumed);
        }
        match outcome {
            Ok(consumed) => {
                for consumed in consumed {
                    self.status.record_consumed(consumed);
                }
                advance(&mut self.status, &current, now)
            }
            Err(Hold::Wait(activity, reason)) => {
                hold(&mut self.status, &current, activity, reason, now)
            }
            Err(Hold::Failed(reason)) => hold_failed(&mut self.status, &current, reason, now),
            Err(Hold::Exceeded(exceeded)) => {
                self.fail_run(&current, exceeded);
                Flow::Hold
            }
        }
    }

    /// The current stage's profiles and who holds them, the checks already appended to its main
    /// profile, and the spec hash the run wants there now. Without appended checks that is
    /// profileSpec + selector, pinned by the run's hashes, so the recorded hash is current and
    /// nothing needs rendering at steady state; appended checks come from the trigger, which can
    /// be edited within a run.
    fn stage_profiles(
        &self,
        stage: &'a Stage,
        next: Option<&Stage>,
    ) -> (StageProfiles, &'a [Value]) {
        let name = self.name();
        let main = stage_profile_name(name, &stage.name);
        let preverification = preverification_profile_name(name, &stage.name);
        let (checks_applied, recorded_hash, waves) = self
            .status
            .stage(&stage.name)
            .map(|s| {
                let waves = s.waves.clone();
                (
                    s.post_delay_checks_applied,
                    s.applied_spec_hash.clone(),
                    waves,
                )
            })
            .unwrap_or_default();
        let checks: &'a [Value] = match &stage.trigger {
            Some(trigger) if checks_applied => trigger.post_delay_health_checks(),
            _ => &[],
        };
        let mut wanted_hash = recorded_hash;
        let mut re_recorded_fresh = None;
        if checks_applied {
            let spec = waves::main_spec(self.snapshot, stage, checks, waves.as_deref());
            let current_hash = spec_hash(&spec);
            if current_hash != wanted_hash {
                re_recorded_fresh = Some(self.fresh_features(&main, &spec, &current_hash));
                wanted_hash = current_hash;
            }
        }
        let has_preverification = stage
            .trigger
            .as_ref()
            .is_some_and(|t| !t.pre_health_check_deployment().is_empty());
        let profiles = StageProfiles {
            foreign_main: self.foreign(&main),
            foreign_preverification: has_preverification && self.foreign(&preverification),
            foreign_next: next
                .map(|n| stage_profile_name(name, &n.name))
                .filter(|n| self.foreign(n)),
            main,
            preverification,
            wanted_hash,
            re_recorded_fresh,
        };
        (profiles, checks)
    }

    /// Deletions the current state calls for, then the status summary.
    fn finish(mut self) -> StepOutput {
        self.note_stages_ahead();
        let mut deletes = self.stale_profiles();
        for name in std::mem::take(&mut self.effects.deletes) {
            if !deletes.contains(&name) {
                deletes.push(name);
            }
        }
        if self.status.phase == Phase::Completed {
            let now = self.now();
            lineage::record(&mut self.status, Verdict::Completed, now);
        }
        if self.status.invalid_spec.is_some()
            && matches!(
                self.status.phase,
                Phase::Progressing | Phase::Waiting | Phase::Completed
            )
        {
            self.status.phase = Phase::Invalid;
        }
        self.status.next_wake_up = self.effects.wake_at;
        let mut actions: Vec<Action> = deletes
            .into_iter()
            .map(|name| Action::DeleteProfile { name })
            .collect();
        actions.extend(self.effects.applies);
        StepOutput {
            actions,
            status: self.status,
            events: self.effects.events,
            wake_at: self.effects.wake_at,
            measurements: self.effects.measurements,
        }
    }

    /// What the stage's profile carried before this run entered the stage (what a rollback
    /// restores). A profile that already carries this run's snapshot was applied by an earlier
    /// step of this run whose status was never persisted (a conflict, an outage); what it
    /// replaced is then what the persisted status says the stage ran.
    fn replaced_snapshot(&self, stage: &str, profile: &str) -> Option<u64> {
        let carried = self.own_live_profile(profile)?.snapshot_index?;
        if carried != self.snapshot.index {
            return Some(carried);
        }
        let persisted = self.input.status?;
        match persisted.stage(stage) {
            Some(entry) if entry.snapshot_index == self.snapshot.index => entry.replaced_snapshot,
            Some(entry) => Some(entry.snapshot_index),
            None => persisted
                .stages_ahead
                .iter()
                .find(|ahead| ahead.name == stage)
                .and_then(|ahead| ahead.snapshot_index),
        }
    }

    /// The stages after the current one that this run has not started, with the snapshot their
    /// profile still carries, so that a new run does not hide what the later stages run.
    fn note_stages_ahead(&mut self) {
        let stages = &self.promotion.spec.stages;
        let after = match &self.status.current_stage_name {
            Some(current) => match stages.iter().position(|s| &s.name == current) {
                Some(index) => index + 1,
                None => stages.len(),
            },
            None => 0,
        };
        let ahead = stages
            .iter()
            .skip(after)
            .filter(|stage| self.status.stage(&stage.name).is_none())
            .enumerate()
            .map(|(i, stage)| {
                let held = self.blackout_hold.as_ref().filter(|_| i == 0);
                let mut ahead = self.stage_ahead(stage, held);
                if let Some((held, dependency)) = &self.dependency_hold
                    && held == &stage.name
                {
                    self.awaiting_dependency(&mut ahead, dependency);
                }
                ahead
            })
            .collect();
        self.status.stages_ahead = ahead;
    }

    /// A stage the run has not reached: pending, or held by `blackout` (since the hold began).
    fn stage_ahead(&self, stage: &Stage, blackout: Option<&ActiveBlackout>) -> StageAhead {
        let (activity, activity_since) = match blackout {
            Some(blackout) => {
                let held = StageActivity::Blackout {
                    until: blackout.until,
                    reason: blackout.reason.clone(),
                    wave: None,
                };
                let since = self
                    .input
                    .status
                    .and_then(|s| s.stages_ahead.iter().find(|a| a.name == stage.name))
                    .filter(|a| a.activity.same_kind(&held))
                    .and_then(|a| a.activity_since)
                    .unwrap_or(self.now());
                (held, Some(since))
            }
            None => (StageActivity::Pending, None),
        };
        StageAhead {
            name: stage.name.clone(),
            snapshot_index: self
                .own_live_profile(&stage_profile_name(self.name(), &stage.name))
                .and_then(|p| p.snapshot_index),
            activity,
            activity_since,
        }
    }

    /// The stage ahead waits for the promotions it depends on (since the hold began).
    fn awaiting_dependency(&self, ahead: &mut StageAhead, dependency: &str) {
        let held = StageActivity::AwaitingDependency {
            dependency: dependency.to_string(),
        };
        let since = self
            .input
            .status
            .and_then(|s| s.stages_ahead.iter().find(|a| a.name == ahead.name))
            .filter(|a| a.activity.same_kind(&held))
            .and_then(|a| a.activity_since)
            .unwrap_or(self.now());
        ahead.activity = held;
        ahead.activity_since = Some(since);
    }

    /// Profiles of this promotion that must go: those of stages no longer in the spec, and every
    /// pre-verification profile except the current stage's while its trigger runs.
    fn stale_profiles(&self) -> Vec<String> {
        let name = self.name();
        let wanted_preverification = self.status.current_stage_name.as_ref().and_then(|current| {
            let stage = self.promotion.stage(current)?;
            let has_refs = stage
                .trigger
                .as_ref()
                .is_some_and(|t| !t.pre_health_check_deployment().is_empty());
            let st = self.status.stage(current)?;
            (has_refs && st.preverification.is_some() && st.succeeded_at.is_none())
                .then(|| preverification_profile_name(name, current))
        });
        self.observed()
            .profiles
            .values()
            .filter(|p| p.is_owned_by(name) && !p.deleting)
            .filter(|p| {
                let in_spec = p
                    .stage
                    .as_deref()
                    .is_some_and(|s| self.promotion.stage(s).is_some());
                !in_spec || (p.verification && wanted_preverification.as_deref() != Some(&p.name))
            })
            .map(|p| p.name.clone())
            .collect()
    }
}

/// Wait: record what the stage does and why, for the stage and the promotion (whose phase the
/// activity makes).
fn hold(
    status: &mut PromotionStatus,
    stage: &str,
    activity: StageActivity,
    reason: String,
    now: DateTime<Utc>,
) -> Flow {
    status.phase = activity.phase();
    status.message = Some(format!("stage {stage}: {reason}"));
    if let Some(st) = status.stage_mut(stage) {
        st.waiting_reason = Some(reason);
        activity::set(&mut st.activity, &mut st.activity_since, activity, now);
    }
    Flow::Hold
}

/// Stop: the stage cannot go on without a fix by the user.
fn hold_failed(
    status: &mut PromotionStatus,
    stage: &str,
    reason: String,
    now: DateTime<Utc>,
) -> Flow {
    if let Some(st) = status.stage_mut(stage) {
        st.set_failure(Some(reason.clone()), now);
    }
    let failed = StageActivity::Failed {
        reason: reason.clone(),
    };
    hold(status, stage, failed, reason, now)
}

/// The stage's trigger held: mark it succeeded (§4.12 "Successfully provisioned").
fn advance(status: &mut PromotionStatus, stage: &str, now: DateTime<Utc>) -> Flow {
    if let Some(st) = status.stage_mut(stage) {
        let done = match st.skipped {
            true => StageActivity::Skipped,
            false => StageActivity::Completed,
        };
        activity::set(&mut st.activity, &mut st.activity_since, done, now);
        st.succeeded_at = Some(now);
        st.last_successful_applied_time = Some(now);
        st.last_status_check_time = Some(now);
        st.failure_message = None;
        st.waiting_reason = None;
        st.awaiting_approval_since = None;
        st.describe(messages::SUCCESSFULLY_PROVISIONED, now);
    }
    Flow::Advanced
}

fn completed_message(snapshot: &Snapshot, stages: usize) -> String {
    format!(
        "all {stages} stages provisioned with snapshot #{} ({})",
        snapshot.index,
        short_sha(&snapshot.commit.sha)
    )
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

pub(crate) use tollgate_model::snapshot::short_sha;
