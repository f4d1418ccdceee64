//! End to end: seed manifests rolled out by the controller loop against the emulator over HTTP,
//! with real git repositories.

mod support;

use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, seed, str_at};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_seed_rolls_out_through_every_stage_in_order() {
    let repo = TestRepo::new();
    repo.write("promotions/kyverno.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
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
    for (stage, env) in [("dev", "dev"), ("staging", "staging"), ("production", "prod")] {
        let profile = world
            .profile(&format!("kyverno-rollout-auto-{stage}"))
            .await
            .unwrap_or_else(|| panic!("profile for {stage}"));
        assert_eq!(
            profile.data.pointer("/spec/clusterSelector/matchLabels/env"),
            Some(&Value::from(env))
        );
        assert_eq!(
            profile.data.pointer("/spec/helmCharts/0/chartVersion"),
            Some(&Value::from("3.5.2"))
        );
        assert!(profile.metadata.owner_references.is_none(), "D7: no ownerReferences");
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
        first_apply("kyverno-rollout-auto-staging") < first_apply("kyverno-rollout-auto-production")
    );
}
