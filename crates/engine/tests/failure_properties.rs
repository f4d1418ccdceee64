//! Property tests of the failure model: random policies, fleets that fail or stall, commits and
//! clock steps, with the safety rules checked after every step (fake clock).

mod common;

use chrono::Duration;
use common::*;
use proptest::prelude::*;
use serde_json::json;
use tollgate_engine::{Action, PromotionStatus};
use tollgate_model::policy::RolloutPolicy;

#[derive(Clone, Debug)]
enum Event {
    Sveltos,
    Clock(u32),
    Step,
    Commit,
    Fail(usize),
    Slow(usize),
    Policy(Option<(u32, Option<u32>, bool)>),
}

fn event() -> impl Strategy<Value = Event> {
    let policy = prop::option::of((0u32..3, prop::option::of(1u32..20), any::<bool>()));
    prop_oneof![
        6 => Just(Event::Sveltos),
        4 => (0u32..900).prop_map(Event::Clock),
        8 => Just(Event::Step),
        1 => Just(Event::Commit),
        2 => (0usize..14).prop_map(Event::Fail),
        1 => (0usize..14).prop_map(Event::Slow),
        1 => policy.prop_map(Event::Policy),
    ]
}

fn policy((max_failures, deadline, rollback): (u32, Option<u32>, bool)) -> RolloutPolicy {
    let mut spec = json!({"maxFailures": max_failures,
        "onFailure": if rollback { "Rollback" } else { "Halt" }});
    if let Some(minutes) = deadline {
        spec["progressDeadline"] = json!(format!("{minutes}m"));
    }
    serde_json::from_value(
        json!({"apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "p"}, "spec": spec}),
    )
    .expect("valid policy")
}

fn build(stages: usize, version: u32) -> tollgate_model::ClusterPromotion {
    let envs = ["s1", "s2", "s3"];
    promotion_with(
        profile_spec(&format!("1.{version}.0")),
        envs[..stages].iter().map(|e| stage(e, None)).collect(),
    )
}

fn snapshot_of(action: &Action) -> Option<u64> {
    match action {
        Action::ApplyProfile { object, .. } => {
            object["metadata"]["annotations"]["tollgate.dev/snapshot-index"]
                .as_str()?
                .parse()
                .ok()
        }
        Action::DeleteProfile { .. } => None,
    }
}

/// The safety rules of one successful step.
fn check_step(
    h: &Harness,
    before: Option<&PromotionStatus>,
    after: &PromotionStatus,
    actions: &[Action],
) -> Result<(), TestCaseError> {
    let now = h.world.now;
    let failed_before = before
        .and_then(|b| b.failure.as_deref())
        .filter(|f| f.snapshot_index == h.snapshot.index);
    if let Some(failure) = failed_before {
        for action in actions {
            let snapshot = snapshot_of(action);
            prop_assert!(
                snapshot != Some(failure.snapshot_index),
                "rejected snapshot applied: {action:?}"
            );
            if failure.on_failure == tollgate_model::policy::OnFailure::Halt {
                prop_assert!(false, "a halted run acted: {action:?}");
            }
        }
    }
    if let Some(failure) = after.failure.as_deref().filter(|_| failed_before.is_none()) {
        let st = after
            .stage(&failure.stage)
            .expect("the failed stage is in status");
        let allowed = st.allowed_failures.unwrap_or(0);
        let failures = st.counts.failed + st.counts.timed_out;
        prop_assert!(
            failures > allowed,
            "failed within its budget: {failures} ≤ {allowed}"
        );
        if st.counts.failed <= allowed {
            prop_assert!(
                st.deadline.is_some_and(|d| d <= now),
                "failed before its deadline"
            );
        }
    }
    // A stage is applied only once every earlier stage of the run succeeded (rollbacks apply
    // earlier snapshots, which this rule does not cover).
    for action in actions
        .iter()
        .filter(|a| snapshot_of(a) == Some(h.snapshot.index))
    {
        let name = action.profile_name();
        if let Some(index) = after
            .stages
            .iter()
            .position(|s| profile_name(&s.name) == name)
        {
            for earlier in &after.stages[..index] {
                prop_assert!(earlier.succeeded_at.is_some(), "{name} applied early");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, .. ProptestConfig::default() })]

    #[test]
    fn failure_rules_hold_over_random_histories(
        stages in 1usize..=3,
        first in prop::option::of((0u32..3, prop::option::of(1u32..20), any::<bool>())),
        events in prop::collection::vec(event(), 1..120),
    ) {
        let mut version = 0;
        let mut seq = 10;
        let mut h = Harness::new(build(stages, version));
        h.world.policy = first.map(policy);
        for event in events {
            match event {
                Event::Sveltos => h.world.sveltos(),
                Event::Clock(seconds) => h.world.advance(Duration::seconds(i64::from(seconds))),
                Event::Step => {
                    let before = h.world.status.clone();
                    let out = h.step();
                    check_step(&h, before.as_ref(), &out.status, &out.actions)?;
                    let again = h.world.evaluate(h.desired(), &h.approvals);
                    prop_assert!(again.actions.is_empty(), "not idempotent: {:?}", again.actions);
                    prop_assert_eq!(&again.status, &out.status);
                    if let Some(wake) = out.wake_at {
                        prop_assert!(wake > h.world.now);
                    }
                }
                Event::Commit => {
                    version += 1;
                    seq += 1;
                    h.commit_content(build(stages, version), seq);
                }
                Event::Fail(i) => {
                    let cluster = h.world.observed.clusters[i % h.world.observed.clusters.len()].name.clone();
                    if !h.world.failing_clusters.remove(&cluster) {
                        h.world.failing_clusters.insert(cluster);
                    }
                }
                Event::Slow(i) => {
                    let cluster = h.world.observed.clusters[i % h.world.observed.clusters.len()].name.clone();
                    if !h.world.slow_clusters.remove(&cluster) {
                        h.world.slow_clusters.insert(cluster);
                    }
                }
                Event::Policy(p) => h.world.policy = p.map(policy),
            }
        }
    }
}
