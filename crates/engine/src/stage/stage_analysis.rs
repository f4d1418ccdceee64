//! The analysis step of the stage pipeline (see `stage`): once the stage's clusters are
//! provisioned its analyses measure over the soak; a failed one fails the stage (`scope: Stage`)
//! or its cluster (`scope: Cluster`, against the failure budget), an inconclusive one holds the
//! stage until approved through git, and the stage is done only when every deciding analysis
//! succeeded.

use chrono::{DateTime, Utc};
use tollgate_model::model::ManualTrigger;

use tollgate_model::compare::Baseline;

use crate::gates::analysis::{self, AnalysisInput};
use crate::gates::approval;
use crate::gates::cohorts::CohortSources;
use crate::gates::stage_run::{Exceeded, Hold, StageRun};
use crate::output::{EngineEvent, EventReason};
use crate::stage::clusters;
use crate::status::activity::StageActivity;
use crate::status::analysis_run::AnalysisPhase;
use crate::status::{Approver, ClusterCondition, ClusterState, ConsumedApproval, WaveApprover};

/// Where the stage's analyses stand after the analysis step.
#[derive(Debug, Default)]
pub(crate) struct Analyzed {
    /// Measurements remain: what, and when the next one is due.
    waiting: Option<(String, Option<DateTime<Utc>>)>,
    /// An approval let an inconclusive analysis pass: recorded as consumed.
    pub consumes: Option<ConsumedApproval>,
}

impl Analyzed {
    /// The stage may go on only once its analyses are done (after its soak, they extend it).
    pub fn done(&self) -> Result<(), Hold> {
        match &self.waiting {
            None => Ok(()),
            Some((what, until)) => Err(Hold::Wait(
                StageActivity::Analyzing { until: *until },
                format!("waiting for analyses: {what}"),
            )),
        }
    }
}

impl StageRun<'_, '_> {
    /// 2b. The stage's analyses (none without a policy naming some), once it is provisioned
    /// (its last wave's, for a waved stage).
    pub(crate) fn analyze(&mut self) -> Result<Analyzed, Hold> {
        let Some(provisioned_at) = self.st.provisioned_at else {
            return Ok(Analyzed::default());
        };
        let members = self.st.members.clone().unwrap_or_default();
        let wave = self.st.waves.as_deref().map(|w| w.reached);
        self.analyze_from(provisioned_at, wave, &members)
    }

    /// 2a'. Between waves: the wave just provisioned (at `done_at`) is analysed over the waves
    /// reached, and the next wave starts only once those analyses succeeded. An approval that
    /// lets an inconclusive wave pass is consumed at once: it never passes a later wave.
    pub(crate) fn analyze_wave(&mut self, done_at: DateTime<Utc>) -> Result<(), Hold> {
        let Some(waves) = self.st.waves.as_deref() else {
            return Ok(());
        };
        let (wave, total, reached) = (waves.reached, waves.total(), waves.reached_clusters());
        let analyzed = self.analyze_from(done_at, Some(wave), &reached)?;
        if let Some(consumed) = analyzed.consumes.clone() {
            self.effects.consumed.push(consumed);
        }
        analyzed.done().map_err(|hold| match hold {
            Hold::Wait(activity, why) => {
                Hold::Wait(activity, format!("wave {wave}/{total} provisioned; {why}"))
            }
            other => other,
        })
    }

    /// Starts, records and judges the analyses of the clusters `members` (those of the waves
    /// reached, for `wave`), provisioned at `provisioned_at`.
    fn analyze_from(
        &mut self,
        provisioned_at: DateTime<Utc>,
        wave: Option<u32>,
        members: &[String],
    ) -> Result<Analyzed, Hold> {
        let Some(policy) = self.policy.clone().filter(|p| !p.analyses.is_empty()) else {
            return Ok(Analyzed::default());
        };
        let mut runs = self
            .st
            .analyses
            .take()
            .map(std::sync::Arc::unwrap_or_clone)
            .unwrap_or_default();
        let next_stage = self.next_stage_clusters(&policy);
        let outcome = analysis::progress(
            &mut runs,
            &AnalysisInput {
                promotion: self.snapshot.promotion.name(),
                stage: &self.stage.name,
                snapshot: self.snapshot,
                analyses: &policy.analyses,
                measurements: self.measurements,
                observed: self.observed,
                members,
                wave,
                now: self.now,
                cohorts: CohortSources {
                    members,
                    waves: self.st.waves.as_deref(),
                    next_stage: &next_stage,
                    applied_at: self.st.applied_at,
                },
                score: policy.score,
            },
            provisioned_at,
        );
        self.st.analyses = Some(std::sync::Arc::new(runs));
        self.effects.events.extend(outcome.events);
        self.effects.measurements.extend(outcome.due);
        if let Some(next) = outcome.next_due {
            self.effects.wake(next);
        }
        if let Some(reason) = outcome.stage_failed {
            return Err(Hold::Exceeded(Exceeded {
                reason,
                clusters: Vec::new(),
                on_failure: policy.on_failure,
            }));
        }
        self.budget_with_failed_clusters(&outcome.clusters_failed, &policy)?;
        let consumes = match outcome.inconclusive {
            Some(reason) => Some(self.approved_past_inconclusive(reason)?),
            None => None,
        };
        Ok(Analyzed {
            waiting: outcome.running.map(|what| (what, outcome.next_due)),
            consumes: consumes.flatten(),
        })
    }

    /// The clusters the next stage selects, when an analysis compares with them (issue #48).
    fn next_stage_clusters(&self, policy: &tollgate_model::policy::StagePolicy) -> Vec<String> {
        let compares_with_next = policy
            .analyses
            .iter()
            .any(|a| a.compare.as_ref().map(|c| c.baseline) == Some(Baseline::NextStage));
        let stages = &self.snapshot.promotion.spec.stages;
        let next = stages
            .iter()
            .position(|s| s.name == self.stage.name)
            .and_then(|at| stages.get(at + 1));
        match next {
            Some(next) if compares_with_next => {
                clusters::selected(&next.cluster_selector, self.observed)
            }
            _ => Vec::new(),
        }
    }

    /// Clusters failed by their analysis are Failed in the stage's per-cluster state
    /// (`AnalysisFailed`) and count against its budget with the others; a spent budget fails
    /// the run naming them.
    fn budget_with_failed_clusters(
        &mut self,
        failed: &[(String, String, DateTime<Utc>)],
        policy: &tollgate_model::policy::StagePolicy,
    ) -> Result<(), Hold> {
        let newly = clusters::list_failed_by_analysis(&mut self.st.not_provisioned, failed);
        let counts = &mut self.st.counts;
        counts.failed += newly;
        counts.provisioned = counts.provisioned.saturating_sub(newly);
        let failures = counts.failed + counts.timed_out;
        let allowed = self.st.allowed_failures.unwrap_or(0);
        if failures <= allowed {
            return Ok(());
        }
        let failing: Vec<ClusterCondition> = self
            .st
            .not_provisioned
            .iter()
            .filter(|c| matches!(c.state, ClusterState::Failed | ClusterState::TimedOut))
            .take(10)
            .cloned()
            .collect();
        let first = failing
            .iter()
            .take(3)
            .map(|c| format!("{} {}", c.cluster, c.message.as_deref().unwrap_or("")))
            .collect::<Vec<_>>()
            .join("; ");
        Err(Hold::Exceeded(Exceeded {
            reason: format!(
                "{failures} of {} clusters failed or timed out, over maxFailures {allowed}: {first}",
                counts.members
            ),
            clusters: failing,
            on_failure: policy.on_failure,
        }))
    }

    /// An inconclusive analysis holds the stage like a manual gate: an approval of this stage
    /// for the run's snapshot (the annotation `approve.tollgate.dev/<stage>`) lets it go on.
    fn approved_past_inconclusive(
        &mut self,
        reason: String,
    ) -> Result<Option<ConsumedApproval>, Hold> {
        let gate = ManualTrigger::default();
        let wave = self.st.waves.as_deref().map(|w| w.reached);
        let passed_another_wave = |commit: &str| {
            self.st
                .analyses
                .iter()
                .flat_map(|runs| runs.iter())
                .any(|r| r.wave != wave && r.approved_by.as_deref() == Some(commit))
        };
        let found = approval::find(
            self.snapshot,
            &self.stage.name,
            &gate,
            self.approvals,
            self.consumed,
        )
        .filter(|valid| {
            // Each inconclusive wave is a new decision: an approval that let one pass is spent.
            valid
                .consumes
                .as_ref()
                .is_none_or(|c| !passed_another_wave(&c.commit))
        });
        let Some(valid) = found else {
            return Err(Hold::Wait(
                StageActivity::AnalysisInconclusive {
                    reason: reason.clone(),
                },
                format!(
                    "{reason}; approve to go on: tollgate approve {} {}",
                    self.snapshot.promotion.name(),
                    self.stage.name
                ),
            ));
        };
        if let Some(consumed) = &valid.consumes {
            self.mark_approved(wave, &consumed.commit);
        }
        self.tell_approver(wave, valid.approver);
        Ok(valid.consumes)
    }

    /// Tells and keeps who approved: once per wave of a waved stage, else once per stage.
    fn tell_approver(&mut self, wave: Option<u32>, approver: Approver) {
        let waved = self.st.waves.as_deref().is_some_and(|w| w.total() > 1);
        let wave_told = |st: &crate::status::StageStatus, wave| {
            st.wave_approvers
                .as_deref()
                .is_some_and(|a| a.iter().any(|w| w.wave == wave))
        };
        match wave.filter(|_| waved) {
            // Each wave is its own decision, and its approver is told and kept (issue #45).
            Some(wave) if !wave_told(self.st, wave) => {
                self.effects.events.push(EngineEvent::normal(
                    EventReason::ApprovalUsed,
                    format!(
                        "{} (wave {wave})",
                        approval::used_note(&self.stage.name, self.snapshot, &approver)
                    ),
                ));
                self.st
                    .wave_approvers
                    .get_or_insert_default()
                    .push(WaveApprover {
                        wave,
                        approver: approver.clone(),
                    });
                self.st.approver.get_or_insert_with(|| Box::new(approver));
            }
            Some(_) => {}
            None if self.st.approver.is_none() => {
                self.effects.events.push(EngineEvent::normal(
                    EventReason::ApprovalUsed,
                    approval::used_note(&self.stage.name, self.snapshot, &approver),
                ));
                self.st.approver = Some(Box::new(approver));
            }
            None => {}
        }
    }

    /// The inconclusive runs of `wave` were let pass by the approval in `commit`.
    fn mark_approved(&mut self, wave: Option<u32>, commit: &str) {
        let runs = self.st.analyses.as_mut().map(std::sync::Arc::make_mut);
        for run in runs.into_iter().flat_map(|runs| runs.iter_mut()) {
            if run.wave == wave && run.phase == AnalysisPhase::Inconclusive {
                run.approved_by = Some(commit.to_string());
            }
        }
    }
}
