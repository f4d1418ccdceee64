//! What governance (issue #44) leaves waiting for an admin: the changes no admin approved yet.
//! Below both `governance`, which finds them commit by commit, and `policies`, whose set carries
//! them to the promotions they hold.

use std::collections::BTreeMap;
use std::sync::Arc;

use tollgate_manifest::{CommitInfo, RolloutPolicy};
use tollgate_model::snapshot::short_sha;

/// A governed change no admin approved yet.
#[derive(Clone, Debug, PartialEq)]
pub struct Unapproved {
    /// The policy whose admins approve it.
    pub policy: String,
    /// The version of that policy in force meanwhile.
    pub in_force: Arc<RolloutPolicy>,
    /// The commits that made the change, oldest first (never empty).
    pub changes: Vec<Arc<CommitInfo>>,
    /// What changed: `RolloutPolicy "gates"`, `ClusterPromotion "web"`.
    pub subject: String,
}

impl Unapproved {
    /// The newest commit of the change: what `tollgate approve --policy` names.
    pub fn latest(&self) -> &CommitInfo {
        self.changes.last().expect("a change has a commit")
    }

    /// Why the promotions it concerns are held, and how to lift it.
    pub fn message(&self) -> String {
        let latest = self.latest();
        let admins = self.in_force.spec.admins.join(", ");
        format!(
            "the change to {} at commit {} ({:?} by {} <{}>) waits for approval by the admins of RolloutPolicy {:?} ({admins}): one of them runs `tollgate approve --policy {}` (signed); version {} stays in force",
            self.subject,
            short_sha(&latest.sha),
            latest.subject,
            latest.author,
            latest.author_email,
            self.policy,
            self.policy,
            self.in_force.version()
        )
    }
}

/// The changes waiting for an admin at the branch head.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Governance {
    /// By policy name: a change to the policy itself.
    pub policies: BTreeMap<String, Unapproved>,
    /// By promotion name: a change that would move the promotion out of its policy's gates.
    pub promotions: BTreeMap<String, Unapproved>,
}

impl Governance {
    /// Every change waiting for the admins of `policy`, oldest commit first.
    pub fn pending_for(&self, policy: &str) -> Vec<&Unapproved> {
        let mut pending: Vec<&Unapproved> = self
            .policies
            .values()
            .chain(self.promotions.values())
            .filter(|u| u.policy == policy)
            .collect();
        pending.sort_by_key(|u| u.latest().seq);
        pending
    }
}
