//! The failure model (RolloutPolicy): deadlines, failure budgets, halt and rollback, driven with
//! a fake clock. Each safety rule has a test named after it.

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::{Action, ClusterState, Phase};

fn applies(actions: &[Action]) -> Vec<&str> {
    actions
        .iter()
        .filter(|a| matches!(a, Action::ApplyProfile { .. }))
        .map(Action::profile_name)
        .collect()
}

fn reasons(h: &Harness) -> Vec<&'static str> {
    h.world.events.iter().map(|e| e.reason.as_str()).collect()
}

fn chart_of(h: &Harness, stage: &str) -> String {
    h.profile_spec_of(&profile_name(stage))["helmCharts"][0]["chartVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn nothing_applied_after_a_halt() {
    let mut h = Harness::new(three_stages("1.0.0"));
    h.world.policy = Some(fleet_policy(json!({"maxFailures": 0, "onFailure": "Halt"})));
    h.world.failing_clusters.insert("s2-1".into());
    h.settle();
    let status = h.status().clone();
    assert_eq!(status.phase, Phase::Failed, "{:?}", status.message);
    let failure = status.failure.as_deref().expect("a run failure");
    assert_eq!(failure.stage, "s2");
    assert_eq!(failure.on_failure, tollgate_model::policy::OnFailure::Halt);
    assert!(failure.clusters.iter().any(|c| c.cluster == "default/s2-1"
        && c.state == ClusterState::Failed
        && c.message.as_deref() == Some("deployment failed")));
    assert!(
        !h.has_profile(&profile_name("s3")),
        "s3 must never be applied"
    );
    for reason in ["BudgetExceeded", "StageFailed"] {
        assert!(reasons(&h).contains(&reason), "missing {reason}");
    }
    // The cluster recovers, a profile drifts: still nothing is applied for this run.
    h.world.failing_clusters.clear();
    h.world.observed.profiles.remove(&profile_name("s1"));
    h.world.sveltos();
    let out = h.step();
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert_eq!(h.status().phase, Phase::Failed);
    h.assert_idempotent();
}

#[test]
fn a_failure_within_the_budget_lets_the_stage_complete() {
    let mut h = Harness::new(three_stages("1.0.0"));
    h.world.policy = Some(fleet_policy(json!({"maxFailures": "50%"})));
    h.world.failing_clusters.insert("s2-1".into());
    h.settle();
    assert_eq!(
        h.status().phase,
        Phase::Completed,
        "{:?}",
        h.status().message
    );
    let s2 = h.stage_status("s2");
    assert_eq!(s2.allowed_failures, Some(1));
    assert_eq!(s2.counts.failed, 1);
    assert!(h.has_profile(&profile_name("s3")));
}

#[test]
fn no_stage_fails_before_its_deadline() {
    let mut h = Harness::new(three_stages("1.0.0"));
    h.world.policy = Some(fleet_policy(
        json!({"progressDeadline": "10m", "maxFailures": 0}),
    ));
    h.world.slow_clusters.insert("s1-2".into());
    let out = h.settle();
    let applied_at = h.stage_status("s1").applied_at;
    let deadline = applied_at + Duration::minutes(10);
    assert_eq!(
        out.wake_at,
        Some(deadline),
        "the engine wakes exactly at the deadline"
    );
    assert_eq!(h.stage_status("s1").deadline, Some(deadline));
    h.settle_at(deadline - Duration::seconds(1));
    assert_eq!(h.status().phase, Phase::Progressing);
    assert!(h.status().failure.is_none());
    let listed = &h.stage_status("s1").not_provisioned;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].cluster, "default/s1-2");
    assert_eq!(listed[0].state, ClusterState::Provisioning);
    // At the deadline the slow cluster is TimedOut, which spends the budget.
    h.settle_at(deadline);
    assert_eq!(h.status().phase, Phase::Failed);
    let failure = h.status().failure.as_deref().unwrap();
    assert_eq!(failure.clusters[0].state, ClusterState::TimedOut);
    assert_eq!(failure.clusters[0].since, deadline);
    assert!(reasons(&h).contains(&"ClusterTimedOut"));
    assert!(!h.has_profile(&profile_name("s2")));
}

#[test]
fn a_timed_out_cluster_within_the_budget_lets_the_stage_go_on_at_the_deadline() {
    let mut h = Harness::new(three_stages("1.0.0"));
    h.world.policy = Some(fleet_policy(
        json!({"progressDeadline": "5m", "maxFailures": 1}),
    ));
    h.world.slow_clusters.insert("s1-2".into());
    h.settle();
    assert!(!h.has_profile(&profile_name("s2")));
    let deadline = h.stage_status("s1").deadline.unwrap();
    h.settle_at(deadline);
    assert!(h.has_profile(&profile_name("s2")));
    assert_eq!(h.stage_status("s1").counts.timed_out, 1);
}

#[test]
fn no_policy_waits_forever_but_shows_each_cluster_and_since_when() {
    let mut h = Harness::new(three_stages("1.0.0"));
    h.world.failing_clusters.insert("s1-1".into());
    h.settle();
    let started = h.world.now;
    h.later(Duration::hours(5));
    assert_eq!(h.status().phase, Phase::Progressing);
    assert!(h.status().failure.is_none());
    let listed = &h.stage_status("s1").not_provisioned;
    assert_eq!(listed[0].cluster, "default/s1-1");
    assert_eq!(listed[0].state, ClusterState::Failed);
    assert_eq!(
        listed[0].since, started,
        "since does not move while the state holds"
    );
    h.assert_idempotent();
}

#[test]
fn rollback_restores_the_failing_stage_first_then_backwards() {
    let mut h = rolled_out_then_failing("Rollback");
    h.step();
    h.world.sveltos();
    h.step(); // s1 provisioned with #2 → s2 applied with #2
    h.world.sveltos();
    let out = h.step(); // s2 fails: the rollback starts with s2
    assert_eq!(
        h.status().phase,
        Phase::RollingBack,
        "{:?}",
        h.status().message
    );
    assert_eq!(applies(&out.actions), vec![profile_name("s2").as_str()]);
    assert_eq!(chart_of(&h, "s2"), "1.0.0");
    assert_eq!(chart_of(&h, "s1"), "9.9.9", "s1 waits until s2 is restored");
    // Content-dependent failure: the restored content deploys.
    h.world.failing_clusters.clear();
    h.world.sveltos();
    let out = h.step();
    assert_eq!(applies(&out.actions), vec![profile_name("s1").as_str()]);
    h.world.sveltos();
    h.step();
    let status = h.status();
    assert_eq!(status.phase, Phase::RolledBack, "{:?}", status.message);
    let message = status.message.as_deref().unwrap();
    assert!(message.contains("snapshot #2 rejected"), "{message}");
    assert!(message.contains("running #1"), "{message}");
    assert_eq!(chart_of(&h, "s1"), "1.0.0");
    assert_eq!(chart_of(&h, "s3"), "1.0.0", "s3 never got #2");
    for reason in ["StageFailed", "RollingBack", "StageRestored", "RolledBack"] {
        assert!(reasons(&h).contains(&reason), "missing {reason}");
    }
    h.assert_idempotent();
}

#[test]
fn a_rejected_snapshot_is_never_applied_after_its_rollback() {
    let mut h = rolled_out_then_failing("Rollback");
    h.settle();
    h.world.failing_clusters.clear();
    h.settle();
    assert_eq!(
        h.status().phase,
        Phase::RolledBack,
        "{:?}",
        h.status().message
    );
    let before = h.world.executed.len();
    // A hand delete of a restored profile is not "corrected" with the rejected content.
    h.world.observed.profiles.remove(&profile_name("s1"));
    h.settle();
    let rejected_applies = h.world.executed[before..]
        .iter()
        .filter(|a| match a {
            Action::ApplyProfile { object, .. } => {
                object["metadata"]["annotations"]["tollgate.dev/snapshot-index"] == "2"
            }
            Action::DeleteProfile { .. } => false,
        })
        .count();
    assert_eq!(rejected_applies, 0);
}

#[test]
fn rollback_of_a_first_ever_rollout_withdraws_its_profiles() {
    let mut h = Harness::new(three_stages("9.9.9"));
    h.world.policy = Some(fleet_policy(
        json!({"maxFailures": 0, "onFailure": "Rollback"}),
    ));
    h.world.failing_clusters.insert("s2-1".into());
    h.settle();
    let status = h.status();
    assert_eq!(status.phase, Phase::RolledBack, "{:?}", status.message);
    assert!(!h.has_profile(&profile_name("s1")));
    assert!(!h.has_profile(&profile_name("s2")));
    assert!(!h.has_profile(&profile_name("s3")));
    assert!(status.message.as_deref().unwrap().contains("withdrawn"));
}

#[test]
fn rollback_respects_preserve_cluster_profiles_on_delete() {
    let mut promotion = three_stages("9.9.9");
    promotion.spec.preserve_cluster_profiles_on_delete = true;
    let mut h = Harness::new(promotion);
    h.world.policy = Some(fleet_policy(
        json!({"maxFailures": 0, "onFailure": "Rollback"}),
    ));
    h.world.failing_clusters.insert("s2-1".into());
    h.settle();
    assert_eq!(h.status().phase, Phase::RolledBack);
    assert!(h.has_profile(&profile_name("s1")));
}

#[test]
fn a_new_commit_after_a_halt_starts_a_new_run() {
    let mut h = rolled_out_then_failing("Halt");
    h.settle();
    assert_eq!(h.status().phase, Phase::Failed);
    h.world.failing_clusters.clear();
    h.commit_content(three_stages("9.9.10"), 30);
    h.settle();
    assert_eq!(
        h.status().phase,
        Phase::Completed,
        "{:?}",
        h.status().message
    );
    assert!(h.status().failure.is_none());
    assert_eq!(chart_of(&h, "s3"), "9.9.10");
}

#[test]
fn a_revert_acknowledges_the_rollback() {
    let mut h = rolled_out_then_failing("Rollback");
    h.settle();
    h.world.failing_clusters.clear();
    h.settle();
    assert_eq!(h.status().phase, Phase::RolledBack);
    h.commit_content(three_stages("1.0.0"), 40);
    h.settle();
    assert!(reasons(&h).contains(&"RollbackAcknowledged"));
    assert_eq!(h.status().phase, Phase::Completed);
    assert!(h.status().failure.is_none());
}

#[test]
fn a_policy_change_mid_run_applies_from_the_next_step() {
    let mut h = Harness::new(three_stages("1.0.0"));
    h.world.failing_clusters.insert("s1-1".into());
    h.settle();
    assert_eq!(h.status().phase, Phase::Progressing);
    assert!(h.status().policy.is_none());
    h.world.policy = Some(fleet_policy(json!({"maxFailures": 0})));
    h.step();
    let status = h.status();
    assert_eq!(status.phase, Phase::Failed);
    let recorded = status
        .policy
        .as_ref()
        .expect("the governing policy is recorded");
    assert_eq!(recorded.name, "fleet-defaults");
    assert_eq!(recorded.version, h.world.policy.as_ref().unwrap().version());
    assert_eq!(
        status.snapshot_index,
        Some(1),
        "a policy change is not a restart"
    );
}

#[test]
fn an_empty_stage_is_skipped_and_says_so() {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None), stage("nowhere", None)],
    ));
    h.settle();
    assert_eq!(h.status().phase, Phase::Completed);
    assert!(h.stage_status("nowhere").skipped);
    assert!(!h.stage_status("s1").skipped);
    assert!(reasons(&h).contains(&"StageSkipped"));
}

/// A step that applied a stage's profile and then failed to persist its status (a 409, an
/// outage) leaves the profile carrying the run's own snapshot. The retried step must not take
/// that for what the stage ran before: a rollback would "restore" the rejected snapshot and wait
/// forever for clusters that reject it.
#[test]
fn a_stage_applied_by_an_unpersisted_step_is_not_its_own_predecessor() {
    let mut h = Harness::new(three_stages("9.9.9"));
    h.world.policy = Some(fleet_policy(
        json!({"maxFailures": 0, "onFailure": "Rollback"}),
    ));
    h.world.failing_clusters.insert("s2-1".into());
    h.step();
    h.world.sveltos();
    let entering_s2 = h.step_failing();
    assert_eq!(applies(&entering_s2.actions), [profile_name("s2")]);
    for action in &entering_s2.actions {
        h.world.execute(action);
    }
    h.settle();
    let status = h.status();
    assert_eq!(status.phase, Phase::RolledBack, "{:?}", status.message);
    assert_eq!(h.stage_status("s2").replaced_snapshot, None);
    assert!(!h.has_profile(&profile_name("s2")));
    assert!(!h.has_profile(&profile_name("s1")));
}
