//! The state one look at the current stage works on ([`StageRun`]) and what stops it
//! ([`Hold`]): the types the stage pipeline (`stage`) and its gate (`gate`) share.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_model::blackout::ActiveBlackout;
use tollgate_model::model::Stage;
use tollgate_model::policy::{OnFailure, StagePolicy};
use tollgate_model::snapshot::{ApprovalEvent, Snapshot};

use crate::effects::Effects;
use crate::measurement::Measurement;
use crate::observed::Observed;
use crate::status::activity::StageActivity;
use crate::status::{ClusterCondition, ConsumedApproval, StageStatus};

/// Why the stage does not move on in this step.
#[derive(Debug)]
pub(crate) enum Hold {
    /// Waiting for something (Sveltos, time, a person): what the stage does meanwhile (which
    /// makes the promotion's phase) and why, in words.
    Wait(StageActivity, String),
    /// The stage cannot go on without a fix by the user; recorded as its failure.
    Failed(String),
    /// More clusters failed or timed out than the stage's RolloutPolicy tolerates: the run fails.
    Exceeded(Exceeded),
}

/// A stage's failure budget is spent.
#[derive(Debug)]
pub(crate) struct Exceeded {
    pub reason: String,
    pub clusters: Vec<ClusterCondition>,
    pub on_failure: OnFailure,
}

/// Everything the steps read, and the two things they write: the stage's status and the effects.
pub(crate) struct StageRun<'a, 's> {
    pub snapshot: &'a Snapshot,
    pub stage: &'a Stage,
    pub observed: &'a Observed,
    pub approvals: &'a [ApprovalEvent],
    pub consumed: &'s [ConsumedApproval],
    pub now: DateTime<Utc>,
    pub st: &'s mut StageStatus,
    pub effects: &'s mut Effects,
    /// Post-delay checks already appended to the main profile's spec.
    pub checks: &'a [Value],
    /// The stage's profiles, and which of them (or the next stage's) are held by someone else.
    pub profiles: StageProfiles,
    /// The run's spec for the main profile, once rendered (at most once per step).
    pub spec: Option<Value>,
    /// The main profile is (re)applied in this step: statuses cannot be fresh yet.
    pub main_applied_now: bool,
    /// The pre-verification spec and whether it is applied in this step.
    pub preverification: Option<(Value, bool)>,
    /// What the run's RolloutPolicy says for this stage; `None`: no policy (wait forever).
    pub policy: Option<StagePolicy>,
    /// A blackout in force now: no next wave starts.
    pub blackout: Option<ActiveBlackout>,
    /// Analysis measurements the controller's runner took (see `analysis`).
    pub measurements: &'a [Measurement],
}

/// Names of the profiles a stage step looks at, with what is known of their owners.
pub(crate) struct StageProfiles {
    pub main: String,
    pub preverification: String,
    pub foreign_main: bool,
    pub foreign_preverification: bool,
    /// The next stage's main profile, when someone else holds it.
    pub foreign_next: Option<String>,
    /// The spec hash the run wants on the main profile, and the features that apply must
    /// refresh when it differs from the recorded one (appended checks edited within the run).
    pub wanted_hash: String,
    pub re_recorded_fresh: Option<Vec<String>>,
}
