//! End to end: seed manifests rolled out by the controller loop against the emulator over HTTP,
//! with real git repositories.

use crate::support;

use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, seed, str_at};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_seed_rolls_out_through_every_stage_in_order() {
    let repo = TestRepo::new();
    repo.write(
        "promotions/kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Add kyverno rollout");
    let world = World::start(repo, &fleet_yaml(2, "100ms")).await;

    let status = world.wait_phase("kyverno-rollout-auto", "Completed").await;
    assert_eq!(str_at(&status, "/currentStageName"), Some("production"));
    let stages: Vec<&str> = status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(stages, ["dev", "staging", "production"]);

    // One profile per stage, each with its own selector and the shared chart.
    for (stage, env) in [
        ("dev", "dev"),
        ("staging", "staging"),
        ("production", "prod"),
    ] {
        let profile = world
            .profile(&format!("kyverno-rollout-auto-{stage}"))
            .await
            .unwrap_or_else(|| panic!("profile for {stage}"));
        assert_eq!(
            profile
                .data
                .pointer("/spec/clusterSelector/matchLabels/env"),
            Some(&Value::from(env))
        );
        assert_eq!(
            profile.data.pointer("/spec/helmCharts/0/chartVersion"),
            Some(&Value::from("3.5.2"))
        );
        assert!(
            profile.metadata.owner_references.is_none(),
            "D7: no ownerReferences"
        );
    }

    // Stage order: each stage's profile was first written after the previous stage completed.
    let log = world.emulator.write_log();
    let first_apply = |name: &str| {
        log.iter()
            .position(|w| w.name == name && w.field_manager == "tollgate")
            .unwrap_or_else(|| panic!("{name} was applied"))
    };
    assert!(first_apply("kyverno-rollout-auto-dev") < first_apply("kyverno-rollout-auto-staging"));
    assert!(
        first_apply("kyverno-rollout-auto-staging")
            < first_apply("kyverno-rollout-auto-production")
    );

    // One Provisioning event per stage, each naming its stage: the same reason with another note
    // is another event, not a repeat of the first (kube's Recorder folded them into one series).
    let notes = world
        .eventually("a Provisioning event per stage", || async {
            let notes: Vec<String> = world
                .emulator
                .write_log()
                .iter()
                .filter(|w| w.resource == "events.events.k8s.io" && w.verb == "create")
                .filter(|w| w.object["reason"] == "Provisioning")
                .filter(|w| w.object["regarding"]["name"] == "kyverno-rollout-auto")
                .filter_map(|w| w.object["note"].as_str().map(str::to_string))
                .collect();
            (notes.len() >= 3).then_some(notes)
        })
        .await;
    for stage in ["dev", "staging", "production"] {
        assert_eq!(
            notes.iter().filter(|n| n.contains(stage)).count(),
            1,
            "one Provisioning event names {stage}: {notes:?}"
        );
    }
}

fn chart_version(profile: &kube::api::DynamicObject) -> Option<&str> {
    profile
        .data
        .pointer("/spec/helmCharts/0/chartVersion")
        .and_then(Value::as_str)
}

/// A new commit mid-rollout restarts from stage 1; later stages keep the profile of the previous
/// run until the pipeline reaches them again. Then `git revert` rolls back, and status says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_restarts_from_stage_one_and_revert_rolls_back() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno 3.5.2");
    let world = World::start(repo, &fleet_yaml(2, "100ms")).await;
    world.wait_phase("kyverno-rollout-auto", "Completed").await;

    // v2 with a long soak in dev: the restart reaches dev only.
    let v2 = seed("06-kyverno-rollout-auto-v2.yaml", "1h");
    world.repo.write("kyverno.yaml", &v2);
    world.repo.commit("Kyverno 3.6.2");
    world.poke();
    let status = world
        .eventually("dev runs snapshot 2", || async {
            world.status("kyverno-rollout-auto").await.filter(|s| {
                s["snapshotIndex"] == 2 && s["stages"][0]["lastSuccessfulAppliedTime"].is_string()
            })
        })
        .await;
    assert_eq!(
        status["stages"].as_array().map(Vec::len),
        Some(1),
        "progress reset to [dev]"
    );
    assert_eq!(str_at(&status, "/phase"), Some("Waiting"));
    let dev = world
        .profile("kyverno-rollout-auto-dev")
        .await
        .expect("dev");
    let staging = world
        .profile("kyverno-rollout-auto-staging")
        .await
        .expect("staging");
    let production = world
        .profile("kyverno-rollout-auto-production")
        .await
        .expect("production");
    assert_eq!(chart_version(&dev), Some("3.6.2"));
    assert_eq!(
        chart_version(&staging),
        Some("3.5.2"),
        "later stages keep the old version"
    );
    assert_eq!(chart_version(&production), Some("3.5.2"));

    // Roll back with git: the revert's content equals snapshot 1.
    world.repo.revert_head();
    world.poke();
    let status = world
        .eventually("rollback to #1 recorded", || async {
            world
                .status("kyverno-rollout-auto")
                .await
                .filter(|s| s["snapshotIndex"] == 3 && s["rollbackOf"] == 1)
        })
        .await;
    assert_eq!(str_at(&status, "/currentStageName"), Some("dev"));
    let dev = world
        .eventually("dev back on 3.5.2", || async {
            world
                .profile("kyverno-rollout-auto-dev")
                .await
                .filter(|p| chart_version(p) == Some("3.5.2"))
        })
        .await;
    assert_eq!(
        dev.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("tollgate.dev/snapshot-index"))
            .map(String::as_str),
        Some("3")
    );
}

/// Every seed that needs no approval rolls out to completion on a fleet whose labels match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_auto_seed_completes() {
    let repo = TestRepo::new();
    // 02 and 03 share a name, as do 05–07: one repository holds one of each name.
    for file in [
        "01-core-payment-processor-ci.yaml",
        "02-test-kyverno-rollout-auto.yaml",
        "04-cert-manager-rollout-auto.yaml",
        "06-kyverno-rollout-auto-v2.yaml",
    ] {
        repo.write(file, &seed(file, "1s"));
    }
    repo.commit("Seeds");
    let world = World::start(repo, &fleet_yaml(2, "100ms")).await;
    for (name, last_stage) in [
        ("core-payment-processor-ci", "production"),
        ("test-kyverno-rollout", "production"),
        ("cert-manager-rollout-auto", "production"),
        ("kyverno-rollout-auto", "production"),
    ] {
        let status = world.wait_phase(name, "Completed").await;
        assert_eq!(
            str_at(&status, "/currentStageName"),
            Some(last_stage),
            "{name}"
        );
    }
    // Seed 04: the dev stage's post-delay check was appended to its profile's validateHealths.
    let dev = world
        .profile("cert-manager-rollout-auto-dev")
        .await
        .expect("dev");
    let checks: Vec<&str> = dev.data["spec"]["validateHealths"]
        .as_array()
        .expect("validateHealths")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        checks,
        ["deployment-health", "cert-manager-resources-health"]
    );
}
