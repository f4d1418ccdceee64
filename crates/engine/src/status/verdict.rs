//! What a content did when it last ran in a promotion: completed, or rejected. Kept in status
//! (bounded) for `lineage`, which tells a rollback from a forward change by it.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Verdicts kept in status, newest last; one per content.
pub const VERDICTS_KEPT: usize = 16;

/// What one content did when it last ran in this promotion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentVerdict {
    /// The content's identity (`tollgate.dev/snapshot-id`).
    pub snapshot_id: String,
    /// The snapshot whose run gave the verdict.
    pub snapshot_index: u64,
    pub verdict: Verdict,
    pub at: DateTime<Utc>,
    /// Why it was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Verdict {
    /// Its run completed every stage: known good.
    Completed,
    /// A stage failed under the policy: the run was halted or rolled back.
    Rejected,
}
