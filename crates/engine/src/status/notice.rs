//! One thing worth telling about a promotion's rollout ([`Notice`]): the data `notices` derives
//! from a transition and the status keeps until it is delivered.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tollgate_model::policy::NotifyEvent;

use crate::status::counts::StageCounts;
use crate::status::phase::Phase;

/// One thing worth telling about a promotion's rollout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// Stable across restarts and replicas: hash of (promotion, snapshot index, run start,
    /// stage, kind[, wave or blackout end]), URL-safe base64.
    pub id: String,
    /// The event, as endpoints list it in `events`.
    #[schemars(with = "String")]
    pub kind: NotifyEvent,
    pub promotion: String,
    /// The stage it is about (for `Completed`, the last stage; for `RolledBack`, the failed one;
    /// for `BlackoutHeld`, the stage whose start or next wave is held).
    pub stage: String,
    pub snapshot_index: u64,
    /// Full SHA of the commit that introduced the run's snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_commit: Option<String>,
    /// Author of that commit (from git: the controller fills it in when it records the notice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// The promotion's phase after the step.
    pub phase: Phase,
    /// Why, in plain words (the failure reason, the waiting reason, the status message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The stage's cluster counts after the step.
    pub counts: StageCounts,
    /// When the transition happened (from status, or the step's time for a hold).
    pub time: DateTime<Utc>,
}
