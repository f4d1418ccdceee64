//! The acceptance scenarios (docs/architecture.md#acceptance-scenarios), adapted to tollgate's labels (and "no
//! ownerReference" where upstream sets one), driven with a fake clock.

mod common;

use chrono::Duration;
use common::*;
use serde_json::json;
use tollgate_engine::testing::{self, World};
use tollgate_engine::{Action, Desired, Phase};
use tollgate_manifest::model::Trigger;
use tollgate_manifest::parse::{Limits, parse_file};
use tollgate_manifest::snapshot::ApprovalKind;
use tollgate_render::{
    MANAGED_BY_LABEL, PROMOTION_LABEL, SNAPSHOT_COMMIT_ANNOTATION, SNAPSHOT_INDEX_ANNOTATION,
    STAGE_LABEL,
};

fn applied_names(actions: &[Action]) -> Vec<&str> {
    actions
        .iter()
        .filter(|a| matches!(a, Action::ApplyProfile { .. }))
        .map(Action::profile_name)
        .collect()
}

#[test]
fn s01_two_stages_without_triggers_roll_out_in_order() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None), stage("s2", None)],
    ));
    let first = h.step();
    assert_eq!(
        applied_names(&first.actions),
        vec![profile_name("s1").as_str()]
    );
    let Action::ApplyProfile { object, .. } = &first.actions[0] else {
        panic!("expected an apply");
    };
    assert!(object["metadata"].get("ownerReferences").is_none());
    let labels = &object["metadata"]["labels"];
    assert_eq!(labels[MANAGED_BY_LABEL], "tollgate");
    assert_eq!(labels[PROMOTION_LABEL], P);
    assert_eq!(labels[STAGE_LABEL], "s1");
    let annotations = &object["metadata"]["annotations"];
    assert_eq!(annotations[SNAPSHOT_INDEX_ANNOTATION], "1");
    assert_eq!(
        annotations[SNAPSHOT_COMMIT_ANNOTATION],
        h.snapshot.commit.sha.as_str()
    );
    let status = h.status();
    assert_eq!(status.stages.len(), 1);
    assert_eq!(status.current_stage_name.as_deref(), Some("s1"));
    assert!(!h.has_profile(&profile_name("s2")));

    // Sveltos provisions s1 → s2 is applied.
    h.world.sveltos();
    let next = h.step();
    assert_eq!(
        applied_names(&next.actions),
        vec![profile_name("s2").as_str()]
    );
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s2"));

    let done = h.settle();
    assert_eq!(done.status.phase, Phase::Completed);
    assert!(h.has_profile(&profile_name("s1")) && h.has_profile(&profile_name("s2")));
    assert_eq!(h.status().stages.len(), 2);
    for stage in &h.status().stages {
        assert!(stage.last_successful_applied_time.is_some());
    }
    // The first rollout ever is no restart.
    assert!(
        h.world
            .events
            .iter()
            .any(|e| e.note == "Provisioning stage s1")
    );
    assert!(!h.world.events.iter().any(|e| e.note.contains("(Restart)")));
    // s1 provisioned and s2 started in one step, the run Progressing throughout: no event for
    // the handoff (events on phase changes only: API economy); status says it.
    assert!(
        !h.world
            .events
            .iter()
            .any(|e| e.note.contains("provisioning stage s2")),
        "{:?}",
        h.world.events
    );
    assert!(
        h.world
            .events
            .iter()
            .any(|e| e.note == "Stage s2 provisioned")
    );
    h.assert_idempotent();
}

#[test]
fn s02_a_stage_matching_no_ready_cluster_completes_and_says_so() {
    let mut nobody = stage("s1", None);
    nobody["clusterSelector"] = json!({"matchLabels": {"env": "nowhere"}});
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![nobody, stage("s2", None)],
    ));
    // A matching cluster that is not ready does not count.
    h.world.add_cluster("unready", &[("env", "nowhere")]);
    if let Some(c) = std::sync::Arc::make_mut(&mut h.world.observed.clusters).last_mut() {
        c.ready = false;
    }
    h.settle();
    let s1 = h.stage_status("s1");
    let description = s1.current_status_description.as_deref().unwrap();
    assert!(
        h.world
            .events
            .iter()
            .any(|e| e.note == "Stage s1 provisioned; provisioning stage s2")
    );
    assert_eq!(s1.counts.matching_clusters, 0);
    // s1 went on to "Successfully provisioned"; its completion text was the upstream one.
    assert!(
        description.starts_with("Successfully provisioned"),
        "{description}"
    );
    assert!(h.has_profile(&profile_name("s2")));

    assert_eq!(
        s1.provisioned_message.as_deref(),
        Some(
            format!(
                "No matching clusters found for ClusterProfile {}. Deployment considered complete.",
                profile_name("s1")
            )
            .as_str()
        )
    );

    // With a gate after it, the upstream description is what the stage shows.
    let mut nobody = stage("s1", None);
    nobody["clusterSelector"] = json!({"matchLabels": {"env": "nowhere"}});
    nobody["trigger"] =
        json!({"auto": {"promotionWindow": {"from": "0 1 * * *", "to": "0 2 * * *"}}});
    let mut h = Harness::new(promotion_with(profile_spec("3.6.2"), vec![nobody]));
    let out = h.step();
    assert_eq!(out.actions.len(), 1);
    assert!(h.stage_status("s1").provisioned_at.is_some());
}

#[test]
fn s03_auto_delay_holds_the_next_stage_until_it_ends() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "5m"}}))),
            stage("s2", None),
        ],
    ));
    let out = h.settle();
    let s1 = h.stage_status("s1");
    let provisioned_at = s1.provisioned_at.unwrap();
    assert!(
        s1.current_status_description
            .as_deref()
            .unwrap()
            .starts_with("Delayed:")
    );
    assert_eq!(out.wake_at, Some(provisioned_at + Duration::minutes(5)));
    assert!(!h.has_profile(&profile_name("s2")));

    h.later(Duration::minutes(4) + Duration::seconds(59));
    assert!(!h.has_profile(&profile_name("s2")));
    h.settle_at(provisioned_at + Duration::minutes(5));
    assert!(h.has_profile(&profile_name("s2")));
    h.assert_idempotent();
}

#[test]
fn s04_manual_gate_waits_for_approval_and_consumes_it() {
    let manual = json!({"manual": {}});
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", Some(manual)), stage("s2", None)],
    ));
    h.settle();
    let s1 = h.stage_status("s1");
    assert!(
        s1.current_status_description
            .as_deref()
            .unwrap()
            .starts_with("Paused: Awaiting Manual Approval")
    );
    assert_eq!(h.status().phase, Phase::Waiting);
    assert!(!h.has_profile(&profile_name("s2")));

    // A commit sets `approved: true` (a trigger edit: same snapshot).
    h.edit_triggers(|p| set_approved(p, "s1", true));
    h.approvals.push(testing::approval(
        "s1",
        ApprovalKind::Field,
        testing::commit(11),
    ));
    h.settle();
    assert!(h.has_profile(&profile_name("s2")));
    let s1 = h.stage_status("s1");
    assert_eq!(
        s1.approver.as_ref().unwrap().sha.as_deref(),
        Some(testing::commit(11).sha.as_str())
    );
    // automaticReset (default): tollgate does not edit git; the approval is consumed instead.
    assert_eq!(h.status().consumed_approvals.len(), 1);
    assert_eq!(
        h.status().consumed_approvals[0].commit,
        testing::commit(11).sha
    );
    h.assert_idempotent();

    // The next run (a new snapshot) needs a new approval even though `approved: true` remains.
    let mut next = (*h.snapshot.promotion).clone();
    next.spec.profile_spec.insert("tier", json!(90));
    h.commit_content(next, 20);
    h.settle();
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s1"));
    assert!(h.stage_status("s1").succeeded_at.is_none());
}

#[test]
fn s04b_manual_gate_without_automatic_reset_keeps_approving() {
    let manual = json!({"manual": {"approved": true, "automaticReset": false}});
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", Some(manual)), stage("s2", None)],
    ));
    h.approvals.push(testing::approval(
        "s1",
        ApprovalKind::Field,
        testing::commit(5),
    ));
    h.settle();
    assert!(h.has_profile(&profile_name("s2")));
    assert!(h.status().consumed_approvals.is_empty());
    let mut next = (*h.snapshot.promotion).clone();
    next.spec.profile_spec.insert("tier", json!(90));
    h.commit_content(next, 20);
    let out = h.settle();
    assert_eq!(out.status.phase, Phase::Completed);
}

fn set_approved(p: &mut tollgate_manifest::model::ClusterPromotion, stage: &str, approved: bool) {
    for s in &mut p.spec.stages {
        if s.name == stage
            && let Some(Trigger::Manual(m)) = &mut s.trigger
        {
            m.approved = Some(approved);
        }
    }
}

#[test]
fn s05_profile_spec_change_mid_rollout_restarts_progressively() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage("s1", None),
            stage("s2", None),
            stage("s3", Some(json!({"manual": {}}))),
            stage("s4", None),
        ],
    ));
    h.settle();
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s3"));
    let old_s2 = h.profile_spec_of(&profile_name("s2"));

    h.commit_content(
        promotion_with(
            profile_spec("3.7.0"),
            h.snapshot
                .promotion
                .spec
                .stages
                .iter()
                .map(|s| serde_json::to_value(s).unwrap())
                .collect(),
        ),
        30,
    );
    let restart = h.step();
    assert_eq!(
        applied_names(&restart.actions),
        vec![profile_name("s1").as_str()]
    );
    assert_eq!(h.status().stages.len(), 1);
    assert_eq!(h.status().current_stage_name.as_deref(), Some("s1"));
    assert_eq!(
        h.profile_spec_of(&profile_name("s1"))["helmCharts"][0]["chartVersion"],
        "3.7.0"
    );
    assert_eq!(h.profile_spec_of(&profile_name("s2")), old_s2);
    assert!(
        restart
            .events
            .iter()
            .any(|e| e.note == "Provisioning stage s1 (Restart)")
    );
    assert_eq!(
        h.stage_status("s1").current_status_description.as_deref(),
        Some("Clusters are being provisioned (2025-10-07T10:00:00Z)")
    );
    // s2 gets the new spec only once the pipeline reaches it.
    h.world.sveltos();
    h.step();
    assert_eq!(
        h.profile_spec_of(&profile_name("s2"))["helmCharts"][0]["chartVersion"],
        "3.7.0"
    );
    assert_eq!(
        h.profile_spec_of(&profile_name("s3"))["helmCharts"][0]["chartVersion"],
        "3.6.2"
    );
}

#[test]
fn s06_trigger_only_edit_does_not_restart() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage("s1", Some(json!({"auto": {"delay": "1h"}}))),
            stage("s2", None),
        ],
    ));
    h.settle();
    let before = h.status().clone();
    h.edit_triggers(|p| {
        p.spec.stages[0].trigger = Some(Trigger::Auto(tollgate_manifest::model::AutoTrigger {
            delay: Some(tollgate_manifest::model::GoDuration::parse("2h").unwrap()),
            ..Default::default()
        }));
    });
    let out = h.step();
    assert!(out.actions.is_empty());
    assert_eq!(out.status.profile_spec_hash, before.profile_spec_hash);
    assert_eq!(
        out.status.stages[0].provisioned_at,
        before.stages[0].provisioned_at
    );
    assert!(!out.events.iter().any(|e| e.note.contains("Restart")));
    // The new delay applies at once.
    assert_eq!(
        out.wake_at,
        Some(before.stages[0].provisioned_at.unwrap() + Duration::hours(2))
    );
}

#[test]
fn s07_removed_stage_profile_is_deleted_and_the_pipeline_restarts() {
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", None), stage("s2", None), stage("s3", None)],
    ));
    h.settle();
    assert!(h.has_profile(&profile_name("s3")));
    h.commit_content(
        promotion_with(
            profile_spec("3.6.2"),
            vec![stage("s1", None), stage("s2", None)],
        ),
        40,
    );
    let out = h.step();
    assert!(out.actions.contains(&Action::DeleteProfile {
        name: profile_name("s3")
    }));
    assert!(
        out.events
            .iter()
            .any(|e| e.note == "Provisioning stage s1 (Restart)")
    );
    assert!(!h.has_profile(&profile_name("s3")));
    // The run restarted at s1. Its profile and s2's already carry this content and their
    // summaries are Provisioned, so both pass again at once (no trigger to wait for).
    let status = h.status();
    assert_eq!(status.stages[0].name, "s1");
    assert_eq!(
        status.stages[0].last_update_reconciled_time,
        Some(h.world.now)
    );
    assert_eq!(status.snapshot_index, Some(2));
    assert!(status.stage("s3").is_none());
    h.assert_idempotent();
}

#[test]
fn s08_post_delay_health_checks_are_appended_and_gate_the_advance() {
    let check = json!({"name": "job-done", "featureID": "Helm", "group": "batch", "version": "v1", "kind": "Job"});
    let mut spec = profile_spec("3.6.2");
    spec["validateHealths"] =
        json!([{"name": "deployment-health", "featureID": "Helm", "kind": "Deployment"}]);
    let mut h = Harness::new(promotion_with(
        spec,
        vec![
            stage(
                "s1",
                Some(json!({"auto": {"delay": "2m", "postDelayHealthChecks": [check]}})),
            ),
            stage("s2", None),
        ],
    ));
    h.settle();
    // Delay served → the checks are appended with a re-apply.
    h.world.advance(Duration::minutes(2));
    let out = h.step();
    assert_eq!(
        applied_names(&out.actions),
        vec![profile_name("s1").as_str()]
    );
    let spec = h.profile_spec_of(&profile_name("s1"));
    let names: Vec<&str> = spec["validateHealths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["deployment-health", "job-done"]);
    assert!(
        h.stage_status("s1")
            .current_status_description
            .as_deref()
            .unwrap()
            .starts_with("Running Post-Promotion Health Checks")
    );
    // Sveltos has not redeployed yet: the old Provisioned status is stale → wait.
    h.world.advance(Duration::seconds(1));
    let waiting = h.step();
    assert!(waiting.actions.is_empty());
    assert!(!h.has_profile(&profile_name("s2")));
    // A failing check: Sveltos reports Failed → still waiting.
    h.world.failing_clusters.insert("s1-1".into());
    h.world.sveltos();
    h.step();
    assert!(!h.has_profile(&profile_name("s2")));
    assert!(
        h.stage_status("s1")
            .current_status_description
            .as_deref()
            .unwrap()
            .starts_with("Awaiting Health Checks to Pass")
    );
    assert_eq!(h.stage_status("s1").counts.failed, 1);
    // The check passes on redeploy → advance.
    h.world.failing_clusters.clear();
    h.world.observed.summaries.clear();
    h.later(Duration::seconds(1));
    assert!(h.has_profile(&profile_name("s2")));
}

#[test]
fn s09_pre_verification_profile_lives_between_delay_end_and_advance() {
    let pre = json!([{"kind": "ConfigMap", "namespace": "default", "name": "validation-job"}]);
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![
            stage(
                "s1",
                Some(json!({"manual": {"delay": "2m", "preHealthCheckDeployment": pre}})),
            ),
            stage("s2", None),
        ],
    ));
    h.settle();
    let pre_name = format!("preverification-{P}-s1");
    assert!(!h.has_profile(&pre_name));
    h.later(Duration::minutes(2));
    let pre_profile = h.world.profile(&pre_name).unwrap();
    assert!(pre_profile.verification);
    assert_eq!(
        pre_profile.spec.value()["policyRefs"][0]["name"],
        "validation-job"
    );
    assert!(!h.has_profile(&profile_name("s2")));

    h.edit_triggers(|p| set_approved(p, "s1", true));
    h.approvals.push(testing::approval(
        "s1",
        ApprovalKind::Field,
        testing::commit(12),
    ));
    h.settle();
    assert!(h.has_profile(&profile_name("s2")));
    assert!(!h.has_profile(&pre_name));
    h.assert_idempotent();
}

#[test]
fn s10_promotion_window_vectors() {
    // (from, to, now, open?, next)
    let vectors = [
        (
            "0 10 * * *",
            "0 11 * * *",
            "2025-10-07T10:05:00Z",
            true,
            None,
        ),
        (
            "0 20 * * *",
            "0 22 * * *",
            "2025-10-07T19:30:00Z",
            false,
            Some("2025-10-07T20:00:00Z"),
        ),
        (
            "0 10 * * 6",
            "0 22 * * 0",
            "2025-10-07T17:30:00Z",
            false,
            Some("2025-10-11T10:00:00Z"),
        ),
    ];
    for (from, to, now, open, next) in vectors {
        let window = json!({"auto": {"promotionWindow": {"from": from, "to": to}}});
        let mut h = Harness::new(promotion_with(
            profile_spec("3.6.2"),
            vec![stage("s1", Some(window)), stage("s2", None)],
        ));
        h.world.now = t(now);
        let out = h.settle();
        assert_eq!(
            h.has_profile(&profile_name("s2")),
            open,
            "{from} / {to} at {now}"
        );
        if let Some(next) = next {
            assert_eq!(out.wake_at, Some(t(next)));
            let description = h
                .stage_status("s1")
                .current_status_description
                .clone()
                .unwrap();
            assert_eq!(
                description,
                format!("Window Closed: Waiting for Next Schedule ({next}). ({now})")
            );
            // Woken at the opening instant, the stage advances.
            h.settle_at(t(next));
            assert!(h.has_profile(&profile_name("s2")));
        }
    }
}

#[test]
fn s11_removal_deletes_profiles_unless_preserved() {
    for preserve in [false, true] {
        let mut promotion = promotion_with(
            profile_spec("3.6.2"),
            vec![stage("s1", None), stage("s2", None)],
        );
        promotion.spec.preserve_cluster_profiles_on_delete = preserve;
        let mut h = Harness::new(promotion);
        h.settle();
        assert!(h.has_profile(&profile_name("s1")) && h.has_profile(&profile_name("s2")));
        let last = h.snapshot.clone();
        let removed = Desired::Removed {
            promotion: P,
            last: Some(&last),
        };
        let out = h.world.step(removed, &[]);
        if preserve {
            assert!(out.actions.is_empty());
            assert!(h.has_profile(&profile_name("s1")) && h.has_profile(&profile_name("s2")));
            assert_eq!(out.status.phase, Phase::Removed);
            assert!(out.status.message.unwrap().contains("kept 2"));
        } else {
            assert_eq!(out.actions.len(), 2);
            assert_eq!(out.status.phase, Phase::Removing);
            assert!(!h.has_profile(&profile_name("s1")) && !h.has_profile(&profile_name("s2")));
            let again = h.world.step(removed, &[]);
            assert!(again.actions.is_empty());
            assert_eq!(again.status.phase, Phase::Removed);
        }
    }
}

#[test]
fn s12_invalid_promotions_never_reach_the_engine_and_a_bad_window_fails_the_stage() {
    // The CRD rules are enforced by the spec crate's parser: such a file never becomes a snapshot.
    let head = "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata: {name: p}\nspec:\n";
    let rejected = [
        "  stages:\n  - name: a\n    clusterSelector: {matchLabels: {env: a}}\n    trigger: {auto: {}, manual: {}}\n",
        "  stages:\n  - name: a\n    clusterSelector: {matchLabels: {env: a}}\n    trigger: {}\n",
        "  stages: []\n",
        "  stages:\n  - name: a\n    clusterSelector: {matchLabels: {env: a}}\n  - name: a\n    clusterSelector: {matchLabels: {env: b}}\n",
        "  stages:\n  - name: a\n    clusterSelector: {matchLabels: {env: a}}\n    trigger: {auto: {promotionWindow: {from: \"\", to: \"0 11 * * *\"}}}\n",
    ];
    for body in rejected {
        let text = format!("{head}{body}");
        let parsed = parse_file("p.yaml", text.as_bytes(), &Limits::default());
        assert!(parsed.has_errors(), "accepted:\n{text}");
        assert!(parsed.promotions.iter().all(|p| p.promotion.is_none()));
    }
    let valid =
        format!("{head}  stages:\n  - name: a\n    clusterSelector: {{matchLabels: {{env: a}}}}\n");
    assert!(!parse_file("p.yaml", valid.as_bytes(), &Limits::default()).has_errors());
    let neither: Result<Trigger, _> = serde_json::from_value(json!({}));
    assert!(neither.is_err());
    // A window that slipped through (empty `from`) stops the stage with a clear failure.
    let window = json!({"auto": {"promotionWindow": {"from": "", "to": "0 11 * * *"}}});
    let mut h = Harness::new(promotion_with(
        profile_spec("3.6.2"),
        vec![stage("s1", Some(window)), stage("s2", None)],
    ));
    let out = h.settle();
    assert_eq!(out.status.phase, Phase::Failed);
    assert!(
        h.stage_status("s1")
            .failure_message
            .as_deref()
            .unwrap()
            .contains("promotionWindow.from")
    );
    assert!(!h.has_profile(&profile_name("s2")));
}

#[test]
fn world_sanity_summaries_follow_profiles() {
    let mut world = World::new(t0());
    world.add_cluster("a", &[("env", "s1")]);
    let h = Harness::new(promotion_with(profile_spec("1"), vec![stage("s1", None)]));
    let out = world.step(h.desired(), &[]);
    assert_eq!(out.actions.len(), 1);
    world.sveltos();
    assert_eq!(world.observed.summaries.len(), 1);
    assert_eq!(
        &*world.observed.summaries[0].features[0].status,
        "Provisioned"
    );
    let profile = world.profile(&profile_name("s1")).unwrap();
    assert!(profile.spec_hash.is_some());
}
