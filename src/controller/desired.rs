//! The git → engine translation: what a promotion's state in git means to the engine (its
//! [`Desired`], and the approvals, history and policy a step takes). The controller's steps and
//! `tollgate plan` both read git through here, so they cannot disagree on what git says.

use std::sync::Arc;

use tollgate_engine::{Desired, PromotionStatus};
use tollgate_manifest::{ApprovalEvent, Snapshot};
use tollgate_model::RolloutPolicy;
use tollgate_source::plan::{PlanStatus, PromotionPlan};
use tollgate_source::{Diagnostic, PromotionView};

use super::git_task::PromotionGit;

/// What the controller knows about a promotion's presence in git.
#[derive(Debug, Clone)]
pub enum GitPresence {
    Present(Arc<PromotionGit>),
    /// Removed from git, but the blast-radius guard holds the removal: `last` is its last good
    /// snapshot (if this process saw one), `reason` says why and how to confirm.
    RemovalHeld {
        last: Option<Arc<Snapshot>>,
        reason: String,
    },
    /// Removed from git, past the blast-radius guard.
    Removed {
        last: Option<Arc<Snapshot>>,
    },
}

/// A promotion's state in git, reduced to what decides the engine's [`Desired`].
#[derive(Debug, Clone, Copy)]
pub enum InGit<'a> {
    /// Defined at the revision: the snapshot to run (the valid one, or the last good one while
    /// the file is invalid; `None` if it never was valid) and, while invalid, why.
    Defined {
        snapshot: Option<&'a Snapshot>,
        errors: Option<&'a [Diagnostic]>,
    },
    /// Gone, but the removal waits for confirmation (see `guard`).
    RemovalHeld {
        last: Option<&'a Snapshot>,
        reason: &'a str,
    },
    Removed {
        last: Option<&'a Snapshot>,
    },
}

impl<'a> InGit<'a> {
    pub fn of_view(view: &'a PromotionView) -> Self {
        match view {
            PromotionView::Valid { snapshot } => InGit::Defined {
                snapshot: Some(snapshot),
                errors: None,
            },
            PromotionView::Invalid { errors, last_good } => InGit::Defined {
                snapshot: last_good.as_deref(),
                errors: Some(errors),
            },
        }
    }

    pub fn of_presence(presence: &'a GitPresence) -> Self {
        match presence {
            GitPresence::Present(git) => InGit::of_view(&git.view),
            GitPresence::RemovalHeld { last, reason } => InGit::RemovalHeld {
                last: last.as_deref(),
                reason,
            },
            GitPresence::Removed { last } => InGit::Removed {
                last: last.as_deref(),
            },
        }
    }

    /// The promotion at the end of a planned range (`tollgate plan`).
    pub fn of_plan(plan: &'a PromotionPlan) -> Self {
        match plan.status {
            PlanStatus::Removed => InGit::Removed {
                last: plan.before.as_deref(),
            },
            PlanStatus::Invalid => InGit::Defined {
                snapshot: plan.after.as_deref(),
                errors: Some(&plan.diagnostics),
            },
            _ => InGit::Defined {
                snapshot: plan.after.as_deref(),
                errors: None,
            },
        }
    }
}

/// A promotion's [`InGit`] with the error text the engine reports for an invalid file (which
/// [`Desired`] borrows, so it lives here).
#[derive(Debug)]
pub struct Translation<'a> {
    name: &'a str,
    in_git: InGit<'a>,
    invalid: String,
}

impl<'a> Translation<'a> {
    pub fn new(name: &'a str, in_git: InGit<'a>) -> Self {
        let invalid = match in_git {
            InGit::Defined {
                errors: Some(errors),
                ..
            } => errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            _ => String::new(),
        };
        Translation {
            name,
            in_git,
            invalid,
        }
    }

    pub fn desired(&self) -> Desired<'_> {
        match self.in_git {
            // The last good snapshot keeps running; the status shows the error.
            InGit::Defined {
                snapshot: Some(current),
                errors,
            } => Desired::Snapshot {
                current,
                invalid: errors.map(|_| self.invalid.as_str()),
            },
            InGit::Defined { snapshot: None, .. } => Desired::NeverValid {
                promotion: self.name,
                error: &self.invalid,
            },
            InGit::RemovalHeld { last, reason } => Desired::RemovalHeld { last, reason },
            InGit::Removed { last } => Desired::Removed {
                promotion: self.name,
                last,
            },
        }
    }

    /// The file defining the promotion, for its GitPromotion's spec: the snapshot's, or the
    /// first error's when it never was valid; empty once removed.
    pub fn file(&self) -> &'a str {
        match self.in_git {
            InGit::Defined {
                snapshot: Some(snapshot),
                ..
            }
            | InGit::RemovalHeld {
                last: Some(snapshot),
                ..
            } => &snapshot.file,
            InGit::Defined {
                snapshot: None,
                errors,
            } => errors
                .and_then(<[Diagnostic]>::first)
                .map_or("", |d| d.file.as_str()),
            InGit::RemovalHeld { last: None, .. } | InGit::Removed { .. } => "",
        }
    }
}

/// Everything one step of the engine takes from git for a promotion.
#[derive(Debug)]
pub struct StepGit<'a> {
    pub translation: Translation<'a>,
    pub approvals: &'a [ApprovalEvent],
    pub history: &'a [Snapshot],
    /// The policy the step runs under. With `policy_problem`, the last valid version of the
    /// policy that governed the run, if any: the run goes on, nothing new starts (fail closed).
    pub policy: Option<Arc<RolloutPolicy>>,
    pub policy_problem: Option<&'a str>,
    /// The `policy_problem` is a change waiting for an admin's approval.
    pub policy_unapproved: bool,
    /// Why the branch tip does not run (`--verify-commits`), if it does not.
    pub unverified: Option<&'a str>,
    /// The branch was rewritten under the promotion's newest snapshot, if it was.
    pub rewound: Option<&'a str>,
}

impl<'a> StepGit<'a> {
    /// `status` is the persisted one: under a policy problem it names the policy that governed
    /// the run.
    pub fn new(name: &'a str, presence: &'a GitPresence, status: Option<&PromotionStatus>) -> Self {
        let translation = Translation::new(name, InGit::of_presence(presence));
        match presence {
            GitPresence::Present(git) => {
                let (policy, policy_problem) = governing_policy(git, status);
                StepGit {
                    translation,
                    approvals: &git.approvals,
                    history: &git.history,
                    policy,
                    policy_problem,
                    policy_unapproved: git.policy.as_ref().is_err_and(|p| p.unapproved),
                    unverified: git.unverified.as_deref(),
                    rewound: git.rewound.as_deref(),
                }
            }
            // A removal runs nothing new: no approval, history or policy applies.
            GitPresence::RemovalHeld { .. } | GitPresence::Removed { .. } => StepGit {
                translation,
                approvals: &[],
                history: &[],
                policy: None,
                policy_problem: None,
                policy_unapproved: false,
                unverified: None,
                rewound: None,
            },
        }
    }
}

/// The policy the engine steps under, and why it cannot be resolved if it cannot: then the last
/// valid version of the policy that governed the run (fail closed: nothing new starts).
fn governing_policy<'a>(
    git: &'a PromotionGit,
    status: Option<&PromotionStatus>,
) -> (Option<Arc<RolloutPolicy>>, Option<&'a str>) {
    match &git.policy {
        Ok(policy) => (policy.clone(), None),
        Err(problem) => {
            let governed = status
                .and_then(|s| s.policy.as_ref())
                .map(|p| p.name.as_str());
            (problem.last_valid(governed), Some(problem.message.as_str()))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tollgate_engine::testing::{commit, promotion, snapshot};
    use tollgate_manifest::diagnostic::Severity;
    use tollgate_source::{PolicyProblem, PolicySet};

    use super::*;

    fn snap(index: u64, file: &str) -> Arc<Snapshot> {
        let p = promotion(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterPromotion",
            "metadata": {"name": "web"},
            "spec": {"profileSpec": {}, "stages": [{"name": "dev", "clusterSelector": {}}]}
        }));
        let mut s = snapshot(p, index, commit(index));
        s.file = file.to_string();
        Arc::new(s)
    }

    fn error(file: &str, line: u32, message: &str) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code: "test",
            file: file.to_string(),
            line,
            column: 1,
            path: "spec.stages".to_string(),
            message: message.to_string(),
        }
    }

    fn policy(name: &str) -> Arc<RolloutPolicy> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "tollgate.dev/v1alpha1",
                "kind": "RolloutPolicy",
                "metadata": {"name": name}
            }))
            .expect("valid policy"),
        )
    }

    fn git(view: PromotionView) -> Arc<PromotionGit> {
        Arc::new(PromotionGit {
            view,
            approvals: Arc::default(),
            history: Arc::new(vec![(*snap(1, "web.yaml")).clone()]),
            policy: Ok(Some(policy("defaults"))),
            unverified: None,
            rewound: None,
        })
    }

    fn desired_text(name: &str, in_git: InGit<'_>) -> String {
        format!("{:?}", Translation::new(name, in_git).desired())
    }

    #[test]
    fn an_invalid_file_keeps_its_last_good_snapshot_and_reports_every_error() {
        let last = snap(1, "web.yaml");
        let view = PromotionView::Invalid {
            errors: vec![error("web.yaml", 3, "bad"), error("web.yaml", 9, "worse")],
            last_good: Some(last.clone()),
        };
        let translation = Translation::new("web", InGit::of_view(&view));
        match translation.desired() {
            Desired::Snapshot { current, invalid } => {
                assert_eq!(current.index, 1);
                assert_eq!(
                    invalid,
                    Some("web.yaml:3:1: spec.stages: bad; web.yaml:9:1: spec.stages: worse")
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(translation.file(), "web.yaml");
        let valid = PromotionView::Valid { snapshot: last };
        let translation = Translation::new("web", InGit::of_view(&valid));
        assert!(matches!(
            translation.desired(),
            Desired::Snapshot { invalid: None, .. }
        ));
    }

    #[test]
    fn a_never_valid_file_is_named_after_its_first_error() {
        let view = PromotionView::Invalid {
            errors: vec![error("broken.yaml", 1, "does not parse")],
            last_good: None,
        };
        let translation = Translation::new("broken", InGit::of_view(&view));
        match translation.desired() {
            Desired::NeverValid { promotion, error } => {
                assert_eq!(promotion, "broken");
                assert_eq!(error, "broken.yaml:1:1: spec.stages: does not parse");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(translation.file(), "broken.yaml");
    }

    #[test]
    fn held_and_removed_promotions_take_no_approval_history_or_policy() {
        let held = GitPresence::RemovalHeld {
            last: Some(snap(1, "web.yaml")),
            reason: "the commit removes all 1 promotions".into(),
        };
        let step = StepGit::new("web", &held, None);
        match step.translation.desired() {
            Desired::RemovalHeld { last, reason } => {
                assert_eq!(last.map(|s| s.index), Some(1));
                assert_eq!(reason, "the commit removes all 1 promotions");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            step.translation.file(),
            "web.yaml",
            "the state object keeps its file"
        );
        assert!(step.approvals.is_empty() && step.history.is_empty());
        assert!(step.policy.is_none() && step.policy_problem.is_none());

        let removed = GitPresence::Removed {
            last: Some(snap(2, "web.yaml")),
        };
        let step = StepGit::new("web", &removed, None);
        match step.translation.desired() {
            Desired::Removed { promotion, last } => {
                assert_eq!(promotion, "web");
                assert_eq!(last.map(|s| s.index), Some(2));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(step.translation.file(), "");
    }

    #[test]
    fn a_present_promotion_steps_with_its_history_approvals_and_policy() {
        let present = GitPresence::Present(git(PromotionView::Valid {
            snapshot: snap(1, "web.yaml"),
        }));
        let step = StepGit::new("web", &present, None);
        assert_eq!(step.history.len(), 1);
        assert_eq!(step.policy.as_ref().map(|p| p.name()), Some("defaults"));
        assert_eq!(step.policy_problem, None);
    }

    #[test]
    fn a_policy_problem_fails_closed_under_the_policy_that_governed_the_run() {
        let problem = PolicyProblem {
            message: "policies.yaml:4: two RolloutPolicies select web".into(),
            chosen: None,
            unapproved: false,
            set: PolicySet::new(vec![(policy("strict"), "policies.yaml".into())], vec![]),
        };
        let broken = Arc::new(PromotionGit {
            policy: Err(problem),
            unverified: None,
            ..(*git(PromotionView::Valid {
                snapshot: snap(1, "web.yaml"),
            }))
            .clone()
        });
        let present = GitPresence::Present(broken);
        let running: PromotionStatus = serde_json::from_value(json!({
            "hashScheme": 1, "phase": "Progressing",
            "policy": {"name": "strict", "version": "1"}
        }))
        .expect("valid status");
        let step = StepGit::new("web", &present, Some(&running));
        assert_eq!(step.policy.as_ref().map(|p| p.name()), Some("strict"));
        assert_eq!(
            step.policy_problem,
            Some("policies.yaml:4: two RolloutPolicies select web"),
            "the problem reaches the engine, which starts nothing new"
        );
        let never_ran = StepGit::new("web", &present, None);
        assert!(never_ran.policy.is_none(), "no run: no policy to keep");
        assert!(never_ran.policy_problem.is_some());
    }

    fn plan(
        status: PlanStatus,
        before: Option<Arc<Snapshot>>,
        after: Option<Arc<Snapshot>>,
    ) -> PromotionPlan {
        PromotionPlan {
            name: "web".into(),
            file: Some("web.yaml".into()),
            status,
            before,
            after,
            approvals: vec![],
            selector_changes: vec![],
            stages_added: vec![],
            stages_removed: vec![],
            stages_reordered: None,
            chart_changes: vec![],
            profile_fields_changed: vec![],
            trigger_changes: vec![],
            diagnostics: vec![error("web.yaml", 3, "bad")],
            policy: None,
            policy_error: None,
        }
    }

    #[test]
    fn plan_and_controller_translate_the_same_git_alike() {
        let one = snap(1, "web.yaml");
        let two = snap(2, "web.yaml");
        let errors = vec![error("web.yaml", 3, "bad")];
        let cases = [
            (
                plan(PlanStatus::Changed, Some(one.clone()), Some(two.clone())),
                InGit::Defined {
                    snapshot: Some(&two),
                    errors: None,
                },
            ),
            (
                plan(PlanStatus::Invalid, Some(one.clone()), Some(one.clone())),
                InGit::Defined {
                    snapshot: Some(&one),
                    errors: Some(&errors),
                },
            ),
            (
                plan(PlanStatus::Invalid, None, None),
                InGit::Defined {
                    snapshot: None,
                    errors: Some(&errors),
                },
            ),
            (
                plan(PlanStatus::Removed, Some(one.clone()), None),
                InGit::Removed { last: Some(&one) },
            ),
        ];
        for (plan, controller) in &cases {
            assert_eq!(
                desired_text("web", InGit::of_plan(plan)),
                desired_text("web", *controller),
                "{:?}",
                plan.status
            );
        }
    }
}
