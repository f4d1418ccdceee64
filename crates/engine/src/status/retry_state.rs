//! What status keeps of retries (`retry.tollgate.dev/<stage>`): the counters consumed and a
//! retry in progress on a stage; the rules are in `retry`.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The highest retry counter consumed for a stage and snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsumedRetry {
    pub stage: String,
    /// The full snapshot id the value named (the value itself when it names no known snapshot).
    pub snapshot_id: String,
    pub n: u64,
    pub at: DateTime<Utc>,
    /// The retry re-drove the stage (false: refused).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redriven: bool,
}

/// A retry in progress on a stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageRetry {
    /// The counter of the retry.
    pub n: u64,
    pub at: DateTime<Utc>,
    /// The re-driven clusters (`namespace/name`, sorted): Failed or TimedOut at the halt.
    pub clusters: Vec<String>,
    /// The clusters the profile keeps targeting while the re-driven ones' summaries go.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
    /// Those of `kept` that are Cluster API clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capi: Vec<String>,
    /// When the re-driven clusters' summaries were seen gone and the profile targeted them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readded_at: Option<DateTime<Utc>>,
}

impl StageRetry {
    /// The re-driven clusters' summaries are still being withdrawn.
    pub fn withdrawing(&self) -> bool {
        self.readded_at.is_none()
    }
}
