//! `onFailure: Rollback`: the stages that got the rejected snapshot are restored to the snapshot
//! each carried before the run entered it, the failing stage first and then backwards, each
//! waiting for its clusters as a normal stage does (no delays or approvals on the way back). A
//! stage that had no profile before is withdrawn (kept if `preserveClusterProfilesOnDelete`).

use chrono::{DateTime, Utc};
use tollgate_model::model::Stage;
use tollgate_model::policy::OnFailure;
use tollgate_model::snapshot::{Snapshot, short_sha};
use tollgate_render::{
    preverification_profile_name, render_stage_profile, snapshot_digest, spec_hash,
    stage_profile_name, stage_profile_spec,
};

use crate::effects::{Effects, Outgoing};
use crate::failure::lineage::{self, Verdict};
use crate::features::{fresh_after_apply, hashes_before_apply};
use crate::gates::stage_run::Exceeded;
use crate::messages;
use crate::observed::Observed;
use crate::stage::completion::{self, AppliedExpectation};
use crate::stage::retry;
use crate::status::activity::{self, StageActivity};
use crate::status::{Phase, PromotionStatus, RestoredStage, RunFailure, StageStatus};

/// The current stage (`stage`) spent its failure budget: the run fails (halt or rollback),
/// recorded on the stage and as the run's failure (which `run/transition_events` tells), and its
/// content rejected.
pub(crate) fn fail(
    status: &mut PromotionStatus,
    stage: &str,
    exceeded: Exceeded,
    index: u64,
    now: DateTime<Utc>,
) {
    if let Some(st) = status.stage_mut(stage) {
        st.set_failure(Some(exceeded.reason.clone()), now);
        let failed = StageActivity::Failed {
            reason: exceeded.reason.clone(),
        };
        activity::set(&mut st.activity, &mut st.activity_since, failed, now);
    }
    let rollback = match exceeded.on_failure {
        OnFailure::Rollback => plan(&status.stages, index),
        OnFailure::Halt => Vec::new(),
    };
    status.failure = Some(Box::new(RunFailure {
        stage: stage.to_string(),
        snapshot_index: index,
        reason: exceeded.reason,
        at: now,
        on_failure: exceeded.on_failure,
        clusters: exceeded.clusters,
        rollback,
    }));
    lineage::record(status, Verdict::Rejected, now);
}

/// A run that failed (its `failure`, taken from its status), as a step settles it (see
/// [`FailedRun::settle`]).
pub(crate) struct FailedRun<'a> {
    pub promotion: &'a str,
    /// The rejected snapshot (the run's).
    pub rejected: &'a Snapshot,
    pub history: &'a [Snapshot],
    pub observed: &'a Observed,
    pub now: DateTime<Utc>,
}

impl FailedRun<'_> {
    /// Halt: nothing further is applied, not even drift corrections; the status says how to go
    /// on. Rollback: restore the stages (told once done), then hold like a halt. Returns what of
    /// the effects goes out.
    pub(crate) fn settle(
        &self,
        mut failure: Box<RunFailure>,
        status: &mut PromotionStatus,
        effects: &mut Effects,
    ) -> Outgoing {
        let rejected = format!(
            "snapshot #{} rejected: stage {} failed: {}",
            failure.snapshot_index, failure.stage, failure.reason
        );
        effects.applies.clear();
        if failure.on_failure != OnFailure::Rollback {
            retry::note_late_failures(&mut failure, self.promotion, self.observed, self.now);
            status.phase = Phase::Failed;
            status.message = Some(format!(
                "{rejected}; the run is halted: `tollgate retry {} {}` re-drives its failed clusters once their cause is fixed, or commit a fix or revert to start a new run",
                self.promotion, failure.stage
            ));
            status.failure = Some(failure);
            return Outgoing::EventsOnly;
        }
        let progress = Restore {
            promotion: self.promotion,
            rejected: self.rejected,
            history: self.history,
            observed: self.observed,
            now: self.now,
        }
        .progress(&mut failure, effects);
        note_rollback_activities(status, &failure, self.now);
        match progress {
            Progress::Waiting(what) => {
                status.phase = Phase::RollingBack;
                status.message = Some(format!("{rejected}; rolling back: {what}"));
            }
            // Told with the last stage restored (`run/transition_events`).
            Progress::Done => {
                status.phase = Phase::RolledBack;
                status.message = Some(format!(
                    "{rejected}; {}; commit a fix or revert to acknowledge",
                    failure.running_after()
                ));
            }
        }
        status.failure = Some(failure);
        Outgoing::ActionsOnly
    }
}

/// Each stage a failure rollback restores, in restore order: restored to the snapshot it runs
/// again; the one being restored now rolling back (since its restore was applied); the ones
/// after it keep what they did until their turn (the rollback restores one stage at a time).
fn note_rollback_activities(
    status: &mut PromotionStatus,
    failure: &RunFailure,
    now: DateTime<Utc>,
) {
    let restoring_now = failure
        .rollback
        .iter()
        .position(|e| e.restored_at.is_none());
    for (position, entry) in failure.rollback.iter().enumerate() {
        let Some(st) = status.stage_mut(&entry.name) else {
            continue;
        };
        let snapshot = entry.to_snapshot;
        let restoring = match entry.restored_at {
            Some(at) => (StageActivity::Restored { snapshot }, at),
            None if Some(position) == restoring_now => (
                StageActivity::RollingBack { snapshot },
                entry.applied_at.unwrap_or(now),
            ),
            None => continue,
        };
        activity::set(
            &mut st.activity,
            &mut st.activity_since,
            restoring.0,
            restoring.1,
        );
    }
}

/// The run's stages in restore order: the failing stage (the last one started) first.
pub(crate) fn plan(stages: &[StageStatus], run: u64) -> Vec<RestoredStage> {
    stages
        .iter()
        .rev()
        .filter(|st| st.snapshot_index == run)
        .map(|st| RestoredStage {
            name: st.name.clone(),
            to_snapshot: st.replaced_snapshot,
            applied_at: None,
            spec_hash: String::new(),
            fresh_features: Vec::new(),
            hashes_before_apply: None,
            restored_at: None,
        })
        .collect()
}

/// What a rollback step reads.
pub(crate) struct Restore<'a> {
    pub promotion: &'a str,
    /// The rejected snapshot (the run's).
    pub rejected: &'a Snapshot,
    pub history: &'a [Snapshot],
    pub observed: &'a Observed,
    pub now: DateTime<Utc>,
}

/// Where the rollback stands after a step.
pub(crate) enum Progress {
    /// Restoring a stage: what it waits for.
    Waiting(String),
    Done,
}

impl Restore<'_> {
    /// Moves the rollback on as far as it can in one step.
    pub fn progress(&self, failure: &mut RunFailure, effects: &mut Effects) -> Progress {
        for entry in failure.rollback.iter_mut() {
            if entry.restored_at.is_some() {
                continue;
            }
            let pre = preverification_profile_name(self.promotion, &entry.name);
            if self.owned_live(&pre) {
                effects.delete(pre);
            }
            let waiting = match entry.to_snapshot {
                Some(index) => match self.target(index, &entry.name) {
                    Some((target, stage)) => self.restore(entry, target, stage, effects),
                    None if self.history.iter().any(|s| s.index == index) => {
                        self.withdraw(entry, effects)
                    }
                    None => Some(format!(
                        "cannot restore stage {}: snapshot #{index} is no longer in git history",
                        entry.name
                    )),
                },
                None => self.withdraw(entry, effects),
            };
            if let Some(waiting) = waiting {
                return Progress::Waiting(waiting);
            }
            // Told by `run/transition_events` from `restored_at`.
            entry.restored_at = Some(self.now);
        }
        Progress::Done
    }

    fn target(&self, index: u64, stage: &str) -> Option<(&Snapshot, &Stage)> {
        let snapshot = self.history.iter().find(|s| s.index == index)?;
        Some((snapshot, snapshot.promotion.stage(stage)?))
    }

    fn owned_live(&self, profile: &str) -> bool {
        self.observed
            .profiles
            .get(profile)
            .is_some_and(|p| p.is_owned_by(self.promotion) && !p.deleting)
    }

    /// Applies the target's profile for the stage; `None` once its clusters run it.
    fn restore(
        &self,
        entry: &mut RestoredStage,
        target: &Snapshot,
        stage: &Stage,
        effects: &mut Effects,
    ) -> Option<String> {
        let main = stage_profile_name(self.promotion, &entry.name);
        let observed = self.observed.profiles.get(&main);
        if observed.is_some_and(|p| !p.is_owned_by(self.promotion)) {
            return Some(messages::foreign_profile(&main));
        }
        let spec = stage_profile_spec(target, stage, &[]);
        let hash = spec_hash(&spec);
        let live = observed.filter(|p| !p.deleting);
        if entry.applied_at.is_none() || entry.spec_hash != hash {
            entry.fresh_features = fresh_after_apply(live, &spec, &hash);
            entry.hashes_before_apply =
                hashes_before_apply(self.observed, &main, &entry.fresh_features);
            entry.applied_at = Some(self.now);
            entry.spec_hash = hash.clone();
        }
        let being_applied = live.is_none_or(|p| {
            p.applied_spec_hash() != Some(hash.as_str())
                || p.snapshot_annotations != snapshot_digest(target)
        });
        if being_applied {
            effects.apply(main.clone(), render_stage_profile(target, stage, &[]));
        }
        let check = completion::check(
            &AppliedExpectation {
                profile: &main,
                selector: &stage.cluster_selector,
                spec: &spec,
                spec_hash: &hash,
                applied_at: entry.applied_at.unwrap_or(self.now),
                fresh_features: &entry.fresh_features,
                hashes_before_apply: entry
                    .hashes_before_apply
                    .as_deref()
                    .map_or(&[], Vec::as_slice),
                being_applied,
                targets: None,
            },
            self.observed,
        );
        (!check.complete).then(|| {
            format!(
                "restoring stage {} to snapshot #{} ({}): {}",
                entry.name,
                target.index,
                short_sha(&target.commit.sha),
                check.message
            )
        })
    }

    /// Deletes the stage's profile (unless the promotion preserves profiles on delete). Done once
    /// the delete is issued: a profile being deleted is on its way out (Sveltos withdraws the
    /// add-ons behind its finalizer), and the status describes the world after the step's actions.
    fn withdraw(&self, entry: &RestoredStage, effects: &mut Effects) -> Option<String> {
        if self
            .rejected
            .promotion
            .spec
            .preserve_cluster_profiles_on_delete
        {
            return None;
        }
        let main = stage_profile_name(self.promotion, &entry.name);
        if self.owned_live(&main) {
            effects.delete(main);
        }
        None
    }
}
