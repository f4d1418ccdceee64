//! Analysis gates of a waved stage (issue #32: "measurements start when the stage's clusters are
//! provisioned, per wave"): each wave is analysed once provisioned, and the next wave starts only
//! when those analyses succeeded. Driven with a fake clock; each rule has a test named after it.

mod common;

use chrono::Duration;
use common::*;
use serde_json::{Value, json};
use tollgate_engine::Phase;
use tollgate_engine::activity::StageActivity;
use tollgate_engine::analysis_run::AnalysisPhase;
use tollgate_engine::measurement::{Measurement, MeasurementDue};
use tollgate_model::analysis::MeasurementVerdict;
use tollgate_model::policy::RolloutPolicy;

/// s1 → prod; prod has a canary (prod-b) then waves of 2: [prod-c, prod-a], [prod-d, prod-x].
/// Its analysis `error-rate` takes one measurement 10 s after each wave is provisioned.
fn waved_and_gated(analysis: Value, stage_extra: Value) -> Harness {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None), stage("prod", None)],
    ));
    std::sync::Arc::make_mut(&mut h.world.observed.clusters)
        .retain(|c| c.labels.get("env").map(String::as_str) != Some("prod"));
    for (name, order) in [
        ("prod-a", "3"),
        ("prod-b", "1"),
        ("prod-c", "2"),
        ("prod-d", "10"),
        ("prod-x", "11"),
    ] {
        h.world
            .add_cluster(name, &[("env", "prod"), ("order", order)]);
    }
    let mut analysis = analysis;
    analysis["name"] = json!("error-rate");
    analysis["initialDelay"] = json!("10s");
    analysis["prometheus"] = json!({"address": "http://prometheus:9090",
        "query": "errors{cluster=~\"{{ clustersRegex }}\"}"});
    let mut prod = json!({"analyses": ["error-rate"],
        "waves": {"sortingLabelKey": "order", "size": 2, "canary": 1}});
    if let (Some(prod), Some(extra)) = (prod.as_object_mut(), stage_extra.as_object()) {
        prod.extend(extra.clone());
    }
    h.world.policy = Some(
        serde_json::from_value::<RolloutPolicy>(json!({
            "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": "gated"},
            "spec": {"analyses": [analysis], "stages": {"prod": prod}},
        }))
        .expect("valid policy"),
    );
    h
}

/// Steps 10 s later (the measurement is due), returns what is due.
fn due_after_initial_delay(h: &mut Harness) -> Vec<MeasurementDue> {
    h.later(Duration::seconds(10)).measurements
}

fn answer(h: &mut Harness, due: &[MeasurementDue], verdict: MeasurementVerdict) {
    for due in due {
        h.world.measurements.push(Measurement {
            key: due.key(),
            taken_at: h.world.now,
            value: Some("0.5".into()),
            verdict,
            error: None,
            comparison: None,
        });
    }
    h.settle();
}

fn approve_prod(h: &mut Harness, seq: u64) {
    let id: String = h.snapshot.hashes.snapshot_id.chars().take(12).collect();
    h.edit_triggers(|p| {
        p.metadata
            .annotations
            .insert("approve.tollgate.dev/prod".into(), id.clone());
    });
    h.approvals.push(tollgate_engine::testing::approval(
        "prod",
        tollgate_model::ApprovalKind::Annotation { value: id },
        tollgate_engine::testing::commit(seq),
    ));
    h.settle();
}

#[test]
fn a_canary_whose_analysis_fails_never_reaches_another_wave() {
    let mut h = waved_and_gated(json!({"count": 1}), json!({"onFailure": "Halt"}));
    h.settle();
    assert_eq!(targeted(&h, "prod"), ["prod-b"]);
    let due = due_after_initial_delay(&mut h);
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(
        due[0].query, "errors{cluster=~\"prod-b\"}",
        "the canary only"
    );
    answer(&mut h, &due, MeasurementVerdict::Failed);
    assert_eq!(h.status().phase, Phase::Failed, "{:?}", h.status().message);
    h.later(Duration::hours(1));
    assert_eq!(targeted(&h, "prod"), ["prod-b"], "no later wave is reached");
}

#[test]
fn the_next_wave_waits_for_the_analyses_of_the_waves_reached() {
    let mut h = waved_and_gated(json!({"count": 1}), json!({}));
    h.settle();
    assert!(h.later(Duration::seconds(5)).measurements.is_empty());
    assert_eq!(
        h.stage_status("prod").activity,
        StageActivity::Analyzing {
            until: Some(t0() + Duration::seconds(10))
        }
    );
    assert!(
        h.status()
            .message
            .as_deref()
            .is_some_and(|m| m.contains("wave 1/3 provisioned; waiting for analyses")),
        "{:?}",
        h.status().message
    );
    // Unanswered, the measurement holds the next wave however long it takes.
    let due = due_after_initial_delay(&mut h);
    h.later(Duration::hours(1));
    assert_eq!(targeted(&h, "prod"), ["prod-b"]);
    answer(&mut h, &due, MeasurementVerdict::Successful);
    assert_eq!(targeted(&h, "prod"), ["prod-a", "prod-b", "prod-c"]);
    // Wave 2 is analysed over the waves reached.
    let due = due_after_initial_delay(&mut h);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].query, "errors{cluster=~\"prod-a|prod-b|prod-c\"}");
    assert_eq!(due[0].wave, Some(2));
    answer(&mut h, &due, MeasurementVerdict::Successful);
    assert_eq!(targeted(&h, "prod"), ["selector"], "the last wave");
    // The last wave: the whole stage, then done.
    let due = due_after_initial_delay(&mut h);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].wave, Some(3));
    assert_eq!(
        due[0].query,
        "errors{cluster=~\"prod-a|prod-b|prod-c|prod-d|prod-x\"}"
    );
    answer(&mut h, &due, MeasurementVerdict::Successful);
    assert_eq!(
        h.status().phase,
        Phase::Completed,
        "{:?}",
        h.status().message
    );
    let runs = h.stage_status("prod").analyses.clone().expect("runs");
    assert_eq!(runs.len(), 3, "one run per wave: {runs:?}");
    assert!(runs.iter().all(|r| r.phase == AnalysisPhase::Successful));
    h.assert_idempotent();
}

#[test]
fn cluster_scope_runs_start_with_each_wave_for_its_clusters() {
    let mut h = waved_and_gated(json!({"count": 1, "scope": "Cluster"}), json!({}));
    h.settle();
    let due = due_after_initial_delay(&mut h);
    let clusters: Vec<_> = due.iter().filter_map(|d| d.cluster.clone()).collect();
    assert_eq!(clusters, ["default/prod-b"]);
    answer(&mut h, &due, MeasurementVerdict::Successful);
    let due = due_after_initial_delay(&mut h);
    let mut clusters: Vec<_> = due.iter().filter_map(|d| d.cluster.clone()).collect();
    clusters.sort();
    assert_eq!(
        clusters,
        ["default/prod-a", "default/prod-c"],
        "only the new wave's clusters; the canary's run is done"
    );
}

#[test]
fn an_approval_passes_one_inconclusive_wave_and_never_another() {
    let mut h = waved_and_gated(json!({"count": 1}), json!({}));
    h.settle();
    let due = due_after_initial_delay(&mut h);
    answer(&mut h, &due, MeasurementVerdict::Inconclusive);
    assert_eq!(h.status().phase, Phase::Paused);
    assert!(matches!(
        h.stage_status("prod").activity,
        StageActivity::AnalysisInconclusive { .. }
    ));
    assert_eq!(targeted(&h, "prod"), ["prod-b"]);
    approve_prod(&mut h, 20);
    assert_eq!(
        targeted(&h, "prod"),
        ["prod-a", "prod-b", "prod-c"],
        "approved on"
    );
    assert_eq!(h.status().consumed_approvals.len(), 1, "consumed at once");
    // Wave 2 inconclusive too: the approval already used does not pass it.
    let due = due_after_initial_delay(&mut h);
    answer(&mut h, &due, MeasurementVerdict::Inconclusive);
    h.later(Duration::minutes(5));
    assert_eq!(h.status().phase, Phase::Paused, "{:?}", h.status().message);
    assert_eq!(targeted(&h, "prod"), ["prod-a", "prod-b", "prod-c"]);
    h.assert_idempotent();
}
