//! Order between promotions (`tollgate.dev/depends-on`): a dependant's stage starts only after
//! the same stage of each dependency completed its current run. The dependencies' states are an
//! observed input; `now` is an argument.

mod common;

use common::*;
use tollgate_engine::activity::StageActivity;
use tollgate_engine::{Phase, PromotionStatus, RunOutcome};

fn three_stages() -> tollgate_model::ClusterPromotion {
    promotion_with(
        profile_spec("1.0.0"),
        vec![
            stage("dev", None),
            stage("staging", None),
            stage("prod", None),
        ],
    )
}

fn stage_names() -> Vec<String> {
    vec!["dev".into(), "staging".into(), "prod".into()]
}

/// cert-manager's status once it settled with `slow` clusters never provisioning.
fn cert_manager(slow: &[&str]) -> PromotionStatus {
    let mut h = Harness::new(three_stages());
    for cluster in slow {
        h.world.slow_clusters.insert(cluster.to_string());
    }
    h.settle();
    h.status().clone()
}

fn depending_on(status: Option<PromotionStatus>) -> Harness {
    let mut h = Harness::new(three_stages());
    h.world.dependencies = vec![("cert-manager".into(), stage_names(), status)];
    h
}

fn ahead_activity(h: &Harness, stage: &str) -> Option<StageActivity> {
    h.status()
        .stages_ahead
        .iter()
        .find(|a| a.name == stage)
        .map(|a| a.activity.clone())
}

#[test]
fn nothing_starts_while_the_dependency_never_ran() {
    let mut h = depending_on(None);
    let out = h.settle();
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert!(!h.has_profile(&profile_name("dev")));
    assert_eq!(h.status().phase, Phase::Waiting);
    let message = h.status().message.clone().unwrap_or_default();
    assert!(
        message.contains("stage dev waits for cert-manager/dev"),
        "{message}"
    );
    assert_eq!(
        ahead_activity(&h, "dev"),
        Some(StageActivity::AwaitingDependency {
            dependency: "cert-manager/dev".into()
        })
    );
    assert_eq!(
        out.wake_at, None,
        "woken by the dependency's change, not a timer"
    );
    h.assert_idempotent();
}

#[test]
fn a_dependant_waits_stage_by_stage_for_its_dependency() {
    // cert-manager: dev done, staging still provisioning.
    let mut h = depending_on(Some(cert_manager(&["staging-1"])));
    h.settle();
    assert!(h.stage_status("dev").provisioned_at.is_some());
    assert!(
        !h.has_profile(&profile_name("staging")),
        "staging waits for cert-manager/staging"
    );
    assert_eq!(h.status().phase, Phase::Waiting);
    assert_eq!(
        ahead_activity(&h, "staging"),
        Some(StageActivity::AwaitingDependency {
            dependency: "cert-manager/staging".into()
        })
    );
    let since = h
        .status()
        .stages_ahead
        .iter()
        .find(|a| a.name == "staging")
        .and_then(|a| a.activity_since);
    h.later(chrono::Duration::minutes(5));
    let kept = h
        .status()
        .stages_ahead
        .iter()
        .find(|a| a.name == "staging")
        .and_then(|a| a.activity_since);
    assert_eq!(kept, since, "the hold keeps its start time");
    h.assert_idempotent();
    // The run waits: its record is not ended (the timeline draws it on, up to now).
    let run = h.status().runs.last().expect("a run recorded").clone();
    assert_eq!((run.outcome, run.ended_at), (RunOutcome::Running, None));
    // cert-manager completes: the dependant goes on through every stage.
    h.world.dependencies[0].2 = Some(cert_manager(&[]));
    h.settle();
    assert_eq!(
        h.status().phase,
        Phase::Completed,
        "{:?}",
        h.status().message
    );
    let run = h.status().runs.last().expect("a run recorded");
    assert_eq!(run.outcome, RunOutcome::Completed);
}

#[test]
fn a_stage_the_dependency_does_not_have_does_not_wait() {
    let mut h = Harness::new(three_stages());
    // cert-manager has only `dev`, done.
    let mut dev_only = Harness::new(promotion_with(
        profile_spec("1.0.0"),
        vec![stage("dev", None)],
    ));
    dev_only.settle();
    h.world.dependencies = vec![(
        "cert-manager".into(),
        vec!["dev".into()],
        Some(dev_only.status().clone()),
    )];
    h.settle();
    assert_eq!(h.status().phase, Phase::Completed);
}

#[test]
fn a_refused_depends_on_holds_every_start_and_says_why_once() {
    let mut h = depending_on(Some(cert_manager(&[])));
    h.world.dependency_problem =
        Some("promotions/apps.yaml:5: cycle apps -> cert-manager -> apps".into());
    let out = h.settle();
    assert!(out.actions.is_empty());
    assert_eq!(h.status().phase, Phase::Held);
    let message = h.status().message.clone().unwrap_or_default();
    assert!(
        message.contains("tollgate.dev/depends-on refused"),
        "{message}"
    );
    assert!(message.contains("apps.yaml:5"), "{message}");
    let blocked = h
        .world
        .events
        .iter()
        .filter(|e| e.reason.as_str() == "Blocked")
        .count();
    h.later(chrono::Duration::minutes(1));
    let again = h
        .world
        .events
        .iter()
        .filter(|e| e.reason.as_str() == "Blocked")
        .count();
    assert_eq!((blocked, again), (1, 1), "told once");
    // Fixed: it starts.
    h.world.dependency_problem = None;
    h.settle();
    assert_eq!(h.status().phase, Phase::Completed);
}
