//! Clusters Sveltos pauses (maintenance windows): `Paused`, never counted failed or timed out,
//! their paused time not charged against the deadline, and `pausedClusters: Wait | Skip`.
//! Driven with a fake clock (`now` is an argument).

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::{ClusterState, Phase};
use tollgate_model::model::TimeWindow;
use tollgate_model::policy::RolloutPolicy;
use tollgate_model::window::Window;

fn policy(spec: serde_json::Value) -> RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "fleet-defaults"}, "spec": spec,
    }))
    .expect("valid policy")
}

fn two_stages() -> tollgate_model::ClusterPromotion {
    promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None), stage("s2", None)],
    )
}

fn set_paused(h: &mut Harness, name: &str, paused: bool) {
    let clusters = std::sync::Arc::make_mut(&mut h.world.observed.clusters);
    let cluster = clusters
        .iter_mut()
        .find(|c| c.name == name)
        .expect("cluster");
    cluster.paused = paused;
}

fn listed_state(h: &Harness, stage: &str, cluster: &str) -> Option<ClusterState> {
    h.stage_status(stage)
        .not_provisioned
        .iter()
        .find(|c| c.cluster == format!("default/{cluster}"))
        .map(|c| c.state)
}

#[test]
fn a_paused_cluster_does_not_time_out_the_stage_and_counts_once_unpaused() {
    let mut h = Harness::new(two_stages());
    h.world.policy = Some(policy(json!({"progressDeadline": "5m", "maxFailures": 0})));
    set_paused(&mut h, "s1-2", true);
    h.settle();
    let s1 = h.stage_status("s1");
    assert_eq!(
        s1.members.as_deref().map(<[String]>::len),
        Some(2),
        "a member"
    );
    assert_eq!(s1.counts.paused, 1);
    assert_eq!(listed_state(&h, "s1", "s1-2"), Some(ClusterState::Paused));
    // Long past the deadline: still waiting, nothing timed out, nothing failed.
    h.later(Duration::minutes(30));
    assert_eq!(
        h.status().phase,
        Phase::Progressing,
        "{:?}",
        h.status().message
    );
    assert!(h.status().failure.is_none());
    assert_eq!(listed_state(&h, "s1", "s1-2"), Some(ClusterState::Paused));
    assert!(!h.has_profile(&profile_name("s2")), "Wait: s2 waits for it");
    h.assert_idempotent();
    // Unpaused: Sveltos deploys, it is counted, the stage completes.
    set_paused(&mut h, "s1-2", false);
    h.later(Duration::seconds(1));
    let s1 = h.stage_status("s1");
    assert_eq!(s1.counts.paused, 0);
    assert!(s1.provisioned_at.is_some(), "{:?}", s1.not_provisioned);
    assert_eq!(h.status().phase, Phase::Completed);
}

#[test]
fn the_deadline_resumes_when_the_cluster_unpauses_without_the_paused_time() {
    let mut h = Harness::new(two_stages());
    h.world.policy = Some(policy(json!({"progressDeadline": "5m", "maxFailures": 0})));
    h.world.slow_clusters.insert("s1-2".into());
    h.settle();
    let applied_at = h.stage_status("s1").applied_at;
    // 2 minutes in, it pauses for 10 minutes.
    h.settle_at(applied_at + Duration::minutes(2));
    set_paused(&mut h, "s1-2", true);
    h.settle_at(applied_at + Duration::minutes(2));
    assert_eq!(listed_state(&h, "s1", "s1-2"), Some(ClusterState::Paused));
    h.settle_at(applied_at + Duration::minutes(12));
    set_paused(&mut h, "s1-2", false);
    let out = h.settle_at(applied_at + Duration::minutes(12));
    // Its deadline moved on by the 10 minutes it was paused: 5m + 10m after the apply.
    let moved = applied_at + Duration::minutes(15);
    assert_eq!(out.wake_at, Some(moved), "wakes at its own deadline");
    h.settle_at(moved - Duration::seconds(1));
    assert_eq!(h.status().phase, Phase::Progressing);
    assert_eq!(
        listed_state(&h, "s1", "s1-2"),
        Some(ClusterState::Provisioning)
    );
    h.settle_at(moved);
    assert_eq!(
        h.status().phase,
        Phase::Failed,
        "still slow at its deadline"
    );
    let failure = h.status().failure.as_deref().expect("failure");
    assert_eq!(failure.clusters[0].state, ClusterState::TimedOut);
    assert_eq!(failure.clusters[0].since, moved);
}

#[test]
fn skip_lets_the_stage_complete_without_its_paused_clusters() {
    let mut h = Harness::new(two_stages());
    h.world.policy = Some(policy(json!({
        "progressDeadline": "5m", "maxFailures": 0,
        "stages": {"s1": {"pausedClusters": "Skip"}},
    })));
    set_paused(&mut h, "s1-2", true);
    set_paused(&mut h, "s2-2", true);
    h.settle();
    let s1 = h.stage_status("s1");
    assert!(
        s1.provisioned_at.is_some(),
        "Skip: s1 completes without s1-2"
    );
    assert_eq!(s1.counts.paused, 1);
    assert!(h.has_profile(&profile_name("s2")));
    // s2 waits (the default): its paused cluster holds it.
    h.later(Duration::hours(1));
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s2"));
    assert_eq!(h.status().phase, Phase::Progressing);
    assert_eq!(listed_state(&h, "s2", "s2-2"), Some(ClusterState::Paused));
}

#[test]
fn a_paused_cluster_never_spends_the_failure_budget() {
    let mut h = Harness::new(two_stages());
    h.world.policy = Some(policy(json!({"maxFailures": 0, "onFailure": "Halt"})));
    // Its deployment would fail, but Sveltos holds it while paused.
    h.world.failing_clusters.insert("s1-2".into());
    set_paused(&mut h, "s1-2", true);
    h.settle();
    assert!(h.status().failure.is_none(), "{:?}", h.status().failure);
    assert_eq!(h.stage_status("s1").counts.failed, 0);
    assert_eq!(listed_state(&h, "s1", "s1-2"), Some(ClusterState::Paused));
    // Unpaused, it fails for real: now it counts.
    set_paused(&mut h, "s1-2", false);
    h.later(Duration::seconds(1));
    assert_eq!(h.status().phase, Phase::Failed);
}

#[test]
fn a_closed_active_window_pauses_the_cluster_and_the_engine_wakes_when_it_opens() {
    let mut h = Harness::new(two_stages());
    h.world.policy = Some(policy(json!({"progressDeadline": "5m", "maxFailures": 0})));
    // t0 is 10:00; the cluster is active 12:00–13:00 only.
    let window = Window::parse(&TimeWindow {
        from: "0 12 * * *".into(),
        to: "0 13 * * *".into(),
    })
    .expect("window");
    let clusters = std::sync::Arc::make_mut(&mut h.world.observed.clusters);
    let cluster = clusters
        .iter_mut()
        .find(|c| c.name == "s1-2")
        .expect("s1-2");
    cluster.active_window = Some(window);
    let out = h.settle();
    assert_eq!(
        out.wake_at,
        Some(t0() + Duration::minutes(5)),
        "the deadline"
    );
    let out = h.settle_at(t0() + Duration::minutes(5));
    let opens = t("2025-10-07T12:00:00Z");
    assert_eq!(listed_state(&h, "s1", "s1-2"), Some(ClusterState::Paused));
    let message = h.stage_status("s1").not_provisioned[0].message.clone();
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("2025-10-07T12:00:00Z")),
        "{message:?}"
    );
    assert_eq!(out.wake_at, Some(opens), "then woken when the window opens");
    assert!(
        h.status().failure.is_none(),
        "not timed out at the deadline"
    );
    h.settle_at(opens);
    assert!(h.stage_status("s1").provisioned_at.is_some());
    assert!(h.status().failure.is_none());
    // Its 2 hours outside the window are on record, not charged.
    let record = h
        .stage_status("s1")
        .paused_clusters
        .as_deref()
        .expect("on record");
    assert_eq!(record.len(), 1, "{record:?}");
    assert_eq!(record[0].paused_seconds, 2 * 3600);
}

#[test]
fn a_member_unpaused_after_its_skip_stage_completed_is_followed_not_shown_paused() {
    let mut h = Harness::new(two_stages());
    h.world.policy = Some(policy(json!({
        "progressDeadline": "5m", "maxFailures": 0,
        "stages": {"s1": {"pausedClusters": "Skip"}},
    })));
    set_paused(&mut h, "s1-2", true);
    h.settle();
    assert_eq!(h.status().phase, Phase::Completed);
    assert_eq!(listed_state(&h, "s1", "s1-2"), Some(ClusterState::Paused));
    // Its window opens after the run completed: Sveltos deploys there.
    set_paused(&mut h, "s1-2", false);
    h.settle();
    let s1 = h.stage_status("s1");
    assert_eq!(s1.counts.paused, 0, "{s1:#?}");
    assert_eq!(s1.counts.provisioned, 2, "{s1:#?}");
    assert_eq!(listed_state(&h, "s1", "s1-2"), None);
    assert_eq!(h.status().phase, Phase::Completed);
    h.assert_idempotent();
}
