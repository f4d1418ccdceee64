//! `onNewSnapshot` (Restart | FinishCurrent | Queue) and blackouts, driven with a fake clock.
//! Each rule has a test named after it.

mod common;

use chrono::Duration;
use common::*;
use serde_json::{Value, json};
use tollgate_engine::{Action, Phase};
use tollgate_model::ClusterPromotion;
use tollgate_model::policy::RolloutPolicy;

fn policy(spec: Value) -> RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "fleet"}, "spec": spec,
    }))
    .expect("valid policy")
}

/// s1 (10m soak) → s2 (manual gate) → s3.
fn pipeline(chart: &str) -> ClusterPromotion {
    promotion_with(
        profile_spec(chart),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "10m"}}))),
            stage("s2", Some(json!({"manual": {}}))),
            stage("s3", None),
        ],
    )
}

fn chart_of(h: &Harness, stage: &str) -> String {
    h.world
        .profile(&profile_name(stage))
        .map(|p| {
            p.spec.value()["helmCharts"][0]["chartVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .unwrap_or_default()
}

fn reasons(h: &Harness) -> Vec<&'static str> {
    h.world.events.iter().map(|e| e.reason.as_str()).collect()
}

/// Approves the running snapshot at stage `stage` as people do: the annotation, set at HEAD in
/// the commit at first-parent position `seq`.
fn approve(h: &mut Harness, stage: &str, seq: u64) {
    let id: String = h
        .status()
        .snapshot_id
        .clone()
        .unwrap_or_default()
        .chars()
        .take(12)
        .collect();
    let key = format!("approve.tollgate.dev/{stage}");
    let mut promotion = (*h.snapshot.promotion).clone();
    promotion.metadata.annotations.insert(key, id.clone());
    h.snapshot.promotion = std::sync::Arc::new(promotion);
    let kind = tollgate_model::ApprovalKind::Annotation { value: id };
    let commit = tollgate_engine::testing::commit(seq);
    h.approvals
        .push(tollgate_engine::testing::approval(stage, kind, commit));
}

/// Runs snapshot #1 to the manual gate of s2.
fn at_the_gate(spec: Value) -> Harness {
    let mut h = Harness::new(pipeline("1.0.0"));
    h.world.policy = Some(policy(spec));
    h.settle();
    h.later(Duration::minutes(10));
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s2"));
    h
}

#[test]
fn finish_current_lets_the_running_run_complete_then_starts_the_newest() {
    let mut h = at_the_gate(json!({"onNewSnapshot": "FinishCurrent"}));
    h.commit_content(pipeline("2.0.0"), 20);
    h.commit_content(pipeline("3.0.0"), 30);
    h.settle();
    // #1 goes on: s1 keeps 1.0.0, #3 waits, #2 is not applied anywhere.
    assert_eq!(chart_of(&h, "s1"), "1.0.0");
    assert_eq!(h.status().snapshot_index, Some(1));
    assert_eq!(h.status().queued_snapshot, Some(3));
    assert!(
        h.status()
            .message
            .as_deref()
            .is_some_and(|m| m.contains("snapshot #3 waits for this run to finish")),
        "{:?}",
        h.status().message
    );
    approve(&mut h, "s2", 40);
    h.settle();
    // #1 completed s3, and #3 started at s1 in the same step.
    assert_eq!(chart_of(&h, "s3"), "1.0.0");
    assert_eq!(chart_of(&h, "s1"), "3.0.0");
    assert_eq!(h.status().snapshot_index, Some(3));
    assert_eq!(h.status().queued_snapshot, None);
    assert_eq!(h.status().superseded_snapshots, vec![2]);
    assert!(reasons(&h).contains(&"SnapshotsSuperseded"));
    // The run history says #1 completed (it was not superseded) and #3 runs.
    let runs: Vec<(u64, String)> = h
        .status()
        .runs
        .iter()
        .map(|r| (r.snapshot_index, format!("{:?}", r.outcome)))
        .collect();
    assert_eq!(
        runs,
        [(1, "Completed".to_string()), (3, "Running".to_string())]
    );
    h.assert_idempotent();
}

#[test]
fn queue_runs_every_snapshot_to_completion_in_commit_order() {
    let mut h = at_the_gate(json!({"onNewSnapshot": "Queue"}));
    h.commit_content(pipeline("2.0.0"), 20);
    h.commit_content(pipeline("3.0.0"), 30);
    h.settle();
    assert_eq!(h.status().snapshot_index, Some(1));
    approve(&mut h, "s2", 40);
    h.settle();
    assert_eq!(chart_of(&h, "s3"), "1.0.0");
    assert_eq!(h.status().snapshot_index, Some(2), "#2 runs next, not #3");
    assert_eq!(chart_of(&h, "s1"), "2.0.0");
    assert_eq!(h.status().queued_snapshot, Some(3));
    h.later(Duration::minutes(10));
    approve(&mut h, "s2", 50);
    h.settle();
    assert_eq!(chart_of(&h, "s3"), "2.0.0");
    assert_eq!(h.status().snapshot_index, Some(3));
    h.later(Duration::minutes(10));
    approve(&mut h, "s2", 60);
    h.settle();
    assert_eq!(chart_of(&h, "s3"), "3.0.0");
    assert_eq!(h.status().phase, Phase::Completed);
    assert!(h.status().superseded_snapshots.is_empty());
    h.assert_idempotent();
}

#[test]
fn a_rollback_takes_effect_at_once_whatever_the_policy() {
    for on_new in ["FinishCurrent", "Queue"] {
        let mut h = at_the_gate(json!({"onNewSnapshot": on_new}));
        approve(&mut h, "s2", 15);
        h.settle();
        assert_eq!(h.status().phase, Phase::Completed, "{on_new}");
        // #2 runs to the gate, #3 waits for it; then a revert to #1's (completed) content.
        h.commit_content(pipeline("2.0.0"), 20);
        h.settle();
        h.later(Duration::minutes(10));
        h.commit_content(pipeline("3.0.0"), 30);
        h.settle();
        assert_eq!(h.status().queued_snapshot, Some(3), "{on_new}");
        h.commit_content(pipeline("1.0.0"), 40);
        h.settle();
        assert_eq!(h.status().snapshot_index, Some(4), "{on_new}");
        assert_eq!(h.status().rollback_of, Some(1), "{on_new}");
        assert_eq!(chart_of(&h, "s1"), "1.0.0", "{on_new}");
        assert_eq!(h.status().queued_snapshot, None);
    }
}

#[test]
fn content_of_a_snapshot_that_never_ran_is_a_forward_change() {
    // #1 runs to the gate; #2 and #3 land while it waits (Queue: they wait too); #4 brings back
    // #2's content, which never ran here: not a rollback, so it waits its turn.
    let mut h = at_the_gate(json!({"onNewSnapshot": "Queue"}));
    h.commit_content(pipeline("2.0.0"), 20);
    h.settle();
    h.commit_content(pipeline("3.0.0"), 30);
    h.settle();
    h.commit_content(pipeline("2.0.0"), 40);
    assert_eq!(h.snapshot.same_content_as, Some(2));
    h.settle();
    assert_eq!(h.status().snapshot_index, Some(1), "#1 still runs");
    assert_eq!(h.status().rollback_of, None);
    assert!(!reasons(&h).contains(&"Rollback"), "{:?}", reasons(&h));
}

#[test]
fn a_first_rollout_whose_content_equals_an_earlier_commit_is_no_rollback() {
    // The middle of a fast-forwarded pull request: the controller never saw #1 or #2.
    let mut h = Harness::new(pipeline("1.0.0"));
    h.commit_content(pipeline("2.0.0"), 20);
    h.commit_content(pipeline("1.0.0"), 30);
    assert_eq!(h.snapshot.same_content_as, Some(1));
    h.step();
    assert_eq!(h.status().snapshot_index, Some(3));
    assert_eq!(h.status().rollback_of, None);
    assert!(!reasons(&h).contains(&"Rollback"), "{:?}", reasons(&h));
}

/// #1 completes; #2 fails in s1 and is rolled back (onFailure: Rollback).
fn rejected_second_snapshot(spec: Value) -> Harness {
    let mut h = Harness::new(pipeline("1.0.0"));
    h.world.policy = Some(policy(spec));
    h.settle();
    h.later(Duration::minutes(10));
    approve(&mut h, "s2", 15);
    h.settle();
    assert_eq!(h.status().phase, Phase::Completed);
    h.world.failing_clusters.insert("s1-1".to_string());
    h.commit_content(pipeline("2.0.0"), 20);
    h.settle();
    h.world.failing_clusters.clear();
    h.settle();
    assert_eq!(
        h.status().phase,
        Phase::RolledBack,
        "{:?}",
        h.status().message
    );
    h
}

#[test]
fn recommitted_rejected_content_obeys_a_blackout_and_is_warned() {
    let mut h = rejected_second_snapshot(json!({"onFailure": "Rollback"}));
    // The revert acknowledges the rollback (#3 = #1's content) ...
    h.commit_content(pipeline("1.0.0"), 30);
    h.settle();
    assert_eq!(h.status().rollback_of, Some(1));
    h.world.policy = Some(policy(json!({
        "onFailure": "Rollback",
        "blackouts": [{"from": "2025-10-07", "to": "2025-10-09", "reason": "freeze"}],
    })));
    // ... and a revert of the revert brings #2's content back, during the freeze.
    h.commit_content(pipeline("2.0.0"), 40);
    assert_eq!(h.snapshot.same_content_as, Some(2));
    let out = h.step();
    assert!(out.actions.is_empty(), "held: {:?}", out.actions);
    assert_eq!(chart_of(&h, "s1"), "1.0.0");
    assert_eq!(h.status().snapshot_index, Some(3), "#4 waits");
    let warned: Vec<&str> = h
        .world
        .events
        .iter()
        .filter(|e| e.reason == "RejectedContentRecommitted")
        .map(|e| e.note.as_str())
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", h.world.events);
    assert!(
        warned[0].contains("content of snapshot #2, rejected at 2025-10-07"),
        "{}",
        warned[0]
    );
    let message = h.status().message.clone().unwrap_or_default();
    assert!(message.contains("blackout"), "{message}");
    assert!(message.contains("rejected at"), "{message}");
    let condition = tollgate_engine::conditions::problem(h.status(), "RejectedContent");
    assert!(condition.is_some(), "{:?}", h.status().conditions);
    // Told once, not at every step.
    h.settle();
    let told = h
        .world
        .events
        .iter()
        .filter(|e| e.reason == "RejectedContentRecommitted")
        .count();
    assert_eq!(told, 1);
}

#[test]
fn rejected_content_pushed_again_at_once_is_not_applied_again() {
    let mut h = rejected_second_snapshot(json!({"onFailure": "Rollback"}));
    let applied = h.world.executed.len();
    h.commit_content(pipeline("2.0.0"), 30);
    h.settle();
    assert_eq!(
        h.world.executed.len(),
        applied,
        "{:?}",
        &h.world.executed[applied..]
    );
    assert_eq!(h.status().phase, Phase::RolledBack);
    let message = h.status().message.clone().unwrap_or_default();
    assert!(message.contains("not applied again"), "{message}");
    assert!(reasons(&h).contains(&"RejectedContentRecommitted"));
}

#[test]
fn recommitted_rejected_content_waits_its_turn_like_any_change() {
    // Staged: a fast rollback would pass the gate at once (issue #34), and #3 must stay running.
    let mut h = rejected_second_snapshot(json!({"onFailure": "Rollback", "onNewSnapshot": "Queue",
        "rollback": {"strategy": "Staged"}}));
    // #3 restores #1 (a rollback, acknowledged), and runs to the gate.
    h.commit_content(pipeline("1.0.0"), 30);
    h.settle();
    assert_eq!(h.status().rollback_of, Some(1));
    h.commit_content(pipeline("2.0.0"), 40);
    h.settle();
    assert_eq!(h.status().snapshot_index, Some(3), "#4 queued behind #3");
    assert_eq!(h.status().queued_snapshot, Some(4));
}

#[test]
fn a_revert_to_what_the_stages_run_now_is_a_rollback_even_if_it_never_completed() {
    // #1 runs to the gate (never completes); #2 restarts s1; reverting to #1 restores s1 at once.
    let mut h = at_the_gate(json!({"blackouts": [
        {"from": "2025-10-07T10:15:00Z", "to": "2025-10-09", "reason": "freeze"}]}));
    h.commit_content(pipeline("2.0.0"), 20);
    h.settle();
    assert_eq!(chart_of(&h, "s1"), "2.0.0");
    h.world.now = t("2025-10-07T10:20:00Z");
    h.commit_content(pipeline("1.0.0"), 30);
    h.settle();
    assert_eq!(h.status().rollback_of, Some(1), "{:?}", h.status().message);
    assert_eq!(chart_of(&h, "s1"), "1.0.0");
}

fn reach(h: &mut Harness, phase: &str) -> bool {
    match phase {
        "provisioning" => {
            h.world.slow_clusters.insert("s1-1".into());
            h.settle();
            false
        }
        "soak" => {
            h.settle();
            false
        }
        "awaiting approval" => {
            h.settle();
            h.later(Duration::minutes(10));
            false
        }
        "halted" => {
            h.world.failing_clusters.insert("s1-1".into());
            h.settle();
            true
        }
        "completed" => {
            h.settle();
            h.later(Duration::minutes(10));
            approve(h, "s2", 15);
            h.settle();
            true
        }
        other => panic!("no phase {other}"),
    }
}

/// A new commit in each phase of a run, under each policy: Restart starts it at once; the others
/// start it at once only when the run has finished (completed or halted).
#[test]
fn a_new_commit_in_each_phase_under_each_policy() {
    let phases = [
        "provisioning",
        "soak",
        "awaiting approval",
        "halted",
        "completed",
    ];
    for on_new in ["Restart", "FinishCurrent", "Queue"] {
        for phase in phases {
            let mut h = Harness::new(pipeline("1.0.0"));
            h.world.policy = Some(policy(
                json!({"onNewSnapshot": on_new, "onFailure": "Halt"}),
            ));
            let finished = reach(&mut h, phase);
            h.commit_content(pipeline("2.0.0"), 20);
            let out = h.step();
            let starts_now = on_new == "Restart" || finished;
            let applied_s1 = out.actions.iter().any(|a| {
                matches!(a, Action::ApplyProfile { name, object }
                    if *name == profile_name("s1")
                        && object["spec"]["helmCharts"][0]["chartVersion"] == "2.0.0")
            });
            assert_eq!(
                applied_s1,
                starts_now,
                "{on_new} in phase {phase}: status {:?}",
                h.status().message
            );
            let queued = h.status().queued_snapshot;
            assert_eq!(queued.is_some(), !starts_now, "{on_new} in {phase}");
        }
    }
}

#[test]
fn no_stage_starts_inside_a_blackout_and_the_engine_wakes_at_its_end() {
    // The blackout begins during s1's soak (mid-delay) and ends an hour later.
    let start = t0() + Duration::minutes(5);
    let end = t0() + Duration::minutes(65);
    let mut h = Harness::new(pipeline("1.0.0"));
    h.world.policy = Some(policy(json!({"blackouts": [{
        "from": start.format("%Y-%m-%dT%H:%M:%S").to_string(),
        "to": end.format("%Y-%m-%dT%H:%M:%S").to_string(),
        "reason": "incident 42",
    }]})));
    h.settle();
    assert!(
        h.has_profile(&profile_name("s1")),
        "s1 starts before the blackout"
    );
    let out = h.later(Duration::minutes(10));
    assert!(out.actions.is_empty());
    assert!(
        !h.has_profile(&profile_name("s2")),
        "s2 must not start in the blackout"
    );
    let status = h.status().clone();
    assert_eq!(status.phase, Phase::Waiting);
    assert_eq!(status.blackout_until, Some(end));
    assert_eq!(status.next_wake_up, Some(end));
    assert!(
        status
            .message
            .as_deref()
            .is_some_and(|m| m.contains("blackout until")
                && m.contains("(incident 42)")
                && m.contains("stage s2 waits to start")),
        "{:?}",
        status.message
    );
    assert_eq!(reasons(&h).iter().filter(|r| **r == "Blackout").count(), 1);
    h.assert_idempotent();
    // At the exact end the stage starts.
    h.settle_at(end);
    assert!(h.has_profile(&profile_name("s2")));
    assert_eq!(h.status().blackout_until, None);
}

#[test]
fn a_new_run_waits_for_the_blackout_but_a_rollback_does_not() {
    let mut h = Harness::new(pipeline("1.0.0"));
    h.settle();
    h.later(Duration::minutes(10));
    approve(&mut h, "s2", 15);
    h.settle();
    assert_eq!(h.status().phase, Phase::Completed, "#1 is known good");
    h.commit_content(pipeline("2.0.0"), 20);
    h.settle();
    h.world.policy = Some(policy(json!({"blackouts": [{
        "from": "2025-10-07", "to": "2025-10-08", "reason": "freeze",
    }]})));
    h.commit_content(pipeline("3.0.0"), 30);
    let out = h.step();
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert_eq!(h.status().snapshot_index, Some(2));
    assert!(
        h.status()
            .message
            .as_deref()
            .is_some_and(|m| m.contains("snapshot #3 waits to start")),
        "{:?}",
        h.status().message
    );
    // A revert to #1's content during the freeze: restoring known-good content is not held.
    h.commit_content(pipeline("1.0.0"), 40);
    h.settle();
    assert_eq!(h.status().snapshot_index, Some(4), "a rollback is not held");
    assert_eq!(chart_of(&h, "s1"), "1.0.0");
}

#[test]
fn a_running_stage_keeps_going_in_a_blackout() {
    let mut h = Harness::new(pipeline("1.0.0"));
    h.world.policy = Some(policy(json!({"blackouts": [{
        "from": "2025-10-07T10:01:00", "to": "2025-10-08",
    }]})));
    // s1 is applied at 10:00; its clusters report only at 10:02, inside the blackout.
    h.step();
    assert!(h.has_profile(&profile_name("s1")));
    h.world.now = t0() + Duration::minutes(2);
    h.settle();
    assert!(
        h.stage_status("s1").provisioned_at.is_some(),
        "s1 completes inside the blackout: {:?}",
        h.status()
    );
}
