//! End to end: the safety rules that must hold when a promotion leaves git and comes back, or
//! its removal is held. Each test is named after the rule it protects.
//!
//! - A consumed approval is never reused: not after the promotion is removed and restored by
//!   `git revert`, not after its tracked path vanishes and comes back, not across a controller
//!   restart in between (docs/architecture.md#d2-approvals-are-consumed-never-lost).
//! - A held removal freezes the promotion: while the blast-radius guard holds it, it advances no
//!   stage, and status, an event and `tollgate status` say so.

use crate::support;

use assert_cmd::Command;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::{TestRepo, World, fleet_yaml, seed};
use tollgate::cluster::resources;

const MANUAL: &str = "kyverno-prog-rollout-man";
const AUTO: &str = "kyverno-rollout-auto";

fn waits_at_staging_gate(status: &Value, snapshot: u64) -> bool {
    status["snapshotIndex"] == snapshot
        && status["currentStageName"] == "staging"
        && status["phase"] == "Waiting"
        && status["message"]
            .as_str()
            .is_some_and(|m| m.contains("waiting for approval"))
}

/// A manual promotion (in `dir`) approved and completed, beside an auto one that keeps the
/// removal of the manual one under the blast-radius guard's share.
async fn approved_and_completed(dir: &str) -> World {
    let repo = TestRepo::new();
    let manual = seed("08-kyverno-rollout-manual.yaml", "1s");
    repo.write(&format!("{dir}manual.yaml"), &manual);
    repo.write(
        &format!("{dir}auto.yaml"),
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Two promotions");
    let mut world = World::without_controller(repo, &fleet_yaml(1, "50ms")).await;
    world.source_path = dir.trim_end_matches('/').to_string();
    world.start_controller().await;
    world
        .eventually("the manual gate of run 1", || async {
            world
                .status(MANUAL)
                .await
                .filter(|s| waits_at_staging_gate(s, 1))
        })
        .await;
    let approved = manual.replacen("approved: false", "approved: true", 1);
    world.repo.write(&format!("{dir}manual.yaml"), &approved);
    world.repo.commit("Approve staging");
    world.poke();
    world.wait_phase(MANUAL, "Completed").await;
    world
}

/// The restored promotion runs again (a new snapshot) and stops at the gate, with nothing applied
/// past it; its status.
async fn restored_run_at_the_gate(world: &World) -> Value {
    let status = world
        .eventually("the restored run waits at the staging gate", || async {
            world.status(MANUAL).await.filter(|s| {
                s["snapshotIndex"].as_u64().is_some_and(|i| i > 1)
                    && s["currentStageName"] == "staging"
                    && s["phase"] == "Waiting"
            })
        })
        .await;
    assert!(
        world
            .profile(&format!("{MANUAL}-production"))
            .await
            .is_none(),
        "production was pruned with the removal and must not come back without a new approval"
    );
    status
}

/// As [`restored_run_at_the_gate`], and status says the `approved: true` in the file was
/// consumed by the run before the removal.
async fn restored_run_waits_at_the_gate(world: &World) {
    let status = restored_run_at_the_gate(world).await;
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`approved: true`") && message.contains("tollgate approve"),
        "the hint says how to approve again: {message}"
    );
}

async fn wait_forgotten(world: &World, name: &str) {
    world
        .eventually("the removed promotion is pruned and forgotten", || async {
            (world.git_promotion(name).await.is_none() && world.profiles_of(name).await.is_empty())
                .then_some(())
        })
        .await;
}

/// Removes the manual promotion from git and waits until its profiles and GitPromotion are gone.
async fn remove_manual_and_wait_forgotten(world: &World) {
    world.repo.remove("manual.yaml");
    world.repo.commit("Remove the manual promotion");
    world.poke();
    wait_forgotten(world, MANUAL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumed_approval_is_never_reused_after_removal_and_revert() {
    let world = approved_and_completed("").await;
    remove_manual_and_wait_forgotten(&world).await;

    world.repo.revert_head();
    world.poke();
    restored_run_waits_at_the_gate(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumed_approval_is_never_reused_across_a_restart_between_removal_and_revert() {
    let mut world = approved_and_completed("").await;
    remove_manual_and_wait_forgotten(&world).await;
    world.stop_controller().await;

    world.repo.revert_head();
    world.start_controller().await;
    restored_run_waits_at_the_gate(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumed_approval_is_never_reused_after_the_path_vanishes_and_returns() {
    let world = approved_and_completed("promotions/").await;
    world.repo.git(&["rm", "-q", "-r", "promotions"]);
    world.repo.commit("Move the promotions away");
    world.poke();
    world.wait_phase(MANUAL, "RemovalHeld").await;
    let api: Api<DynamicObject> = Api::all_with(world.client.clone(), &resources::git_promotion());
    for name in [MANUAL, AUTO] {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"tollgate.dev/confirm-prune": "true"}}}),
            ),
        )
        .await
        .expect("confirm the prune");
    }
    wait_forgotten(&world, MANUAL).await;

    world.repo.revert_head();
    world.poke();
    restored_run_waits_at_the_gate(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumed_annotation_approval_is_never_reused_after_removal_and_revert() {
    let repo = TestRepo::new();
    let manual = seed("08-kyverno-rollout-manual.yaml", "1s");
    repo.write("manual.yaml", &manual);
    repo.write("auto.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
    repo.commit("Two promotions");
    let world = World::start(repo, &fleet_yaml(1, "50ms")).await;
    let status = world
        .eventually("the manual gate of run 1", || async {
            world
                .status(MANUAL)
                .await
                .filter(|s| waits_at_staging_gate(s, 1))
        })
        .await;
    // Approve snapshot #1 by its id, as `tollgate approve` does.
    let id = status["snapshotId"].as_str().expect("snapshot id")[..12].to_string();
    let annotated = manual.replacen(
        &format!("name: {MANUAL}\n"),
        &format!("name: {MANUAL}\n  annotations:\n    approve.tollgate.dev/staging: \"{id}\"\n"),
        1,
    );
    assert_ne!(annotated, manual);
    world.repo.write("manual.yaml", &annotated);
    world.repo.commit("Approve snapshot 1");
    world.poke();
    world.wait_phase(MANUAL, "Completed").await;

    remove_manual_and_wait_forgotten(&world).await;
    world.repo.revert_head();
    world.poke();
    let status = restored_run_at_the_gate(&world).await;
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("names this snapshot but was set by commit"),
        "status says the annotation in the file no longer counts: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_removal_freezes_the_promotion() {
    let repo = TestRepo::new();
    // dev → staging (delay 1s) → production (delay 1s): a removal held at dev must stay at dev.
    repo.write("auto.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
    repo.commit("One promotion");
    // Clusters slow to provision: the removal lands while dev is still rolling out.
    let world = World::start(repo, &fleet_yaml(1, "1500ms")).await;
    world
        .eventually("dev is being provisioned", || async {
            world
                .status(AUTO)
                .await
                .filter(|s| s["currentStageName"] == "dev" && s["phase"] == "Progressing")
        })
        .await;

    world.repo.remove("auto.yaml");
    world.repo.commit("Remove everything");
    world.poke();
    let status = world.wait_phase(AUTO, "RemovalHeld").await;
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Removal held") && message.contains("removes all 1 promotions"),
        "status says it is held and why: {message}"
    );
    assert!(
        message.contains("tollgate.dev/confirm-prune"),
        "and how to confirm: {message}"
    );
    let events = world
        .eventually("a RemovalHeld warning", || async {
            let events = world.events_of(AUTO).await;
            events
                .iter()
                .any(|(reason, _)| reason == "RemovalHeld")
                .then_some(events)
        })
        .await;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "RemovalHeld" && note.contains("removes all")),
        "{events:?}"
    );

    // That it stays frozen whatever wakes it (provisioned clusters, the delay's end) is the
    // scheduler's (`a_mass_removal_is_held_and_stepped_frozen_until_confirmed_by_annotation`)
    // and the engine's (`a_held_removal_deletes_nothing_even_without_a_snapshot`) to show,
    // synchronously: here a 5 s sleep used to wait for it.
    assert_eq!(status["currentStageName"], "dev", "held where it was");

    // The hold is visible in `tollgate status`, not only in the log.
    let output = Command::cargo_bin("tollgate")
        .expect("binary")
        .args(["status", AUTO, "--kubeconfig"])
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate status runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains("RemovalHeld") && text.contains("Removal held"),
        "tollgate status shows the hold: {text}"
    );
}
