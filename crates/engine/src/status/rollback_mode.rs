//! How a rollback run goes through its stages (RolloutPolicy `rollback.strategy`), as status
//! records it; the rule is in `fast_rollback`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How the current rollback run goes through its stages (status `rollback`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RollbackMode {
    /// Stages where the restored content completed only wait for their clusters.
    Fast,
    /// Every stage with its gates, as a forward change.
    Staged,
}

impl RollbackMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RollbackMode::Fast => "Fast",
            RollbackMode::Staged => "Staged",
        }
    }
}
