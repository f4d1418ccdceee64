//! Property tests: random promotions driven through random event orders (Sveltos progress,
//! commits, approvals, clock steps, failed actions), checking the engine's invariants after
//! every step.

mod common;

use std::collections::BTreeMap;

use chrono::{Duration, Timelike};
use common::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use tollgate_engine::testing;
use tollgate_engine::{Action, PromotionStatus};
use tollgate_manifest::model::Trigger;
use tollgate_manifest::snapshot::{ApprovalKind, PAUSED_ANNOTATION};

#[derive(Clone, Debug)]
enum Trig {
    None,
    Auto {
        delay: Option<u32>,
        window: bool,
        post_checks: bool,
    },
    Manual {
        delay: Option<u32>,
        approved: bool,
        reset: bool,
    },
}

#[derive(Clone, Debug)]
enum Event {
    Sveltos,
    Clock(u32),
    Step,
    FailedStep,
    Commit,
    Approve(usize),
    Unapprove(usize),
    Annotate(usize),
    Fail(usize),
    Pause(bool),
}

fn trigger() -> impl Strategy<Value = Trig> {
    let delay = prop::option::of(0u32..4);
    prop_oneof![
        Just(Trig::None),
        (delay.clone(), any::<bool>(), any::<bool>()).prop_map(|(delay, window, post_checks)| {
            Trig::Auto {
                delay,
                window,
                post_checks,
            }
        }),
        (delay, any::<bool>(), any::<bool>()).prop_map(|(delay, approved, reset)| Trig::Manual {
            delay,
            approved,
            reset
        }),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        6 => Just(Event::Sveltos),
        4 => (0u32..1500).prop_map(Event::Clock),
        8 => Just(Event::Step),
        2 => Just(Event::FailedStep),
        1 => Just(Event::Commit),
        2 => (0usize..4).prop_map(Event::Approve),
        1 => (0usize..4).prop_map(Event::Unapprove),
        1 => (0usize..4).prop_map(Event::Annotate),
        1 => (0usize..8).prop_map(Event::Fail),
        1 => any::<bool>().prop_map(Event::Pause),
    ]
}

fn trigger_value(t: &Trig) -> Option<Value> {
    let minutes = |d: &Option<u32>| d.map(|m| format!("{m}m"));
    match t {
        Trig::None => None,
        Trig::Auto {
            delay,
            window,
            post_checks,
        } => {
            let mut auto = json!({});
            if let Some(d) = minutes(delay) {
                auto["delay"] = json!(d);
            }
            if *window {
                // Open during the first half of every hour.
                auto["promotionWindow"] = json!({"from": "0 * * * *", "to": "30 * * * *"});
            }
            if *post_checks {
                auto["postDelayHealthChecks"] = json!([{"name": "post", "featureID": "Helm"}]);
            }
            Some(json!({"auto": auto}))
        }
        Trig::Manual {
            delay,
            approved,
            reset,
        } => {
            let mut manual = json!({"approved": approved, "automaticReset": reset});
            if let Some(d) = minutes(delay) {
                manual["delay"] = json!(d);
            }
            Some(json!({"manual": manual}))
        }
    }
}

fn build(triggers: &[Trig], version: u32) -> tollgate_manifest::model::ClusterPromotion {
    let stages = triggers
        .iter()
        .enumerate()
        .map(|(i, t)| stage(&format!("s{}", i + 1), trigger_value(t)))
        .collect();
    promotion_with(profile_spec(&format!("1.{version}.0")), stages)
}

fn manual_of(
    p: &mut tollgate_manifest::model::ClusterPromotion,
    stage: usize,
) -> Option<&mut tollgate_manifest::model::ManualTrigger> {
    match p.spec.stages.get_mut(stage)?.trigger.as_mut()? {
        Trigger::Manual(m) => Some(m),
        Trigger::Auto(_) => None,
    }
}

/// Check the invariants of one successful step, from the world before it and its output.
fn check_step(
    h: &Harness,
    before: Option<&PromotionStatus>,
    before_observed: &tollgate_engine::Observed,
    after: &PromotionStatus,
    actions: &[Action],
    used: &mut BTreeMap<(String, String), u64>,
) -> Result<(), TestCaseError> {
    let now = h.world.now;
    let promotion = &h.snapshot.promotion;
    let spec_stages: Vec<&str> = promotion
        .spec
        .stages
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    let paused = promotion
        .metadata
        .annotations
        .contains_key(PAUSED_ANNOTATION);
    if paused {
        prop_assert!(actions.is_empty(), "paused but acted: {actions:?}");
        return Ok(());
    }
    let restarted = before.is_none_or(|b| {
        b.profile_spec_hash != after.profile_spec_hash || b.stages_hash != after.stages_hash
    });

    // Stages started in this run are a prefix of the pipeline, in order.
    let names: Vec<&str> = after.stages.iter().map(|s| s.name.as_str()).collect();
    prop_assert_eq!(&names[..], &spec_stages[..names.len()]);
    // Every stage but the current one succeeded; success needs completion first.
    for (i, st) in after.stages.iter().enumerate() {
        if i + 1 < after.stages.len() {
            prop_assert!(
                st.succeeded_at.is_some(),
                "{} left without succeeding",
                st.name
            );
        }
        if let Some(succeeded) = st.succeeded_at {
            prop_assert!(st.provisioned_at.is_some_and(|p| p <= succeeded));
        }
    }
    // Restart resets progress: every stage of a new run was started now.
    if restarted && !after.stages.is_empty() {
        prop_assert_eq!(after.snapshot_index, Some(h.snapshot.index));
        for st in &after.stages {
            prop_assert_eq!(st.last_update_reconciled_time, Some(now));
        }
    }

    // Stages that passed their trigger in this step.
    for st in after.stages.iter().filter(|s| s.succeeded_at == Some(now)) {
        let was_succeeded = !restarted
            && before
                .and_then(|b| b.stage(&st.name))
                .is_some_and(|b| b.succeeded_at.is_some());
        if was_succeeded {
            continue;
        }
        let stage = promotion.stage(&st.name).unwrap();
        let provisioned_at = st.provisioned_at.unwrap();
        if let Some(delay) = stage.trigger.as_ref().and_then(|t| t.delay()) {
            prop_assert!(
                provisioned_at + Duration::from_std(delay.value).unwrap() <= now,
                "{} advanced before its delay ended",
                st.name
            );
        }
        match &stage.trigger {
            Some(Trigger::Auto(auto)) if auto.promotion_window.is_some() => {
                prop_assert!(
                    now.minute() < 30,
                    "{} advanced while its window was closed",
                    st.name
                );
            }
            Some(Trigger::Manual(manual)) => {
                prop_assert!(
                    st.approver.is_some(),
                    "{} advanced without an approver",
                    st.name
                );
                let run_start = h.snapshot.commit.seq;
                let field_ok = manual.approved == Some(true)
                    && (!manual.automatic_reset
                        || h.approvals.iter().any(|e| {
                            e.stage == st.name
                                && e.kind == ApprovalKind::Field
                                && e.commit.seq >= run_start
                        }));
                let annotation_ok = promotion
                    .metadata
                    .annotations
                    .get(&format!("approve.tollgate.dev/{}", st.name))
                    .is_some_and(|v| h.snapshot.hashes.snapshot_id.starts_with(v.as_str()));
                prop_assert!(
                    field_ok || annotation_ok,
                    "{} advanced without a valid approval",
                    st.name
                );
            }
            _ => {}
        }
        // Completion, checked independently on what Sveltos reported before the step: every
        // ready matching cluster has a summary, with every feature Provisioned.
        let profile = profile_name(&st.name);
        let summaries: Vec<_> = before_observed
            .summaries
            .iter()
            .filter(|s| *s.profile_name == *profile)
            .collect();
        let matching = before_observed
            .clusters
            .iter()
            .filter(|c| c.ready && !c.paused && stage.cluster_selector.matches(&c.labels))
            .count();
        let fresh_profile_apply = actions
            .iter()
            .any(|a| matches!(a, Action::ApplyProfile { name, .. } if *name == profile));
        if matching > 0 || fresh_profile_apply {
            prop_assert!(
                summaries.len() >= matching,
                "{} advanced with missing summaries",
                st.name
            );
        }
        for s in summaries {
            prop_assert!(
                s.features.iter().all(|f| &*f.status == "Provisioned"),
                "{} advanced with an unprovisioned summary {}",
                st.name,
                s.name
            );
        }
    }

    // A main profile is applied only for the current stage of this run, or for a stage whose
    // predecessors all succeeded in this run.
    for action in actions {
        if let Action::ApplyProfile { name, object } = action {
            let stage = object["metadata"]["labels"]["tollgate.dev/stage"]
                .as_str()
                .unwrap();
            let index = spec_stages.iter().position(|s| *s == stage).unwrap();
            prop_assert!(
                index < after.stages.len(),
                "applied {name} for a stage not started"
            );
            for earlier in &after.stages[..index] {
                prop_assert!(earlier.succeeded_at.is_some());
            }
            prop_assert_eq!(
                object["metadata"]["annotations"]["tollgate.dev/snapshot-id"].as_str(),
                Some(h.snapshot.hashes.snapshot_id.as_str())
            );
        }
    }

    // An approval advances at most one stage of one run.
    for consumed in &after.consumed_approvals {
        let key = (consumed.stage.clone(), consumed.commit.clone());
        let run = *used.entry(key).or_insert(consumed.run);
        prop_assert_eq!(run, consumed.run, "an approval served two runs");
    }
    let mut seen = std::collections::BTreeSet::new();
    for consumed in &after.consumed_approvals {
        prop_assert!(
            seen.insert((&consumed.stage, &consumed.commit)),
            "approval recorded twice"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, .. ProptestConfig::default() })]

    #[test]
    fn engine_invariants_hold_over_random_histories(
        triggers in prop::collection::vec(trigger(), 1..=4),
        events in prop::collection::vec(event(), 1..120),
    ) {
        let mut version = 0;
        let mut seq = 10;
        let mut h = Harness::new(build(&triggers, version));
        let mut used = BTreeMap::new();
        for event in events {
            match event {
                Event::Sveltos => h.world.sveltos(),
                Event::Clock(seconds) => h.world.advance(Duration::seconds(i64::from(seconds))),
                Event::FailedStep => {
                    let before = h.world.status.clone();
                    h.step_failing();
                    prop_assert_eq!(&h.world.status, &before);
                }
                Event::Step => {
                    let before = h.world.status.clone();
                    let before_observed = h.world.observed.clone();
                    let out = h.step();
                    check_step(&h, before.as_ref(), &before_observed, &out.status, &out.actions, &mut used)?;
                    // Idempotence: once the actions took effect, nothing more to do.
                    let again = h.world.evaluate(h.desired(), &h.approvals);
                    prop_assert!(again.actions.is_empty(), "not idempotent: {:?}", again.actions);
                    prop_assert_eq!(&again.status, &out.status);
                    prop_assert!(again.events.is_empty());
                    if let Some(wake) = out.wake_at {
                        prop_assert!(wake > h.world.now);
                    }
                }
                Event::Commit => {
                    version += 1;
                    seq += 1;
                    let mut next = build(&triggers, version);
                    next.metadata.annotations = h.snapshot.promotion.metadata.annotations.clone();
                    h.commit_content(next, seq);
                }
                Event::Approve(i) => {
                    let mut p = (*h.snapshot.promotion).clone();
                    if let Some(m) = manual_of(&mut p, i)
                        && m.approved != Some(true)
                    {
                        m.approved = Some(true);
                        seq += 1;
                        h.approvals.push(testing::approval(
                            &format!("s{}", i + 1),
                            ApprovalKind::Field,
                            testing::commit(seq),
                        ));
                        h.snapshot.promotion = std::sync::Arc::new(p);
                    }
                }
                Event::Unapprove(i) => {
                    h.edit_triggers(|p| {
                        if let Some(m) = manual_of(p, i) {
                            m.approved = Some(false);
                        }
                    });
                }
                Event::Annotate(i) => {
                    let value = h.snapshot.hashes.snapshot_id[..12].to_string();
                    let stage = format!("s{}", i + 1);
                    seq += 1;
                    h.approvals.push(testing::approval(
                        &stage,
                        ApprovalKind::Annotation { value: value.clone() },
                        testing::commit(seq),
                    ));
                    h.edit_triggers(|p| {
                        p.metadata
                            .annotations
                            .insert(format!("approve.tollgate.dev/{stage}"), value);
                    });
                }
                Event::Fail(i) => {
                    let cluster = h.world.observed.clusters[i % h.world.observed.clusters.len()].name.clone();
                    if !h.world.failing_clusters.remove(&cluster) {
                        h.world.failing_clusters.insert(cluster);
                    }
                }
                Event::Pause(on) => h.edit_triggers(|p| {
                    if on {
                        p.metadata.annotations.insert(PAUSED_ANNOTATION.into(), "true".into());
                    } else {
                        p.metadata.annotations.remove(PAUSED_ANNOTATION);
                    }
                }),
            }
        }
    }
}
