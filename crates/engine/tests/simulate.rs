//! `simulate`: the engine on a fake clock from a snapshot, a policy, a status and `now`. Each rule
//! an estimate must follow has a test: a blackout in force holds the first start to its end,
//! waves and their pauses take their time, a window waits for its opening, a manual gate is
//! marked and approved at once, an analysis gate's measurements pass, `onNewSnapshot` decides when the new run starts, and the spans
//! are those the controller records when it runs the same rollout.

mod common;

use chrono::{DateTime, Duration, Utc};
use common::*;
use serde_json::{Value, json};
use tollgate_engine::activity::{StageActivity, WaveOf};
use tollgate_engine::run_history::{ActivitySpan, RunRecord};
use tollgate_engine::simulate::{DEFAULT_MAX_STEPS, SimulationEnd};
use tollgate_engine::{
    ObservedCluster, PromotionStatus, RunOutcome, Simulation, SimulationInput, simulate,
};
use tollgate_manifest::snapshot::Snapshot;
use tollgate_model::policy::RolloutPolicy;

fn policy(spec: Value) -> RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "fleet"}, "spec": spec,
    }))
    .expect("valid policy")
}

/// The inputs of a plan: git only (no status, no fleet), one minute per provisioning.
fn from_git<'a>(
    snapshot: &'a Snapshot,
    policy: Option<&'a RolloutPolicy>,
    now: DateTime<Utc>,
) -> SimulationInput<'a> {
    SimulationInput {
        snapshot,
        approvals: &[],
        history: std::slice::from_ref(snapshot),
        policy,
        policy_problem: None,
        status: None,
        fleet: None,
        now,
        provisioning_latency: Duration::minutes(1).into(),
        max_steps: DEFAULT_MAX_STEPS,
    }
}

fn first_snapshot(promotion: tollgate_model::ClusterPromotion) -> Snapshot {
    tollgate_engine::testing::snapshot(promotion, 1, tollgate_engine::testing::commit(10))
}

/// `(kind, since)` of every span of `stage` in `run`, minutes after `t0`.
fn spans(run: &RunRecord, stage: &str, t0: DateTime<Utc>) -> Vec<(String, i64)> {
    run.stages
        .iter()
        .find(|s| s.name == stage)
        .unwrap_or_else(|| panic!("no stage {stage} in {run:#?}"))
        .activities
        .iter()
        .map(|span| {
            let kind = match span.activity.wave() {
                Some(w) => format!("{} {}/{}", span.activity.kind(), w.wave, w.of),
                None => span.activity.kind().to_string(),
            };
            (kind, (span.since - t0).num_minutes())
        })
        .collect()
}

fn only_run(simulation: &Simulation) -> &RunRecord {
    assert_eq!(simulation.runs.len(), 1, "{:#?}", simulation.runs);
    &simulation.runs[0]
}

fn spans_of(kinds: &[(&str, i64)]) -> Vec<(String, i64)> {
    kinds.iter().map(|(k, m)| (k.to_string(), *m)).collect()
}

#[test]
fn a_blackout_in_force_holds_the_first_start_until_it_ends() {
    // 22:00, a blackout until 00:03 tomorrow: nothing starts before 00:03.
    let now = t("2025-10-07T22:00:00Z");
    let freeze = policy(json!({"blackouts": [{
        "from": "2025-10-07T18:00:00Z", "to": "2025-10-08T00:03:00Z", "reason": "release freeze"}]}));
    let snapshot = first_snapshot(promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "10m"}}))),
            stage("s2", None),
        ],
    ));
    let simulation = simulate(&from_git(&snapshot, Some(&freeze), now));
    let run = only_run(&simulation);
    let end_of_freeze = t("2025-10-08T00:03:00Z");
    assert_eq!(run.started_at, end_of_freeze);
    for stage in &run.stages {
        for span in &stage.activities {
            assert!(
                span.since >= end_of_freeze,
                "{} starts early: {span:?}",
                stage.name
            );
        }
    }
    let hold = &run.held_starts[0];
    assert_eq!(
        (
            hold.stage.as_str(),
            hold.since,
            hold.until,
            hold.reason.as_deref()
        ),
        ("s1", now, end_of_freeze, Some("release freeze"))
    );
    assert_eq!(
        spans(run, "s1", end_of_freeze),
        spans_of(&[("Provisioning", 0), ("Soaking", 1), ("Completed", 11)])
    );
    assert_eq!(
        spans(run, "s2", end_of_freeze),
        spans_of(&[("Provisioning", 11), ("Completed", 12)])
    );
    assert_eq!(
        simulation.end,
        SimulationEnd::Completed {
            at: end_of_freeze + Duration::minutes(12)
        }
    );
    assert!(simulation.fleet_assumed);
}

/// s1 (no trigger) → prod, whose clusters go out in waves of one with a 5m pause between them.
fn waved(pause: &str, blackouts: Value) -> (Snapshot, RolloutPolicy) {
    let snapshot = first_snapshot(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None), stage("prod", None)],
    ));
    let policy = policy(json!({
        "blackouts": blackouts,
        "stages": {"prod": {"waves": {"size": 1, "sortingLabelKey": "order", "pause": pause}}}
    }));
    (snapshot, policy)
}

fn prod_fleet(n: usize) -> Vec<ObservedCluster> {
    let mut clusters = vec![ObservedCluster {
        namespace: "fleet".into(),
        name: "s1-1".into(),
        labels: [("env".to_string(), "s1".to_string())].into(),
        ready: true,
        paused: false,
        capi: false,
        active_window: None,
    }];
    clusters.extend((1..=n).map(|i| {
        ObservedCluster {
            namespace: "fleet".into(),
            name: format!("prod-{i}"),
            labels: [
                ("env".to_string(), "prod".to_string()),
                ("order".to_string(), i.to_string()),
            ]
            .into(),
            ready: true,
            paused: false,
            capi: false,
            active_window: None,
        }
    }));
    clusters
}

#[test]
fn waves_and_their_pauses_take_their_time() {
    let now = t0();
    let (snapshot, policy) = waved("5m", json!([]));
    let fleet = prod_fleet(3);
    let simulation = simulate(&SimulationInput {
        fleet: Some(&fleet),
        ..from_git(&snapshot, Some(&policy), now)
    });
    let run = only_run(&simulation);
    assert_eq!(
        spans(run, "prod", now),
        spans_of(&[
            ("Provisioning 1/3", 1),
            ("WavePause 1/3", 2),
            ("Provisioning 2/3", 7),
            ("WavePause 2/3", 8),
            ("Provisioning 3/3", 13),
            ("Completed", 14),
        ])
    );
    // Without the pauses the same waves take three minutes.
    let (snapshot, policy) = waved("0s", json!([]));
    let quick = simulate(&SimulationInput {
        fleet: Some(&fleet),
        ..from_git(&snapshot, Some(&policy), now)
    });
    assert_eq!(quick.end.at() - now, Duration::minutes(4));
    assert_eq!(simulation.end.at() - now, Duration::minutes(14));
}

#[test]
fn a_blackout_between_waves_holds_the_next_wave_until_it_ends() {
    let now = t0();
    // Starts during wave 1's pause, ends 20 minutes after the simulation's start.
    let (snapshot, policy) = waved(
        "5m",
        json!([{"from": "2025-10-07T10:03:00Z", "to": "2025-10-07T10:20:00Z"}]),
    );
    let fleet = prod_fleet(2);
    let simulation = simulate(&SimulationInput {
        fleet: Some(&fleet),
        ..from_git(&snapshot, Some(&policy), now)
    });
    let run = only_run(&simulation);
    assert_eq!(
        spans(run, "prod", now),
        spans_of(&[
            ("Provisioning 1/2", 1),
            ("WavePause 1/2", 2),
            ("Blackout 2/2", 7),
            ("Provisioning 2/2", 20),
            ("Completed", 21),
        ])
    );
}

#[test]
fn without_a_fleet_a_waved_stage_is_assumed_one_cluster_per_wave() {
    let now = t0();
    let (snapshot, policy) = waved("5m", json!([]));
    let simulation = simulate(&from_git(&snapshot, Some(&policy), now));
    let prod: Vec<&ObservedCluster> = simulation
        .fleet
        .iter()
        .filter(|c| c.labels.get("env").map(String::as_str) == Some("prod"))
        .collect();
    assert_eq!(prod.len(), 2, "two waves of size 1: {prod:?}");
    let kinds: Vec<String> = spans(only_run(&simulation), "prod", now)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        kinds,
        [
            "Provisioning 1/2",
            "WavePause 1/2",
            "Provisioning 2/2",
            "Completed"
        ]
    );
}

#[test]
fn a_closed_window_waits_for_its_opening() {
    // Friday 18:00 UTC; the window opens on weekdays at 10:00: Monday.
    let now = t("2025-10-10T18:00:00Z");
    let snapshot = first_snapshot(promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage(
                "s1",
                Some(json!({"auto": {"delay": "10m", "promotionWindow": {
                    "from": "0 10 * * 1-5", "to": "0 16 * * 1-5"}}})),
            ),
            stage("s2", None),
        ],
    ));
    let simulation = simulate(&from_git(&snapshot, None, now));
    let run = only_run(&simulation);
    let s1 = &run.stages[0].activities;
    assert_eq!(
        s1[2],
        ActivitySpan {
            activity: StageActivity::AwaitingWindow {
                until: t("2025-10-13T10:00:00Z")
            },
            since: now + Duration::minutes(11),
        }
    );
    assert_eq!(s1[3].activity, StageActivity::Completed);
    assert_eq!(s1[3].since, t("2025-10-13T10:00:00Z"));
    assert_eq!(simulation.end.at(), t("2025-10-13T10:01:00Z"));
}

#[test]
fn an_analysis_gate_takes_its_measurements_and_passes() {
    let now = t0();
    let snapshot = first_snapshot(promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "1m"}}))),
            stage("s2", None),
        ],
    ));
    // Three measurements 5m apart from s1's provisioning (at 1m): the last at 11m outlasts the soak.
    let policy = policy(json!({
        "analyses": [{"name": "error-rate", "interval": "5m", "count": 3,
            "prometheus": {"address": "http://prometheus:9090", "query": "sum(errors)"}}],
        "stages": {"s1": {"analyses": ["error-rate"]}},
    }));
    let simulation = simulate(&from_git(&snapshot, Some(&policy), now));
    assert_eq!(
        simulation.end,
        SimulationEnd::Completed {
            at: now + Duration::minutes(12)
        },
        "{:#?}",
        simulation.runs
    );
    let s1 = spans(only_run(&simulation), "s1", now);
    assert_eq!(s1.last(), Some(&("Completed".to_string(), 11)), "{s1:?}");
}

#[test]
fn a_manual_gate_is_marked_and_its_approval_assumed_at_once() {
    let now = t0();
    let snapshot = first_snapshot(promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage("s1", None),
            stage("s2", Some(json!({"manual": {}}))),
            stage("s3", None),
        ],
    ));
    let simulation = simulate(&from_git(&snapshot, None, now));
    assert_eq!(simulation.assumed_approvals.len(), 1);
    let gate = &simulation.assumed_approvals[0];
    assert_eq!(
        (gate.snapshot, gate.stage.as_str(), gate.at),
        (1, "s2", now + Duration::minutes(2))
    );
    assert_eq!(
        spans(only_run(&simulation), "s2", now),
        spans_of(&[
            ("Provisioning", 1),
            ("AwaitingApproval", 2),
            ("Completed", 2)
        ])
    );
    assert_eq!(
        simulation.end,
        SimulationEnd::Completed {
            at: now + Duration::minutes(3)
        }
    );
}

/// Runs #1 of s1 (10m soak) → s2 (manual) → s3 to the gate under `on_new`, then commits #2.
fn at_the_gate_with_a_new_commit(on_new: &str) -> Harness {
    let pipeline = |chart: &str| {
        promotion_with(
            profile_spec(chart),
            vec![
                stage("s1", Some(json!({"auto": {"delay": "10m"}}))),
                stage("s2", Some(json!({"manual": {}}))),
                stage("s3", None),
            ],
        )
    };
    let mut h = Harness::new(pipeline("1.0.0"));
    h.world.policy = Some(policy(json!({"onNewSnapshot": on_new})));
    h.settle();
    h.later(Duration::minutes(10));
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s2"));
    h.commit_content(pipeline("2.0.0"), 20);
    h
}

fn simulate_live(h: &Harness) -> Simulation {
    simulate(&SimulationInput {
        snapshot: &h.snapshot,
        approvals: &h.approvals,
        history: &h.world.history,
        policy: h.world.policy.as_ref(),
        policy_problem: None,
        status: h.world.status.as_ref(),
        fleet: Some(&h.world.observed.clusters),
        now: h.world.now,
        provisioning_latency: Duration::minutes(1).into(),
        max_steps: DEFAULT_MAX_STEPS,
    })
}

#[test]
fn finish_current_starts_the_new_snapshot_once_the_running_run_completed() {
    let h = at_the_gate_with_a_new_commit("FinishCurrent");
    let now = h.world.now;
    let simulation = simulate_live(&h);
    let first = simulation.run_of(1).expect("run #1 goes on");
    let second = simulation.run_of(2).expect("run #2");
    assert_eq!(first.outcome, RunOutcome::Completed);
    // #1 passes its gate (approval assumed at once) and provisions s3: #2 starts then.
    assert_eq!(first.ended_at, Some(now + Duration::minutes(1)));
    assert_eq!(second.started_at, now + Duration::minutes(1));
    assert_eq!(simulation.assumed_approvals[0].snapshot, 1);
}

#[test]
fn restart_supersedes_the_running_run_at_once() {
    let h = at_the_gate_with_a_new_commit("Restart");
    let now = h.world.now;
    let simulation = simulate_live(&h);
    let first = simulation.run_of(1).expect("run #1 is seen");
    assert_eq!(first.outcome, RunOutcome::Superseded);
    assert_eq!(first.ended_at, Some(now));
    assert_eq!(simulation.run_of(2).map(|r| r.started_at), Some(now));
}

/// The simulation's spans are those the controller records for the same rollout: the test
/// world (Sveltos at once) driven to each instant the engine asks for, against a simulation with
/// no latency.
#[test]
fn the_simulated_spans_are_those_the_controller_records() {
    let promotion = promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "10m"}}))),
            stage("prod", None),
        ],
    );
    let rules = policy(json!({
        "blackouts": [{"from": "2025-10-07T09:00:00Z", "to": "2025-10-07T10:30:00Z"}],
        "stages": {"prod": {"waves": {"size": 1, "sortingLabelKey": "order", "pause": "3m"}}}
    }));
    let mut h = Harness::new(promotion);
    std::sync::Arc::make_mut(&mut h.world.observed.clusters)
        .retain(|c| c.labels.get("env").map(String::as_str) != Some("prod"));
    for i in 1..=3 {
        let order = i.to_string();
        h.world
            .add_cluster(&format!("p-{i}"), &[("env", "prod"), ("order", &order)]);
    }
    h.world.policy = Some(rules.clone());
    let fleet = h.world.observed.clusters.to_vec();
    let simulation = simulate(&SimulationInput {
        fleet: Some(&fleet),
        provisioning_latency: Duration::zero().into(),
        ..from_git(&h.snapshot, Some(&rules), h.world.now)
    });
    let mut output = h.settle();
    for _ in 0..50 {
        let Some(at) = output.wake_at else { break };
        output = h.settle_at(at);
    }
    let recorded: &PromotionStatus = h.status();
    assert_eq!(recorded.runs.len(), 1);
    let simulated = only_run(&simulation);
    assert_eq!(simulated.stages, recorded.runs[0].stages);
    assert_eq!(simulated.started_at, recorded.runs[0].started_at);
    assert!(
        simulated.stages[1]
            .activities
            .iter()
            .any(|s| s.activity.wave() == Some(WaveOf { wave: 3, of: 3 })),
        "{simulated:#?}"
    );
}

#[test]
fn a_paused_promotion_is_stuck_and_says_why() {
    let mut promotion = promotion_with(profile_spec("1.0.0"), vec![stage("s1", None)]);
    promotion
        .metadata
        .annotations
        .insert("tollgate.dev/paused".into(), "true".into());
    let snapshot = first_snapshot(promotion);
    let simulation = simulate(&from_git(&snapshot, None, t0()));
    let SimulationEnd::Stuck { at, reason } = &simulation.end else {
        panic!("stuck expected: {:?}", simulation.end);
    };
    assert_eq!(*at, t0());
    assert!(reason.contains("paused"), "{reason}");
}

#[test]
fn a_policy_problem_holds_the_run_and_the_simulation_says_so() {
    let snapshot = first_snapshot(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None)],
    ));
    let simulation = simulate(&SimulationInput {
        policy_problem: Some("two RolloutPolicies select it: a, b"),
        ..from_git(&snapshot, None, t0())
    });
    let SimulationEnd::Stuck { reason, .. } = &simulation.end else {
        panic!("stuck expected: {:?}", simulation.end);
    };
    assert!(reason.contains("two RolloutPolicies select it"), "{reason}");
    assert!(simulation.runs.is_empty());
}

#[test]
fn the_step_limit_ends_a_simulation() {
    let snapshot = first_snapshot(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    let simulation = simulate(&SimulationInput {
        max_steps: 2,
        ..from_git(&snapshot, None, t0())
    });
    // Two steps at the start: s1 applied, then waiting for its clusters.
    assert_eq!(simulation.end, SimulationEnd::StepLimit { at: t0() });
    assert_eq!(simulation.steps, 2);
}
