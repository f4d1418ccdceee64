//! Pause, invalid HEAD, takeover protection, rollback marking, status persistence, idempotence.

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::observed::{ObservedProfile, ObservedSpec};
use tollgate_engine::{Action, Phase, PromotionStatus};
use tollgate_manifest::snapshot::PAUSED_ANNOTATION;

fn pause(h: &mut Harness, paused: bool) {
    h.edit_triggers(|p| {
        if paused {
            p.metadata
                .annotations
                .insert(PAUSED_ANNOTATION.into(), "true".into());
        } else {
            p.metadata.annotations.remove(PAUSED_ANNOTATION);
        }
    });
}

#[test]
fn pause_holds_everything_and_resume_keeps_served_delays() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "10m"}}))),
            stage("s2", None),
        ],
    ));
    h.settle();
    let provisioned_at = h.stage_status("s1").provisioned_at.unwrap();
    pause(&mut h, true);
    let out = h.later(Duration::minutes(3));
    assert_eq!(out.status.phase, Phase::Paused);
    assert_eq!(h.status().paused_since, Some(t0() + Duration::minutes(3)));
    assert_eq!(out.wake_at, None);

    // A new snapshot while paused: no restart apply, "restart pending".
    let mut changed = (*h.snapshot.promotion).clone();
    changed.spec.profile_spec.insert("tier", json!(42));
    let old_snapshot = h.snapshot.clone();
    h.commit_content(changed, 90);
    let out = h.later(Duration::minutes(20));
    assert!(out.actions.is_empty());
    assert!(
        out.status
            .message
            .as_deref()
            .unwrap()
            .contains("restart pending")
    );
    assert!(!h.has_profile(&profile_name("s2")));
    h.assert_idempotent();

    // Back to the old content and resume: the delay already served is not reset.
    h.snapshot = old_snapshot;
    pause(&mut h, true);
    pause(&mut h, false);
    let out = h.settle();
    assert!(h.world.events.iter().any(|e| e.reason == "Resumed"));
    assert!(h.has_profile(&profile_name("s2")));
    assert_eq!(h.stage_status("s1").provisioned_at, Some(provisioned_at));
    assert_eq!(out.status.paused_since, None);
}

#[test]
fn invalid_head_keeps_running_the_last_good_snapshot() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    h.invalid = Some("promotions.yaml:7:5: stages[1].trigger: neither auto nor manual".into());
    let out = h.settle();
    assert!(h.has_profile(&profile_name("s2")));
    assert_eq!(out.status.phase, Phase::Invalid);
    assert_eq!(out.status.invalid_spec, h.invalid);
    h.invalid = None;
    let out = h.step();
    assert_eq!(out.status.phase, Phase::Completed);
    assert_eq!(out.status.invalid_spec, None);
}

fn foreign(name: &str) -> ObservedProfile {
    // Labelled by its team, not by tollgate.
    ObservedProfile::from_metadata(
        name.to_string(),
        |key| (key == "team").then_some("payments"),
        |_| None,
        ObservedSpec::of(&json!({"clusterSelector": {"matchLabels": {"env": "s2"}}})),
        false,
    )
}

#[test]
fn a_foreign_profile_with_a_generated_name_is_never_taken_over() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    let name = profile_name("s2");
    h.world
        .observed
        .profiles
        .insert(name.clone(), foreign(&name));
    let out = h.settle();
    assert_eq!(out.status.phase, Phase::Failed);
    assert!(
        h.stage_status("s1")
            .failure_message
            .as_deref()
            .unwrap()
            .contains(&format!(
                "ClusterProfile {name} exists and is not managed by tollgate"
            ))
    );
    assert!(h.world.executed.iter().all(|a| a.profile_name() != name));
    assert_eq!(h.world.profile(&name), Some(&foreign(&name)));
    // Removed from git: the foreign profile is not deleted either.
    let last = h.snapshot.clone();
    let out = h.world.step(
        tollgate_engine::Desired::Removed {
            promotion: P,
            last: Some(&last),
        },
        &[],
    );
    assert_eq!(
        out.actions,
        vec![Action::DeleteProfile {
            name: profile_name("s1")
        }]
    );

    // Blocking stage 1 blocks the restart, and the blocked run keeps no new hashes.
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None)],
    ));
    let first = profile_name("s1");
    h.world
        .observed
        .profiles
        .insert(first.clone(), foreign(&first));
    let out = h.step();
    assert!(out.actions.is_empty());
    assert_eq!(out.status.phase, Phase::Failed);
    assert_eq!(out.status.profile_spec_hash, None);
}

#[test]
fn rollback_is_marked_in_status_and_events() {
    let stages = vec![stage("s1", None)];
    let mut h = Harness::new(promotion_with(profile_spec("1.0.0"), stages.clone()));
    h.settle();
    h.commit_content(promotion_with(profile_spec("2.0.0"), stages.clone()), 20);
    h.settle();
    h.commit_content(promotion_with(profile_spec("1.0.0"), stages), 30);
    let out = h.settle();
    assert_eq!(out.status.rollback_of, Some(1));
    assert_eq!(out.status.snapshot_index, Some(3));
    assert!(h.world.events.iter().any(|e| {
        e.reason == "Rollback"
            && e.note
                .starts_with("Rolling back to the content of snapshot #1")
    }));
    assert_eq!(
        h.profile_spec_of(&profile_name("s1"))["helmCharts"][0]["chartVersion"],
        "1.0.0"
    );
}

#[test]
fn status_round_trips_through_json_and_carries_the_hash_scheme() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage(
                "s1",
                Some(
                    json!({"auto": {"delay": "1m", "preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "d", "name": "j"}]}}),
                ),
            ),
            stage(
                "s2",
                Some(json!({"manual": {"approved": true, "automaticReset": false}})),
            ),
        ],
    ));
    h.settle();
    h.later(Duration::minutes(2));
    let status = h.status().clone();
    let text = serde_json::to_string(&status).unwrap();
    let back: PromotionStatus = serde_json::from_str(&text).unwrap();
    assert_eq!(back, status);
    let value = serde_json::to_value(&status).unwrap();
    assert_eq!(value["hashScheme"], 1);
    assert!(value["stages"][0]["lastSuccessfulAppliedTime"].is_string());
    assert!(value["stages"][0].get("preverification").is_some());
}

#[test]
fn every_step_of_a_rollout_is_idempotent_once_applied() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage(
                "s1",
                Some(
                    json!({"auto": {"delay": "1m", "postDelayHealthChecks": [{"name": "c", "featureID": "Helm"}]}}),
                ),
            ),
            stage(
                "s2",
                Some(
                    json!({"manual": {"approved": true, "automaticReset": false, "preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "d", "name": "j"}]}}),
                ),
            ),
            stage(
                "s3",
                Some(
                    json!({"auto": {"promotionWindow": {"from": "10 10 * * *", "to": "0 12 * * *"}}}),
                ),
            ),
        ],
    ));
    for _ in 0..40 {
        h.step();
        h.assert_idempotent();
        h.world.sveltos();
        h.world.advance(Duration::seconds(30));
    }
    assert_eq!(h.status().phase, Phase::Completed);
}

#[test]
fn a_held_removal_deletes_nothing_even_without_a_snapshot() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    h.settle();
    let owned = h.world.observed.profiles.len();
    assert!(owned > 0);
    // Held with and without the last snapshot (a promotion restored broken has none): frozen.
    let last = h.snapshot.clone();
    for last in [Some(&last), None] {
        let out = h.world.step(
            tollgate_engine::Desired::RemovalHeld {
                last,
                reason: "the commit removes all 1 promotions",
            },
            &[],
        );
        assert!(out.actions.is_empty(), "{:?}", out.actions);
        assert_eq!(out.status.phase, Phase::RemovalHeld);
        assert_eq!(h.world.observed.profiles.len(), owned);
    }
    // The Warning is said once, not on every step.
    let again = h.world.step(
        tollgate_engine::Desired::RemovalHeld {
            last: None,
            reason: "the commit removes all 1 promotions",
        },
        &[],
    );
    assert!(again.events.is_empty(), "{:?}", again.events);
}
