//! The pipeline as every view shows it: each stage with what it does ([`StageView`]), from the
//! stages the current run started and those it has not reached.

use chrono::{DateTime, Utc};

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
