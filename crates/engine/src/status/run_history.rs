//! A bounded history of the promotion's recent runs, for pictures of a rollout (`tollgate
//! timeline`): per run its snapshot, when it started and ended and how, and per stage the instants
//! its bars start and end.
//!
//! Derived after every step from the persisted status and the next one ([`record`]), never from
//! messages: the status already carries every transition, but only for the current run; this keeps
//! them once the run is replaced. Like the rest of the status it changes on transitions only, so a
//! step at steady state still writes nothing.

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::status::activity::StageActivity;

/// Runs kept, newest last.
pub const RUNS_KEPT: usize = 10;

/// Stage records kept over all runs: with many stages fewer runs are kept, so that the status stays
/// small (a run of 50 stages is about 10 KB of JSON). The current run is always kept whole.
pub const STAGE_RECORDS_KEPT: usize = 100;

/// How a run ended (or that it has not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RunOutcome {
    /// The current run, still going (waiting, progressing, paused or blocked).
    Running,
    /// Its last stage succeeded.
    Completed,
    /// A stage failed under its RolloutPolicy: halted, or still rolling back.
    Failed,
    /// A stage failed and the stages it reached run what they ran before.
    RolledBack,
    /// A new snapshot started a new run before this one finished.
    Superseded,
}

/// One run of the pipeline: one snapshot rolled out from stage 1.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub snapshot_index: u64,
    /// The short SHA of the commit that introduced the snapshot.
    pub commit: String,
    /// When that commit was made: the lead time of the run's deployments counts from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_at: Option<DateTime<Utc>>,
    /// Set when the run brings back the content of an earlier snapshot (a revert).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<u64>,
    pub started_at: DateTime<Utc>,
    /// The run's OpenTelemetry trace id (`status::trace_ids`): derived from the promotion, the
    /// snapshot and `started_at`, kept so that views need not know the promotion's name. Absent in
    /// runs recorded before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub trace_id: Option<crate::status::trace_ids::TraceId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    pub outcome: RunOutcome,
    /// The stages the run entered, in the order entered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageRecord>,
    /// Stage starts a blackout held (the stage was not entered yet), at most [`HOLDS_KEPT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_starts: Vec<HeldStart>,
    /// A rollback run under a RolloutPolicy: `Fast` or `Staged` (see `fast_rollback`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<crate::status::rollback_mode::RollbackMode>,
}

/// A stage start held by a blackout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeldStart {
    pub stage: String,
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One activity of a stage in a run, from `since` until the next one's `since` (or the run's
/// end, or now).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivitySpan {
    pub activity: StageActivity,
    pub since: DateTime<Utc>,
}

/// Held stage starts kept per run.
pub const HOLDS_KEPT: usize = 8;
/// Activity spans kept per stage and run: the first one and the newest (a stage of many waves
/// loses its middle ones).
pub const SPANS_KEPT: usize = 32;

/// The transitions of one stage in one run. Each instant is the first one seen: a wait that is
/// cleared once it passes keeps its start here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageRecord {
    pub name: String,
    /// The stage was entered: its profile applied with the run's snapshot.
    pub applied_at: DateTime<Utc>,
    /// Every cluster provisioned: the soak (delay, post-delay checks) starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_approval_since: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_window_since: Option<DateTime<Utc>>,
    /// The stage's trigger held and the pipeline moved on (or finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded_at: Option<DateTime<Utc>>,
    /// The stage failed under the run's RolloutPolicy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<DateTime<Utc>>,
    /// A failure rollback restored the stage: to this snapshot (`None`: its profiles withdrawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_to: Option<u64>,
    /// What the stage did, in order: each activity the engine named and since when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub activities: Vec<ActivitySpan>,
    /// The newest comparison of each comparative analysis of the stage (issue #48), in the words
    /// every view shows: `latency: prod-1, prod-2 (median 0.26) vs OtherWaves … (Failed)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<String>,
}

/// The run history as kept in status. Shared, not copied: every step starts from a clone of the
/// persisted status, and a history copied on each of them was 60 % of a steady-state step's time
/// (engine bench); it is copied only when a step changes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunHistory(pub(crate) Arc<Vec<RunRecord>>);

impl RunHistory {
    pub fn new(runs: Vec<RunRecord>) -> Self {
        RunHistory(Arc::new(runs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Both are the same copy (a step that changed no run passes the history on as it was).
    pub fn is_shared_with(&self, other: &RunHistory) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for RunHistory {
    type Target = [RunRecord];

    fn deref(&self) -> &[RunRecord] {
        &self.0
    }
}

impl Serialize for RunHistory {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.as_slice().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RunHistory {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<RunRecord>::deserialize(deserializer).map(RunHistory::new)
    }
}

/// The schema of a list of runs (the CRD's `status.runs`).
impl JsonSchema for RunHistory {
    fn inline_schema() -> bool {
        <Vec<RunRecord>>::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        <Vec<RunRecord>>::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        <Vec<RunRecord>>::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <Vec<RunRecord>>::json_schema(generator)
    }
}

impl StageRecord {
    /// A stage entered at `applied_at`, with no later transition yet.
    pub fn new(name: String, applied_at: DateTime<Utc>) -> Self {
        StageRecord {
            name,
            applied_at,
            provisioned_at: None,
            awaiting_approval_since: None,
            awaiting_window_since: None,
            succeeded_at: None,
            failed_at: None,
            restored_at: None,
            restored_to: None,
            activities: Vec::new(),
            comparisons: Vec::new(),
        }
    }
}
