//! `tollgate rollback` end to end: the commit it makes, merged, is seen by the running controller
//! as "rollback to #N" with the metadata of the tip kept — a paused promotion stays paused.

use crate::support;

use std::process::Command;

use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, seed};

const NAME: &str = "kyverno-rollout-auto";

fn paused(manifest: &str) -> String {
    manifest.replacen(
        &format!("  name: {NAME}\n"),
        &format!("  name: {NAME}\n  annotations:\n    tollgate.dev/paused: \"true\"\n"),
        1,
    )
}

fn chart_version(profile: &kube::api::DynamicObject) -> Option<String> {
    profile
        .data
        .pointer("/spec/helmCharts/0/chartVersion")
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merged_rollback_of_a_paused_promotion_stays_paused() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno 3.5.2");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    // #1 runs to completion here: content a rollback may restore.
    world.wait_phase(NAME, "Completed").await;
    let v2 = seed("06-kyverno-rollout-auto-v2.yaml", "1s");
    world.repo.write("kyverno.yaml", &v2);
    world.repo.commit("Kyverno 3.6.2");
    world.poke();
    world
        .eventually("#2 completes", || async {
            world
                .status(NAME)
                .await
                .filter(|s| s["snapshotIndex"] == 2 && s["phase"] == "Completed")
        })
        .await;
    world.repo.write("kyverno.yaml", &paused(&v2));
    world.repo.commit("Pause Kyverno");
    world.poke();
    let held = world.wait_phase(NAME, "Paused").await;
    assert_eq!(held["snapshotIndex"], 2);

    let output = Command::new(assert_cmd::cargo::cargo_bin("tollgate"))
        .args(["rollback", NAME, "--to", "1", "--repo"])
        .arg(world.repo.path())
        .output()
        .expect("tollgate rollback");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    world.repo.git(&[
        "merge",
        "-q",
        "--ff-only",
        &format!("tollgate/rollback-{NAME}-to-1"),
    ]);
    world.poke();

    let status = world
        .eventually("the rollback commit, held by the pause", || async {
            world.status(NAME).await.filter(|s| {
                s["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("restart pending for snapshot #3"))
            })
        })
        .await;
    assert_eq!(status["phase"], "Paused", "still paused: {status}");
    assert_eq!(status["snapshotIndex"], 2, "{status}");
    // Held where it was: no profile was rolled back to 3.5.2 behind the pause.
    for profile in world.profiles_of(NAME).await {
        assert_eq!(
            chart_version(&profile).as_deref(),
            Some("3.6.2"),
            "{profile:?}"
        );
    }

    // Unpaused, the restored content runs as what it is: a rollback to #1.
    world.repo.write(
        "kyverno.yaml",
        &world.repo.git(&["show", "HEAD:kyverno.yaml"]).replace(
            "tollgate.dev/paused: \"true\"",
            "tollgate.dev/paused: \"false\"",
        ),
    );
    world.repo.commit("Resume Kyverno");
    world.poke();
    let status = world
        .eventually("the rollback runs once resumed", || async {
            world
                .status(NAME)
                .await
                .filter(|s| s["snapshotIndex"] == 3 && s["phase"] != "Paused")
        })
        .await;
    assert_eq!(status["rollbackOf"], 1, "{status}");
}
