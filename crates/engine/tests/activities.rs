//! What each stage is doing, named by the engine (issue #30): the activity every view reads, its
//! since/until, the counts over the stage's members, and the transitions in the run history.

mod common;

use chrono::Duration;
use common::*;
use serde_json::{Value, json};
use tollgate_engine::activity::{StageActivity, WaveOf};
use tollgate_model::policy::RolloutPolicy;

fn policy(spec: Value) -> RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "p"}, "spec": spec,
    }))
    .expect("valid policy")
}

fn activity_of(h: &Harness, stage: &str) -> StageActivity {
    h.status()
        .pipeline()
        .iter()
        .find(|s| s.name == stage)
        .map(|s| s.activity.clone())
        .unwrap_or_else(|| panic!("no stage {stage}"))
}

/// s1 (2m soak) → prod with seven clusters.
fn seven_in_prod() -> Harness {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "2m"}}))),
            stage("prod", None),
        ],
    ));
    std::sync::Arc::make_mut(&mut h.world.observed.clusters)
        .retain(|c| c.labels.get("env").map(String::as_str) != Some("prod"));
    for i in 1..=7 {
        let order = i.to_string();
        h.world
            .add_cluster(&format!("prod-{i}"), &[("env", "prod"), ("order", &order)]);
    }
    h
}

#[test]
fn a_waved_stage_counts_its_members_and_names_each_wave_and_pause() {
    let mut h = seven_in_prod();
    h.world.policy = Some(policy(json!({"stages": {"prod": {"waves": {
        "sortingLabelKey": "order", "size": 3, "canary": 1, "pause": "1m"}}}})));
    h.settle();
    assert!(matches!(
        activity_of(&h, "s1"),
        StageActivity::Soaking { .. }
    ));
    assert_eq!(activity_of(&h, "prod"), StageActivity::Pending);
    h.later(Duration::minutes(2));
    // The canary is provisioned: a pause, and the counts are of all seven members.
    let pause = activity_of(&h, "prod");
    let StageActivity::WavePause { wave, until } = pause else {
        panic!("a pause after the canary: {pause:?}");
    };
    assert_eq!(wave, WaveOf { wave: 1, of: 3 });
    assert_eq!(until, h.world.now + Duration::minutes(1));
    let counts = &h.status().stage("prod").expect("prod").counts;
    assert_eq!(
        (counts.members, counts.provisioned, counts.later_waves),
        (7, 1, 6)
    );
    h.later(Duration::minutes(1));
    let counts = &h.status().stage("prod").expect("prod").counts;
    assert_eq!((counts.members, counts.later_waves), (7, 3), "{counts:?}");
    h.later(Duration::minutes(1));
    assert_eq!(activity_of(&h, "prod"), StageActivity::Completed);
    let counts = &h.status().stage("prod").expect("prod").counts;
    assert_eq!(
        (counts.members, counts.provisioned, counts.later_waves),
        (7, 7, 0)
    );
    // The run history keeps every transition: a provisioning and a pause per wave but the last.
    let record = h.status().runs.last().expect("run");
    let prod = record
        .stages
        .iter()
        .find(|s| s.name == "prod")
        .expect("prod");
    let kinds: Vec<&str> = prod.activities.iter().map(|a| a.activity.kind()).collect();
    assert_eq!(
        kinds,
        [
            "Provisioning",
            "WavePause",
            "Provisioning",
            "WavePause",
            "Provisioning",
            "Completed"
        ]
    );
    let waves: Vec<Option<u32>> = prod
        .activities
        .iter()
        .map(|a| a.activity.wave().map(|w| w.wave))
        .collect();
    assert_eq!(waves, [Some(1), Some(1), Some(2), Some(2), Some(3), None]);
}

#[test]
fn a_wave_held_by_a_blackout_says_so_with_its_reason_and_an_event() {
    let mut h = seven_in_prod();
    h.world.policy = Some(policy(json!({
        "stages": {"prod": {"waves": {"sortingLabelKey": "order", "size": 3, "pause": "5m"}}},
        "blackouts": [{"from": "2025-10-07T10:05:00Z", "to": "2025-10-07T12:00:00Z",
                       "reason": "change freeze"}],
    })));
    h.settle();
    h.later(Duration::minutes(2));
    // prod started at 10:02 (before the freeze); its second wave (10:07) falls inside it.
    h.later(Duration::minutes(6));
    let held = activity_of(&h, "prod");
    assert_eq!(
        held,
        StageActivity::Blackout {
            until: t("2025-10-07T12:00:00Z"),
            reason: Some("change freeze".into()),
            wave: Some(WaveOf { wave: 2, of: 3 }),
        }
    );
    let blackouts = h
        .world
        .events
        .iter()
        .filter(|e| e.reason == "Blackout")
        .count();
    assert_eq!(blackouts, 1, "{:?}", h.world.events);
    h.later(Duration::minutes(30));
    let blackouts = h
        .world
        .events
        .iter()
        .filter(|e| e.reason == "Blackout")
        .count();
    assert_eq!(blackouts, 1, "told once");
}

#[test]
fn a_stage_start_held_by_a_blackout_is_named_on_the_stage_ahead() {
    let mut h = seven_in_prod();
    h.world.policy = Some(policy(json!({"blackouts": [
        {"from": "2025-10-07T10:01:00Z", "to": "2025-10-07T12:00:00Z", "reason": "freeze"}]})));
    h.settle();
    h.later(Duration::minutes(2));
    let view = h.status().pipeline();
    let prod = view.iter().find(|s| s.name == "prod").expect("prod");
    assert!(
        matches!(prod.activity, StageActivity::Blackout { reason: Some(r), .. } if r == "freeze"),
        "{:?}",
        prod.activity
    );
    assert_eq!(prod.since, Some(t("2025-10-07T10:02:00Z")));
    assert_eq!(prod.activity.until(), Some(t("2025-10-07T12:00:00Z")));
    let held = &h.status().runs.last().expect("run").held_starts;
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].stage, "prod");
}

#[test]
fn gates_name_what_they_wait_for() {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage(
                "s1",
                Some(json!({"auto": {"promotionWindow": {
                "from": "0 12 * * *", "to": "0 13 * * *"}}})),
            ),
            stage("s2", Some(json!({"manual": {}}))),
            stage("s3", None),
        ],
    ));
    h.settle();
    assert_eq!(
        activity_of(&h, "s1"),
        StageActivity::AwaitingWindow {
            until: t("2025-10-07T12:00:00Z")
        }
    );
    h.settle_at(t("2025-10-07T12:00:00Z"));
    assert_eq!(activity_of(&h, "s1"), StageActivity::Completed);
    assert_eq!(activity_of(&h, "s2"), StageActivity::AwaitingApproval);
    assert_eq!(activity_of(&h, "s3"), StageActivity::Pending);
    assert_eq!(h.status().phase.as_str(), "Waiting");
}

#[test]
fn a_failed_stage_and_its_rollback_are_named_with_the_snapshot_each_stage_runs() {
    let three = |chart: &str| {
        promotion_with(
            profile_spec(chart),
            vec![stage("s1", None), stage("s2", None), stage("s3", None)],
        )
    };
    let mut h = Harness::new(three("1.0.0"));
    h.world.policy = Some(policy(json!({"onFailure": "Rollback", "maxFailures": 0})));
    h.settle();
    h.world.failing_clusters.insert("s2-1".into());
    h.commit_content(three("2.0.0"), 20);
    let out = h.settle();
    assert_eq!(
        out.status.phase.as_str(),
        "RollingBack",
        "{:?}",
        out.status.message
    );
    assert!(matches!(
        activity_of(&h, "s2"),
        StageActivity::RollingBack { .. }
    ));
    h.world.failing_clusters.clear();
    h.later(Duration::minutes(1));
    let view = h.status().pipeline();
    let shown: Vec<(&str, &str, Option<u64>)> = view
        .iter()
        .map(|s| (s.name, s.activity.kind(), s.snapshot))
        .collect();
    assert_eq!(
        shown,
        [
            ("s1", "Restored", Some(1)),
            ("s2", "Restored", Some(1)),
            ("s3", "Pending", Some(1))
        ]
    );
}

#[test]
fn a_halted_stage_is_failed_with_its_reason() {
    let two = |chart: &str| promotion_with(profile_spec(chart), vec![stage("s1", None)]);
    let mut h = Harness::new(two("1.0.0"));
    h.world.policy = Some(policy(json!({"onFailure": "Halt", "maxFailures": 0})));
    h.world.failing_clusters.insert("s1-1".into());
    h.settle();
    let StageActivity::Failed { reason } = activity_of(&h, "s1") else {
        panic!("failed: {:?}", activity_of(&h, "s1"));
    };
    assert!(reason.contains("over maxFailures 0"), "{reason}");
}

#[test]
fn a_stage_without_clusters_is_skipped() {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None), stage("nowhere", None)],
    ));
    h.settle();
    assert_eq!(activity_of(&h, "nowhere"), StageActivity::Skipped);
    assert_eq!(activity_of(&h, "s1"), StageActivity::Completed);
}

#[test]
fn a_paused_promotion_names_its_current_stage_paused() {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "5m"}}))),
            stage("s2", None),
        ],
    ));
    h.settle();
    h.edit_triggers(|p| {
        p.metadata
            .annotations
            .insert("tollgate.dev/paused".into(), "true".into());
    });
    h.settle();
    assert_eq!(activity_of(&h, "s1"), StageActivity::Paused);
}

#[test]
fn a_rollback_restores_one_stage_at_a_time_and_only_that_one_is_rolling_back() {
    let three = |chart: &str| {
        promotion_with(
            profile_spec(chart),
            vec![stage("s1", None), stage("s2", None), stage("s3", None)],
        )
    };
    let mut h = Harness::new(three("1.0.0"));
    h.world.policy = Some(policy(json!({"onFailure": "Rollback", "maxFailures": 0})));
    h.settle();
    h.world.failing_clusters.insert("s2-1".into());
    h.commit_content(three("2.0.0"), 20);
    h.settle();
    // s2 failed and is restored first (its failing cluster holds its restore); s1, restored
    // after it, still runs #2 and has not begun rolling back.
    assert_eq!(
        activity_of(&h, "s2"),
        StageActivity::RollingBack { snapshot: Some(1) }
    );
    assert_eq!(activity_of(&h, "s1"), StageActivity::Completed);
    h.world.failing_clusters.clear();
    h.later(Duration::minutes(1));
    assert_eq!(
        activity_of(&h, "s1"),
        StageActivity::Restored { snapshot: Some(1) }
    );
}

#[test]
fn a_new_snapshot_held_by_a_blackout_is_named_on_its_first_stage_not_on_the_old_runs_next() {
    // t0 is 10:00; the blackout runs from 10:30 to 11:30.
    let two = |chart: &str| {
        promotion_with(
            profile_spec(chart),
            vec![stage("s1", None), stage("s2", None)],
        )
    };
    let mut h = Harness::new(two("1.0.0"));
    h.world.policy = Some(policy(json!({"onFailure": "Halt", "maxFailures": 0,
        "blackouts": [{"from": "2025-10-07T10:30:00", "to": "2025-10-07T11:30:00",
            "reason": "freeze"}]})));
    h.world.failing_clusters.insert("s1-1".into());
    h.settle();
    assert!(matches!(
        activity_of(&h, "s1"),
        StageActivity::Failed { .. }
    ));
    h.world.failing_clusters.clear();
    h.world.advance(Duration::minutes(40));
    h.commit_content(two("2.0.0"), 20);
    h.settle();
    let StageActivity::Blackout { until, reason, .. } = activity_of(&h, "s1") else {
        panic!("s1: {:?}", activity_of(&h, "s1"));
    };
    assert_eq!(until, t("2025-10-07T11:30:00Z"));
    assert_eq!(reason.as_deref(), Some("freeze"));
    let pipeline = h.status().pipeline();
    assert_eq!(pipeline[0].snapshot, Some(1), "s1 still runs #1");
    assert_eq!(pipeline[0].since, Some(t("2025-10-07T10:40:00Z")));
    // The halted run of #1 never starts s2: the blackout holds #2's start, not s2's.
    assert_eq!(activity_of(&h, "s2"), StageActivity::Pending);
}
