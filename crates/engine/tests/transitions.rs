//! `transitions(before, after)` (`status/transitions.rs`): the unhappy cases first (a status reset by a restart, a run
//! superseded mid-stage, a rollback restoring stages, a retry clearing a failure), then a rollout.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use tollgate_model::policy::OnFailure;

use tollgate_engine::Desired;
use tollgate_engine::testing::{self, World};
use tollgate_engine::transitions::{Transition, TransitionKind, transitions};
use tollgate_engine::{PromotionStatus, RestoredStage, RunFailure};

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-06T10:00:00Z")
        .expect("a time")
        .with_timezone(&Utc)
}

fn promotion(chart: &str) -> tollgate_model::ClusterPromotion {
    let stage =
        |name: &str| json!({"name": name, "clusterSelector": {"matchLabels": {"env": name}}});
    testing::promotion(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": "demo"},
        "spec": {
            "profileSpec": {"helmCharts": [{
                "repositoryURL": "https://charts.example/", "repositoryName": "web",
                "chartName": "web/web", "chartVersion": chart, "releaseName": "web",
                "releaseNamespace": "web", "helmChartAction": "Install"
            }]},
            "stages": [stage("dev"), stage("staging"), stage("prod")]
        }
    }))
}

/// A world with one cluster per stage, snapshot #1 of `chart` in git.
fn world() -> (World, tollgate_model::Snapshot) {
    let mut world = World::new(t0());
    for env in ["dev", "staging", "prod"] {
        world.add_cluster(&format!("{env}-1"), &[("env", env)]);
    }
    let snapshot = testing::snapshot(promotion("1.0.0"), 1, testing::commit(1));
    world.history.push(snapshot.clone());
    (world, snapshot)
}

/// Steps (with Sveltos answering in between) until the status is what `done` wants.
fn step_until(
    world: &mut World,
    snapshot: &tollgate_model::Snapshot,
    done: impl Fn(&PromotionStatus) -> bool,
) -> PromotionStatus {
    for _ in 0..20 {
        let desired = Desired::Snapshot {
            current: snapshot,
            invalid: None,
        };
        let status = world.step(desired, &[]).status;
        if done(&status) {
            return status;
        }
        world.sveltos();
        world.advance(Duration::seconds(10));
    }
    panic!("the rollout never got there");
}

fn kinds(transitions: &[Transition]) -> Vec<(String, TransitionKind)> {
    transitions
        .iter()
        .map(|t| (t.stage.clone(), t.kind.clone()))
        .collect()
}

fn of(stage: &str, kind: TransitionKind) -> (String, TransitionKind) {
    (stage.to_string(), kind)
}

#[test]
fn a_status_reset_by_a_restart_tells_nothing_of_the_run_it_lost() {
    let (mut world, snapshot) = world();
    let running = step_until(&mut world, &snapshot, |s| s.stage("staging").is_some());
    let reset: PromotionStatus =
        serde_json::from_value(json!({"hashScheme": 1, "phase": "Progressing"})).expect("status");
    assert_eq!(transitions(Some(&running), &reset), vec![]);
    assert_eq!(transitions(None, &reset), vec![]);
}

#[test]
fn a_run_seen_first_after_a_restart_tells_each_of_its_transitions() {
    let (mut world, snapshot) = world();
    let running = step_until(&mut world, &snapshot, |s| s.stage("staging").is_some());
    assert_eq!(
        kinds(&transitions(None, &running)),
        vec![
            of("dev", TransitionKind::Started),
            of("dev", TransitionKind::Provisioned),
            of("dev", TransitionKind::Completed),
            of("staging", TransitionKind::Started),
        ]
    );
}

#[test]
fn a_run_superseded_mid_stage_tells_only_the_new_run_starting() {
    let (mut world, first) = world();
    let old = step_until(&mut world, &first, |s| s.stage("staging").is_some());
    let second = testing::snapshot(promotion("2.0.0"), 2, testing::commit(2));
    world.history.push(second.clone());
    let new = step_until(&mut world, &second, |s| s.snapshot_index == Some(2));
    let told = transitions(Some(&old), &new);
    assert_eq!(kinds(&told), vec![of("dev", TransitionKind::Started)]);
    assert_eq!(told[0].snapshot, 2);
    assert_eq!(told[0].at, world.now);
}

/// A status whose run failed at prod under `onFailure: Rollback`, prod and staging to restore.
fn failed(status: &PromotionStatus, at: DateTime<Utc>) -> PromotionStatus {
    let entry = |name: &str| RestoredStage {
        name: name.to_string(),
        to_snapshot: Some(1),
        applied_at: None,
        spec_hash: String::new(),
        fresh_features: Vec::new(),
        hashes_before_apply: None,
        restored_at: None,
    };
    let mut failed = status.clone();
    failed.failure = Some(Box::new(RunFailure {
        stage: "prod".into(),
        snapshot_index: status.snapshot_index.unwrap_or_default(),
        reason: "2 of 2 clusters failed".into(),
        at,
        on_failure: OnFailure::Rollback,
        clusters: Vec::new(),
        rollback: vec![entry("prod"), entry("staging")],
    }));
    failed
}

#[test]
fn a_rollback_tells_each_restore_as_it_starts_and_ends_and_the_failure_once() {
    let (mut world, snapshot) = world();
    let running = step_until(&mut world, &snapshot, |s| s.stage("prod").is_some());
    let at = world.now;
    let failing = failed(&running, at);
    assert_eq!(
        kinds(&transitions(Some(&running), &failing)),
        vec![of("prod", TransitionKind::Failed)]
    );
    let mut prod_applied = failing.clone();
    let rollback = &mut prod_applied.failure.as_mut().expect("failed").rollback;
    rollback[0].applied_at = Some(at + Duration::seconds(1));
    let restoring = kinds(&transitions(Some(&failing), &prod_applied));
    let to = Some(1);
    assert_eq!(
        restoring,
        vec![of("prod", TransitionKind::RestoreStarted { to })]
    );
    let mut prod_restored = prod_applied.clone();
    let rollback = &mut prod_restored.failure.as_mut().expect("failed").rollback;
    rollback[0].restored_at = Some(at + Duration::seconds(3));
    rollback[1].applied_at = Some(at + Duration::seconds(3));
    assert_eq!(
        kinds(&transitions(Some(&prod_applied), &prod_restored)),
        vec![
            of("prod", TransitionKind::Restored { to }),
            of("staging", TransitionKind::RestoreStarted { to }),
        ]
    );
    assert_eq!(transitions(Some(&prod_restored), &prod_restored), vec![]);
}

#[test]
fn a_retry_clearing_a_failure_tells_nothing_until_the_stage_fails_again() {
    let (mut world, snapshot) = world();
    let running = step_until(&mut world, &snapshot, |s| s.stage("prod").is_some());
    let halted = failed(&running, world.now);
    let retried = running.clone();
    assert_eq!(transitions(Some(&halted), &retried), vec![]);
    let again = failed(&running, world.now + Duration::minutes(5));
    let told = transitions(Some(&retried), &again);
    assert_eq!(kinds(&told), vec![of("prod", TransitionKind::Failed)]);
    assert_eq!(told[0].at, world.now + Duration::minutes(5));
}

#[test]
fn a_step_at_steady_state_tells_nothing() {
    let (mut world, snapshot) = world();
    let done = step_until(&mut world, &snapshot, |s| {
        s.stage("prod").is_some_and(|p| p.succeeded_at.is_some())
    });
    assert_eq!(transitions(Some(&done), &done), vec![]);
}
