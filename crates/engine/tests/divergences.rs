//! One test per deliberate divergence from upstream (docs/architecture.md#design-decisions). Each would fail under
//! upstream's behaviour, as noted on it.

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::observed::FeatureSummary;
use tollgate_engine::testing;
use tollgate_engine::{Action, Desired, Phase};
use tollgate_manifest::model::Trigger;
use tollgate_manifest::snapshot::ApprovalKind;

fn set_approved(h: &mut Harness, stage: &str) {
    h.edit_triggers(|p| {
        for s in &mut p.spec.stages {
            if s.name == stage
                && let Some(Trigger::Manual(m)) = &mut s.trigger
            {
                m.approved = Some(true);
            }
        }
    });
}

fn manual_pipeline() -> Harness {
    Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage("s1", None),
            stage("s2", Some(json!({"manual": {}}))),
            stage("s3", None),
        ],
    ))
}

/// Upstream writes the new hashes before applying stage 1 (Q1): a failed apply is then never
/// retried. Here nothing is persisted unless the apply succeeded, and the next step re-applies.
#[test]
fn d1_failed_restart_apply_keeps_old_hashes_and_is_retried() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    h.settle();
    let old_hash = h.status().profile_spec_hash.clone();
    h.commit_content(
        promotion_with(
            profile_spec("3.7.0"),
            vec![stage("s1", None), stage("s2", None)],
        ),
        50,
    );
    let failed = h.step_failing();
    assert_eq!(failed.actions.len(), 1);
    // Not persisted: the stored status still has the old run.
    assert_eq!(h.status().profile_spec_hash, old_hash);
    let retry = h.step();
    assert_eq!(retry.actions, failed.actions);
    assert_eq!(
        h.status().profile_spec_hash.as_deref(),
        Some(h.snapshot.hashes.profile_spec.as_str())
    );
}

/// Upstream honours `approved: true` set before the run started (it is still in the spec).
#[test]
fn d2_an_approval_committed_before_the_run_does_not_count() {
    let mut h = manual_pipeline();
    set_approved(&mut h, "s2");
    // The approving commit (seq 5) predates the snapshot's commit (seq 10).
    h.approvals.push(testing::approval(
        "s2",
        ApprovalKind::Field,
        testing::commit(5),
    ));
    h.settle();
    assert!(!h.has_profile(&profile_name("s3")));
    assert_eq!(h.status().phase, Phase::Waiting);
}

/// An annotation names one snapshot; a stale one does not approve the current snapshot.
#[test]
fn d2_annotation_approves_exactly_the_named_snapshot() {
    let mut h = manual_pipeline();
    let key = "approve.tollgate.dev/s2";
    h.edit_triggers(|p| {
        p.metadata
            .annotations
            .insert(key.into(), "0123456789abcdef".into());
    });
    h.approvals.push(testing::approval(
        "s2",
        ApprovalKind::Annotation {
            value: "0123456789abcdef".into(),
        },
        testing::commit(11),
    ));
    h.settle();
    assert!(
        !h.has_profile(&profile_name("s3")),
        "a stale snapshot id approved"
    );

    // Too short a prefix does not count either.
    let short = h.snapshot.hashes.snapshot_id[..8].to_string();
    h.edit_triggers(|p| {
        p.metadata.annotations.insert(key.into(), short.clone());
    });
    h.approvals.push(testing::approval(
        "s2",
        ApprovalKind::Annotation {
            value: short.clone(),
        },
        testing::commit(12),
    ));
    h.settle();
    assert!(!h.has_profile(&profile_name("s3")));

    let id = h.snapshot.hashes.snapshot_id[..12].to_string();
    h.edit_triggers(|p| {
        p.metadata.annotations.insert(key.into(), id.clone());
    });
    h.approvals.push(testing::approval(
        "s2",
        ApprovalKind::Annotation { value: id.clone() },
        testing::commit(13),
    ));
    h.settle();
    assert!(h.has_profile(&profile_name("s3")));
    let approver = h.stage_status("s2").approver.clone().unwrap();
    assert_eq!(approver.kind.as_str(), "Annotation");
    assert_eq!(
        approver.author.as_deref(),
        Some("author13 <author13@example.com>")
    );
}

/// An approval used by one run is never used by another, even when the content comes back
/// (rollback) and the annotation names the same snapshot id.
#[test]
fn d2_an_approval_is_not_reused_by_the_next_run() {
    let mut h = manual_pipeline();
    let id = h.snapshot.hashes.snapshot_id[..16].to_string();
    let original = (*h.snapshot.promotion).clone();
    h.edit_triggers(|p| {
        p.metadata
            .annotations
            .insert("approve.tollgate.dev/s2".into(), id.clone());
    });
    h.approvals.push(testing::approval(
        "s2",
        ApprovalKind::Annotation { value: id.clone() },
        testing::commit(11),
    ));
    h.settle();
    assert_eq!(h.status().phase, Phase::Completed);
    let with_annotation = (*h.snapshot.promotion).clone();

    // Another version, then a revert to the same content (same snapshot id).
    h.commit_content(
        promotion_with(
            profile_spec("9.9.9"),
            vec![
                stage("s1", None),
                stage("s2", Some(json!({"manual": {}}))),
                stage("s3", None),
            ],
        ),
        20,
    );
    h.settle();
    let _ = original;
    h.commit_content(with_annotation, 30);
    h.settle();
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s2"));
    assert_eq!(h.status().phase, Phase::Waiting);
    assert_eq!(h.status().rollback_of, Some(1));
}

/// Upstream's manual mode does not re-check health (Q3): a stage whose clusters fail after
/// provisioning would pass its gate as soon as it is approved.
#[test]
fn d3_manual_gate_waits_for_failing_health() {
    let mut h = manual_pipeline();
    h.settle();
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s2"));
    // s2's clusters start failing (e.g. a pod crash-loops after the deploy).
    for summary in &mut h.world.observed.summaries {
        if *summary.profile_name == *profile_name("s2") {
            summary.features[0].status = "Failed".into();
            summary.features[0].failure_message = Some("health check failed".into());
        }
    }
    set_approved(&mut h, "s2");
    h.approvals.push(testing::approval(
        "s2",
        ApprovalKind::Field,
        testing::commit(11),
    ));
    h.step();
    assert!(!h.has_profile(&profile_name("s3")));
    let s2 = h.stage_status("s2");
    assert!(
        s2.current_status_description
            .as_deref()
            .unwrap()
            .starts_with("Awaiting Health Checks to Pass")
    );
    // The approval is not consumed by a gate that did not open.
    assert!(h.status().consumed_approvals.is_empty());
    // Healthy again → the same approval opens the gate.
    h.world.observed.summaries.clear();
    h.world.advance(Duration::seconds(1));
    h.world.sveltos();
    h.step();
    assert!(h.has_profile(&profile_name("s3")));
}

/// Upstream compares only helmCharts/policyRefs/kustomizationRefs and reads any Provisioned
/// status (Q4): a status from before the apply, or a summary with an old tier, counts as done.
#[test]
fn d4_stale_provisioned_status_and_old_spec_do_not_complete() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    h.settle();
    let stages = vec![stage("s1", None), stage("s2", None)];

    // New chart version; the summaries still show the old status written before the apply.
    h.world.advance(Duration::minutes(1));
    h.commit_content(promotion_with(profile_spec("3.7.0"), stages.clone()), 60);
    h.step();
    for summary in &mut h.world.observed.summaries {
        if *summary.profile_name == *profile_name("s1") {
            // Spec propagated, but the feature status is the old one.
            summary.spec = h.world.observed.profiles[&profile_name("s1")].spec.clone();
        }
    }
    let out = h.step();
    assert!(out.actions.is_empty());
    assert!(h.stage_status("s1").provisioned_at.is_none());
    assert!(
        h.stage_status("s1")
            .failure_message
            .as_deref()
            .unwrap()
            .ends_with("is not yet provisioned.")
    );

    // A tier-only change: helmCharts equal, but the summaries carry the old tier.
    let mut h = Harness::new(promotion_with(profile_spec("3.6.2"), stages.clone()));
    h.settle();
    let mut tier = profile_spec("3.6.2");
    tier["tier"] = json!(50);
    h.commit_content(promotion_with(tier, stages), 70);
    h.step();
    h.step();
    assert!(h.stage_status("s1").provisioned_at.is_none());
    assert!(
        h.stage_status("s1")
            .failure_message
            .as_deref()
            .unwrap()
            .contains("tier differs")
    );
    // Fresh, matching statuses complete it.
    h.world.advance(Duration::seconds(1));
    h.world.sveltos();
    h.step();
    assert!(h.stage_status("s1").provisioned_at.is_some());
}

/// Kubernetes times are whole seconds, and Sveltos writes a summary's new spec before its new
/// status: a re-apply in the same second as the last deploy finds the spec propagated and the
/// old `Provisioned` status stamped with the apply's own second. Its feature `hash` is the old
/// one, so it is not about the apply (this completed the stage, and a failing release passed).
#[test]
fn d4_no_stage_completes_on_a_status_from_before_its_apply_in_the_same_second() {
    let stages = vec![stage("s1", None), stage("s2", None)];
    let mut h = Harness::new(promotion_with(profile_spec("3.6.2"), stages.clone()));
    h.settle();
    // The same second: the new content is applied while s1's summaries say 3.6.2 was
    // provisioned in it.
    h.commit_content(promotion_with(profile_spec("3.7.0"), stages), 60);
    h.step();
    let applied = h.world.observed.profiles[&profile_name("s1")].spec.clone();
    for summary in &mut h.world.observed.summaries {
        if *summary.profile_name == *profile_name("s1") {
            summary.spec = applied.clone();
            assert_eq!(summary.features[0].last_applied_time, Some(h.world.now));
        }
    }
    h.step();
    assert!(
        h.stage_status("s1").provisioned_at.is_none(),
        "a status from before the apply completed s1"
    );
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s1"));
    // Sveltos deploys 3.7.0 within that same second: the new hash counts.
    for summary in &mut h.world.observed.summaries {
        if *summary.profile_name == *profile_name("s1") {
            summary.features[0].hash = Some("Helm-3.7.0".into());
        }
    }
    h.step();
    assert!(h.stage_status("s1").provisioned_at.is_some());
}

/// Upstream completes a stage with zero ClusterSummaries even while matching clusters exist.
#[test]
fn d4_zero_summaries_wait_while_ready_clusters_match() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    h.step();
    h.step();
    assert!(!h.has_profile(&profile_name("s2")));
    assert_eq!(
        h.stage_status("s1").failure_message.as_deref(),
        Some("waiting for Sveltos to create ClusterSummaries for 2 matching clusters")
    );
    // A summary with a Provisioned feature but missing another cluster's summary still waits.
    h.world.sveltos();
    h.world.observed.summaries.pop();
    h.step();
    assert!(!h.has_profile(&profile_name("s2")));
    assert_eq!(h.stage_status("s1").counts.provisioned, 1);
    assert_eq!(h.stage_status("s1").counts.matching_clusters, 2);
}

/// Upstream sorts lists before hashing (Q5): reordering charts changes nothing. Here it restarts
/// the run and the new order reaches the profile.
#[test]
fn d5_reordering_charts_is_a_change_that_reaches_the_profile() {
    let mut two = profile_spec("3.6.2");
    let mut other = two["helmCharts"][0].clone();
    other["releaseName"] = json!("other");
    two["helmCharts"].as_array_mut().unwrap().push(other);
    let stages = vec![stage("s1", None)];
    let mut h = Harness::new(promotion_with(two.clone(), stages.clone()));
    h.settle();
    two["helmCharts"].as_array_mut().unwrap().reverse();
    h.commit_content(promotion_with(two, stages), 80);
    let out = h.step();
    assert_eq!(out.actions.len(), 1);
    assert_eq!(
        h.profile_spec_of(&profile_name("s1"))["helmCharts"][0]["releaseName"],
        "other"
    );
}

/// Upstream polls every 2 minutes; tollgate asks to be woken exactly when a delay ends or a
/// window opens, and advances at that instant.
#[test]
fn d6_wake_at_is_the_exact_delay_end_and_window_opening() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "90s"}}))),
            stage(
                "s2",
                Some(
                    json!({"auto": {"promotionWindow": {"from": "0 20 * * *", "to": "0 22 * * *"}}}),
                ),
            ),
            stage("s3", None),
        ],
    ));
    let out = h.settle();
    let end = h.stage_status("s1").provisioned_at.unwrap() + Duration::seconds(90);
    assert_eq!(out.wake_at, Some(end));
    assert_eq!(h.status().next_wake_up, Some(end));
    let at_end = h.settle_at(end);
    assert!(h.has_profile(&profile_name("s2")));
    assert_eq!(at_end.wake_at, Some(t("2025-10-07T20:00:00Z")));
    h.settle_at(t("2025-10-07T20:00:00Z"));
    assert!(h.has_profile(&profile_name("s3")));
}

/// Upstream sets an ownerReference to the ClusterPromotion: deleting the state object garbage
/// collects the profiles and withdraws add-ons. tollgate's profiles carry none.
#[test]
fn d7_generated_profiles_carry_no_owner_references() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None)],
    ));
    let out = h.step();
    for action in &out.actions {
        if let Action::ApplyProfile { object, .. } = action {
            assert!(object["metadata"].get("ownerReferences").is_none());
        }
    }
}

/// Upstream's cron parser has no time zones (a `CRON_TZ=` prefix is a parse error that stalls
/// the stage); tollgate evaluates the window in the given zone.
#[test]
fn d8_windows_with_a_time_zone() {
    let window = json!({"auto": {"promotionWindow": {"from": "CRON_TZ=Europe/Paris 0 20 * * *", "to": "CRON_TZ=Europe/Paris 0 22 * * *"}}});
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", Some(window)), stage("s2", None)],
    ));
    let out = h.settle();
    // 20:00 in Paris on 2025-10-07 (CEST, UTC+2) is 18:00 UTC.
    assert_eq!(out.wake_at, Some(t("2025-10-07T18:00:00Z")));
    assert_eq!(out.status.phase, Phase::Waiting);
}

/// Upstream's profiles are garbage-collected through their ownerReference even with
/// `preserveClusterProfilesOnDelete: true` (Q7).
#[test]
fn d9_preserve_on_delete_keeps_the_profiles() {
    let mut promotion = promotion_with(profile_spec("3.6.2"), vec![stage("s1", None)]);
    promotion.spec.preserve_cluster_profiles_on_delete = true;
    let mut h = Harness::new(promotion);
    h.settle();
    let last = h.snapshot.clone();
    let out = h.world.step(
        Desired::Removed {
            promotion: P,
            last: Some(&last),
        },
        &[],
    );
    assert!(out.actions.is_empty());
    assert!(h.has_profile(&profile_name("s1")));
    // Kept as applied, tollgate's labels and spec-hash annotation included.
    let kept = h.world.profile(&profile_name("s1")).unwrap();
    assert!(kept.is_owned_by(P));
    assert!(kept.applied_spec_hash().is_some());
}

/// Upstream says "Delayed: Waiting for Time Window" for a plain delay (Q11).
#[test]
fn d10_the_delay_message_says_it_is_a_delay_with_its_end() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "5m"}}))),
            stage("s2", None),
        ],
    ));
    h.step();
    h.world.sveltos();
    h.step();
    assert_eq!(
        h.stage_status("s1").current_status_description.as_deref(),
        Some(
            "Delayed: waiting for the 5m0s delay to end at 2025-10-07T10:05:00Z (2025-10-07T10:00:00Z)"
        )
    );
    assert_eq!(
        h.stage_status("s1").waiting_reason.as_deref(),
        Some("delayed: waiting for the 5m0s delay to end at 2025-10-07T10:05:00Z")
    );
}

#[test]
fn feature_summary_helpers() {
    let f = FeatureSummary {
        feature_id: "Helm".into(),
        status: "FailedNonRetriable".into(),
        ..Default::default()
    };
    assert!(f.is_failed() && !f.is_provisioned());
}
