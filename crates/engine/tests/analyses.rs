//! Fleet analysis gates (issue #32), driven with a fake clock: the engine says which measurement
//! is due, the test plays the analysis runner, and each rule has a test named after it.

mod common;

use chrono::Duration;
use common::*;
use serde_json::{Value, json};
use tollgate_engine::activity::StageActivity;
use tollgate_engine::analysis_run::AnalysisPhase;
use tollgate_engine::measurement::{Measurement, MeasurementDue};
use tollgate_engine::status::ClusterState;
use tollgate_engine::write_hold::awaits_first_measurements;
use tollgate_engine::{Phase, StepOutput};
use tollgate_model::analysis::MeasurementVerdict;
use tollgate_model::policy::RolloutPolicy;

fn policy(analysis: Value, stage_extra: Value) -> RolloutPolicy {
    let mut prod = json!({"analyses": ["error-rate"]});
    if let (Some(prod), Some(extra)) = (prod.as_object_mut(), stage_extra.as_object()) {
        prod.extend(extra.clone());
    }
    let mut analysis = analysis;
    analysis["name"] = json!("error-rate");
    analysis["prometheus"] = json!({"address": "http://prometheus:9090",
        "query": "sum(rate(errors{cluster=~\"{{ clustersRegex }}\"}[1m]))"});
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "gated"},
        "spec": {"analyses": [analysis], "stages": {"s1": prod}},
    }))
    .expect("valid policy")
}

/// s1 (a soak of `delay`) → s2.
fn gated(delay: &str, analysis: Value, stage_extra: Value) -> Harness {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": delay}}))),
            stage("s2", None),
        ],
    ));
    h.world.policy = Some(policy(analysis, stage_extra));
    h
}

/// Plays the analysis runner: every measurement due gets `verdict` (value `value`).
fn answer(h: &mut Harness, due: &[MeasurementDue], verdict: MeasurementVerdict, value: &str) {
    for due in due {
        h.world.measurements.push(Measurement {
            key: due.key(),
            taken_at: h.world.now,
            value: Some(value.to_string()),
            verdict,
            error: (verdict == MeasurementVerdict::Error).then(|| "connection refused".into()),
            comparison: None,
        });
    }
}

/// Steps at `now`, answers what is due, steps again (recording it).
fn measure(h: &mut Harness, verdict: MeasurementVerdict, value: &str) -> StepOutput {
    let out = h.settle();
    let due = out.measurements.clone();
    answer(h, &due, verdict, value);
    h.settle()
}

fn runs(h: &Harness) -> Vec<tollgate_engine::analysis_run::AnalysisRun> {
    h.status()
        .stage("s1")
        .and_then(|s| s.analyses.as_deref())
        .cloned()
        .unwrap_or_default()
}

fn activity(h: &Harness, stage: &str) -> StageActivity {
    h.status()
        .stage(stage)
        .map(|s| s.activity.clone())
        .unwrap_or_default()
}

#[test]
fn measurements_are_due_after_provisioning_plus_initial_delay_then_an_interval_after_the_last() {
    let mut h = gated(
        "2m",
        json!({"initialDelay": "10s", "interval": "30s", "count": 3}),
        json!({}),
    );
    let out = h.settle();
    assert!(out.measurements.is_empty(), "{:?}", out.measurements);
    assert_eq!(out.wake_at, Some(t0() + Duration::seconds(10)));
    let run = &runs(&h)[0];
    assert_eq!(run.query, "sum(rate(errors{cluster=~\"s1-1|s1-2\"}[1m]))");
    // Each taken 3 s late: the next one is due an interval after it, never sooner (a new
    // leader that finds measurements overdue takes them an interval apart, not in a burst).
    for (at, index) in [(10, 0), (43, 1), (76, 2)] {
        h.world.now = t0() + Duration::seconds(at - 1);
        let early = h.settle();
        assert!(early.measurements.is_empty(), "at {}s", at - 1);
        assert_eq!(early.wake_at, Some(t0() + Duration::seconds(at)));
        h.world.now = t0() + Duration::seconds(at);
        let out = h.settle();
        assert_eq!(out.measurements.len(), 1, "at {at}s");
        assert_eq!(out.measurements[0].index, index);
        assert_eq!(out.measurements[0].due_at, h.world.now);
        h.world.now += Duration::seconds(3);
        let due = out.measurements.clone();
        answer(&mut h, &due, MeasurementVerdict::Successful, "0.001");
        h.settle();
    }
    assert_eq!(runs(&h)[0].phase, AnalysisPhase::Successful);
    assert_eq!(runs(&h)[0].measurements.len(), 3);
    // The soak (2m) still holds the stage.
    assert!(matches!(activity(&h, "s1"), StageActivity::Soaking { .. }));
    h.settle_at(t0() + Duration::minutes(2));
    assert_eq!(activity(&h, "s1"), StageActivity::Completed);
    h.assert_idempotent();
}

#[test]
fn analyses_that_outlast_the_soak_extend_it() {
    let mut h = gated("10s", json!({"interval": "30s", "count": 2}), json!({}));
    measure(&mut h, MeasurementVerdict::Successful, "0");
    h.settle_at(t0() + Duration::seconds(10));
    assert_eq!(
        activity(&h, "s1"),
        StageActivity::Analyzing {
            until: Some(t0() + Duration::seconds(30))
        }
    );
    assert_eq!(h.status().phase, Phase::Waiting);
    h.world.now = t0() + Duration::seconds(30);
    measure(&mut h, MeasurementVerdict::Successful, "0");
    assert_eq!(activity(&h, "s1"), StageActivity::Completed);
}

#[test]
fn a_failed_measurement_over_the_failure_limit_fails_the_stage_under_the_policy() {
    let mut h = gated(
        "2m",
        json!({"interval": "30s", "count": 4, "failureLimit": 1}),
        json!({"onFailure": "Halt"}),
    );
    measure(&mut h, MeasurementVerdict::Failed, "0.2");
    assert_eq!(
        runs(&h)[0].phase,
        AnalysisPhase::Running,
        "one failure tolerated"
    );
    h.world.now = t0() + Duration::seconds(30);
    measure(&mut h, MeasurementVerdict::Failed, "0.3");
    assert_eq!(runs(&h)[0].phase, AnalysisPhase::Failed);
    assert_eq!(h.status().phase, Phase::Failed);
    let failure = h.status().failure.as_ref().expect("failure");
    assert!(
        failure.reason.contains(
            "analysis error-rate: 2 failed measurement(s), over failureLimit 1 (last: 0.3)"
        ),
        "{}",
        failure.reason
    );
    assert!(
        h.world
            .events
            .iter()
            .any(|e| e.reason == "AnalysisFailed" && e.note.contains("query: sum(rate")),
        "{:?}",
        h.world.events
    );
    assert!(
        !h.has_profile(&profile_name("s2")),
        "nothing after the failed stage"
    );
}

#[test]
fn an_errored_measurement_is_never_a_success_and_an_error_streak_fails() {
    let mut h = gated(
        "10s",
        json!({"interval": "10s", "count": 1, "consecutiveErrorLimit": 2}),
        json!({}),
    );
    measure(&mut h, MeasurementVerdict::Error, "");
    assert_eq!(runs(&h)[0].phase, AnalysisPhase::Running);
    assert_eq!(runs(&h)[0].taken, 0, "an error does not count");
    h.world.now = t0() + Duration::seconds(10);
    measure(&mut h, MeasurementVerdict::Error, "");
    h.world.now = t0() + Duration::seconds(20);
    measure(&mut h, MeasurementVerdict::Error, "");
    let run = &runs(&h)[0];
    assert_eq!(run.phase, AnalysisPhase::Failed, "{run:?}");
    assert!(
        run.message
            .as_deref()
            .is_some_and(|m| m.contains("3 errors in a row"))
    );
}

#[test]
fn an_inconclusive_analysis_holds_the_stage_until_approved_through_git() {
    let mut h = gated("10s", json!({"count": 1}), json!({}));
    measure(&mut h, MeasurementVerdict::Inconclusive, "[]");
    h.settle_at(t0() + Duration::seconds(10));
    assert_eq!(h.status().phase, Phase::Paused);
    assert!(matches!(
        activity(&h, "s1"),
        StageActivity::AnalysisInconclusive { .. }
    ));
    assert!(!h.has_profile(&profile_name("s2")));
    assert!(
        h.world
            .events
            .iter()
            .any(|e| e.reason == "AnalysisInconclusive")
    );
    // The annotation approving this snapshot at s1 lets it go on.
    let id: String = h.snapshot.hashes.snapshot_id.chars().take(12).collect();
    h.edit_triggers(|p| {
        p.metadata
            .annotations
            .insert("approve.tollgate.dev/s1".into(), id.clone());
    });
    h.approvals.push(tollgate_engine::testing::approval(
        "s1",
        tollgate_model::ApprovalKind::Annotation { value: id },
        tollgate_engine::testing::commit(20),
    ));
    h.settle();
    assert!(
        h.has_profile(&profile_name("s2")),
        "{:?}",
        h.status().message
    );
}

#[test]
fn a_cluster_scope_failure_counts_against_max_failures() {
    for (budget, expected) in [(1, StageActivity::Completed), (0, StageActivity::Pending)] {
        let mut h = gated(
            "10s",
            json!({"scope": "Cluster", "count": 1}),
            json!({"maxFailures": budget}),
        );
        let out = h.settle();
        assert_eq!(out.measurements.len(), 2, "one per member cluster");
        let (one, other) = (out.measurements[0].clone(), out.measurements[1].clone());
        answer(&mut h, &[one], MeasurementVerdict::Failed, "0.5");
        answer(&mut h, &[other], MeasurementVerdict::Successful, "0");
        h.settle_at(t0() + Duration::seconds(10));
        match expected {
            StageActivity::Completed => {
                assert_eq!(activity(&h, "s1"), StageActivity::Completed);
                let counts = &h.status().stage("s1").expect("s1").counts;
                assert_eq!((counts.failed, counts.provisioned), (1, 1), "{counts:?}");
            }
            _ => {
                assert_eq!(h.status().phase, Phase::Failed, "budget {budget}");
                let failure = h.status().failure.clone().expect("the run's failure");
                let named: Vec<&str> = failure
                    .clusters
                    .iter()
                    .map(|c| c.cluster.as_str())
                    .collect();
                assert_eq!(named.len(), 1, "the failed cluster is named: {failure:?}");
            }
        }
        let listed = &h.status().stage("s1").expect("s1").not_provisioned;
        assert!(
            listed.iter().any(|c| c.state == ClusterState::Failed
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("AnalysisFailed"))),
            "the cluster is Failed by its analysis in the per-cluster state: {listed:?}"
        );
    }
}

#[test]
fn a_dry_run_analysis_is_measured_and_never_decides() {
    let mut h = gated("10s", json!({"count": 1, "dryRun": true}), json!({}));
    measure(&mut h, MeasurementVerdict::Failed, "0.9");
    assert_eq!(runs(&h)[0].phase, AnalysisPhase::Failed);
    h.settle_at(t0() + Duration::seconds(10));
    assert_eq!(activity(&h, "s1"), StageActivity::Completed);
}

#[test]
fn a_restart_neither_loses_nor_repeats_a_recorded_measurement() {
    let mut h = gated("2m", json!({"interval": "30s", "count": 3}), json!({}));
    measure(&mut h, MeasurementVerdict::Successful, "0");
    // A new process: the runner's memory is gone, the status is not.
    h.world.measurements.clear();
    h.world.now = t0() + Duration::seconds(30);
    let out = h.settle();
    assert_eq!(out.measurements.len(), 1);
    assert_eq!(
        out.measurements[0].index, 1,
        "the recorded one is not asked again"
    );
    assert_eq!(runs(&h)[0].taken, 1);
}

#[test]
fn a_result_for_another_run_is_ignored() {
    let mut h = gated("2m", json!({"count": 1}), json!({}));
    let out = h.settle();
    let mut due = out.measurements[0].clone();
    due.snapshot_index += 1;
    answer(&mut h, &[due], MeasurementVerdict::Failed, "1");
    h.settle();
    assert_eq!(runs(&h)[0].phase, AnalysisPhase::Running);
}

/// Steps (persisting each) until a step asks for measurements; that step is returned unpersisted,
/// as the controller holds it, with the status it started from.
fn until_measurements_asked(
    h: &mut Harness,
) -> (Option<tollgate_engine::PromotionStatus>, StepOutput) {
    for _ in 0..20 {
        let before = h.world.status.clone();
        let out = h.step_failing();
        if !out.measurements.is_empty() {
            return (before, out);
        }
        h.step();
        h.world.sveltos();
    }
    panic!("no measurement asked for");
}

#[test]
fn a_step_that_only_asks_for_first_measurements_may_wait_and_the_next_step_records_them() {
    let mut h = gated("0s", json!({}), json!({}));
    let (before, out) = until_measurements_asked(&mut h);
    assert!(awaits_first_measurements(before.as_ref(), &out), "{out:?}");
    // Nothing was written; the result comes in and the next step writes the handoff at once.
    h.world.now += Duration::milliseconds(40);
    answer(
        &mut h,
        &out.measurements,
        MeasurementVerdict::Successful,
        "0",
    );
    let events_before = h.world.events.len();
    let out = h.step();
    assert!(!awaits_first_measurements(before.as_ref(), &out));
    assert_eq!(runs(&h)[0].phase, AnalysisPhase::Successful);
    assert_eq!(runs(&h)[0].measurements.len(), 1);
    assert_eq!(
        runs(&h)[0].started_at,
        h.world.now,
        "the run starts when the step that wrote it saw the stage provisioned (later, never earlier)"
    );
    assert!(
        out.actions
            .iter()
            .any(|a| a.profile_name() == profile_name("s2"))
    );
    assert_eq!(
        h.world.events[events_before..].len(),
        0,
        "an automatic handoff inside a Progressing run tells no Event: {:?}",
        &h.world.events[events_before..]
    );
}

#[test]
fn a_step_that_records_a_measurement_or_decides_is_written_at_once() {
    // A second measurement due at once: the first one's record must be written.
    let mut h = gated("0s", json!({"count": 2, "interval": "0s"}), json!({}));
    let (before, out) = until_measurements_asked(&mut h);
    h.step();
    answer(
        &mut h,
        &out.measurements,
        MeasurementVerdict::Successful,
        "0",
    );
    let persisted = h.world.status.clone();
    let recorded = h.step_failing();
    assert_eq!(recorded.measurements.first().map(|d| d.index), Some(1));
    assert!(!awaits_first_measurements(persisted.as_ref(), &recorded));
    assert!(awaits_first_measurements(before.as_ref(), &out));
    // A failed first measurement decides: written at once.
    let mut h = gated("0s", json!({}), json!({}));
    let (_, out) = until_measurements_asked(&mut h);
    h.step();
    answer(&mut h, &out.measurements, MeasurementVerdict::Failed, "0.3");
    let persisted = h.world.status.clone();
    let failed = h.step_failing();
    assert!(!awaits_first_measurements(persisted.as_ref(), &failed));
    // A query that cannot be rendered fails the run at its start: no measurement to wait for.
    let mut h = gated("0s", json!({}), json!({}));
    if let Some(policy) = h.world.policy.as_mut() {
        policy.spec_mut().analyses[0]
            .prometheus
            .as_mut()
            .expect("prometheus")
            .query = "{{ nope }}".into();
    }
    let failing = loop_until_stage_failed(&mut h);
    assert!(failing.measurements.is_empty());
}

fn loop_until_stage_failed(h: &mut Harness) -> StepOutput {
    for _ in 0..20 {
        let before = h.world.status.clone();
        let out = h.step();
        assert!(!awaits_first_measurements(before.as_ref(), &out));
        if out.status.phase == Phase::Failed || out.status.phase == Phase::RollingBack {
            return out;
        }
        h.world.sveltos();
    }
    panic!("the stage did not fail");
}

#[test]
fn one_error_over_a_limit_of_zero_is_one_error_in_a_row() {
    let mut h = gated(
        "10s",
        json!({"interval": "10s", "count": 1, "consecutiveErrorLimit": 0}),
        json!({}),
    );
    measure(&mut h, MeasurementVerdict::Error, "");
    let run = &runs(&h)[0];
    assert_eq!(run.phase, AnalysisPhase::Failed, "{run:?}");
    assert!(
        run.message
            .as_deref()
            .is_some_and(|m| m.starts_with("1 error in a row, over consecutiveErrorLimit 0")),
        "{run:?}"
    );
}
