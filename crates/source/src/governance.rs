//! Changes that could lift a gate take effect only once an admin approves them (issue #44,
//! docs/trust.md#admins). A RolloutPolicy that lists `admins` governs: a change to the policy
//! itself (its removal too), and a change to a promotion it governs that would escape it (its
//! policy choice, or the trigger of a stage the policy gates), wait for a signed
//! `Tollgate-Approve-Policy: <policy>@<change commit>` statement by one of the admins of the
//! version in force. Meanwhile that version stays in force and the promotions it governs hold
//! new runs (`PolicyChangeUnapproved`).
//!
//! The first version of a policy that lists admins is in force as committed (someone had to
//! write it; a policy without admins separates no duties, and `validate` says so).
//!
//! Fed commit by commit after the promotion and policy indexes, like them: pure, no git.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use tollgate_manifest::{ClusterPromotion, CommitInfo, RolloutPolicy};
use tollgate_model::policy::choose_policy;
use tracing::{info, warn};

use crate::index::HistoryIndex;
use crate::policies::PolicyIndex;
pub use crate::trailers::PolicyApproval;
pub use crate::unapproved::{Governance, Unapproved};

/// What a promotion's relation to its governing policy is: the policy it chooses and the
/// triggers of the stages that policy gates. A change of either waits for an admin.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    chosen: Option<String>,
    gated: String,
}

/// The head version of a governed policy when it is not the approved one (`None`: removed),
/// and the commits that changed it since.
type PendingPolicy = (Option<Arc<RolloutPolicy>>, Vec<Arc<CommitInfo>>);

#[derive(Clone, Debug)]
struct GovernedPolicy {
    approved: Arc<RolloutPolicy>,
    pending: Option<PendingPolicy>,
}

#[derive(Clone, Debug)]
struct GovernedPromotion {
    policy: String,
    approved: Fingerprint,
    pending: Option<(Fingerprint, Vec<Arc<CommitInfo>>)>,
}

impl GovernedPromotion {
    /// Governed by `policy`, its relation to it (`print`) approved, nothing waiting.
    fn approved(policy: String, print: Fingerprint) -> Self {
        GovernedPromotion {
            policy,
            approved: print,
            pending: None,
        }
    }
}

/// What one commit changes, for [`GovernanceIndex::apply`].
pub(crate) struct Heads<'a> {
    pub promotions: &'a HistoryIndex,
    pub policies: &'a PolicyIndex,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct GovernanceIndex {
    policies: BTreeMap<String, GovernedPolicy>,
    promotions: BTreeMap<String, GovernedPromotion>,
}

impl GovernanceIndex {
    /// Follows one commit: `touched` are the promotions whose definition it changed; `approvals`
    /// its `Tollgate-Approve-Policy` statements.
    pub fn apply(
        &mut self,
        heads: &Heads<'_>,
        commit: &Arc<CommitInfo>,
        touched: &[String],
        approvals: &[PolicyApproval],
    ) {
        let moved = self.follow_policies(heads.policies, commit);
        if self.policies.is_empty() {
            self.promotions.clear();
            return;
        }
        let names: Vec<String> = match moved {
            true => heads.promotions.names().cloned().collect(),
            false => touched.to_vec(),
        };
        for name in &names {
            self.follow_promotion(name, heads, commit);
        }
        for approval in approvals {
            self.take(approval, heads);
        }
    }

    /// Follows every policy's head; true when a governed policy's head moved.
    fn follow_policies(&mut self, policies: &PolicyIndex, commit: &Arc<CommitInfo>) -> bool {
        let heads: BTreeMap<&String, &Arc<RolloutPolicy>> = policies.heads().collect();
        let mut names: Vec<String> = self.policies.keys().cloned().collect();
        names.extend(
            heads
                .iter()
                .filter(|(_, p)| !p.spec.admins.is_empty())
                .map(|(name, _)| (*name).clone()),
        );
        names.sort();
        names.dedup();
        let mut moved = false;
        for name in names {
            let head = heads.get(&name).copied();
            moved |= self.follow_policy(&name, head, commit);
        }
        moved
    }

    fn follow_policy(
        &mut self,
        name: &str,
        head: Option<&Arc<RolloutPolicy>>,
        commit: &Arc<CommitInfo>,
    ) -> bool {
        let Some(governed) = self.policies.get_mut(name) else {
            let Some(head) = head.filter(|h| !h.spec.admins.is_empty()) else {
                return false;
            };
            let approved = Arc::clone(head);
            self.policies.insert(
                name.to_string(),
                GovernedPolicy {
                    approved,
                    pending: None,
                },
            );
            return true;
        };
        let version = head.map(|h| h.version());
        if version.as_deref() == Some(governed.approved.version().as_str()) {
            return governed.pending.take().is_some();
        }
        match &mut governed.pending {
            Some((pending, _)) if pending.as_ref().map(|p| p.version()) == version => false,
            Some((pending, changes)) => {
                *pending = head.cloned();
                changes.push(Arc::clone(commit));
                true
            }
            None => {
                governed.pending = Some((head.cloned(), vec![Arc::clone(commit)]));
                true
            }
        }
    }

    fn follow_promotion(&mut self, name: &str, heads: &Heads<'_>, commit: &Arc<CommitInfo>) {
        let Some(promotion) = heads.promotions.valid_content(name) else {
            self.promotions.remove(name);
            return;
        };
        let chosen = chosen_policy(promotion, heads.policies);
        let governing = match self.promotions.get(name) {
            Some(governed) => governed.policy.clone(),
            None => match chosen.as_ref().filter(|c| self.policies.contains_key(*c)) {
                Some(chosen) => chosen.clone(),
                None => return,
            },
        };
        let Some(policy) = self.policies.get(&governing) else {
            self.promotions.remove(name);
            return;
        };
        let print = fingerprint(promotion, chosen, &policy.approved);
        let Some(governed) = self.promotions.get_mut(name) else {
            let governed = GovernedPromotion::approved(governing, print);
            self.promotions.insert(name.to_string(), governed);
            return;
        };
        if governed.approved == print {
            governed.pending = None;
            return;
        }
        match &mut governed.pending {
            Some((pending, _)) if *pending == print => {}
            Some((pending, changes)) => {
                *pending = print;
                changes.push(Arc::clone(commit));
            }
            None => governed.pending = Some((print, vec![Arc::clone(commit)])),
        }
    }

    /// Takes one admin statement: the changes under its policy up to the one it names go into
    /// force. A statement that is not an admin's, names no waiting change, or is older than the
    /// change is logged and ignored.
    fn take(&mut self, approval: &PolicyApproval, heads: &Heads<'_>) {
        let name = &approval.trailer.policy;
        let refuse = |why: &str| {
            warn!(commit = %approval.commit.sha, policy = %name, why, "Tollgate-Approve-Policy statement ignored");
        };
        let Some(governed) = self.policies.get(name) else {
            return refuse("the policy lists no admins (or no file defines it)");
        };
        let Some(principals) = approval
            .commit
            .signature
            .as_ref()
            .and_then(|s| s.principals())
        else {
            return refuse("the statement is not signed by a trusted key");
        };
        let Some(admin) = principals
            .iter()
            .find(|p| governed.approved.lists_admin(p))
            .cloned()
        else {
            return refuse("its signer is not an admin of the version in force");
        };
        let Some(named) = self.pending_commits(name).into_iter().find(|c| {
            c.sha
                .to_ascii_lowercase()
                .starts_with(&approval.trailer.change)
        }) else {
            return refuse("it names no change that waits for approval");
        };
        if approval.commit.committed < named.committed {
            return refuse("it was committed before the change it names");
        }
        info!(policy = %name, %admin, change = %named.sha, "RolloutPolicy change approved");
        self.approve(name, named.seq, heads);
    }

    /// Every commit of a change waiting under `policy`.
    fn pending_commits(&self, policy: &str) -> Vec<Arc<CommitInfo>> {
        let own = self
            .policies
            .get(policy)
            .and_then(|g| g.pending.as_ref())
            .map(|(_, changes)| changes.clone())
            .unwrap_or_default();
        let promotions = self
            .promotions
            .values()
            .filter(|g| g.policy == policy)
            .filter_map(|g| g.pending.as_ref())
            .flat_map(|(_, changes)| changes.iter().cloned());
        own.into_iter().chain(promotions).collect()
    }

    /// Puts the changes under `policy` made at or before `seq` into force.
    fn approve(&mut self, policy: &str, seq: u64, heads: &Heads<'_>) {
        let covered =
            |changes: &[Arc<CommitInfo>]| changes.last().is_some_and(|latest| latest.seq <= seq);
        if let Some(governed) = self.policies.get_mut(policy)
            && let Some((head, changes)) = &governed.pending
            && covered(changes)
        {
            match head.clone().filter(|h| !h.spec.admins.is_empty()) {
                Some(head) => {
                    governed.approved = head;
                    governed.pending = None;
                }
                None => {
                    self.policies.remove(policy);
                }
            }
        }
        let names: Vec<String> = self
            .promotions
            .iter()
            .filter(|(_, g)| g.policy == policy)
            .map(|(name, _)| name.clone())
            .collect();
        for name in names {
            self.rebaseline(&name, policy, seq, heads);
        }
    }

    /// After an approval: the promotion's relation to the policy as it is now is approved, if
    /// its own change (if any) was covered.
    fn rebaseline(&mut self, name: &str, policy: &str, seq: u64, heads: &Heads<'_>) {
        let waits_beyond = self
            .promotions
            .get(name)
            .and_then(|g| g.pending.as_ref())
            .is_some_and(|(_, changes)| changes.last().is_some_and(|c| c.seq > seq));
        if waits_beyond {
            return;
        }
        self.promotions.remove(name);
        let Some(promotion) = heads.promotions.valid_content(name) else {
            return;
        };
        let chosen = chosen_policy(promotion, heads.policies);
        let governing = chosen
            .clone()
            .filter(|c| self.policies.contains_key(c))
            .or_else(|| Some(policy.to_string()).filter(|p| self.policies.contains_key(p)));
        let Some(governing) = governing else {
            return;
        };
        let approved = &self.policies[&governing].approved;
        let print = fingerprint(promotion, chosen, approved);
        let governed = GovernedPromotion::approved(governing, print);
        self.promotions.insert(name.to_string(), governed);
    }

    /// The changes waiting for an admin.
    pub fn view(&self) -> Governance {
        let mut view = Governance::default();
        for (name, governed) in &self.policies {
            if let Some((_, changes)) = &governed.pending {
                view.policies.insert(
                    name.clone(),
                    Unapproved {
                        policy: name.clone(),
                        in_force: Arc::clone(&governed.approved),
                        changes: changes.clone(),
                        subject: format!("RolloutPolicy {name:?}"),
                    },
                );
            }
        }
        for (name, governed) in &self.promotions {
            let (Some((_, changes)), Some(policy)) =
                (&governed.pending, self.policies.get(&governed.policy))
            else {
                continue;
            };
            view.promotions.insert(
                name.clone(),
                Unapproved {
                    policy: governed.policy.clone(),
                    in_force: Arc::clone(&policy.approved),
                    changes: changes.clone(),
                    subject: format!(
                        "ClusterPromotion {name:?} (its RolloutPolicy, or the trigger of a stage the policy gates)"
                    ),
                },
            );
        }
        view
    }
}

/// The policy `promotion` chooses at head (`None`: none, or no single one).
fn chosen_policy(promotion: &ClusterPromotion, policies: &PolicyIndex) -> Option<String> {
    choose_policy(&promotion.metadata, policies.heads().map(|(_, p)| &**p))
        .ok()
        .flatten()
        .map(|p| p.name().to_string())
}

fn fingerprint(
    promotion: &ClusterPromotion,
    chosen: Option<String>,
    policy: &RolloutPolicy,
) -> Fingerprint {
    let mut stages: Vec<&str> = policy.gated_stages().collect();
    stages.sort_unstable();
    stages.dedup();
    let gated: Vec<serde_json::Value> = stages
        .iter()
        .map(|name| {
            let stage = promotion.stage(name);
            json!({
                "stage": name,
                "present": stage.is_some(),
                "trigger": stage.and_then(|s| s.trigger.as_ref()),
            })
        })
        .collect();
    Fingerprint {
        chosen,
        gated: serde_json::Value::from(gated).to_string(),
    }
}
