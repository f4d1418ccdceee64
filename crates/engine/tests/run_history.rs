//! The bounded run history in status (`status.runs`): what `tollgate timeline` draws. Driven with
//! the fake clock; each rule has a test named after it.

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::run_history::{RUNS_KEPT, STAGE_RECORDS_KEPT};
use tollgate_engine::testing::{approval, commit};
use tollgate_engine::{RunOutcome, RunRecord};
use tollgate_model::model::Trigger;
use tollgate_model::policy::RolloutPolicy;
use tollgate_model::snapshot::ApprovalKind;

fn policy(spec: serde_json::Value) -> RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "fleet-defaults"}, "spec": spec,
    }))
    .expect("valid policy")
}

fn runs(h: &Harness) -> &[RunRecord] {
    &h.status().runs
}

/// dev (auto, 5m delay), staging (auto, promotion window 11:00–12:00), prod (manual).
fn gated(chart: &str) -> tollgate_model::ClusterPromotion {
    promotion_with(
        profile_spec(chart),
        vec![
            stage("dev", Some(json!({"auto": {"delay": "5m"}}))),
            stage(
                "staging",
                Some(
                    json!({"auto": {"promotionWindow": {"from": "0 11 * * *", "to": "0 12 * * *"}}}),
                ),
            ),
            stage("prod", Some(json!({"manual": {"automaticReset": false}}))),
        ],
    )
}

#[test]
fn a_full_run_records_every_bar_of_every_stage() {
    let mut h = Harness::new(gated("1.0.0"));
    h.settle();
    let run = &runs(&h)[0];
    assert_eq!(run.snapshot_index, 1);
    assert_eq!(run.commit.len(), 7, "short sha: {}", run.commit);
    assert_eq!(run.outcome, RunOutcome::Running);
    assert_eq!(run.started_at, t0());
    let dev = &run.stages[0];
    assert_eq!((dev.name.as_str(), dev.applied_at), ("dev", t0()));
    assert_eq!(dev.provisioned_at, Some(t0()));
    assert_eq!(dev.succeeded_at, None, "the delay is running");

    h.settle_at(t("2025-10-07T10:05:00Z"));
    let staging = &runs(&h)[0].stages[1];
    assert_eq!(
        runs(&h)[0].stages[0].succeeded_at,
        Some(t("2025-10-07T10:05:00Z"))
    );
    assert_eq!(
        staging.awaiting_window_since,
        Some(t("2025-10-07T10:05:00Z"))
    );

    h.settle_at(t("2025-10-07T11:00:00Z"));
    let run = &runs(&h)[0];
    assert_eq!(run.stages[1].succeeded_at, Some(t("2025-10-07T11:00:00Z")));
    assert_eq!(
        run.stages[1].awaiting_window_since,
        Some(t("2025-10-07T10:05:00Z")),
        "kept after the window opened (the status clears its own)"
    );
    assert_eq!(h.stage_status("staging").awaiting_window_since, None);
    assert_eq!(
        run.stages[2].awaiting_approval_since,
        Some(t("2025-10-07T11:00:00Z"))
    );

    h.edit_triggers(|p| {
        for s in &mut p.spec.stages {
            if let Some(Trigger::Manual(manual)) = &mut s.trigger {
                manual.approved = Some(true);
            }
        }
    });
    h.approvals
        .push(approval("prod", ApprovalKind::Field, commit(11)));
    h.settle_at(t("2025-10-07T11:30:00Z"));
    let run = &runs(&h)[0];
    assert_eq!(run.outcome, RunOutcome::Completed);
    assert_eq!(run.ended_at, Some(t("2025-10-07T11:30:00Z")));
    assert_eq!(run.stages[2].succeeded_at, Some(t("2025-10-07T11:30:00Z")));
    assert_eq!(
        run.stages[2].awaiting_approval_since,
        Some(t("2025-10-07T11:00:00Z"))
    );
    assert_eq!(runs(&h).len(), 1);
    h.assert_idempotent();
}

#[test]
fn a_restart_by_a_new_snapshot_supersedes_the_old_run() {
    let mut h = Harness::new(gated("1.0.0"));
    h.settle();
    h.commit_content(gated("2.0.0"), 20);
    h.settle_at(t("2025-10-07T10:02:00Z"));
    let runs = runs(&h);
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].outcome, RunOutcome::Superseded);
    assert_eq!(runs[0].ended_at, Some(t("2025-10-07T10:02:00Z")));
    assert_eq!(runs[0].stages.len(), 1, "the old run kept what it reached");
    assert_eq!(runs[1].snapshot_index, 2);
    assert_eq!(runs[1].outcome, RunOutcome::Running);
    assert_eq!(runs[1].started_at, t("2025-10-07T10:02:00Z"));
    h.assert_idempotent();
}

#[test]
fn a_completed_run_stays_completed_when_the_next_one_starts() {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("dev", None), stage("prod", None)],
    ));
    h.settle();
    h.commit_content(
        promotion_with(
            profile_spec("2.0.0"),
            vec![stage("dev", None), stage("prod", None)],
        ),
        20,
    );
    h.later(Duration::minutes(1));
    let runs = runs(&h);
    assert_eq!(runs[0].outcome, RunOutcome::Completed);
    assert_eq!(runs[0].ended_at, Some(t0()));
    assert_eq!(runs[1].outcome, RunOutcome::Completed);
}

#[test]
fn a_failure_with_rollback_records_the_failed_stage_and_the_restores() {
    let three = |chart: &str| {
        promotion_with(
            profile_spec(chart),
            vec![stage("s1", None), stage("s2", None), stage("s3", None)],
        )
    };
    let mut h = Harness::new(three("1.0.0"));
    h.world.policy = Some(policy(json!({"maxFailures": 0, "onFailure": "Rollback"})));
    h.settle();
    h.commit_content(three("9.9.9"), 20);
    h.world.failing_clusters.insert("s2-2".into());
    h.settle_at(t("2025-10-07T10:10:00Z"));
    let failed = &runs(&h)[1];
    assert_eq!(failed.outcome, RunOutcome::Failed, "still rolling back");
    assert_eq!(failed.ended_at, None);
    assert_eq!(failed.stages[1].failed_at, Some(t("2025-10-07T10:10:00Z")));
    h.world.failing_clusters.clear();
    h.settle_at(t("2025-10-07T10:12:00Z"));
    let runs = runs(&h);
    assert_eq!(runs[0].outcome, RunOutcome::Completed);
    let failed = &runs[1];
    assert_eq!(failed.outcome, RunOutcome::RolledBack);
    assert_eq!(failed.ended_at, Some(t("2025-10-07T10:12:00Z")));
    let s1 = &failed.stages[0];
    let s2 = &failed.stages[1];
    assert_eq!(
        (s2.restored_at, s2.restored_to),
        (Some(t("2025-10-07T10:12:00Z")), Some(1))
    );
    assert_eq!(
        (s1.restored_at, s1.restored_to),
        (Some(t("2025-10-07T10:12:00Z")), Some(1))
    );
    assert_eq!(s1.failed_at, None);
    assert_eq!(failed.stages.len(), 2, "s3 never got #2");
    h.assert_idempotent();

    // Reverting to #1's content starts a rollback run.
    h.commit_content(three("1.0.0"), 30);
    h.settle_at(t("2025-10-07T10:20:00Z"));
    let runs = &h.status().runs;
    assert_eq!(runs.len(), 3);
    assert_eq!(
        runs[1].outcome,
        RunOutcome::RolledBack,
        "a finished run is not superseded"
    );
    assert_eq!((runs[2].snapshot_index, runs[2].rollback_of), (3, Some(1)));
}

#[test]
fn a_halted_run_ends_failed_at_its_failure() {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    h.world.policy = Some(policy(json!({"maxFailures": 0, "onFailure": "Halt"})));
    h.world.failing_clusters.insert("s2-1".into());
    h.settle();
    let run = &runs(&h)[0];
    assert_eq!(run.outcome, RunOutcome::Failed);
    assert_eq!(run.ended_at, Some(t0()));
    assert_eq!(run.stages[1].failed_at, Some(t0()));
}

/// 50 stages (without clusters, so that a run takes one step): the largest pipeline the status
/// must stay small for.
fn fifty_stages(chart: &str) -> tollgate_model::ClusterPromotion {
    let stages = (1..=50).map(|i| stage(&format!("x{i}"), None)).collect();
    promotion_with(profile_spec(chart), stages)
}

#[test]
fn the_history_is_bounded_in_runs_and_in_size() {
    let mut h = Harness::new(fifty_stages("1.0.0"));
    h.settle();
    for n in 2..=(RUNS_KEPT as u64 + 3) {
        h.commit_content(fifty_stages(&format!("{n}.0.0")), 10 * n);
        h.later(Duration::minutes(1));
    }
    let status = h.status();
    let records: usize = status.runs.iter().map(|r| r.stages.len()).sum();
    assert!(
        records <= STAGE_RECORDS_KEPT,
        "{records} stage records kept"
    );
    assert_eq!(status.runs.len(), STAGE_RECORDS_KEPT / 50);
    assert_eq!(
        status.runs.last().map(|r| r.snapshot_index),
        Some(RUNS_KEPT as u64 + 3)
    );
    let bytes = serde_json::to_vec(status).unwrap().len();
    assert!(bytes < 100_000, "the whole status is {bytes} bytes");
    let history = serde_json::to_vec(&status.runs).unwrap().len();
    assert!(history < 40_000, "the run history is {history} bytes");
}

#[test]
fn a_small_pipeline_keeps_ten_runs() {
    let two = |chart: &str| promotion_with(profile_spec(chart), vec![stage("dev", None)]);
    let mut h = Harness::new(two("1.0.0"));
    h.settle();
    for n in 2..=15 {
        h.commit_content(two(&format!("{n}.0.0")), 10 * n);
        h.later(Duration::minutes(1));
    }
    let indexes: Vec<u64> = runs(&h).iter().map(|r| r.snapshot_index).collect();
    assert_eq!(indexes, (6..=15).collect::<Vec<_>>());
}

/// A status written before the history existed (an upgrade) gets its current run recorded from
/// the stages it shows, with their own times, not the upgrade's.
#[test]
fn an_upgrade_records_the_running_run_from_its_stages() {
    let mut h = Harness::new(gated("1.0.0"));
    h.settle();
    let recorded = h.status().runs.clone();
    if let Some(status) = h.world.status.as_mut() {
        status.runs = tollgate_engine::RunHistory::default();
    }
    h.later(Duration::minutes(1));
    assert_eq!(h.status().runs, recorded);
    assert_eq!(h.status().runs[0].started_at, t0());
}

/// The history is handed on, not copied, by a step that changes no run: at ten runs a copy per
/// step was 60 % of a steady-state step's time.
#[test]
fn a_step_that_changes_no_run_shares_the_history() {
    let one = |chart: &str| promotion_with(profile_spec(chart), vec![stage("dev", None)]);
    let mut h = Harness::new(one("1.0.0"));
    h.settle();
    for n in 2..=12 {
        h.commit_content(one(&format!("{n}.0.0")), 10 * n);
        h.later(Duration::minutes(1));
    }
    let again = h.world.evaluate(h.desired(), &h.approvals);
    assert!(again.status.runs.is_shared_with(&h.status().runs));
    assert_eq!(again.status.runs.len(), RUNS_KEPT);
}
