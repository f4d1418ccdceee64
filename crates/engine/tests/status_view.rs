//! What the status tells a reader (`tollgate status --watch`) beyond the current run's stages:
//! the stages the run has not reached with the snapshot they still run, and when a delay ends.

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::StageAhead;

fn ahead(name: &str, snapshot_index: Option<u64>) -> StageAhead {
    StageAhead {
        name: name.to_string(),
        snapshot_index,
        activity: tollgate_engine::activity::StageActivity::Pending,
        activity_since: None,
    }
}

#[test]
fn a_new_run_keeps_the_stages_it_has_not_reached_visible_with_their_older_snapshot() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.5.2"),
        vec![
            stage("s1", None),
            stage("s2", Some(json!({"manual": {}}))),
            stage("s3", None),
        ],
    ));
    // The first run: s3 has no profile yet.
    h.settle();
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s2"));
    assert_eq!(h.status().stages_ahead, vec![ahead("s3", None)]);

    // A new snapshot restarts at s1; s2 keeps running #1 until the run reaches it.
    let stages = h.snapshot.promotion.spec.stages.clone();
    let stages = stages
        .iter()
        .map(|s| serde_json::to_value(s).expect("stage"))
        .collect();
    h.commit_content(promotion_with(profile_spec("3.6.2"), stages), 20);
    h.step();
    assert_eq!(h.status().snapshot_index, Some(2));
    assert_eq!(
        h.status().stages_ahead,
        vec![ahead("s2", Some(1)), ahead("s3", None)]
    );
    h.assert_idempotent();

    // Once s2 is entered, only s3 is ahead.
    h.settle();
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s2"));
    assert_eq!(h.status().stages_ahead, vec![ahead("s3", None)]);
}

#[test]
fn a_completed_run_has_no_stage_ahead() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.5.2"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    h.settle();
    assert!(h.status().stages_ahead.is_empty(), "{:?}", h.status());
}

#[test]
fn a_delayed_stage_says_when_its_delay_ends() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "5m"}}))),
            stage("s2", None),
        ],
    ));
    h.settle();
    let s1 = h.stage_status("s1");
    let provisioned_at = s1.provisioned_at.expect("provisioned");
    assert_eq!(
        s1.delay_ends_at,
        Some(provisioned_at + Duration::minutes(5))
    );
    h.assert_idempotent();
    // Kept once the delay is over: it says when the soak ended.
    h.settle_at(provisioned_at + Duration::minutes(5));
    assert_eq!(
        h.stage_status("s1").delay_ends_at,
        Some(provisioned_at + Duration::minutes(5))
    );
}

#[test]
fn a_stage_without_delay_has_no_delay_end() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", Some(json!({"manual": {}}))), stage("s2", None)],
    ));
    h.settle();
    assert_eq!(h.stage_status("s1").delay_ends_at, None);
}
