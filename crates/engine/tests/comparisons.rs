//! Comparative analyses (issue #48), driven with a fake clock: the engine chooses the cohorts
//! (`OtherWaves`, `NextStage`, `Before`) and renders each cohort's query, the test plays the
//! analysis runner, and the engine keeps what the comparison measured and judges the stage,
//! alone or by its `score`.

mod common;

use chrono::Duration;
use common::*;
use serde_json::{Value, json};
use tollgate_engine::Phase;
use tollgate_engine::activity::StageActivity;
use tollgate_engine::comparison::{ClusterSample, ComparisonVerdict, compare_samples};
use tollgate_engine::measurement::{Measurement, MeasurementDue};
use tollgate_model::analysis::MeasurementVerdict;
use tollgate_model::compare::{Baseline, Compare};
use tollgate_model::policy::RolloutPolicy;

const QUERY: &str = "latency{cluster=~\"{{ clustersRegex }}\"}";

fn analysis(name: &str, compare: Value) -> Value {
    json!({"name": name, "initialDelay": "10s", "count": 1, "compare": compare,
        "prometheus": {"address": "http://prometheus:9090", "query": QUERY}})
}

fn with_policy(h: &mut Harness, analyses: Vec<Value>, prod: Value) {
    h.world.policy = Some(
        serde_json::from_value::<RolloutPolicy>(json!({
            "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": "compared"},
            "spec": {"analyses": analyses, "stages": {"prod": prod}},
        }))
        .expect("valid policy"),
    );
}

/// s1 → prod → s2; prod: prod-b (the canary) then [prod-c, prod-a], [prod-d, prod-x].
fn waved(analyses: Vec<Value>, extra: Value) -> Harness {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None), stage("prod", None), stage("s2", None)],
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
    let mut prod = json!({"analyses": analyses.iter().map(|a| a["name"].clone()).collect::<Vec<_>>(),
        "waves": {"sortingLabelKey": "order", "size": 2, "canary": 1}});
    if let (Some(prod), Some(extra)) = (prod.as_object_mut(), extra.as_object()) {
        prod.extend(extra.clone());
    }
    with_policy(&mut h, analyses, prod);
    h
}

/// Plays the runner: every due measurement judged `verdict`, with the comparison of `test`
/// against `baseline` (each cluster of its cohort gives the next value).
fn answer(h: &mut Harness, due: &[MeasurementDue], verdict: MeasurementVerdict) {
    for due in due {
        let comparison = due.comparison.as_ref().map(|c| {
            let samples = |clusters: &[String], base: f64| -> Vec<ClusterSample> {
                clusters
                    .iter()
                    .enumerate()
                    .map(|(i, c)| ClusterSample {
                        cluster: c.rsplit('/').next().unwrap_or(c).to_string(),
                        value: base + i as f64 * 0.01,
                    })
                    .collect()
            };
            let compare = Compare {
                baseline: c.baseline,
                min_clusters: Some(1),
                ..Compare::default()
            };
            let (summary, _) = compare_samples(
                &samples(&c.test_clusters, 0.3),
                &samples(&c.baseline_clusters, 0.2),
                &compare,
            );
            Box::new(summary)
        });
        h.world.measurements.push(Measurement {
            key: due.key(),
            taken_at: h.world.now,
            value: Some("p=0.01".into()),
            verdict,
            error: None,
            comparison,
        });
    }
    h.settle();
}

fn names(keys: &[String]) -> Vec<&str> {
    keys.iter()
        .map(|k| k.rsplit('/').next().unwrap_or(k))
        .collect()
}

#[test]
fn a_regression_against_the_waves_not_reached_fails_the_stage_and_keeps_the_comparison() {
    let mut h = waved(
        vec![analysis("latency", json!({"baseline": "OtherWaves"}))],
        json!({"onFailure": "Halt"}),
    );
    h.settle();
    let due = h.later(Duration::seconds(10)).measurements;
    assert_eq!(due.len(), 1, "{due:?}");
    let comparison = due[0].comparison.as_ref().expect("a comparison");
    assert_eq!(comparison.baseline, Baseline::OtherWaves);
    assert_eq!(names(&comparison.test_clusters), ["prod-b"]);
    assert_eq!(
        names(&comparison.baseline_clusters),
        ["prod-a", "prod-c", "prod-d", "prod-x"]
    );
    assert_eq!(due[0].query, "latency{cluster=~\"prod-b\"}");
    assert_eq!(
        comparison.baseline_query,
        "latency{cluster=~\"prod-a|prod-c|prod-d|prod-x\"}"
    );
    answer(&mut h, &due, MeasurementVerdict::Failed);
    assert_eq!(h.status().phase, Phase::Failed, "{:?}", h.status().message);
    let runs = h.stage_status("prod").analyses.clone().expect("runs");
    let kept = runs[0].measurements[0]
        .comparison
        .as_ref()
        .expect("the comparison is kept");
    assert_eq!(kept.test_cohort, ["prod-b"]);
    assert_eq!(kept.baseline_cohort.len(), 4);
    let record = kept.record.as_ref().expect("a record");
    assert!((record.test_median - 0.3).abs() < 1e-9, "{record:?}");
    assert!((record.baseline_median - 0.215).abs() < 1e-9, "{record:?}");
    assert!(record.effect > 0.3, "{record:?}");
    // The run history keeps the comparison for the timeline, in the words every view shows.
    let history = &h.status().runs;
    let recorded = history
        .iter()
        .last()
        .and_then(|run| run.stages.iter().find(|s| s.name == "prod"))
        .map(|s| s.comparisons.clone())
        .unwrap_or_default();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert!(
        recorded[0].starts_with("latency: prod-b (median 0.3) vs OtherWaves")
            && recorded[0].ends_with("(Failed)"),
        "{recorded:?}"
    );
}

#[test]
fn the_next_stage_and_before_baselines() {
    let mut h = waved(
        vec![
            analysis("next", json!({"baseline": "NextStage"})),
            analysis("before", json!({"baseline": "Before"})),
        ],
        json!({}),
    );
    h.settle();
    let applied_at = h.stage_status("prod").applied_at;
    let due = h.later(Duration::seconds(10)).measurements;
    assert_eq!(due.len(), 2, "{due:?}");
    let next = due[0].comparison.as_ref().expect("next");
    assert_eq!(names(&next.baseline_clusters), ["s2-1", "s2-2"]);
    assert_eq!(next.baseline_until, None);
    let before = due[1].comparison.as_ref().expect("before");
    assert_eq!(names(&before.test_clusters), ["prod-b"]);
    assert_eq!(before.baseline_clusters, before.test_clusters);
    assert_eq!(before.baseline_until, Some(applied_at));
}

#[test]
fn a_score_judges_the_analyses_together_marginal_holds_and_below_fails() {
    let both = || {
        vec![
            analysis("latency", json!({"baseline": "Before"})),
            analysis("errors", json!({"baseline": "Before"})),
        ]
    };
    // One of two passed: 50 %, marginal at 40 %: held like an inconclusive analysis.
    let mut h = waved(both(), json!({"score": {"pass": 90, "marginal": 40}}));
    h.settle();
    let due = h.later(Duration::seconds(10)).measurements;
    answer(&mut h, &due[..1], MeasurementVerdict::Failed);
    assert_ne!(
        h.status().phase,
        Phase::Failed,
        "one failure alone decides nothing"
    );
    answer(&mut h, &due[1..], MeasurementVerdict::Successful);
    assert_ne!(h.status().phase, Phase::Failed, "{:?}", h.status().message);
    let message = h.status().message.clone().unwrap_or_default();
    assert!(message.contains("marginal score 50%"), "{message}");
    assert!(
        !matches!(
            h.stage_status("prod").activity,
            StageActivity::Analyzing { .. }
        ),
        "held, not measuring"
    );
    // The same with marginal at 75 %: the stage fails.
    let mut h = waved(both(), json!({"score": {"pass": 90, "marginal": 75}}));
    h.settle();
    let due = h.later(Duration::seconds(10)).measurements;
    answer(&mut h, &due[..1], MeasurementVerdict::Failed);
    answer(&mut h, &due[1..], MeasurementVerdict::Successful);
    assert_eq!(h.status().phase, Phase::Failed, "{:?}", h.status().message);
    // Both passed: 100 %, the next wave starts.
    let mut h = waved(both(), json!({"score": {"pass": 90, "marginal": 75}}));
    h.settle();
    let due = h.later(Duration::seconds(10)).measurements;
    answer(&mut h, &due, MeasurementVerdict::Successful);
    assert_eq!(targeted(&h, "prod").len(), 3, "the second wave");
}

#[test]
fn too_few_clusters_in_a_cohort_is_no_data() {
    let sample = |cluster: &str, value: f64| ClusterSample {
        cluster: cluster.to_string(),
        value,
    };
    let compare = Compare::default();
    // Range samples: many points of two clusters are still two clusters, under minClusters 3.
    let test: Vec<ClusterSample> = (0..10).map(|i| sample(["a", "b"][i % 2], 1.3)).collect();
    let baseline: Vec<ClusterSample> = ["c", "d", "e"].iter().map(|c| sample(c, 1.0)).collect();
    let (summary, verdict) = compare_samples(&test, &baseline, &compare);
    assert!(summary.record.is_none());
    assert!(
        matches!(&verdict, ComparisonVerdict::NoData(why) if why.contains("2 test and 3 baseline clusters")),
        "{verdict:?}"
    );
    assert_eq!(summary.test_cohort, ["a", "b"]);
}

#[test]
fn the_last_of_several_waves_has_nothing_left_to_compare_and_completes() {
    let mut h = waved(
        vec![analysis("latency", json!({"baseline": "OtherWaves"}))],
        json!({}),
    );
    h.settle();
    for wave in 1..=2 {
        let due = h.later(Duration::seconds(10)).measurements;
        assert_eq!(due.len(), 1, "wave {wave}: {due:?}");
        answer(&mut h, &due, MeasurementVerdict::Successful);
    }
    let due = h.later(Duration::seconds(10)).measurements;
    assert!(due.is_empty(), "the last wave measures nothing: {due:?}");
    let runs = h.stage_status("prod").analyses.clone().expect("runs");
    let last = runs
        .iter()
        .find(|r| r.wave == Some(3))
        .expect("wave 3's run");
    assert!(
        last.message
            .as_deref()
            .is_some_and(|m| m.contains("no wave is left")),
        "{last:?}"
    );
    assert_ne!(
        h.stage_status("prod").activity,
        StageActivity::Analyzing { until: None }
    );
    assert!(
        h.stage_status("prod").succeeded_at.is_some(),
        "prod completed"
    );
}
