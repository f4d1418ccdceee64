//! Recovery (issue #34): retrying a halted stage (`retry.tollgate.dev/<stage>`) and the fast
//! rollback path (`rollback.strategy`), driven with a fake clock. Each safety rule has a test
//! named after it; unhappy paths first.

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::fast_rollback::RollbackMode;
use tollgate_engine::{Action, Phase};
use tollgate_model::policy::RolloutPolicy;

fn policy(spec: serde_json::Value) -> RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "fleet-defaults"}, "spec": spec,
    }))
    .expect("valid policy")
}

fn three_stages(
    chart: &str,
    trigger: Option<serde_json::Value>,
) -> tollgate_model::ClusterPromotion {
    promotion_with(
        profile_spec(chart),
        vec![
            stage("s1", trigger.clone()),
            stage("s2", trigger.clone()),
            stage("s3", trigger),
        ],
    )
}

fn reasons(h: &Harness) -> Vec<&'static str> {
    h.world.events.iter().map(|e| e.reason.as_str()).collect()
}

fn retry_condition(h: &Harness) -> (String, String) {
    let c = h
        .status()
        .conditions
        .iter()
        .find(|c| c.type_ == "Retry")
        .expect("a Retry condition");
    (c.status.clone(), c.message.clone())
}

fn annotate_retry(h: &mut Harness, stage: &str, value: &str) {
    let key = format!("retry.tollgate.dev/{stage}");
    let value = value.to_string();
    h.edit_triggers(move |p| {
        p.metadata.annotations.insert(key, value);
    });
}

/// s2 has three clusters; s2-1 and s2-2 fail, so the run halts at s2.
fn halted_at_s2() -> Harness {
    let mut h = Harness::new(three_stages("1.0.0", None));
    h.world.add_cluster("s2-3", &[("env", "s2")]);
    h.world.policy = Some(policy(json!({"maxFailures": 0, "onFailure": "Halt"})));
    h.world.failing_clusters.insert("s2-1".into());
    h.world.failing_clusters.insert("s2-2".into());
    h.settle();
    assert_eq!(h.status().phase, Phase::Failed, "{:?}", h.status().message);
    h
}

fn id12(h: &Harness) -> String {
    h.snapshot.hashes.short().to_string()
}

fn last_applied(h: &Harness, cluster: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let name = format!("{}-sveltos-{cluster}", profile_name("s2"));
    h.world
        .observed
        .summaries
        .iter()
        .find(|s| *s.name == *name)
        .and_then(|s| s.features.first())
        .and_then(|f| f.last_applied_time)
}

#[test]
fn a_retry_of_another_snapshot_does_nothing_and_says_why() {
    let mut h = halted_at_s2();
    h.world.failing_clusters.clear();
    annotate_retry(&mut h, "s2", "0123456789ab0123/1");
    let out = h.step();
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert_eq!(h.status().phase, Phase::Failed);
    let (state, message) = retry_condition(&h);
    assert_eq!(state, "False");
    assert!(message.contains("not the run's snapshot #1"), "{message}");
    assert!(reasons(&h).contains(&"RetryRefused"));
    h.assert_idempotent();
}

#[test]
fn a_retry_of_a_run_not_halted_does_nothing_and_never_acts_on_a_later_halt() {
    let mut h = Harness::new(three_stages("1.0.0", None));
    h.world.add_cluster("s2-3", &[("env", "s2")]);
    h.world.policy = Some(policy(json!({"maxFailures": 0, "onFailure": "Halt"})));
    h.step();
    let id = id12(&h);
    annotate_retry(&mut h, "s2", &format!("{id}/1"));
    h.step();
    let (state, message) = retry_condition(&h);
    assert_eq!(state, "False");
    assert!(message.contains("is not halted"), "{message}");
    // The run then halts at s2: the value written before is spent, it re-drives nothing.
    h.world.failing_clusters.insert("s2-1".into());
    h.settle();
    assert_eq!(h.status().phase, Phase::Failed);
    assert!(!reasons(&h).contains(&"Retried"));
    h.assert_idempotent();
}

#[test]
fn a_retry_never_reapplies_a_rejected_snapshot() {
    let mut h = Harness::new(three_stages("1.0.0", None));
    h.world.policy = Some(policy(json!({"maxFailures": 0, "onFailure": "Rollback"})));
    h.settle();
    h.commit_content(three_stages("9.9.9", None), 20);
    h.world.failing_clusters.insert("s2-2".into());
    h.settle();
    h.world.failing_clusters.clear();
    h.settle();
    assert_eq!(h.status().phase, Phase::RolledBack);
    let before = h.world.executed.len();
    let value = format!("{}/1", id12(&h));
    annotate_retry(&mut h, "s2", &value);
    h.settle();
    assert_eq!(h.status().phase, Phase::RolledBack);
    let (state, message) = retry_condition(&h);
    assert_eq!(state, "False");
    assert!(message.contains("rolled back"), "{message}");
    let rejected = h.world.executed[before..].iter().any(|a| match a {
        Action::ApplyProfile { object, .. } => {
            object["metadata"]["annotations"]["tollgate.dev/snapshot-index"] == "2"
        }
        Action::DeleteProfile { .. } => false,
    });
    assert!(!rejected, "the rejected snapshot was applied again");
}

#[test]
fn a_retry_redrives_only_the_failed_clusters_and_the_run_goes_on() {
    let mut h = halted_at_s2();
    let kept_applied = last_applied(&h, "s2-3");
    assert!(kept_applied.is_some());
    h.world.failing_clusters.clear();
    h.world.advance(Duration::minutes(1));
    let value = format!("{}/1", id12(&h));
    annotate_retry(&mut h, "s2", &value);
    let out = h.step();
    assert!(reasons(&h).contains(&"Retried"));
    assert_eq!(retry_condition(&h).0, "True");
    // First the profile targets only the kept cluster, so the retried ones' summaries go.
    let spec = match out.actions.as_slice() {
        [Action::ApplyProfile { object, .. }] => object["spec"].clone(),
        other => panic!("one apply expected: {other:?}"),
    };
    assert_eq!(spec["clusterRefs"].as_array().map(Vec::len), Some(1));
    assert_eq!(spec["clusterRefs"][0]["name"], "s2-3");
    assert_eq!(spec["stopMatchingBehavior"], "LeavePolicies");
    let retry = h.stage_status("s2").retry.clone().expect("a retry");
    assert_eq!(retry.clusters, ["default/s2-1", "default/s2-2"]);
    h.world.sveltos();
    assert!(last_applied(&h, "s2-1").is_none(), "withdrawn");
    // Then they are targeted again and deployed from scratch; the kept one is not redeployed.
    h.world.advance(Duration::seconds(5));
    let readded = h.world.now;
    h.settle();
    assert_eq!(
        h.status().phase,
        Phase::Completed,
        "{:?}",
        h.status().message
    );
    assert!(last_applied(&h, "s2-1").is_some_and(|t| t >= readded));
    assert!(last_applied(&h, "s2-2").is_some_and(|t| t >= readded));
    assert_eq!(
        last_applied(&h, "s2-3"),
        kept_applied,
        "s2-3 was redeployed"
    );
    assert!(h.has_profile(&profile_name("s3")));
    assert!(
        h.profile_spec_of(&profile_name("s2"))
            .get("clusterRefs")
            .is_none()
    );
    h.assert_idempotent();
}

#[test]
fn the_same_retry_value_redrives_once() {
    let mut h = halted_at_s2();
    let value = format!("{}/1", id12(&h));
    annotate_retry(&mut h, "s2", &value);
    // Still failing: the retry re-drives, and the stage halts again.
    h.settle();
    assert_eq!(h.status().phase, Phase::Failed, "{:?}", h.status().message);
    let retried = |h: &Harness| reasons(h).iter().filter(|r| **r == "Retried").count();
    assert_eq!(retried(&h), 1);
    // The same value again (a restart, a new leader: the persisted status decides): nothing.
    h.later(Duration::minutes(5));
    assert_eq!(retried(&h), 1);
    assert_eq!(h.status().phase, Phase::Failed);
    h.assert_idempotent();
    // A new counter re-drives again, and this time the clusters recover.
    h.world.failing_clusters.clear();
    let value = format!("{}/2", id12(&h));
    annotate_retry(&mut h, "s2", &value);
    h.settle();
    assert_eq!(retried(&h), 2);
    assert_eq!(
        h.status().phase,
        Phase::Completed,
        "{:?}",
        h.status().message
    );
    let consumed: Vec<u64> = h.status().retries.iter().map(|r| r.n).collect();
    assert_eq!(consumed, [2], "the highest counter per stage and snapshot");
}

#[test]
fn a_retry_counts_the_deadline_from_the_retry() {
    let mut h = Harness::new(three_stages("1.0.0", None));
    h.world.policy = Some(policy(json!({"progressDeadline": "10m", "maxFailures": 0})));
    h.world.slow_clusters.insert("s1-2".into());
    h.settle();
    let deadline = h.stage_status("s1").deadline.expect("a deadline");
    h.settle_at(deadline);
    assert_eq!(h.status().phase, Phase::Failed);
    h.world.advance(Duration::hours(1));
    let value = format!("{}/1", id12(&h));
    annotate_retry(&mut h, "s1", &value);
    h.settle();
    let retried_at = h.stage_status("s1").retry.as_ref().expect("retry").at;
    let fresh = h.stage_status("s1").deadline.expect("a fresh deadline");
    assert!(
        fresh >= retried_at + Duration::minutes(10),
        "{fresh} vs {retried_at}"
    );
    assert_eq!(
        h.status().phase,
        Phase::Progressing,
        "{:?}",
        h.status().message
    );
    assert!(h.status().failure.is_none());
}

/// #1 rolled out everywhere (stages soak 30 s), then #2, then a revert to #1's content.
fn reverted_after_full_rollouts(strategy: &str) -> Harness {
    let soak = Some(json!({"auto": {"delay": "30s"}}));
    let mut h = Harness::new(three_stages("1.0.0", soak.clone()));
    h.world.policy = Some(policy(json!({"rollback": {"strategy": strategy}})));
    for _ in 0..4 {
        h.later(Duration::seconds(30));
    }
    assert_eq!(h.status().phase, Phase::Completed);
    h.commit_content(three_stages("2.0.0", soak.clone()), 20);
    for _ in 0..4 {
        h.later(Duration::seconds(30));
    }
    assert_eq!(h.status().phase, Phase::Completed);
    h.commit_content(three_stages("1.0.0", soak), 30);
    h
}

#[test]
fn a_staged_rollback_waits_every_soak() {
    let mut h = reverted_after_full_rollouts("Staged");
    let started = h.world.now;
    h.settle();
    assert_eq!(h.status().rollback, Some(RollbackMode::Staged));
    assert_eq!(h.status().rollback_of, Some(1));
    assert_ne!(h.status().phase, Phase::Completed);
    assert!(!h.stage_status("s1").fast_rollback);
    for _ in 0..3 {
        h.later(Duration::seconds(30));
    }
    assert_eq!(h.status().phase, Phase::Completed);
    assert!(h.world.now - started >= Duration::seconds(90));
}

#[test]
fn a_fast_rollback_skips_the_soaks_of_stages_where_the_content_completed() {
    let mut h = reverted_after_full_rollouts("Fast");
    let started = h.world.now;
    h.settle();
    assert_eq!(
        h.status().phase,
        Phase::Completed,
        "{:?}",
        h.status().message
    );
    assert_eq!(h.world.now, started, "no time passed: no soak was waited");
    assert_eq!(h.status().rollback, Some(RollbackMode::Fast));
    for stage in ["s1", "s2", "s3"] {
        let st = h.stage_status(stage);
        assert!(st.fast_rollback, "{stage}");
        assert_eq!(st.delay_ends_at, None, "{stage} soaked");
        assert_eq!(
            h.profile_spec_of(&profile_name(stage))["helmCharts"][0]["chartVersion"],
            "1.0.0"
        );
    }
    let run = h.status().runs.last().expect("a run");
    assert_eq!(run.rollback, Some(RollbackMode::Fast));
    h.assert_idempotent();
}

#[test]
fn a_fast_rollback_only_targets_snapshots_that_completed_in_that_stage() {
    // #1 completes; #2 completes s1 and s2 and is mid-soak in s3 when #3 (new content) restarts;
    // then #4 reverts to #2's content, which s3 still runs but never completed.
    let soak = Some(json!({"auto": {"delay": "30s"}}));
    let mut h = Harness::new(three_stages("1.0.0", soak.clone()));
    h.world.policy = Some(policy(json!({})));
    for _ in 0..4 {
        h.later(Duration::seconds(30));
    }
    h.commit_content(three_stages("2.0.0", soak.clone()), 20);
    for _ in 0..3 {
        h.later(Duration::seconds(30));
    }
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s3"));
    h.commit_content(three_stages("3.0.0", soak.clone()), 30);
    h.settle();
    h.commit_content(three_stages("2.0.0", soak), 40);
    h.settle();
    assert_eq!(h.status().rollback, Some(RollbackMode::Fast));
    assert_eq!(h.status().rollback_of, Some(2));
    assert!(h.stage_status("s1").fast_rollback);
    h.later(Duration::seconds(0));
    assert!(h.stage_status("s2").fast_rollback);
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s3"));
    assert!(
        !h.stage_status("s3").fast_rollback,
        "#2 never completed in s3: it soaks there"
    );
    assert_ne!(h.status().phase, Phase::Completed);
    h.later(Duration::seconds(30));
    assert_eq!(h.status().phase, Phase::Completed);
}
