//! What a step produces besides the status: applies, events, and the next wake-up.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::measurement::MeasurementDue;
use crate::output::{Action, EngineEvent};
use crate::status::ConsumedApproval;

#[derive(Default)]
pub(crate) struct Effects {
    pub applies: Vec<Action>,
    /// Profiles to delete in this step (besides the stale ones `finish` finds).
    pub deletes: Vec<String>,
    pub events: Vec<EngineEvent>,
    pub wake_at: Option<DateTime<Utc>>,
    /// Analysis measurements due now.
    pub measurements: Vec<MeasurementDue>,
    /// Approvals used in this step whatever the stage's outcome (an inconclusive wave let pass).
    pub consumed: Vec<ConsumedApproval>,
}

impl Effects {
    /// Queue an apply, replacing an earlier one of the same object in this step.
    pub fn apply(&mut self, name: String, object: Value) {
        self.applies.retain(|a| a.profile_name() != name);
        self.applies.push(Action::ApplyProfile { name, object });
    }

    pub fn delete(&mut self, name: String) {
        if !self.deletes.contains(&name) {
            self.deletes.push(name);
        }
    }

    pub fn wake(&mut self, at: DateTime<Utc>) {
        // An instant that never comes (a window that never opens) is no wake-up.
        if at == DateTime::<Utc>::MAX_UTC {
            return;
        }
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }
}
