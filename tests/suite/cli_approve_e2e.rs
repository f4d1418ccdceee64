//! `tollgate approve` end to end: the approval it commits, merged, opens the manual gate of the
//! running controller — including after a `git revert` brought back a snapshot whose id the
//! annotation already holds (consumed by the earlier run).

use crate::support;

use std::process::Output;

use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, seed};

const MANUAL: &str = "kyverno-prog-rollout-man";

fn waits_at_the_gate(status: &Value, snapshot: u64) -> bool {
    status["snapshotIndex"] == snapshot
        && status["currentStageName"] == "staging"
        && status["phase"] == "Waiting"
        && status["stages"].as_array().is_some_and(|stages| {
            stages.iter().any(|s| {
                s["name"] == "staging"
                    && s["currentStatusDescription"]
                        .as_str()
                        .is_some_and(|d| d.starts_with("Paused: Awaiting Manual Approval"))
            })
        })
}

async fn wait_for_gate(world: &World, snapshot: u64) {
    world
        .eventually(
            &format!("the staging gate of snapshot #{snapshot}"),
            || async {
                world
                    .status(MANUAL)
                    .await
                    .filter(|s| waits_at_the_gate(s, snapshot))
            },
        )
        .await;
}

async fn wait_completed(world: &World, snapshot: u64) -> Value {
    world
        .eventually(&format!("snapshot #{snapshot} completes"), || async {
            world
                .status(MANUAL)
                .await
                .filter(|s| s["snapshotIndex"] == snapshot && s["phase"] == "Completed")
        })
        .await
}

/// `tollgate approve MANUAL staging`, merged.
fn approve_and_merge(world: &World) -> Output {
    support::approve_and_merge(world, MANUAL, "staging")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_after_a_revert_opens_the_gate_of_the_restored_snapshot() {
    let repo = TestRepo::new();
    let v1 = seed("08-kyverno-rollout-manual.yaml", "1s");
    repo.write("manual.yaml", &v1);
    repo.commit("Kyverno 3.6.2 with a manual gate");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;

    wait_for_gate(&world, 1).await;
    approve_and_merge(&world);
    wait_completed(&world, 1).await;

    // #2, then a revert back to #1's content: the annotation names #3's id, consumed by run #1.
    let approved = world.repo.git(&["show", "HEAD:manual.yaml"]) + "\n";
    world.repo.write(
        "manual.yaml",
        &approved.replace("chartVersion:     3.6.2", "chartVersion:     3.7.0"),
    );
    world.repo.commit("Kyverno 3.7.0");
    world.poke();
    wait_for_gate(&world, 2).await;
    let revert = world.repo.revert_head();
    world.poke();
    wait_for_gate(&world, 3).await;

    let output = approve_and_merge(&world);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&revert[..12]), "the SHA form: {stdout}");
    let status = wait_completed(&world, 3).await;
    assert_eq!(status["rollbackOf"], 1, "{status}");
}
