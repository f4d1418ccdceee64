//! Waves inside a stage (RolloutPolicy `stages.<name>.waves`), driven with a fake clock. Each
//! rule has a test named after it.

mod common;

use chrono::Duration;
use common::*;
use serde_json::{Value, json};
use tollgate_engine::Phase;
use tollgate_model::ClusterPromotion;
use tollgate_model::policy::RolloutPolicy;

fn policy(spec: Value) -> RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "waves"}, "spec": spec,
    }))
    .expect("valid policy")
}

/// s1 → prod; prod has 5 clusters ordered by `order` (prod-x has none).
fn fleet_and_promotion() -> Harness {
    let mut h = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("s1", None), stage("prod", None)],
    ));
    std::sync::Arc::make_mut(&mut h.world.observed.clusters)
        .retain(|c| c.labels.get("env").map(String::as_str) != Some("prod"));
    for (name, order) in [
        ("prod-a", Some("3")),
        ("prod-b", Some("1")),
        ("prod-c", Some("2")),
        ("prod-d", Some("10")),
        ("prod-x", None),
    ] {
        let mut labels = vec![("env", "prod")];
        if let Some(order) = order {
            labels.push(("order", order));
        }
        h.world.add_cluster(name, &labels);
    }
    h
}

fn waved(h: &mut Harness, waves: Value) {
    h.world.policy = Some(policy(json!({"stages": {"prod": {"waves": waves}}})));
}

/// Clusters with a prod ClusterSummary.
fn reached(h: &Harness) -> Vec<String> {
    let mut names: Vec<String> = h
        .world
        .observed
        .summaries
        .iter()
        .filter(|s| *s.profile_name == *profile_name("prod"))
        .map(|s| s.cluster_name.to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn no_cluster_of_a_later_wave_is_targeted_before_its_wave() {
    let mut h = fleet_and_promotion();
    waved(
        &mut h,
        json!({"sortingLabelKey": "order", "size": 2, "canary": 1, "pause": "2m"}),
    );
    h.settle();
    // Canary: the lowest order (prod-b, order 1), alone; LeavePolicies while waves remain.
    assert_eq!(targeted(&h, "prod"), ["prod-b"]);
    assert_eq!(reached(&h), ["prod-b"]);
    let spec = h.profile_spec_of(&profile_name("prod"));
    assert!(spec.get("clusterSelector").is_none());
    assert_eq!(spec["stopMatchingBehavior"], "LeavePolicies");
    let waves = h
        .stage_status("prod")
        .waves
        .clone()
        .expect("waves in status");
    assert_eq!(
        waves.clusters,
        [
            vec!["default/prod-b"],
            vec!["default/prod-c", "default/prod-a"],
            vec!["default/prod-d", "default/prod-x"]
        ]
    );
    // The pause runs before the next wave, and the engine wakes at its end.
    assert_eq!(h.status().phase, Phase::Waiting);
    assert_eq!(
        h.status().next_wake_up,
        Some(t0() + Duration::minutes(2)),
        "{:?}",
        h.status().message
    );
    h.assert_idempotent();
    h.later(Duration::minutes(2));
    assert_eq!(targeted(&h, "prod"), ["prod-a", "prod-b", "prod-c"]);
    assert!(h.stage_status("prod").provisioned_at.is_none());
    h.later(Duration::minutes(2));
    // The last wave: the selector again, the user's stopMatchingBehavior, and the stage done.
    assert_eq!(targeted(&h, "prod"), ["selector"]);
    assert_eq!(
        h.profile_spec_of(&profile_name("prod"))["stopMatchingBehavior"],
        "WithdrawPolicies"
    );
    assert_eq!(reached(&h).len(), 5);
    assert_eq!(h.status().phase, Phase::Completed);
    h.assert_idempotent();
}

#[test]
fn a_canary_that_fails_fails_the_stage_before_any_other_wave() {
    let mut h = fleet_and_promotion();
    h.world.policy = Some(policy(json!({
        "maxFailures": "50%", "onFailure": "Halt",
        "stages": {"prod": {"waves": {"sortingLabelKey": "order", "size": 2, "canary": 1}}},
    })));
    h.world.failing_clusters.insert("prod-b".into());
    h.settle();
    assert_eq!(h.status().phase, Phase::Failed, "{:?}", h.status().message);
    assert_eq!(reached(&h), ["prod-b"], "no later wave is reached");
}

#[test]
fn a_wave_over_its_budget_fails_the_stage_and_stops_the_waves() {
    let mut h = fleet_and_promotion();
    h.world.policy = Some(policy(json!({
        "maxFailures": 0, "onFailure": "Halt",
        "stages": {"prod": {"waves": {"sortingLabelKey": "order", "size": 2}}},
    })));
    h.world.failing_clusters.insert("prod-a".into());
    h.settle();
    // Wave 1: prod-b, prod-c (fine); wave 2: prod-a (fails), prod-d.
    assert_eq!(h.status().phase, Phase::Failed, "{:?}", h.status().message);
    assert_eq!(reached(&h), ["prod-a", "prod-b", "prod-c", "prod-d"]);
    assert!(
        !reached(&h).contains(&"prod-x".to_string()),
        "wave 3 never starts"
    );
    assert_eq!(
        h.status().failure.as_deref().map(|f| f.stage.as_str()),
        Some("prod")
    );
}

#[test]
fn a_blackout_holds_the_next_wave_until_it_ends() {
    let mut h = fleet_and_promotion();
    h.world.policy = Some(policy(json!({
        "blackouts": [{"from": "2025-10-07T10:01:00", "to": "2025-10-07T11:00:00", "reason": "freeze"}],
        "stages": {"prod": {"waves": {"sortingLabelKey": "order", "size": 2, "pause": "2m"}}},
    })));
    h.settle();
    assert_eq!(targeted(&h, "prod"), ["prod-b", "prod-c"]);
    h.later(Duration::minutes(2));
    assert_eq!(
        targeted(&h, "prod"),
        ["prod-b", "prod-c"],
        "no wave starts in the blackout"
    );
    assert!(
        h.status()
            .message
            .as_deref()
            .is_some_and(|m| m.contains("blackout until")),
        "{:?}",
        h.status().message
    );
    assert_eq!(h.status().next_wake_up, Some(t("2025-10-07T11:00:00Z")));
    h.settle_at(t("2025-10-07T11:00:00Z"));
    assert_eq!(
        targeted(&h, "prod"),
        ["prod-a", "prod-b", "prod-c", "prod-d"]
    );
}

#[test]
fn a_stage_without_waves_is_unchanged() {
    let mut h = fleet_and_promotion();
    h.world.policy = Some(policy(json!({"maxFailures": 0})));
    h.settle();
    assert_eq!(targeted(&h, "prod"), ["selector"]);
    assert!(h.stage_status("prod").waves.is_none());
    let _: ClusterPromotion = (*h.snapshot.promotion).clone();
}

#[test]
fn each_wave_is_one_span_under_its_stage_from_its_start_until_its_clusters_provisioned() {
    use tollgate_engine::status::trace_spans::{SpanOf, finished_spans};
    use tollgate_engine::transitions::transitions;

    let mut h = fleet_and_promotion();
    waved(
        &mut h,
        json!({"sortingLabelKey": "order", "size": 2, "canary": 1, "pause": "2m"}),
    );
    let mut spans = Vec::new();
    for _ in 0..60 {
        let before = h.world.status.clone();
        let status = h.step().status;
        let told = transitions(before.as_ref(), &status);
        spans.extend(finished_spans(before.as_ref(), &status, &told));
        if status.runs.last().is_some_and(|r| r.ended_at.is_some()) {
            break;
        }
        h.world.sveltos();
        h.world.advance(Duration::seconds(30));
    }
    let run = h.status().runs.last().expect("a run").clone();
    assert!(run.ended_at.is_some(), "the run did not end");
    let trace = run.trace_id.expect("a trace id");
    let prod = run.stages.iter().find(|s| s.name == "prod").expect("prod");
    let stage_span = trace.stage_span("prod", prod.applied_at);
    let waves: Vec<_> = spans
        .iter()
        .filter_map(|s| match &s.of {
            SpanOf::Wave { stage, wave, of } => Some((stage.as_str(), *wave, *of, s)),
            _ => None,
        })
        .collect();
    let of = waves.first().map(|w| w.2).expect("wave spans");
    assert!(of >= 2, "{waves:#?}");
    let numbers: Vec<u32> = waves.iter().map(|w| w.1).collect();
    assert_eq!(
        numbers,
        (1..=of).collect::<Vec<_>>(),
        "each wave once, in order"
    );
    let mut previous_end = prod.applied_at;
    for (stage, wave, _, span) in &waves {
        assert_eq!(*stage, "prod");
        assert_eq!(
            span.parent,
            Some(stage_span),
            "wave {wave} is not under prod"
        );
        assert_eq!(span.id, trace.wave_span("prod", prod.applied_at, *wave));
        assert!(
            span.start >= previous_end,
            "wave {wave} starts before the last ended"
        );
        assert!(span.start < span.end, "wave {wave}: {span:?}");
        previous_end = span.end;
    }
}
