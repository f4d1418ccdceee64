//! The Kubernetes Events that announce stage transitions, derived from `transitions(before,
//! after)` (`run/transition_events.rs`): unhappy paths first (a write that failed, a status lost,
//! a run superseded mid-stage, a rollback held behind a policy problem), then a rollback's and a
//! wave's events in order.

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::{EngineEvent, EventReason, Phase};

/// The transition events among `events`, as "Reason: note".
fn told(events: &[EngineEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| EventReason::TRANSITIONS.contains(&e.reason))
        .map(|e| format!("{}: {}", e.reason, e.note))
        .collect()
}

/// The events told (persisted with their status) since the first `from`.
fn told_since(h: &Harness, from: usize) -> Vec<String> {
    told(&h.world.events[from..])
}

#[test]
fn a_step_whose_write_failed_tells_nothing_and_the_next_tells_it_once() {
    let mut h = rolled_out_then_failing("Halt");
    h.step();
    h.world.sveltos();
    h.step(); // s1 provisioned with #2 → s2 applied
    h.world.sveltos();
    let from = h.world.events.len();
    // s2 fails, but the step's write fails: its status is not persisted, nor its events told.
    let unwritten = h.step_failing();
    assert_eq!(
        told(&unwritten.events),
        [
            "BudgetExceeded: Stage s2: 1 of 2 clusters failed or timed out (1 failed, 0 timed out), over maxFailures 0: default/s2-2 Failed: deployment failed",
            "StageFailed: Stage s2 failed with snapshot #2; onFailure: Halt",
        ]
    );
    assert_eq!(h.world.events.len(), from);
    h.world.advance(Duration::seconds(5));
    h.settle();
    assert_eq!(
        told_since(&h, from),
        [
            "BudgetExceeded: Stage s2: 1 of 2 clusters failed or timed out (1 failed, 0 timed out), over maxFailures 0: default/s2-2 Failed: deployment failed",
            "StageFailed: Stage s2 failed with snapshot #2; onFailure: Halt",
        ],
        "told once, by the step that wrote the failure"
    );
    h.assert_idempotent();
}

#[test]
fn a_restart_that_lost_the_status_tells_the_run_again_once() {
    let mut h = Harness::new(three_stages("1.0.0"));
    h.settle();
    assert_eq!(h.status().phase, Phase::Completed);
    assert_eq!(
        told_since(&h, 0),
        [
            "Provisioning: Provisioning stage s1",
            "Provisioned: Stage s3 provisioned"
        ],
        "the handoffs inside the Progressing run are in status, not Events (issue #20)"
    );
    // The state object is gone (deleted by hand): the run is seen anew, as its notices are (with
    // a new run start, so with new ids). Each transition is told again once, none lost; with no
    // persisted phase to compare with, the handoffs are told too.
    h.world.status = None;
    let from = h.world.events.len();
    h.world.advance(Duration::minutes(1));
    h.settle();
    assert_eq!(h.status().phase, Phase::Completed);
    assert_eq!(
        told_since(&h, from),
        [
            "Provisioning: Provisioning stage s1",
            "Provisioning: Stage s1 provisioned; provisioning stage s2",
            "Provisioning: Stage s2 provisioned; provisioning stage s3",
            "Provisioned: Stage s3 provisioned",
        ]
    );
    h.assert_idempotent();
}

#[test]
fn a_run_superseded_mid_stage_tells_nothing_more_of_the_old_run() {
    let mut h = Harness::new(three_stages("1.0.0"));
    h.step();
    h.world.sveltos();
    h.step(); // s1 provisioned → s2 applied with #1
    // s2's clusters provision #1, but #2 is committed before the engine looks again.
    h.world.sveltos();
    h.commit_content(three_stages("2.0.0"), 20);
    let from = h.world.events.len();
    let out = h.step();
    assert_eq!(out.status.snapshot_index, Some(2));
    assert_eq!(
        told_since(&h, from),
        ["Provisioning: Provisioning stage s1 (Restart)"],
        "s2 provisioned with #1 is not told: that run is superseded"
    );
}

#[test]
fn a_rolled_back_run_held_behind_a_policy_problem_tells_rolled_back_once() {
    let mut h = rolled_out_then_failing("Rollback");
    h.settle();
    h.world.failing_clusters.clear();
    h.settle();
    assert_eq!(h.status().phase, Phase::RolledBack);
    // A fix is committed while the policy cannot be resolved: the promotion is Held.
    h.world.policy_problem = Some("RolloutPolicy fleet-defaults: invalid".into());
    h.commit_content(three_stages("9.9.10"), 30);
    let from = h.world.events.len();
    for _ in 0..3 {
        h.world.advance(Duration::seconds(30));
        h.step();
    }
    assert_eq!(h.status().phase, Phase::Held, "{:?}", h.status().message);
    assert_eq!(
        told_since(&h, from),
        Vec::<String>::new(),
        "the rollback was told when it ended, not at every step of the hold"
    );
}

#[test]
fn a_rollback_tells_the_failure_then_each_stage_restored_in_restore_order() {
    let mut h = rolled_out_then_failing("Rollback");
    let from = h.world.events.len();
    h.step();
    h.world.sveltos();
    h.step();
    h.world.sveltos();
    h.step(); // s2 fails
    h.world.failing_clusters.clear();
    h.settle();
    assert_eq!(h.status().phase, Phase::RolledBack);
    assert_eq!(
        told_since(&h, from),
        [
            "Provisioning: Provisioning stage s1 (Restart)",
            "BudgetExceeded: Stage s2: 1 of 2 clusters failed or timed out (1 failed, 0 timed out), over maxFailures 0: default/s2-2 Failed: deployment failed",
            "StageFailed: Stage s2 failed with snapshot #2; onFailure: Rollback",
            "RollingBack: Rolling back snapshot #2, stage s2 first",
            "StageRestored: Stage s2 restored to snapshot #1",
            "StageRestored: Stage s1 restored to snapshot #1",
            "RolledBack: Snapshot #2 rolled back after stage s2 failed; running #1",
        ]
    );
    h.assert_idempotent();
}

#[test]
fn a_first_rollout_rolled_back_withdraws_each_stage_and_says_so() {
    let mut h = Harness::new(three_stages("9.9.9"));
    h.world.policy = Some(fleet_policy(
        json!({"maxFailures": 0, "onFailure": "Rollback"}),
    ));
    h.world.failing_clusters.insert("s2-1".into());
    h.settle();
    assert_eq!(h.status().phase, Phase::RolledBack);
    let told = told_since(&h, 0);
    assert_eq!(
        told[told.len() - 3..],
        [
            "StageRestored: Stage s2 withdrawn (it had no profile before)",
            "StageRestored: Stage s1 withdrawn (it had no profile before)",
            "RolledBack: Snapshot #1 rolled back after stage s2 failed; its profiles are withdrawn",
        ]
    );
}

/// s1 → prod; prod's five clusters in three waves (a canary, then two by two), 2 m apart.
fn waved() -> Harness {
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
        ("prod-d", "4"),
        ("prod-e", "5"),
    ] {
        h.world
            .add_cluster(name, &[("env", "prod"), ("order", order)]);
    }
    h.world.policy = Some(fleet_policy(json!({"stages": {"prod": {"waves": {
        "sortingLabelKey": "order", "size": 2, "canary": 1, "pause": "2m"
    }}}})));
    h
}

#[test]
fn a_waved_stage_tells_each_wave_once_its_first_with_the_stage_and_its_last_with_provisioned() {
    let mut h = waved();
    h.settle();
    assert_eq!(h.status().phase, Phase::Waiting);
    h.later(Duration::minutes(2));
    h.later(Duration::minutes(2));
    assert_eq!(h.status().phase, Phase::Completed);
    assert_eq!(
        told_since(&h, 0),
        [
            "Provisioning: Provisioning stage s1",
            "WaveCompleted: Stage prod: wave 1/3 provisioned",
            "WaveStarted: Stage prod: wave 2/3 started: default/prod-c, default/prod-a",
            "WaveCompleted: Stage prod: wave 2/3 provisioned",
            "WaveStarted: Stage prod: wave 3/3 started: default/prod-d, default/prod-e",
            "Provisioned: Stage prod provisioned",
        ]
    );
    h.assert_idempotent();
}
