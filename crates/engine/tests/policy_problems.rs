//! A RolloutPolicy that cannot be resolved (two policies select the promotion, its annotation
//! names a missing policy, its file does not parse) fails closed: the run in progress goes on
//! under the last valid policy, nothing new starts, and the problem is visible.

mod common;

use chrono::Duration;
use common::*;
use serde_json::{Value, json};
use tollgate_engine::Phase;
use tollgate_engine::conditions::{POLICY_VALID, problem};
use tollgate_model::ClusterPromotion;
use tollgate_model::policy::RolloutPolicy;

const PROBLEM: &str = "RolloutPolicies \"a\" (policies/a.yaml:4) and \"b\" (policies/b.yaml:4) both select this promotion: name one with the annotation tollgate.dev/policy, or narrow a selector";

fn policy(spec: Value) -> RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "a"}, "spec": spec,
    }))
    .expect("valid policy")
}

/// s1 (10m soak) → s2.
fn pipeline(chart: &str) -> ClusterPromotion {
    promotion_with(
        profile_spec(chart),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "10m"}}))),
            stage("s2", None),
        ],
    )
}

fn told(h: &Harness, reason: &str) -> usize {
    h.world.events.iter().filter(|e| e.reason == reason).count()
}

#[test]
fn a_new_snapshot_waits_while_the_policy_cannot_be_resolved() {
    let mut h = Harness::new(pipeline("1.0.0"));
    h.world.policy = Some(policy(json!({"progressDeadline": "5m"})));
    h.settle();
    h.later(Duration::minutes(10));
    assert_eq!(h.status().phase, Phase::Completed);
    let applied = h.world.executed.len();

    h.world.policy_problem = Some(PROBLEM.to_string());
    h.commit_content(pipeline("2.0.0"), 20);
    h.settle();
    assert_eq!(h.world.executed.len(), applied, "nothing applied");
    assert_eq!(h.status().phase, Phase::Held);
    assert_eq!(h.status().queued_snapshot, Some(2));
    let message = h.status().message.clone().unwrap_or_default();
    assert!(message.contains("snapshot #2 is held"), "{message}");
    assert!(message.contains("policies/a.yaml:4"), "{message}");
    let condition = problem(h.status(), POLICY_VALID).expect("condition");
    assert_eq!(condition.reason, "PolicyInvalid");
    assert_eq!(told(&h, "PolicyInvalid"), 1);
    h.later(Duration::minutes(30));
    assert_eq!(told(&h, "PolicyInvalid"), 1, "told once");
    h.assert_idempotent();

    // Fixed: the held snapshot starts, and the condition says so.
    h.world.policy_problem = None;
    h.settle();
    assert_eq!(h.status().snapshot_index, Some(2));
    assert!(problem(h.status(), POLICY_VALID).is_none());
}

#[test]
fn the_run_in_progress_goes_on_under_the_last_valid_policy() {
    let mut h = Harness::new(pipeline("1.0.0"));
    h.world.policy = Some(policy(
        json!({"progressDeadline": "5m", "onFailure": "Halt"}),
    ));
    h.world.slow_clusters.insert("s1-1".to_string());
    h.settle();
    // The policy breaks while s1 provisions: its last valid version still times s1 out.
    h.world.policy_problem = Some(PROBLEM.to_string());
    h.later(Duration::minutes(6));
    assert_eq!(h.status().phase, Phase::Failed, "{:?}", h.status().message);
    assert_eq!(
        h.status().policy.as_ref().map(|p| p.name.as_str()),
        Some("a")
    );
    assert!(h.status().failure.is_some());
}

#[test]
fn a_held_snapshot_waits_after_the_running_run_finishes() {
    let mut h = Harness::new(pipeline("1.0.0"));
    h.settle();
    h.world.policy_problem = Some(PROBLEM.to_string());
    h.commit_content(pipeline("2.0.0"), 20);
    h.settle();
    // #1 goes on (its soak), #2 waits.
    assert_eq!(h.status().snapshot_index, Some(1));
    assert_eq!(h.status().phase, Phase::Held);
    h.later(Duration::minutes(10));
    assert!(h.has_profile(&profile_name("s2")), "#1 reached s2");
    assert_eq!(h.status().snapshot_index, Some(1));
    assert_eq!(h.status().phase, Phase::Held);
    let message = h.status().message.clone().unwrap_or_default();
    assert!(
        message.contains("meanwhile all 2 stages provisioned"),
        "{message}"
    );
}

#[test]
fn a_promotion_that_never_ran_does_not_start_with_a_broken_policy() {
    let mut h = Harness::new(pipeline("1.0.0"));
    h.world.policy_problem = Some(PROBLEM.to_string());
    let out = h.step();
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert_eq!(h.status().phase, Phase::Held);
    assert_eq!(h.status().snapshot_index, None);
    assert_eq!(told(&h, "PolicyInvalid"), 1);
    h.world.policy_problem = None;
    h.settle();
    assert_eq!(h.status().snapshot_index, Some(1));
}

#[test]
fn a_rollback_is_held_too_while_the_policy_is_broken() {
    let mut h = Harness::new(pipeline("1.0.0"));
    h.settle();
    h.later(Duration::minutes(10));
    h.commit_content(pipeline("2.0.0"), 20);
    h.settle();
    h.world.policy_problem = Some(PROBLEM.to_string());
    h.commit_content(pipeline("1.0.0"), 30);
    h.settle();
    assert_eq!(
        h.status().snapshot_index,
        Some(2),
        "fail closed: nothing new starts"
    );
    assert_eq!(h.status().queued_snapshot, Some(3));
}
