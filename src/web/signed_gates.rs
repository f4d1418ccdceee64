//! Approvals the web view must not offer (issue #44 item 9). An approval made through the web
//! view is the server's commit: signed with the server's key, or not at all. Under an approval
//! policy with `requireSignature`, only an approver's own signature counts, so such a button
//! could never open the gate (or, were the server's key an approver's, would let anyone who
//! reaches the page approve as that approver; `tollgate run --ui` refuses to start then, see
//! `cli::ui_signing`). For those stages the page shows the signed command each approver runs,
//! and an approve POST is refused.

use std::sync::Arc;

use tollgate_engine::PromotionStatus;
use tollgate_model::policy::RolloutPolicy;
use tollgate_source::{PolicySet, PromotionView};

/// What git says about the RolloutPolicies that may govern one promotion's gates.
#[derive(Clone, Debug, Default)]
pub struct GatePolicies {
    /// The policies at the branch tip: the one the status names is looked up here.
    set: PolicySet,
    /// The policy git chooses for the promotion's running snapshot at the tip.
    chosen: Option<Arc<RolloutPolicy>>,
    /// False when git cannot say which policy governs it (a conflict, a name no file defines).
    resolved: bool,
}

impl GatePolicies {
    /// The policies that may govern `view`'s running snapshot, from the policies at the tip.
    pub fn read(set: &PolicySet, view: &PromotionView) -> GatePolicies {
        let (chosen, resolved) = match view.effective_snapshot() {
            None => (None, false),
            Some(snapshot) => match set.choose(&snapshot.promotion, &snapshot.file) {
                Ok(chosen) => (chosen, true),
                // Only the chosen policy's file is broken: its last valid version governs.
                Err(problem) => (problem.chosen.clone(), problem.chosen.is_some()),
            },
        };
        GatePolicies {
            set: set.clone(),
            chosen,
            resolved,
        }
    }

    /// The approvers the policy git chooses wants for `stage`, when more than one (what
    /// `tollgate approve` reads to write a trailer instead of the annotation).
    pub fn trailer_approvals(&self, stage: &str) -> Option<u32> {
        let policy = self.chosen.as_ref()?;
        tollgate_source::edit::approval_in_trailer(policy.spec.approvals.get(stage))
    }

    /// The name of a policy that may govern the promotion and wants signed approvals of
    /// `stage`: `Some(Some(name))`; `Some(None)` when none does; `None` when git cannot say.
    /// `named` is the policy the status says governed the run at its last step.
    fn requiring_signature(&self, named: Option<&str>, stage: &str) -> Option<Option<String>> {
        let from_status = named.map(|name| self.set.last_valid(name));
        let candidates = self.chosen.iter().chain(from_status.iter().flatten());
        let requiring = candidates
            .filter(|policy| {
                policy
                    .spec
                    .approvals
                    .get(stage)
                    .is_some_and(|approval| approval.require_signature)
            })
            .map(|policy| policy.name().to_string())
            .next();
        let known = self.resolved && from_status.as_ref().is_none_or(Option::is_some);
        match requiring {
            Some(name) => Some(Some(name)),
            None if known => Some(None),
            None => None,
        }
    }
}

/// How a person approves a stage through the web view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalRoute {
    /// The button: the commit it makes counts like any other approval.
    Button,
    /// The signed command only; `why` says which policy wants signatures, or that the web view
    /// cannot tell.
    SignedCommand { why: String },
}

/// The route for approving `stage` of the promotion whose status is `status`. `git` is what
/// the repository says (`None` without one): without it the status is all there is, and a
/// stage whose status lists approval reviews has an approval policy that may want signatures,
/// so it gets the command rather than a button that may not count.
pub fn route(status: &PromotionStatus, git: Option<&GatePolicies>, stage: &str) -> ApprovalRoute {
    let named = status.policy.as_ref().map(|p| p.name.as_str());
    let under_policy = status
        .stages
        .iter()
        .any(|st| st.name == stage && st.approvals.is_some());
    match git.map(|git| git.requiring_signature(named, stage)) {
        Some(Some(Some(policy))) => ApprovalRoute::SignedCommand {
            why: format!("RolloutPolicy {policy} has requireSignature for {stage}"),
        },
        Some(Some(None)) => ApprovalRoute::Button,
        _ if under_policy => ApprovalRoute::SignedCommand {
            why: format!(
                "an approval policy governs {stage}, and without reading it the web view cannot \
                 tell whether it has requireSignature"
            ),
        },
        _ => ApprovalRoute::Button,
    }
}

/// The note beside the command on the page.
pub fn note(why: &str) -> String {
    format!(
        "Approvals here count only when signed by an approver's own key ({why}). An approval \
         made by the web view would be the server's commit, so there is no button: run this \
         signed with your own key (git config user.signingKey), then merge the branch it prints."
    )
}

/// Why an approve POST for such a stage is refused, and what to run instead.
pub fn refusal(command: &str, why: &str) -> String {
    format!(
        "The web view does not approve here: approvals count only when signed by an approver's \
         own key ({why}), and an approval it made would be the server's commit. Run `{command}` \
         signed with your own key."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(name: &str, stage: &str, require_signature: bool) -> Arc<RolloutPolicy> {
        let approvals = json!({stage: {"approvers": ["alice@example.com"], "requireSignature": require_signature}});
        let policy = json!({
            "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": name}, "spec": {"approvals": approvals},
        });
        Arc::new(serde_json::from_value(policy).expect("a policy"))
    }

    /// A status waiting at `prod`, governed by `named`, with approval reviews when `reviewed`.
    fn status(named: Option<&str>, reviewed: bool) -> PromotionStatus {
        let mut prod = json!({
            "name": "prod", "activity": {"kind": "AwaitingApproval"},
            "activitySince": "2026-01-01T00:00:00Z", "snapshotIndex": 1,
            "appliedAt": "2026-01-01T00:00:00Z", "appliedSpecHash": "h",
        });
        if reviewed {
            prod["approvals"] = json!([]);
        }
        let mut status = json!({"hashScheme": 1, "phase": "Waiting", "stages": [prod], "runs": []});
        if let Some(name) = named {
            status["policy"] = json!({"name": name, "version": "v"});
        }
        serde_json::from_value(status).expect("a status")
    }

    fn gates(
        chosen: Option<Arc<RolloutPolicy>>,
        at_tip: &[Arc<RolloutPolicy>],
        resolved: bool,
    ) -> GatePolicies {
        let set = PolicySet::new(
            at_tip
                .iter()
                .map(|p| (p.clone(), "policy.yaml".to_string()))
                .collect(),
            Vec::new(),
        );
        GatePolicies {
            set,
            chosen,
            resolved,
        }
    }

    fn signed(route: ApprovalRoute) -> bool {
        matches!(route, ApprovalRoute::SignedCommand { .. })
    }

    #[test]
    fn the_policy_git_chooses_or_the_status_names_decides() {
        let strict = policy("strict", "prod", true);
        let lax = policy("lax", "prod", false);
        let git = gates(Some(strict.clone()), std::slice::from_ref(&strict), true);
        assert_eq!(
            route(&status(Some("strict"), true), Some(&git), "prod"),
            ApprovalRoute::SignedCommand {
                why: "RolloutPolicy strict has requireSignature for prod".into()
            }
        );
        assert!(
            !signed(route(&status(None, false), Some(&git), "dev")),
            "another stage"
        );
        let git = gates(Some(lax.clone()), std::slice::from_ref(&lax), true);
        assert!(!signed(route(
            &status(Some("lax"), true),
            Some(&git),
            "prod"
        )));
        // The run's policy (by name in status) wants signatures though git now chooses another.
        let git = gates(Some(lax.clone()), &[lax, strict], true);
        assert!(signed(route(
            &status(Some("strict"), true),
            Some(&git),
            "prod"
        )));
    }

    #[test]
    fn when_git_cannot_say_a_stage_under_an_approval_policy_gets_the_command() {
        // No repository: the status's reviews are all there is.
        assert!(signed(route(&status(Some("gates"), true), None, "prod")));
        assert!(!signed(route(&status(None, false), None, "prod")));
        // A conflict at the tip, or a policy name git does not know.
        let unresolved = gates(None, &[], false);
        assert!(signed(route(
            &status(Some("gates"), true),
            Some(&unresolved),
            "prod"
        )));
        assert!(!signed(route(
            &status(None, false),
            Some(&unresolved),
            "prod"
        )));
        let unknown_name = gates(None, &[], true);
        assert!(signed(route(
            &status(Some("gone"), true),
            Some(&unknown_name),
            "prod"
        )));
        assert!(!signed(route(
            &status(None, false),
            Some(&unknown_name),
            "prod"
        )));
    }
}
