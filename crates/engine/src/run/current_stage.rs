//! The current stage of a run: one look at it through the stage pipeline (`stage`), whose
//! outcome becomes the promotion's phase and message, and the hand-over to the next stage.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_model::model::Stage;
use tollgate_render::{preverification_profile_name, spec_hash, stage_profile_name};

use crate::failure::rollback;
use crate::gates::start_gate;
use crate::messages;
use crate::run::enter::StageEntry;
use crate::run::{Run, completed_message};
use crate::stage::waves;
use crate::stage::{Hold, StageProfiles, StageRun};
use crate::status::activity::{self, StageActivity};
use crate::status::{Phase, PromotionStatus};

/// Whether the pipeline may go on after a stage was looked at.
pub(super) enum Flow {
    /// The current stage moved on; look at the new current stage in the same step.
    Advanced,
    /// Waiting for something (Sveltos, time, a person) or finished.
    Hold,
}

impl<'a> Run<'_, 'a> {
    /// Runs `f` on stage `index` of the promotion, as [`StageRun`] sees it (`None`: the stage
    /// has no status in this run).
    fn with_stage_run<R>(&mut self, index: usize, f: impl FnOnce(&mut StageRun) -> R) -> Option<R> {
        let now = self.now();
        let stages = &self.promotion.spec.stages;
        let stage = &stages[index];
        let (profiles, checks) = self.stage_profiles(stage, stages.get(index + 1));
        let blackout = start_gate::blackout(self.input, self.is_rollback());
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
    pub(super) fn follow_completed_stages(&mut self) {
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
    pub(super) fn progress_current_stage(&mut self) -> Flow {
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
                let (index, now) = (self.snapshot.index, self.now());
                rollback::fail(&mut self.status, &current, exceeded, index, now);
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
