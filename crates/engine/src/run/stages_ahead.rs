//! The stages after the current one that the run has not started, as status shows them: with the
//! snapshot their profile still carries, and the start gate's kept answer on the stage it holds.

use tollgate_model::model::Stage;
use tollgate_render::stage_profile_name;

use crate::gates::start_gate::StartHold;
use crate::run::Run;
use crate::status::StageAhead;
use crate::status::activity::StageActivity;

impl Run<'_, '_> {
    /// The stages after the current one that this run has not started, with the snapshot their
    /// profile still carries, so that a new run does not hide what the later stages run.
    pub(super) fn note_stages_ahead(&mut self) {
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
            .map(|(position, stage)| {
                let held = self
                    .held
                    .as_ref()
                    .filter(|hold| hold.shown_ahead(position, &stage.name));
                self.stage_ahead(stage, held)
            })
            .collect();
        self.status.stages_ahead = ahead;
    }

    /// A stage the run has not reached: pending, or what the start gate's hold makes it do (since
    /// the hold began).
    fn stage_ahead(&self, stage: &Stage, held: Option<&StartHold>) -> StageAhead {
        let (activity, activity_since) = match held {
            Some(hold) => {
                let since = self
                    .input
                    .status
                    .and_then(|s| s.stages_ahead.iter().find(|a| a.name == stage.name))
                    .filter(|a| a.activity.same_kind(&hold.activity))
                    .and_then(|a| a.activity_since)
                    .unwrap_or(self.now());
                (hold.activity.clone(), Some(since))
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
}
