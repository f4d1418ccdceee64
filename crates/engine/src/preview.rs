//! `preview`: what a change in git would do to a promotion's rollout, decided by the rules `step`
//! applies (the same restart rule, the same approval rule), so that `tollgate plan` and the
//! controller cannot disagree. Pure, like `step`: the caller reads git (and, if it can, the live
//! status) and renders the result.

mod run_start;

use chrono::{DateTime, Utc};
use tollgate_model::policy::RolloutPolicy;
use tollgate_model::snapshot::{ApprovalEvent, Snapshot};
use tollgate_render::{preverification_profile_name, stage_profile_name};

use crate::failure::lineage::Lineage;
use crate::gates::approval;
use crate::gates::gate;
use crate::input::Desired;
use crate::status::{Approver, PromotionStatus, runs_content_of};
pub use run_start::{RunStart, StartsAfter};

#[derive(Clone, Copy, Debug)]
pub struct PreviewInput<'a> {
    /// The snapshot running before the change: the promotion's last good snapshot at the start
    /// of the range (`None`: nothing runs).
    pub before: Option<&'a Snapshot>,
    /// The promotion at the end of the range.
    pub after: Desired<'a>,
    /// Every approval event up to the end of the range, in first-parent order.
    pub approvals: &'a [ApprovalEvent],
    /// The live status, when the cluster is known: which run goes on, which stages it passed,
    /// which approvals it consumed. Without it the preview assumes the run of `before`.
    pub status: Option<&'a PromotionStatus>,
    /// The promotion's snapshots up to the end of the range (oldest first): with the status, they
    /// tell a rollback from recommitted rejected content.
    pub history: &'a [Snapshot],
    /// The RolloutPolicy governing the promotion at the end of the range.
    pub policy: Option<&'a RolloutPolicy>,
    /// Why no policy can be chosen at the end of the range (nothing new would start).
    pub policy_problem: Option<&'a str>,
    /// The instant the preview is for: a blackout in force then holds the run's start.
    pub now: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Preview {
    pub run: RunChange,
    /// The stages the new run goes through, in order; empty when the running pipeline goes on.
    pub stages_run: Vec<String>,
    /// Every manual stage still ahead of the run, and whether it would pass.
    pub gates: Vec<GatePreview>,
    /// Generated ClusterProfiles the change deletes (removed stages, or a removed promotion).
    pub pruned: Vec<String>,
    /// Generated ClusterProfiles a removal leaves in place (`preserveClusterProfilesOnDelete`).
    pub kept: Vec<String>,
    /// Stages whose empty clusterSelector matches no cluster: they complete at once.
    pub empty_stages: Vec<String>,
    /// When the run the change starts begins (`onNewSnapshot`, a blackout in force, a policy
    /// problem); `None` when it starts no run.
    pub run_start: Option<RunStart>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunChange {
    /// A new promotion: its first run starts at stage 1.
    Starts,
    /// Content changed: the pipeline restarts at stage 1.
    Restarts {
        profile_spec_changed: bool,
        stages_changed: bool,
        /// The content equals this earlier snapshot's (a git fact, not a verdict).
        same_content_as: Option<u64>,
        /// With the live status: whether that makes it a rollback, or recommitted rejected
        /// content ([`crate::failure::lineage`]); `None` without the status (unknown).
        lineage: Option<Lineage>,
    },
    /// Same content: the running pipeline goes on; trigger and annotation edits apply in place.
    Continues,
    /// Invalid at the end of the range: the last good snapshot keeps running (`None`: nothing).
    Invalid { keeps: Option<u64> },
    /// Gone from git.
    Removed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatePreview {
    pub stage: String,
    pub verdict: GateVerdict,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateVerdict {
    /// An approval in git lets this run pass: who gave it, in which commit.
    Approved(Approver),
    /// `automaticReset: false` with `approved: true`: every run passes.
    Standing,
    /// No approval serves this run yet: what would.
    Waits(String),
}

pub fn preview(input: &PreviewInput<'_>) -> Preview {
    let mut preview = Preview {
        run: RunChange::Continues,
        stages_run: Vec::new(),
        gates: Vec::new(),
        pruned: Vec::new(),
        kept: Vec::new(),
        empty_stages: Vec::new(),
        run_start: None,
    };
    let after = match input.after {
        Desired::Snapshot {
            current,
            invalid: None,
        } => current,
        Desired::Snapshot {
            current,
            invalid: Some(_),
        } => {
            preview.run = RunChange::Invalid {
                keeps: Some(current.index),
            };
            return preview;
        }
        // A held removal runs nothing new: its preview is that of the removal.
        Desired::RemovalHeld { last, .. } => {
            return preview_removal(preview, input.before.or(last));
        }
        Desired::NeverValid { .. } => {
            preview.run = RunChange::Invalid {
                keeps: input.before.map(|s| s.index),
            };
            return preview;
        }
        Desired::Removed { last, .. } => {
            return preview_removal(preview, input.before.or(last));
        }
    };
    preview.run = run_change(input, after);
    if preview.run != RunChange::Continues {
        preview.stages_run = after
            .promotion
            .spec
            .stages
            .iter()
            .map(|s| s.name.clone())
            .collect();
    }
    if let Some(before) = input.before {
        preview.pruned = generated_profiles(before, |stage| after.promotion.stage(stage).is_none());
    }
    preview.empty_stages = after
        .promotion
        .spec
        .stages
        .iter()
        .filter(|s| s.cluster_selector.is_empty())
        .map(|s| s.name.clone())
        .collect();
    preview.gates = gates(input, after, preview.run == RunChange::Continues);
    preview.run_start = starts_run(&preview.run).then(|| {
        run_start::run_start(&run_start::Context {
            after,
            rollback: is_rollback(&preview.run),
            policy: input.policy,
            policy_problem: input.policy_problem,
            status: input.status,
            history: input.history,
            now: input.now,
        })
    });
    preview
}

fn starts_run(run: &RunChange) -> bool {
    matches!(run, RunChange::Starts | RunChange::Restarts { .. })
}

/// Known to restore content that completed here (only the live status can tell).
fn is_rollback(run: &RunChange) -> bool {
    matches!(
        run,
        RunChange::Restarts {
            lineage: Some(lineage),
            ..
        } if lineage.rollback_to().is_some()
    )
}

fn preview_removal(mut preview: Preview, last: Option<&Snapshot>) -> Preview {
    preview.run = RunChange::Removed;
    if let Some(last) = last {
        let profiles = generated_profiles(last, |_| true);
        if last.promotion.spec.preserve_cluster_profiles_on_delete {
            preview.kept = profiles;
        } else {
            preview.pruned = profiles;
        }
    }
    preview
}

/// The restart rule of `step`: a run goes on while the content hashes are the ones it runs.
fn run_change(input: &PreviewInput<'_>, after: &Snapshot) -> RunChange {
    let (profile_spec, stages) = match (input.status, input.before) {
        (Some(status), _) if status.snapshot_index.is_some() => (
            status.profile_spec_hash.as_deref(),
            status.stages_hash.as_deref(),
        ),
        (_, Some(before)) => (
            Some(before.hashes.profile_spec.as_str()),
            Some(before.hashes.stages.as_str()),
        ),
        _ => return RunChange::Starts,
    };
    if runs_content_of(profile_spec, stages, after) {
        return RunChange::Continues;
    }
    RunChange::Restarts {
        profile_spec_changed: profile_spec != Some(after.hashes.profile_spec.as_str()),
        stages_changed: stages != Some(after.hashes.stages.as_str()),
        same_content_as: after.same_content_as,
        lineage: input
            .status
            .map(|status| crate::failure::lineage::judge(Some(status), input.history, after)),
    }
}

/// The manual stages still ahead of the run and their verdicts, by the approval rule of `step`.
fn gates(input: &PreviewInput<'_>, after: &Snapshot, continues: bool) -> Vec<GatePreview> {
    let status = input.status.filter(|_| continues);
    let consumed = input
        .status
        .map(|s| s.consumed_approvals.as_slice())
        .unwrap_or_default();
    after
        .promotion
        .spec
        .stages
        .iter()
        .filter(|stage| {
            status
                .and_then(|s| s.stage(&stage.name))
                .is_none_or(|s| s.succeeded_at.is_none())
        })
        .filter_map(|stage| gate::manual(stage).map(|manual| (stage, manual)))
        .map(|(stage, manual)| {
            let found = approval::find(after, &stage.name, manual, input.approvals, consumed);
            let verdict = match found {
                Some(valid) if valid.consumes.is_none() => GateVerdict::Standing,
                Some(valid) => GateVerdict::Approved(valid.approver),
                None => GateVerdict::Waits(approval::wanted(
                    after,
                    &stage.name,
                    manual,
                    input.approvals,
                    consumed,
                )),
            };
            GatePreview {
                stage: stage.name.clone(),
                verdict,
            }
        })
        .collect()
}

/// The names of the profiles generated for the stages of `snapshot` that `wanted` selects.
fn generated_profiles(snapshot: &Snapshot, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let promotion = snapshot.promotion.name();
    let mut names = Vec::new();
    for stage in snapshot
        .promotion
        .spec
        .stages
        .iter()
        .filter(|s| wanted(&s.name))
    {
        names.push(stage_profile_name(promotion, &stage.name));
        let verifies = stage
            .trigger
            .as_ref()
            .is_some_and(|t| !t.pre_health_check_deployment().is_empty());
        if verifies {
            names.push(preverification_profile_name(promotion, &stage.name));
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tollgate_model::snapshot::ApprovalKind;

    use super::*;
    use crate::testing::{approval, commit, promotion, snapshot};

    /// `p` with stages dev (auto) → prod (manual), `chart` as its only chart.
    fn manifest(chart: &str, prod: Value, preserve: bool) -> tollgate_model::ClusterPromotion {
        promotion(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {
                "preserveClusterProfilesOnDelete": preserve,
                "profileSpec": {"helmCharts": [{"chartName": "c", "chartVersion": chart}]},
                "stages": [
                    {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                    {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}},
                     "trigger": prod},
                ]
            }
        }))
    }

    fn manual(approved: bool, reset: bool) -> Value {
        json!({"manual": {"approved": approved, "automaticReset": reset}})
    }

    fn input<'a>(
        before: Option<&'a Snapshot>,
        after: &'a Snapshot,
        approvals: &'a [ApprovalEvent],
    ) -> PreviewInput<'a> {
        PreviewInput {
            before,
            after: Desired::Snapshot {
                current: after,
                invalid: None,
            },
            approvals,
            status: None,
            history: &[],
            policy: None,
            policy_problem: None,
            now: chrono::DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_restart_whose_range_supplies_the_approval_passes_the_gate() {
        let before = snapshot(manifest("1.0.0", manual(false, true), false), 1, commit(10));
        let after = snapshot(manifest("1.1.0", manual(true, true), false), 2, commit(20));
        // The bump and the approval in one range: the approving commit is after the run start.
        let approvals = [approval("prod", ApprovalKind::Field, commit(21))];
        let out = preview(&input(Some(&before), &after, &approvals));
        assert_eq!(
            out.run,
            RunChange::Restarts {
                profile_spec_changed: true,
                // `approved` is not content: the stages hash leaves it out.
                stages_changed: false,
                same_content_as: None,
                lineage: None,
            }
        );
        assert_eq!(out.stages_run, ["dev", "prod"]);
        let GateVerdict::Approved(approver) = &out.gates[0].verdict else {
            panic!("approved expected: {:?}", out.gates);
        };
        assert_eq!(approver.sha.as_deref(), Some(commit(21).sha.as_str()));
    }

    #[test]
    fn a_restart_needs_a_fresh_approval_and_says_how() {
        let before = snapshot(manifest("1.0.0", manual(true, true), false), 1, commit(10));
        let after = snapshot(manifest("1.1.0", manual(true, true), false), 2, commit(20));
        let approvals = [approval("prod", ApprovalKind::Field, commit(11))];
        let out = preview(&input(Some(&before), &after, &approvals));
        let GateVerdict::Waits(hint) = &out.gates[0].verdict else {
            panic!("waits expected: {:?}", out.gates);
        };
        assert!(hint.contains("tollgate approve p prod"), "{hint}");
        // automaticReset: false with approved: true serves every run.
        let standing = snapshot(manifest("1.1.0", manual(true, false), false), 2, commit(20));
        let out = preview(&input(Some(&before), &standing, &[]));
        assert_eq!(out.gates[0].verdict, GateVerdict::Standing);
    }

    #[test]
    fn a_trigger_edit_continues_the_run() {
        let before = snapshot(manifest("1.0.0", manual(false, true), false), 1, commit(10));
        let mut after = before.clone();
        after.promotion = std::sync::Arc::new(manifest("1.0.0", manual(true, true), false));
        let approvals = [approval("prod", ApprovalKind::Field, commit(12))];
        let out = preview(&input(Some(&before), &after, &approvals));
        assert_eq!(out.run, RunChange::Continues);
        assert!(out.stages_run.is_empty());
        assert!(matches!(out.gates[0].verdict, GateVerdict::Approved(_)));
        // With the live status, a gate the run already passed is not ahead any more.
        let mut status = crate::status::PromotionStatus::empty();
        status.profile_spec_hash = Some(before.hashes.profile_spec.clone());
        status.stages_hash = Some(before.hashes.stages.clone());
        status.snapshot_index = Some(1);
        let prod = serde_json::from_value(json!({
            "name": "prod", "snapshotIndex": 1, "appliedAt": "2025-01-01T00:00:00Z",
            "appliedSpecHash": "h", "succeededAt": "2025-01-01T00:00:00Z"
        }))
        .expect("stage status");
        status.stages.push(prod);
        let out = preview(&PreviewInput {
            status: Some(&status),
            ..input(Some(&before), &after, &approvals)
        });
        assert!(out.gates.is_empty(), "{:?}", out.gates);
    }

    #[test]
    fn removals_prune_unless_preserved_and_a_revert_is_a_rollback() {
        let before = snapshot(manifest("1.0.0", json!(null), false), 1, commit(10));
        let removed = PreviewInput {
            after: Desired::Removed {
                promotion: "p",
                last: None,
            },
            ..input(Some(&before), &before, &[])
        };
        let out = preview(&removed);
        assert_eq!(out.run, RunChange::Removed);
        assert_eq!(out.pruned, ["p-dev", "p-prod"]);
        let preserved = snapshot(manifest("1.0.0", json!(null), true), 1, commit(10));
        let out = preview(&PreviewInput {
            before: Some(&preserved),
            ..removed
        });
        assert_eq!(out.kept, ["p-dev", "p-prod"]);
        assert!(out.pruned.is_empty());

        // A revert: the same content as #1. Without the live status nobody can tell whether #1
        // completed (a rollback) or not; with a status where #1 completed, it is a rollback.
        let newer = snapshot(manifest("1.1.0", json!(null), false), 2, commit(20));
        let mut reverted = snapshot(manifest("1.0.0", json!(null), false), 3, commit(30));
        reverted.same_content_as = Some(1);
        let out = preview(&input(Some(&newer), &reverted, &[]));
        assert!(matches!(
            out.run,
            RunChange::Restarts {
                same_content_as: Some(1),
                lineage: None,
                ..
            }
        ));
        let mut status = crate::status::PromotionStatus::empty();
        status.snapshot_index = Some(1);
        status.snapshot_id = Some(before.id().to_string());
        crate::failure::lineage::record(
            &mut status,
            crate::failure::lineage::Verdict::Completed,
            chrono::DateTime::UNIX_EPOCH,
        );
        status.profile_spec_hash = Some(newer.hashes.profile_spec.clone());
        status.stages_hash = Some(newer.hashes.stages.clone());
        status.snapshot_index = Some(2);
        let history = [before.clone(), newer.clone(), reverted.clone()];
        let out = preview(&PreviewInput {
            status: Some(&status),
            history: &history,
            ..input(Some(&newer), &reverted, &[])
        });
        assert!(matches!(
            out.run,
            RunChange::Restarts {
                lineage: Some(Lineage::Rollback { to: 1 }),
                ..
            }
        ));
    }

    #[test]
    fn a_removed_stage_prunes_its_profile_and_empty_selectors_are_named() {
        let before = snapshot(manifest("1.0.0", json!(null), false), 1, commit(10));
        let after = snapshot(
            promotion(json!({
                "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
                "metadata": {"name": "p"},
                "spec": {"profileSpec": {"helmCharts": [{"chartName": "c", "chartVersion": "1.0.0"}]},
                    "stages": [{"name": "dev", "clusterSelector": {}}]}
            })),
            2,
            commit(20),
        );
        let out = preview(&input(Some(&before), &after, &[]));
        assert_eq!(out.pruned, ["p-prod"]);
        assert_eq!(out.empty_stages, ["dev"]);
        assert_eq!(preview(&input(None, &after, &[])).run, RunChange::Starts);
    }
    fn rules(spec: Value) -> tollgate_model::policy::RolloutPolicy {
        serde_json::from_value(json!({
            "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": "fleet"}, "spec": spec,
        }))
        .expect("policy")
    }

    /// A status whose run of `running` is still going (its last stage not passed).
    fn running(running: &Snapshot) -> PromotionStatus {
        let mut status = PromotionStatus::empty();
        status.snapshot_index = Some(running.index);
        status.profile_spec_hash = Some(running.hashes.profile_spec.clone());
        status.stages_hash = Some(running.hashes.stages.clone());
        status
    }

    fn at(text: &str) -> chrono::DateTime<chrono::Utc> {
        text.parse().expect("instant")
    }

    #[test]
    fn finish_current_and_queue_start_after_the_run_in_progress() {
        let one = snapshot(manifest("1.0.0", json!(null), false), 1, commit(10));
        let two = snapshot(manifest("2.0.0", json!(null), false), 2, commit(20));
        let three = snapshot(manifest("3.0.0", json!(null), false), 3, commit(30));
        let history = [one.clone(), two.clone(), three.clone()];
        let finish = rules(json!({"onNewSnapshot": "FinishCurrent"}));
        let base = PreviewInput {
            policy: Some(&finish),
            history: &history,
            ..input(Some(&two), &three, &[])
        };
        // Without the live status nobody knows whether a run is in progress.
        let start = preview(&base).run_start.expect("a run starts");
        assert_eq!(
            start.after,
            StartsAfter::RunInProgressIfAny {
                policy: tollgate_model::policy::OnNewSnapshot::FinishCurrent
            }
        );
        let status = running(&one);
        let start = preview(&PreviewInput {
            status: Some(&status),
            ..base
        })
        .run_start
        .expect("a run starts");
        assert_eq!(
            start.after,
            StartsAfter::RunningRun {
                policy: tollgate_model::policy::OnNewSnapshot::FinishCurrent,
                running: 1,
                between: vec![2],
            }
        );
        let queue = rules(json!({"onNewSnapshot": "Queue"}));
        let start = preview(&PreviewInput {
            status: Some(&status),
            policy: Some(&queue),
            ..base
        })
        .run_start
        .expect("a run starts");
        assert_eq!(
            start.after,
            StartsAfter::RunningRun {
                policy: tollgate_model::policy::OnNewSnapshot::Queue,
                running: 1,
                between: vec![2],
            }
        );
        let restart = rules(json!({}));
        let start = preview(&PreviewInput {
            status: Some(&status),
            policy: Some(&restart),
            ..base
        })
        .run_start
        .expect("a run starts");
        assert_eq!(
            start.after,
            StartsAfter::Nothing {
                supersedes: Some(1)
            }
        );
        // A trigger edit starts no run.
        let out = preview(&PreviewInput {
            after: Desired::Snapshot {
                current: &two,
                invalid: None,
            },
            ..base
        });
        assert_eq!(out.run_start, None);
    }

    #[test]
    fn a_blackout_in_force_holds_the_start_unless_the_run_is_a_rollback() {
        let one = snapshot(manifest("1.0.0", json!(null), false), 1, commit(10));
        let two = snapshot(manifest("2.0.0", json!(null), false), 2, commit(20));
        let freeze = rules(json!({"blackouts": [
            {"from": "2026-01-01T20:00:00Z", "to": "2026-01-03T00:03:00Z", "reason": "freeze"}]}));
        let base = PreviewInput {
            policy: Some(&freeze),
            now: at("2026-01-02T22:00:00Z"),
            ..input(Some(&one), &two, &[])
        };
        let start = preview(&base).run_start.expect("a run starts");
        let held = start.blackout.expect("held");
        assert_eq!(held.until, at("2026-01-03T00:03:00Z"));
        assert_eq!(held.reason.as_deref(), Some("freeze"));
        let later = preview(&PreviewInput {
            now: at("2026-01-03T00:03:00Z"),
            ..base
        });
        assert_eq!(later.run_start.and_then(|s| s.blackout), None);

        // #3 brings back #1's content, which completed here: a rollback, never held.
        let mut three = snapshot(manifest("1.0.0", json!(null), false), 3, commit(30));
        three.same_content_as = Some(1);
        let mut status = running(&one);
        status.snapshot_id = Some(one.id().to_string());
        crate::failure::lineage::record(
            &mut status,
            crate::failure::lineage::Verdict::Completed,
            chrono::DateTime::UNIX_EPOCH,
        );
        let status = PromotionStatus {
            snapshot_index: Some(2),
            profile_spec_hash: Some(two.hashes.profile_spec.clone()),
            stages_hash: Some(two.hashes.stages.clone()),
            ..status
        };
        let history = [one.clone(), two.clone(), three.clone()];
        let start = preview(&PreviewInput {
            status: Some(&status),
            history: &history,
            ..PreviewInput {
                after: Desired::Snapshot {
                    current: &three,
                    invalid: None,
                },
                ..base
            }
        })
        .run_start
        .expect("a run starts");
        assert_eq!(start.after, StartsAfter::NothingAsARollback);
        assert_eq!(start.blackout, None);
    }

    #[test]
    fn a_policy_problem_holds_every_new_run() {
        let one = snapshot(manifest("1.0.0", json!(null), false), 1, commit(10));
        let two = snapshot(manifest("2.0.0", json!(null), false), 2, commit(20));
        let start = preview(&PreviewInput {
            policy_problem: Some("two policies select it"),
            ..input(Some(&one), &two, &[])
        })
        .run_start
        .expect("a run would start");
        assert_eq!(
            start.after,
            StartsAfter::PolicyProblem {
                problem: "two policies select it".to_string()
            }
        );
    }
}
