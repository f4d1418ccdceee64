//! End to end: generated ClusterProfiles are owned. A hand edit (`kubectl edit` is a merge patch,
//! `kubectl replace` a PUT, both under another field manager) of what tollgate set, or a hand
//! delete, is re-applied with a `DriftCorrected` Warning naming the fields and a metric, and the
//! promotion ends Completed over profiles that carry what tollgate applied.

use crate::support;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{TestRepo, World, fleet_yaml, seed};
use tollgate::cluster::resources;

const AUTO: &str = "kyverno-rollout-auto";

fn chart_version(profile: &DynamicObject) -> Option<&str> {
    profile
        .data
        .pointer("/spec/helmCharts/0/chartVersion")
        .and_then(Value::as_str)
}

async fn completed_world() -> World {
    let repo = TestRepo::new();
    repo.write("auto.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
    repo.commit("One promotion");
    let world = World::start(repo, &fleet_yaml(1, "50ms")).await;
    world.wait_phase(AUTO, "Completed").await;
    world
}

/// Waits for a DriftCorrected Warning about `profile` whose note names `field`.
async fn drift_event(world: &World, profile: &str, field: &str) -> String {
    world
        .eventually(
            &format!("DriftCorrected for {profile} naming {field}"),
            || async {
                world
                    .events_of(AUTO)
                    .await
                    .into_iter()
                    .find(|(reason, note)| {
                        reason == "DriftCorrected" && note.contains(profile) && note.contains(field)
                    })
                    .map(|(_, note)| note)
            },
        )
        .await
}

async fn restored(world: &World, profile: &str) -> DynamicObject {
    world
        .eventually(
            &format!("{profile} carries what tollgate applied"),
            || async {
                world
                    .profile(profile)
                    .await
                    .filter(|p| chart_version(p) == Some("3.5.2"))
            },
        )
        .await
}

fn drift_corrections(world: &World) -> f64 {
    let text = world.metrics.encode();
    let series = format!("tollgate_drift_corrections_total{{promotion=\"{AUTO}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_edits_of_generated_profiles_are_corrected() {
    let world = completed_world().await;
    let api: Api<DynamicObject> =
        Api::all_with(world.client.clone(), &resources::cluster_profile());
    let dev = format!("{AUTO}-dev");

    // `kubectl edit`: a merge patch of the spec and of an annotation tollgate owns.
    api.patch(
        &dev,
        &PatchParams {
            field_manager: Some("kubectl-edit".into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({
            "metadata": {"annotations": {"tollgate.dev/snapshot-index": "42"}},
            "spec": {"helmCharts": [{
                "repositoryURL": "https://kyverno.github.io/kyverno/", "repositoryName": "kyverno",
                "chartName": "kyverno/kyverno", "chartVersion": "9.9.9",
                "releaseName": "kyverno-latest", "releaseNamespace": "kyverno",
                "helmChartAction": "Install"
            }]}
        })),
    )
    .await
    .expect("hand edit");
    let note = drift_event(&world, &dev, "spec.helmCharts").await;
    assert!(note.contains("tollgate.dev/snapshot-*"), "{note}");
    let profile = restored(&world, &dev).await;
    assert_eq!(
        profile
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("tollgate.dev/snapshot-index"))
            .map(String::as_str),
        Some("1")
    );

    // `kubectl replace`: a PUT of the whole object with a changed label tollgate owns.
    let staging = format!("{AUTO}-staging");
    let mut object = api.get(&staging).await.expect("staging profile");
    object
        .metadata
        .labels
        .get_or_insert_default()
        .insert("tollgate.dev/stage".into(), "elsewhere".into());
    object.data["spec"]["helmCharts"][0]["chartVersion"] = json!("0.0.1");
    api.replace(
        &staging,
        &PostParams {
            field_manager: Some("kubectl-replace".into()),
            ..PostParams::default()
        },
        &object,
    )
    .await
    .expect("hand replace");
    let note = drift_event(&world, &staging, "metadata.labels[tollgate.dev/stage]").await;
    assert!(note.contains("spec.helmCharts"), "{note}");
    let profile = restored(&world, &staging).await;
    assert_eq!(
        profile
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("tollgate.dev/stage"))
            .map(String::as_str),
        Some("staging")
    );

    // A hand delete re-creates the profile.
    let production = format!("{AUTO}-production");
    api.delete(&production, &DeleteParams::default())
        .await
        .expect("hand delete");
    drift_event(&world, &production, "deleted").await;
    restored(&world, &production).await;

    world.wait_phase(AUTO, "Completed").await;
    assert!(
        drift_corrections(&world) >= 3.0,
        "{}",
        world.metrics.encode()
    );
}
