//! The pipeline as every view shows it: each stage with what it does ([`StageView`]), from the
//! stages the current run started and those it has not reached.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::status::activity::StageActivity;
use crate::status::{PromotionStatus, StageCounts, StageStatus};

/// Names the activity of stages a status written before activities existed left unnamed: done
/// stages and a failed one (the current stage gets its activity from the step itself).
pub(crate) fn name_unnamed(status: &mut PromotionStatus) {
    let failed = status
        .failure
        .as_deref()
        .map(|f| (f.stage.clone(), f.reason.clone(), f.at));
    for st in &mut status.stages {
        if st.activity != StageActivity::Pending {
            continue;
        }
        if let Some(at) = st.succeeded_at {
            st.activity = match st.skipped {
                true => StageActivity::Skipped,
                false => StageActivity::Completed,
            };
            st.activity_since = at;
        } else if let Some((_, reason, at)) = failed.as_ref().filter(|(s, _, _)| *s == st.name) {
            st.activity = StageActivity::Failed {
                reason: reason.clone(),
            };
            st.activity_since = *at;
        }
    }
}

/// One stage as every view shows it, in spec order: the stages the current run started, then
/// those it has not reached.
#[derive(Clone, Copy, Debug)]
pub struct StageView<'s> {
    pub name: &'s str,
    pub activity: &'s StageActivity,
    /// Since when (`None`: pending, not held).
    pub since: Option<DateTime<Utc>>,
    /// The snapshot the stage runs: what its profile carries, or what a rollback restored.
    pub snapshot: Option<u64>,
    /// Its counts, for a stage the current run started.
    pub counts: Option<&'s StageCounts>,
    /// The stage's full status, for a stage the current run started.
    pub status: Option<&'s StageStatus>,
}

impl PromotionStatus {
    /// Every stage with what it does, in spec order (see [`StageView`]).
    pub fn pipeline(&self) -> Vec<StageView<'_>> {
        let mut views = self.recorded_pipeline();
        // A blackout holding a new run's start: the held stage still runs the older snapshot,
        // and, unless it is still busy with the run before, what it does now is wait for the
        // blackout's end.
        if let Some(held) = self.blackout_holds.as_deref()
            && Some(held.snapshot_index) != self.snapshot_index
            && held.activity != StageActivity::Pending
            && let Some(view) = views.iter_mut().find(|v| {
                v.name == held.stage
                    && (v.activity.is_final() || *v.activity == StageActivity::Pending)
            })
        {
            view.activity = &held.activity;
            view.since = held.since;
        }
        views
    }

    /// The stages as the status records them: those the current run started, then the others.
    fn recorded_pipeline(&self) -> Vec<StageView<'_>> {
        let started = self.stages.iter().map(|st| StageView {
            name: &st.name,
            activity: &st.activity,
            since: Some(st.activity_since),
            snapshot: match &st.activity {
                StageActivity::Restored { snapshot } => *snapshot,
                _ => Some(st.snapshot_index),
            },
            counts: Some(&st.counts),
            status: Some(st),
        });
        let ahead = self.stages_ahead.iter().map(|ahead| StageView {
            name: &ahead.name,
            activity: &ahead.activity,
            since: ahead.activity_since,
            snapshot: ahead.snapshot_index,
            counts: None,
            status: None,
        });
        started.chain(ahead).collect()
    }
}

impl<'s> StageView<'s> {
    /// The counts every view shows for the stage: those of a stage the current run started,
    /// except while a rollback restores it or once it has (they count the rejected snapshot's
    /// clusters, not what the stage runs now).
    pub fn shown_counts(&self) -> Option<&'s StageCounts> {
        match self.activity {
            StageActivity::RollingBack { .. } | StageActivity::Restored { .. } => None,
            _ => self.counts,
        }
    }
}

impl PromotionStatus {
    /// The stage the promotion's phase is about, as every view names it: the first stage doing
    /// something now (neither pending nor done with the run: provisioning, waiting, held,
    /// paused, rolling back), else the run's current stage.
    pub fn current_stage(&self) -> Option<&str> {
        let pipeline = self.pipeline();
        let named = self.current_stage_name.as_deref();
        // A status with no stage listed (written by hand, or before stages were) still names it.
        current_of(&pipeline, named).map(|view| view.name).or(named)
    }
}

/// The view of [`PromotionStatus::current_stage`] in `pipeline`.
pub fn current_of<'v, 's>(
    pipeline: &'v [StageView<'s>],
    current_stage_name: Option<&str>,
) -> Option<&'v StageView<'s>> {
    pipeline
        .iter()
        .find(|view| *view.activity != StageActivity::Pending && !view.activity.is_final())
        .or_else(|| {
            let name = current_stage_name?;
            pipeline.iter().find(|view| view.name == name)
        })
}

/// A stage of the projection as machine-readable output carries it (`status -o json`'s
/// `pipeline`): what [`StageView`] says, without the raw status.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectedStage<'s> {
    pub stage: &'s str,
    pub activity: &'s StageActivity,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<&'s StageCounts>,
}

impl<'s> StageView<'s> {
    /// The stage as machine-readable output carries it.
    pub fn projected(&self) -> ProjectedStage<'s> {
        ProjectedStage {
            stage: self.name,
            activity: self.activity,
            since: self.since,
            snapshot: self.snapshot,
            counts: self.shown_counts(),
        }
    }
}
