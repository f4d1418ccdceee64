//! `spec.approvals.<stage>` of a RolloutPolicy: who may open a manual gate, and how many of them
//! must (docs/rollout-policy.md#approvals).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The approval policy of one manual gate, keyed by the name of the stage whose `manual` trigger
/// it governs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ApprovalPolicy {
    /// Principals from the trusted keys (allowed-signers principals, OpenPGP user-ID e-mails); an
    /// unsigned approval is matched by its author's e-mail. Empty: anyone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// Distinct approvers needed; default 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1))]
    pub min_approvals: u32,
    /// No author, committer or signer of a commit that brought the snapshot approves it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forbid_self_approval: bool,
    /// An approval counts only from a commit signed by a trusted key (an approver's, when
    /// `approvers` is set).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_signature: bool,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy {
            approvers: Vec::new(),
            min_approvals: 1,
            forbid_self_approval: false,
            require_signature: false,
        }
    }
}

impl ApprovalPolicy {
    /// Whether `identity` (a principal or e-mail) is one of the approvers; case-insensitive, as
    /// e-mail addresses are compared.
    pub fn lists(&self, identity: &str) -> bool {
        self.approvers
            .iter()
            .any(|approver| approver.eq_ignore_ascii_case(identity))
    }
}
