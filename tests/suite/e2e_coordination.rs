//! End to end (issue #34 items 3 and 4), through the controller loop against the emulator over
//! HTTP with real git repositories: clusters Sveltos pauses for their maintenance window
//! (`pausedClusters: Wait | Skip`), and order between promotions (`tollgate.dev/depends-on`).
//! Unhappy paths first.

use crate::support;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::{TestRepo, World, tollgate_binary};
use tollgate::cluster::resources;
use tollgate_fixtures::{cluster, fleet, fleet_of_envs, promotion, stage};

const WEB: &str = "web";

fn web() -> String {
    let mut p = promotion(WEB).chart("web", "1.0.0");
    for env in ["dev", "staging"] {
        p = p.stage(stage(env).selector("env", env).auto());
    }
    p.to_yaml()
}

/// A policy with a 2s deadline, no failure tolerated, and `staging`'s `pausedClusters`.
fn policy(staging_paused_clusters: Option<&str>) -> String {
    let mut yaml = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: fleet-defaults\nspec:\n  selector: {}\n  progressDeadline: 2s\n  maxFailures: 0\n  onFailure: Halt\n".to_string();
    if let Some(value) = staging_paused_clusters {
        yaml.push_str(&format!(
            "  stages:\n    staging:\n      pausedClusters: {value}\n"
        ));
    }
    yaml
}

/// dev-1, staging-1, and staging-2 paused by Sveltos.
fn fleet_with_a_paused_cluster() -> String {
    fleet()
        .default_latency("20ms")
        .cluster(cluster("dev-1").ns("fleet").label("env", "dev"))
        .cluster(cluster("staging-1").ns("fleet").label("env", "staging"))
        .cluster(
            cluster("staging-2")
                .ns("fleet")
                .label("env", "staging")
                .paused(),
        )
        .to_yaml()
}

fn stage_of<'s>(status: &'s Value, name: &str) -> Option<&'s Value> {
    status["stages"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
}

async fn set_paused(world: &World, cluster: &str, paused: bool) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(world.client.clone(), "fleet", &resources::sveltos_cluster());
    api.patch(
        cluster,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": paused}})),
    )
    .await
    .expect("patch the SveltosCluster");
}

/// The stage waits with its paused member past the stage's deadline: the status says it waits
/// for a window and nothing timed out or failed.
async fn waits_past_the_deadline(world: &World) -> Value {
    world
        .eventually(
            "staging waits past its deadline with a paused member",
            || async {
                let status = world.status(WEB).await?;
                let staging = stage_of(&status, "staging")?;
                let deadline: chrono::DateTime<chrono::Utc> =
                    staging["deadline"].as_str()?.parse().ok()?;
                let paused = staging["counts"]["paused"].as_u64() == Some(1);
                (paused && chrono::Utc::now() > deadline + chrono::Duration::seconds(1))
                    .then_some(status)
            },
        )
        .await;
    // One more look, after the deadline passed: still waiting.
    let status = world.status(WEB).await.expect("status");
    assert_ne!(status["phase"], "Failed", "{status:#}");
    assert!(status.get("failure").is_none(), "{status:#}");
    let staging = stage_of(&status, "staging").expect("staging");
    let listed = staging["notProvisioned"].as_array().expect("listed");
    assert!(
        listed
            .iter()
            .any(|c| c["cluster"] == "fleet/staging-2" && c["state"] == "Paused"),
        "{listed:?}"
    );
    assert!(
        !listed.iter().any(|c| c["state"] == "TimedOut"),
        "{listed:?}"
    );
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_cluster_does_not_time_out_the_stage_and_counts_once_unpaused() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web());
    repo.write("policy.yaml", &policy(None));
    repo.commit("web under a 2s deadline");
    let world = World::start(repo, &fleet_with_a_paused_cluster()).await;
    waits_past_the_deadline(&world).await;
    // `tollgate status NAME` says how many clusters wait for a window.
    let out = tollgate_binary()
        .args(["status", WEB, "--kubeconfig"])
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("1 paused") && text.contains("fleet/staging-2 ┆ Paused"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Its window opens: Sveltos deploys, it is counted, the run completes.
    set_paused(&world, "staging-2", false).await;
    let status = world.wait_phase(WEB, "Completed").await;
    let staging = stage_of(&status, "staging").expect("staging");
    assert_eq!(staging["counts"]["provisioned"], 2, "{staging:#}");
    assert!(status.get("failure").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_paused_clusters_skip_the_stage_completes_without_them() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web());
    repo.write("policy.yaml", &policy(Some("Skip")));
    repo.commit("web: staging skips paused clusters");
    let world = World::start(repo, &fleet_with_a_paused_cluster()).await;
    let status = world.wait_phase(WEB, "Completed").await;
    let staging = stage_of(&status, "staging").expect("staging");
    assert_eq!(staging["counts"]["paused"], 1, "{staging:#}");
    assert_eq!(staging["counts"]["provisioned"], 1, "{staging:#}");
    assert!(status.get("failure").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_cluster_never_spends_the_failure_budget() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web());
    repo.write("policy.yaml", &policy(None));
    repo.commit("web, no failure tolerated");
    // staging-2's deployment would fail, but it is paused: Sveltos deploys nothing there.
    let fleet = fleet()
        .default_latency("20ms")
        .cluster(cluster("dev-1").ns("fleet").label("env", "dev"))
        .cluster(cluster("staging-1").ns("fleet").label("env", "staging"))
        .cluster(
            cluster("staging-2")
                .ns("fleet")
                .label("env", "staging")
                .paused()
                .fail_feature("Helm", "values: bad"),
        )
        .to_yaml();
    let world = World::start(repo, &fleet).await;
    let status = waits_past_the_deadline(&world).await;
    let staging = stage_of(&status, "staging").expect("staging");
    assert_eq!(staging["counts"]["failed"], 0, "{staging:#}");
}

// ---- order between promotions ----

const CERT: &str = "cert-manager";
const APPS: &str = "apps";

fn three_stage(name: &str, staging_manual: Option<bool>) -> tollgate_fixtures::PromotionBuilder {
    let mut p = promotion(name).chart(name, "1.0.0");
    for env in ["dev", "staging", "prod"] {
        let s = stage(env).selector("env", env);
        p = p.stage(match (env, staging_manual) {
            ("staging", Some(approved)) => s.approved(approved),
            _ => s.auto(),
        });
    }
    p
}

fn stage_ahead<'s>(status: &'s Value, name: &str) -> Option<&'s Value> {
    status["stagesAhead"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_promotion_waits_stage_by_stage_for_its_dependency() {
    let repo = TestRepo::new();
    // cert-manager's staging waits for an approval; apps depends on cert-manager.
    repo.write(
        "cert-manager.yaml",
        &three_stage(CERT, Some(false)).to_yaml(),
    );
    repo.commit("cert-manager");
    repo.write(
        "apps.yaml",
        &three_stage(APPS, None)
            .annotation("tollgate.dev/depends-on", CERT)
            .to_yaml(),
    );
    repo.commit("apps after cert-manager");
    // `plan` says what each stage's start waits for.
    let out = tollgate_binary()
        .args(["plan", "--from", "HEAD~1", "--to", "HEAD", "--repo"])
        .arg(repo.path())
        .output()
        .expect("tollgate plan");
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(
        plan.contains("stage staging waits for cert-manager/staging"),
        "{plan}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let world = World::start(
        repo,
        &fleet_of_envs(&["dev", "staging", "prod"], 1, "20ms").to_yaml(),
    )
    .await;
    let status = world
        .eventually("apps' staging waits for cert-manager/staging", || async {
            let status = world.status(APPS).await?;
            let ahead = stage_ahead(&status, "staging")?;
            (ahead["activity"]["kind"] == "AwaitingDependency").then_some(status)
        })
        .await;
    let ahead = stage_ahead(&status, "staging").expect("staging ahead");
    assert_eq!(ahead["activity"]["dependency"], "cert-manager/staging");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("waits for cert-manager/staging")),
        "{status:#}"
    );
    let dev = stage_of(&status, "dev").expect("apps' dev ran");
    assert_eq!(dev["activity"]["kind"], "Completed");
    assert!(world.profile("apps-staging").await.is_none());
    // The live view and `status NAME` say it too.
    let out = tollgate_binary()
        .args(["status", APPS, "--kubeconfig"])
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("waits for cert-manager/staging"), "{text}");
    // cert-manager's staging is approved in git: apps goes on, stage by stage, to the end.
    world.repo.write(
        "cert-manager.yaml",
        &three_stage(CERT, Some(true)).to_yaml(),
    );
    world.repo.commit("approve cert-manager staging");
    world.poke();
    world.wait_phase(CERT, "Completed").await;
    world.wait_phase(APPS, "Completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_and_an_unknown_name_are_refused_and_the_others_keep_rolling() {
    let repo = TestRepo::new();
    repo.write(
        "a.yaml",
        &three_stage("a", None)
            .annotation("tollgate.dev/depends-on", "b")
            .to_yaml(),
    );
    repo.write(
        "b.yaml",
        &three_stage("b", None)
            .annotation("tollgate.dev/depends-on", "a")
            .to_yaml(),
    );
    repo.write(
        "c.yaml",
        &three_stage("c", None)
            .annotation("tollgate.dev/depends-on", "nope")
            .to_yaml(),
    );
    repo.write("d.yaml", &three_stage("d", None).to_yaml());
    repo.commit("a cycle, an unknown name, and a plain promotion");
    // `tollgate validate` over the repository: errors at the annotation's line.
    let out = tollgate_binary()
        .arg("validate")
        .arg(repo.path())
        .output()
        .expect("tollgate validate");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for expected in ["a.yaml:6:", "b.yaml:6:", "c.yaml:6:"] {
        assert!(text.contains(expected), "{expected} in {text}");
    }
    assert!(
        text.contains("a cycle") || text.contains("makes a cycle"),
        "{text}"
    );
    assert!(text.contains("\"nope\""), "{text}");
    let world = World::start(
        repo,
        &fleet_of_envs(&["dev", "staging", "prod"], 1, "20ms").to_yaml(),
    )
    .await;
    world.wait_phase("d", "Completed").await;
    for (name, why) in [
        ("a", "a cycle: a -> b -> a"),
        ("b", "a cycle"),
        ("c", "\"nope\""),
    ] {
        let status = world.wait_phase(name, "Held").await;
        let message = status["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("tollgate.dev/depends-on refused") && message.contains(why),
            "{name}: {message}"
        );
        assert!(message.contains(&format!("{name}.yaml")), "{message}");
        assert!(world.profile(&format!("{name}-dev")).await.is_none());
    }
}
