//! Entering a stage: a new run's first stage (the run state reset, docs/architecture.md#the-restart-rule)
//! or the next stage the pipeline hands over to; the apply of its main profile follows.

use serde_json::Value;
use tollgate_model::model::Stage;
use tollgate_model::policy::OnNewSnapshot;
use tollgate_model::snapshot::short_sha;
use tollgate_render::{spec_hash, stage_profile_name};

use crate::features::fresh_after_apply;
use crate::gates::new_snapshot;
use crate::messages;
use crate::output::{EngineEvent, EventReason};
use crate::run::Run;
use crate::stage::waves;
use crate::status::activity::{StageActivity, WaveOf};
use crate::status::{PromotionStatus, StageStatus};

/// How a stage is entered: as the first stage of a new run (which may replace an earlier run),
/// or because the pipeline advanced to it.
#[derive(Clone, Copy)]
pub(super) enum StageEntry {
    NewRun,
    Advance,
}

impl Run<'_, '_> {
    /// First run or restart (docs/architecture.md#the-restart-rule): the run state is reset and stage 1's profile is
    /// applied with the new snapshot. Later stages keep their profiles until the pipeline reaches
    /// them. The new hashes reach the persisted status only with this apply (D1).
    pub(super) fn start_run(&mut self, first: &Stage) {
        let previous = std::mem::replace(&mut self.status, PromotionStatus::empty());
        let snapshot = self.snapshot;
        self.status.profile_spec_hash = Some(snapshot.hashes.profile_spec.clone());
        self.status.stages_hash = Some(snapshot.hashes.stages.clone());
        self.status.snapshot_index = Some(snapshot.index);
        self.status.snapshot_commit = Some(snapshot.commit.sha.clone());
        self.status.snapshot_id = Some(snapshot.hashes.snapshot_id.clone());
        let rollback_to = self.lineage.rollback_to();
        self.status.rollback_of = rollback_to;
        self.status.rollback = crate::failure::fast_rollback::mode(rollback_to, self.input.policy);
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
        self.enter_stage(first, StageEntry::NewRun);
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
    pub(super) fn enter_stage(&mut self, stage: &Stage, entry: StageEntry) {
        let new_run = matches!(entry, StageEntry::NewRun);
        let now = self.now();
        let profile = stage_profile_name(self.name(), &stage.name);
        let members = self
            .input
            .policy
            .map(|_| crate::stage::clusters::selected(&stage.cluster_selector, self.observed()));
        // A fast rollback restores content that completed here: all clusters at once.
        let fast_rollback = crate::failure::fast_rollback::applies(&self.status, &stage.name);
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
        let hashes_before_apply =
            crate::features::hashes_before_apply(self.observed(), &profile, &fresh_features);
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
            hashes_before_apply,
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
        // Its Provisioning event is derived from the status (`run/transition_events`); the apply
        // itself is queued by `progress_current_stage`, which sees the observed
        // profile does not carry this spec yet.
    }

    /// Features whose ClusterSummary status must be newer than an apply of `spec` to `profile`.
    pub(super) fn fresh_features(&self, profile: &str, spec: &Value, hash: &str) -> Vec<String> {
        fresh_after_apply(self.own_live_profile(profile), spec, hash)
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
}
