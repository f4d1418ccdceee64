//! What a step produces besides the status: applies, events, and the next wake-up; and the one
//! place they become the step's output with its status ([`Effects::into_output`]).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::measurement::MeasurementDue;
use crate::output::{Action, EngineEvent, StepOutput};
use crate::status::{ConsumedApproval, PromotionStatus};

/// What of a step's effects goes out with its status: each outcome says it, none by omission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outgoing {
    /// Everything: deletions, then applies, the wake-up and the measurements due (a run that
    /// goes on).
    Everything,
    /// Deletions, then applies; no wake-up and no measurement: a failed run restores its stages
    /// or waits for a person, a removal deletes.
    ActionsOnly,
    /// The events and the wake-up: a hold on a start, which a time (a blackout's end) or an
    /// input change lifts.
    EventsUntilWake,
    /// The events only: a halted run, a promotion that cannot run, a removal held.
    EventsOnly,
}

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

    /// The step's output: `status`, with what `outgoing` lets out of these effects (the status
    /// records the same wake-up as the output).
    pub fn into_output(self, mut status: PromotionStatus, outgoing: Outgoing) -> StepOutput {
        let actions = || {
            let deletes = self.deletes.into_iter();
            let deletes = deletes.map(|name| Action::DeleteProfile { name });
            deletes.chain(self.applies).collect()
        };
        let (actions, wake_at, measurements) = match outgoing {
            Outgoing::Everything => (actions(), self.wake_at, self.measurements),
            Outgoing::ActionsOnly => (actions(), None, Vec::new()),
            Outgoing::EventsUntilWake => (Vec::new(), self.wake_at, Vec::new()),
            Outgoing::EventsOnly => (Vec::new(), None, Vec::new()),
        };
        status.next_wake_up = wake_at;
        StepOutput {
            actions,
            status,
            events: self.events,
            wake_at,
            measurements,
        }
    }
}
