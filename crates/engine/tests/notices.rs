//! Notices (issue #19): what a step tells people, derived from the persisted statuses before and
//! after it, driven with the fake clock. One notice per transition, none at steady state.

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::notices::{Notice, notices};
use tollgate_engine::testing;
use tollgate_model::policy::{NotifyEvent, RolloutPolicy};
use tollgate_model::snapshot::ApprovalKind;

/// The harness, plus every notice its persisted steps produced (as the controller derives them).
struct Told {
    h: Harness,
    told: Vec<Notice>,
}

impl Told {
    fn new(h: Harness) -> Self {
        Told {
            h,
            told: Vec::new(),
        }
    }

    fn step(&mut self) -> bool {
        let before = self.h.world.status.clone();
        let now = self.h.world.now;
        let out = self.h.step();
        let after = self.h.status().clone();
        self.told.extend(notices(P, before.as_ref(), &after, now));
        !out.actions.is_empty()
    }

    fn settle(&mut self) {
        let mut acted = self.step();
        for _ in 0..20 {
            self.h.world.sveltos();
            let again = self.step();
            if !again && !acted {
                return;
            }
            acted = again;
        }
        panic!("the world did not settle");
    }

    fn kinds(&self) -> Vec<(NotifyEvent, String)> {
        self.told
            .iter()
            .map(|n| (n.kind, n.stage.clone()))
            .collect()
    }
}

fn policy(spec: serde_json::Value) -> RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "fleet-defaults"}, "spec": spec,
    }))
    .expect("valid policy")
}

fn two_stages(chart: &str) -> tollgate_model::ClusterPromotion {
    promotion_with(
        profile_spec(chart),
        vec![stage("s1", None), stage("s2", None)],
    )
}

use NotifyEvent::*;

fn of(kind: NotifyEvent, stage: &str) -> (NotifyEvent, String) {
    (kind, stage.to_string())
}

#[test]
fn a_full_rollout_tells_each_stage_start_and_completion_then_completed() {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    t.settle();
    assert_eq!(
        t.kinds(),
        [
            of(StageStarted, "s1"),
            of(StageCompleted, "s1"),
            of(StageStarted, "s2"),
            of(StageCompleted, "s2"),
            of(Completed, "s2"),
        ]
    );
    let first = &t.told[0];
    assert_eq!(first.promotion, P);
    assert_eq!(first.snapshot_index, 1);
    assert_eq!(
        first.snapshot_commit.as_deref(),
        Some(testing::commit(10).sha.as_str()),
        "the full SHA of the snapshot's commit"
    );
    assert_eq!(t.told[1].counts.provisioned, 2, "{:?}", t.told[1].counts);
    let ids: std::collections::BTreeSet<&str> = t.told.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids.len(), t.told.len(), "every notice has its own id");
}

#[test]
fn no_notice_when_nothing_changed() {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    t.settle();
    let status = t.h.status().clone();
    assert!(notices(P, Some(&status), &status, t.h.world.now).is_empty());
    let before = t.told.len();
    t.h.world.advance(Duration::hours(1));
    t.settle();
    assert_eq!(t.told.len(), before, "{:?}", &t.told[before..]);
}

#[test]
fn a_restart_mid_run_starts_the_new_run_with_its_own_ids() {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    t.step(); // s1 applied with #1
    t.h.world.sveltos();
    t.step(); // s1 done, s2 started
    assert_eq!(t.kinds().last(), Some(&of(StageStarted, "s2")));
    let first_start = t.told[0].clone();
    t.told.clear();
    t.h.world.advance(Duration::minutes(1));
    t.h.commit_content(two_stages("2.0.0"), 20);
    t.settle();
    assert_eq!(t.kinds()[0], of(StageStarted, "s1"));
    let restarted = &t.told[0];
    assert_eq!(restarted.snapshot_index, 2);
    assert_eq!(
        restarted.snapshot_commit.as_deref(),
        Some(testing::commit(20).sha.as_str())
    );
    assert_ne!(restarted.id, first_start.id, "a new run, a new notice");
    assert_eq!(t.kinds().last(), Some(&of(Completed, "s2")));
}

#[test]
fn the_same_transition_seen_twice_has_the_same_id() {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    t.settle();
    let completed = t.told.last().cloned().expect("completed");
    assert_eq!(completed.kind, Completed);
    // A drift correction takes the promotion out of Completed and back in: same run, same id.
    t.h.world.observed.profiles.remove(&profile_name("s1"));
    t.told.clear();
    t.h.world.advance(Duration::minutes(5));
    t.settle();
    let again: Vec<&Notice> = t.told.iter().filter(|n| n.kind == Completed).collect();
    assert_eq!(again.len(), 1, "{:?}", t.told);
    assert_eq!(again[0].id, completed.id);
}

#[test]
fn a_manual_gate_tells_that_an_approval_is_needed_once() {
    let mut t = Told::new(Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", Some(json!({"manual": {}}))), stage("s2", None)],
    )));
    t.settle();
    t.h.world.advance(Duration::minutes(10));
    t.settle();
    assert_eq!(
        t.kinds(),
        [of(StageStarted, "s1"), of(ApprovalNeeded, "s1")]
    );
    assert!(
        t.told[1].reason.is_some(),
        "the waiting reason says what it waits for"
    );
    t.h.approvals.push(testing::approval(
        "s1",
        ApprovalKind::Field,
        testing::commit(11),
    ));
    t.h.edit_triggers(|p| {
        if let Some(tollgate_model::model::Trigger::Manual(m)) = p
            .spec
            .stages
            .iter_mut()
            .find(|s| s.name == "s1")
            .and_then(|s| s.trigger.as_mut())
        {
            m.approved = Some(true);
        }
    });
    t.settle();
    assert!(t.kinds().contains(&of(StageCompleted, "s1")));
    assert_eq!(t.kinds().last(), Some(&of(Completed, "s2")));
}

#[test]
fn a_halted_failure_tells_stage_failed_with_the_reason() {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    t.h.world.policy = Some(policy(json!({"maxFailures": 0, "onFailure": "Halt"})));
    t.h.world.failing_clusters.insert("s2-1".into());
    t.settle();
    let failed: Vec<&Notice> = t.told.iter().filter(|n| n.kind == StageFailed).collect();
    assert_eq!(failed.len(), 1, "{:?}", t.kinds());
    assert_eq!(failed[0].stage, "s2");
    assert_eq!(failed[0].phase, tollgate_engine::Phase::Failed);
    assert_eq!(failed[0].counts.failed, 1);
    assert!(failed[0].reason.as_deref().is_some_and(|r| !r.is_empty()));
    assert!(!t.kinds().contains(&of(Completed, "s2")));
    assert!(!t.kinds().iter().any(|(k, _)| *k == RolledBack));
}

/// #1 rolled out under `onFailure: Rollback`, then #2 (9.9.9) failed on s2: rolling back, and
/// nothing told since #1 completed.
fn rolling_back_after_s2_failed() -> Told {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    t.h.world.policy = Some(policy(json!({"maxFailures": 0, "onFailure": "Rollback"})));
    t.settle();
    t.told.clear();
    t.h.world.advance(Duration::minutes(1));
    t.h.commit_content(two_stages("9.9.9"), 20);
    t.h.world.failing_clusters.insert("s2-2".into());
    t.step();
    t.h.world.sveltos();
    t.step();
    t.h.world.sveltos();
    t.step(); // s2 fails: rolling back
    t
}

/// The rollback ends in the step that holds a fix behind a policy problem: the promotion is
/// Held, not RolledBack, and the rollback is told all the same (it was not: the notice read the
/// phase).
#[test]
fn a_rollback_ending_in_the_step_that_holds_a_fix_is_told_once() {
    let mut t = rolling_back_after_s2_failed();
    assert_eq!(t.h.status().phase, tollgate_engine::Phase::RollingBack);
    t.h.world.failing_clusters.clear();
    t.h.world.policy_problem = Some("RolloutPolicy fleet-defaults: invalid".into());
    t.h.commit_content(two_stages("9.9.10"), 30);
    t.settle();
    for _ in 0..3 {
        t.h.world.advance(Duration::seconds(30));
        t.step();
    }
    assert_eq!(t.h.status().phase, tollgate_engine::Phase::Held);
    let rolled_back: Vec<&Notice> = t.told.iter().filter(|n| n.kind == RolledBack).collect();
    assert_eq!(rolled_back.len(), 1, "{:?}", t.kinds());
    assert_eq!(rolled_back[0].snapshot_index, 2, "the rejected snapshot");
    assert!(
        rolled_back[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("running #1")),
        "{:?}",
        rolled_back[0].reason
    );
}

#[test]
fn a_rollback_tells_stage_failed_then_rolled_back_once() {
    let mut t = rolling_back_after_s2_failed();
    t.h.world.failing_clusters.clear();
    t.settle();
    assert_eq!(t.h.status().phase, tollgate_engine::Phase::RolledBack);
    let kinds = t.kinds();
    assert_eq!(
        kinds,
        [
            of(StageStarted, "s1"),
            of(StageCompleted, "s1"),
            of(StageStarted, "s2"),
            of(StageFailed, "s2"),
            of(RolledBack, "s2"),
        ]
    );
    let rolled_back = t.told.last().expect("rolled back");
    assert_eq!(rolled_back.snapshot_index, 2, "the rejected snapshot");
    assert!(
        rolled_back
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("running #1")),
        "{:?}",
        rolled_back.reason
    );
}

#[test]
fn waves_are_told_as_each_wave_starts_and_completes_in_order() {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    t.h.world.policy = Some(policy(
        json!({"stages": {"s2": {"waves": {"size": 1, "pause": "2m"}}}}),
    ));
    t.settle();
    assert_eq!(
        t.kinds(),
        [
            of(StageStarted, "s1"),
            of(StageCompleted, "s1"),
            of(StageStarted, "s2"),
            of(WaveStarted, "s2"),
            of(WaveCompleted, "s2"),
        ],
        "the pause holds the second wave"
    );
    t.h.world.advance(Duration::minutes(3));
    t.settle();
    assert_eq!(
        t.kinds()[5..],
        [
            of(WaveStarted, "s2"),
            of(WaveCompleted, "s2"),
            of(StageCompleted, "s2"),
            of(Completed, "s2"),
        ]
    );
    let reasons: Vec<&str> = t
        .told
        .iter()
        .filter(|n| matches!(n.kind, WaveStarted | WaveCompleted))
        .filter_map(|n| n.reason.as_deref())
        .collect();
    assert_eq!(reasons[0], "wave 1/2 started: default/s2-1");
    assert_eq!(reasons[1], "wave 1/2 provisioned");
    assert_eq!(reasons[2], "wave 2/2 started: default/s2-2");
    assert_eq!(reasons[3], "wave 2/2 provisioned");
    let ids: std::collections::BTreeSet<&str> = t.told.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids.len(), t.told.len(), "each wave has its own notices");
}

#[test]
fn a_wave_without_pause_completes_before_the_next_one_starts() {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    t.h.world.policy = Some(policy(json!({"stages": {"s2": {"waves": {"size": 1}}}})));
    t.settle();
    let waves: Vec<(NotifyEvent, Option<String>)> = t
        .told
        .iter()
        .filter(|n| matches!(n.kind, WaveStarted | WaveCompleted))
        .map(|n| (n.kind, n.reason.clone()))
        .collect();
    let expected = [
        (WaveStarted, "wave 1/2 started: default/s2-1"),
        (WaveCompleted, "wave 1/2 provisioned"),
        (WaveStarted, "wave 2/2 started: default/s2-2"),
        (WaveCompleted, "wave 2/2 provisioned"),
    ]
    .map(|(k, r)| (k, Some(r.to_string())));
    assert_eq!(
        waves, expected,
        "the completed wave is told before the next starts"
    );
}

#[test]
fn a_blackout_holding_a_stage_start_or_a_wave_is_told_once_each() {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    let from = t0() + Duration::minutes(5);
    let until = t0() + Duration::minutes(65);
    t.h.world.policy = Some(policy(json!({
        "stages": {"s2": {"waves": {"size": 1}}},
        "blackouts": [{
            "from": from.format("%Y-%m-%dT%H:%M:%S").to_string(),
            "to": until.format("%Y-%m-%dT%H:%M:%S").to_string(),
            "reason": "incident 42",
        }],
    })));
    // s2's first wave goes out; the blackout begins before its clusters are provisioned.
    t.step();
    t.h.world.sveltos();
    t.step();
    assert_eq!(t.kinds().last(), Some(&of(WaveStarted, "s2")));
    t.h.world.advance(Duration::minutes(10));
    t.h.world.sveltos();
    t.step();
    t.step();
    t.h.world.advance(Duration::minutes(1));
    t.step();
    let held: Vec<&Notice> = t.told.iter().filter(|n| n.kind == BlackoutHeld).collect();
    assert_eq!(held.len(), 1, "{:?}", t.kinds());
    assert_eq!(held[0].stage, "s2");
    assert!(
        held[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("wave 2/2 waits") && r.contains("incident 42")),
        "{:?}",
        held[0].reason
    );
    assert_eq!(held[0].time, t0() + Duration::minutes(10));
    t.h.world.now = until;
    t.settle();
    assert_eq!(t.kinds().last(), Some(&of(Completed, "s2")));

    // A new run waits for the next blackout at its start: told about its first stage.
    let from = until + Duration::minutes(30);
    let until = from + Duration::hours(1);
    t.h.world.policy = Some(policy(json!({"blackouts": [{
        "from": from.format("%Y-%m-%dT%H:%M:%S").to_string(),
        "to": until.format("%Y-%m-%dT%H:%M:%S").to_string(),
    }]})));
    t.h.world.now = from + Duration::minutes(1);
    t.told.clear();
    t.h.commit_content(two_stages("2.0.0"), 20);
    t.step();
    t.step();
    assert_eq!(t.kinds(), [of(BlackoutHeld, "s1")]);
    assert_eq!(t.told[0].snapshot_index, 2, "the snapshot that waits");
    assert_eq!(
        t.told[0].snapshot_commit.as_deref(),
        Some(testing::commit(20).sha.as_str())
    );
    assert!(
        t.told[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("snapshot #2 waits to start")),
        "{:?}",
        t.told[0].reason
    );
    t.h.world.now = until;
    t.settle();
    assert_eq!(t.kinds()[1], of(StageStarted, "s1"));
    assert_eq!(t.told[1].snapshot_index, 2);
}

#[test]
fn a_first_run_held_by_a_blackout_is_told_before_anything_ran() {
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    let until = t0() + Duration::minutes(30);
    t.h.world.policy = Some(policy(json!({"blackouts": [{
        "from": (t0() - Duration::hours(1)).format("%Y-%m-%dT%H:%M:%S").to_string(),
        "to": until.format("%Y-%m-%dT%H:%M:%S").to_string(),
    }]})));
    t.step();
    t.h.world.advance(Duration::minutes(1));
    t.step();
    assert_eq!(t.kinds(), [of(BlackoutHeld, "s1")]);
    let held = &t.told[0];
    assert_eq!(held.snapshot_index, 1);
    assert_eq!(held.time, t0());
    t.h.world.now = until;
    t.settle();
    assert_eq!(t.kinds()[1], of(StageStarted, "s1"));
    assert_eq!(t.kinds().last(), Some(&of(Completed, "s2")));
}

/// Steps, answers every measurement due with `verdict`, steps again: the analysis runner's part.
fn measure_all(t: &mut Told, verdict: tollgate_model::analysis::MeasurementVerdict) {
    use tollgate_engine::measurement::Measurement;
    let before = t.h.world.status.clone();
    let now = t.h.world.now;
    let out = t.h.step();
    t.told
        .extend(notices(P, before.as_ref(), t.h.status(), now));
    for due in &out.measurements {
        t.h.world.measurements.push(Measurement {
            key: due.key(),
            taken_at: now,
            value: Some("0.5".into()),
            verdict,
            error: None,
            comparison: None,
        });
    }
    t.settle();
}

fn gated_policy(analysis: serde_json::Value) -> RolloutPolicy {
    let mut analysis = analysis;
    analysis["name"] = json!("error-rate");
    analysis["prometheus"] = json!({"address": "http://p:9090", "query": "errors"});
    policy(json!({"analyses": [analysis], "stages": {"s1": {"analyses": ["error-rate"]}}}))
}

#[test]
fn a_failed_or_inconclusive_analysis_is_told_once_and_a_dry_run_is_not() {
    use tollgate_model::analysis::MeasurementVerdict;
    for (analysis, verdict, expected) in [
        (
            json!({"count": 1}),
            MeasurementVerdict::Failed,
            Some(AnalysisFailed),
        ),
        (
            json!({"count": 1}),
            MeasurementVerdict::Inconclusive,
            Some(AnalysisInconclusive),
        ),
        (
            json!({"count": 1, "dryRun": true}),
            MeasurementVerdict::Failed,
            None,
        ),
    ] {
        let mut t = Told::new(Harness::new(two_stages("1.0.0")));
        t.h.world.policy = Some(gated_policy(analysis.clone()));
        t.settle();
        measure_all(&mut t, verdict);
        measure_all(&mut t, verdict);
        let told: Vec<&Notice> = t
            .told
            .iter()
            .filter(|n| matches!(n.kind, AnalysisFailed | AnalysisInconclusive))
            .collect();
        match expected {
            Some(kind) => {
                assert_eq!(told.len(), 1, "{analysis}: {:?}", t.kinds());
                assert_eq!((told[0].kind, told[0].stage.as_str()), (kind, "s1"));
                let reason = told[0].reason.as_deref().unwrap_or_default();
                assert!(
                    reason.contains("analysis error-rate") && reason.contains("query: errors"),
                    "{reason}"
                );
            }
            None => assert!(told.is_empty(), "{analysis}: {:?}", t.kinds()),
        }
    }
}

#[test]
fn each_inconclusive_wave_is_told_once() {
    use tollgate_model::analysis::MeasurementVerdict;
    let mut t = Told::new(Harness::new(two_stages("1.0.0")));
    t.h.world.policy = Some(policy(json!({
        "analyses": [{"name": "error-rate", "count": 1,
            "prometheus": {"address": "http://p:9090", "query": "errors"}}],
        "stages": {"s1": {"analyses": ["error-rate"], "waves": {"size": 1}}},
    })));
    t.settle();
    measure_all(&mut t, MeasurementVerdict::Inconclusive);
    // An approval lets wave 1 pass; wave 2 is inconclusive too: told again, once.
    let id: String = t.h.snapshot.hashes.snapshot_id.chars().take(12).collect();
    t.h.edit_triggers(|p| {
        p.metadata
            .annotations
            .insert("approve.tollgate.dev/s1".into(), id.clone());
    });
    t.h.approvals.push(tollgate_engine::testing::approval(
        "s1",
        tollgate_model::ApprovalKind::Annotation { value: id },
        tollgate_engine::testing::commit(20),
    ));
    t.settle();
    measure_all(&mut t, MeasurementVerdict::Inconclusive);
    measure_all(&mut t, MeasurementVerdict::Inconclusive);
    let told = t
        .told
        .iter()
        .filter(|n| n.kind == AnalysisInconclusive)
        .count();
    assert_eq!(told, 2, "{:?}", t.kinds());
}
