//! A stage's cluster counts: over its members (fixed when it started, every wave) while a policy
//! governs, else over the clusters matching now.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageCounts {
    /// The clusters the stage is judged over: its members, fixed when it started (every wave),
    /// while a policy governs; else the clusters matching now. Views count against this.
    #[serde(default)]
    pub members: u32,
    /// Members in waves not reached yet (waiting for their wave).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub later_waves: u32,
    /// Ready, unpaused clusters matching the stage selector (the waves reached, while waves
    /// remain).
    pub matching_clusters: u32,
    pub summaries: u32,
    /// ClusterSummaries carrying the applied spec with every feature freshly Provisioned.
    pub provisioned: u32,
    /// Clusters with a failed feature or a failure message for the applied content.
    pub failed: u32,
    /// Per-cluster states (see [`ClusterState`]); members only while a policy governs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pending: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub provisioning: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub timed_out: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub joined: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vanished: u32,
    /// Members Sveltos pauses now, waiting for their maintenance window (not yet provisioned).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paused: u32,
}
