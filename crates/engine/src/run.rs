//! The run: one snapshot's way through the stages, driven as a named pipeline (as one look at a
//! stage is, see `stage`):
//!
//! `start_gate → enter → current_stage → failure → drift → output`
//!
//! The start gate (`gates::start_gate`) is asked once per start and its answer kept for the
//! stages ahead; entering starts a new run's first stage (`enter`); the current stage runs its
//! own pipeline and hands over to the next, each next start asked of the start gate again
//! (`current_stage`); a failed run halts or rolls back (`failure::rollback`); what this run
//! applied is kept as applied (`drift`); the effects become the step's output
//! ([`Effects::into_output`]). `step` chooses the snapshot that runs; the rest of this folder is
//! what surrounds a run (removal, a never-valid file, the run history it records).

pub(crate) mod analysis_end;
mod current_stage;
pub mod drift;
mod enter;
pub(crate) mod never_valid;
pub(crate) mod phase_since;
pub(crate) mod removal;
pub(crate) mod run_recording;
mod stages_ahead;
pub mod step;
pub(crate) mod transition_events;
pub mod write_hold;

use chrono::{DateTime, Utc};
use tollgate_model::hash::HASH_SCHEME;
use tollgate_model::model::ClusterPromotion;
use tollgate_model::policy::OnNewSnapshot;
use tollgate_model::snapshot::Snapshot;
use tollgate_render::preverification_profile_name;

use crate::effects::{Effects, Outgoing};
use crate::failure::lineage::{self, Lineage, Verdict};
use crate::failure::rollback;
use crate::gates::new_snapshot::Choice;
use crate::gates::start_gate::{self, Start, StartHold, Starting};
use crate::input::StepInput;
use crate::observed::{Observed, ObservedProfile};
use crate::output::{EngineEvent, StepOutput};
use crate::status::{Phase, PolicyRef, PromotionStatus, RunFailure, runs_content_of};
use current_stage::Flow;

/// One step of a run: what it reads, the status it builds and the effects it collects.
pub(crate) struct Run<'i, 'a> {
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
    /// The start gate's answer for the start it held in this step, kept for the stages ahead.
    held: Option<StartHold>,
}

impl<'i, 'a> Run<'i, 'a> {
    pub(crate) fn new(
        input: &'i StepInput<'a>,
        snapshot: &'a Snapshot,
        choice: &Choice<'a>,
        invalid: Option<&str>,
    ) -> Self {
        let mut status = input.status.cloned().unwrap_or_else(PromotionStatus::empty);
        status.hash_scheme = HASH_SCHEME;
        crate::status::pipeline::name_unnamed(&mut status);
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
            held: None,
        }
    }

    /// The run's step: its pipeline, then the events announcing the stage transitions from the
    /// status it read to the one it persists (`transition_events`; a second run started in the
    /// same step reads the first one's).
    pub(crate) fn run(self) -> StepOutput {
        let before = self.input.status;
        let mut output = self.pipeline();
        let told = transition_events::announce(before, &output.status);
        output.events.extend(told);
        output
    }

    /// The run's pipeline (see the module documentation).
    fn pipeline(mut self) -> StepOutput {
        if self.start_gate() {
            return self.held_output();
        }
        self.enter();
        self.current_stage();
        if let Some(failure) = self.status.failure.take() {
            return self.failure(failure);
        }
        self.drift();
        self.output()
    }

    /// 1. May the run go on, may a new run start? A pause holds everything; a new run's first
    ///    stage asks the whole start gate (`true`: held).
    fn start_gate(&mut self) -> bool {
        let starting = match self.same_run() {
            true => Starting::Nothing,
            false => Starting::Run {
                first: self.promotion.spec.stages.first().map(|s| s.name.as_str()),
            },
        };
        let start = self.start(starting);
        let hold = start_gate::ask(&start);
        if hold.as_ref().is_none_or(|hold| !hold.is_pause()) {
            start_gate::note_resumed(&mut self.status, &mut self.effects);
        }
        self.keep(&start, hold)
    }

    /// Asks the start gate about the next stage's start (`true`: held).
    fn next_stage_start_gate(&mut self, next: &str) -> bool {
        let start = self.start(Starting::Stage(next));
        let hold = start_gate::ask(&start);
        self.keep(&start, hold)
    }

    /// The start gate's answer: a hold is said in status and kept for the stages ahead.
    fn keep(&mut self, start: &Start<'_, '_>, hold: Option<StartHold>) -> bool {
        let Some(hold) = hold else {
            return false;
        };
        hold.record(start, &mut self.status, &mut self.effects);
        self.held = Some(hold);
        true
    }

    /// What the start gate reads of this run for `starting`.
    fn start<'s>(&self, starting: Starting<'s>) -> Start<'i, 's>
    where
        'a: 's,
    {
        Start {
            input: self.input,
            snapshot: self.snapshot,
            newest: self.newest,
            starting,
            rollback: self.is_rollback(),
        }
    }

    /// 2. Enter the run: a new run starts at its first stage (the start gate let it); the run
    ///    records its policy and acts on retries.
    fn enter(&mut self) {
        // A retry refused below names the phase the run was in, not the one set while looking.
        let previous = std::mem::replace(&mut self.status.phase, Phase::Progressing);
        let run_phase = match self.same_run() {
            true => previous,
            false => Phase::Progressing,
        };
        if !self.same_run()
            && let Some(first) = self.promotion.spec.stages.first()
        {
            self.start_run(first);
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
        crate::stage::retry::act(
            &mut self.status,
            (snapshot, &run_phase),
            history,
            observed,
            now,
            &mut self.effects,
        );
    }

    /// 3. Look at the current stage and, while it hands over, at the next (each start asked of
    ///    the start gate); then keep the completed stages following their members.
    fn current_stage(&mut self) {
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
            let Some(next) = next else {
                self.status.phase = Phase::Completed;
                self.status.message = Some(completed_message(self.snapshot, stages.len()));
                break;
            };
            if self.next_stage_start_gate(&next.name) {
                break;
            }
            self.enter_stage(next, enter::StageEntry::Advance);
        }
        if self.status.failure.is_none() {
            self.follow_completed_stages();
        }
    }

    /// 4. A stage failed under the run's policy: halt (nothing further is applied, not even drift
    ///    corrections), or roll back (restore the stages, then hold like a halt).
    fn failure(mut self, failure: Box<RunFailure>) -> StepOutput {
        self.note_stages_ahead();
        let failed = rollback::FailedRun {
            promotion: self.name(),
            rejected: self.snapshot,
            history: self.input.history,
            observed: self.observed(),
            now: self.now(),
        };
        let outgoing = failed.settle(failure, &mut self.status, &mut self.effects);
        self.effects.into_output(self.status, outgoing)
    }

    /// 5. Re-apply what this run applied where a hand edit or delete changed it.
    fn drift(&mut self) {
        let Some(persisted) = self.input.status else {
            return;
        };
        let run = crate::run::drift::RunProfiles {
            promotion: self.promotion,
            snapshot: self.snapshot,
            observed: self.observed(),
            persisted,
        };
        run.correct(&mut self.status, &mut self.effects);
    }

    /// 6. Deletions the current state calls for, then the status summary: the step's output.
    fn output(mut self) -> StepOutput {
        self.note_stages_ahead();
        let stale = self.stale_profiles();
        let earlier = std::mem::replace(&mut self.effects.deletes, stale);
        for name in earlier {
            self.effects.delete(name);
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
        self.effects.into_output(self.status, Outgoing::Everything)
    }

    /// A start held by the start gate: no actions, woken when a hold that ends by itself ends.
    fn held_output(mut self) -> StepOutput {
        self.note_stages_ahead();
        self.effects
            .into_output(self.status, Outgoing::EventsUntilWake)
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

/// [`lineage::judge`], skipped for content git has not seen before (most steps).
pub(crate) fn judge(
    status: Option<&PromotionStatus>,
    history: &[Snapshot],
    snapshot: &Snapshot,
) -> Lineage {
    match snapshot.same_content_as {
        Some(_) => lineage::judge(status, history, snapshot),
        None => Lineage::Forward,
    }
}

fn completed_message(snapshot: &Snapshot, stages: usize) -> String {
    format!(
        "all {stages} stages provisioned with snapshot #{} ({})",
        snapshot.index,
        tollgate_model::snapshot::short_sha(&snapshot.commit.sha)
    )
}
