//! End to end (issue #34): `tollgate retry` re-drives only the failed clusters of a halted stage,
//! and a `git revert` rolls back through the stages on the fast path, through the controller
//! loop against the emulator over HTTP with real git repositories. Unhappy paths first.

use crate::support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{TestRepo, World, str_at, tollgate_binary};
use tollgate_emulator::fleet::Feature;
use tollgate_fixtures::{cluster, fleet, policy, promotion, stage};

const WEB: &str = "web";
const HELM_ERROR: &str = "values: replicas must be an integer";

fn web(chart: &str, soak: Option<&str>) -> String {
    let mut p = promotion(WEB).chart("web", chart);
    for env in ["dev", "staging", "prod"] {
        let s = stage(env).selector("env", env);
        p = p.stage(match soak {
            Some(delay) => s.delay(delay),
            None => s.auto(),
        });
    }
    p.to_yaml()
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("tollgate runs");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn retry_commit(world: &World) -> Output {
    let output = run(tollgate_binary()
        .args(["retry", WEB, "staging", "--commit", "--repo"])
        .arg(world.repo.path()));
    world.poke();
    output
}

fn status_text(world: &World) -> String {
    let output = run(tollgate_binary()
        .args(["status", WEB, "--kubeconfig"])
        .arg(world.kubeconfig()));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `namespace/name` → (summary uid, Helm lastAppliedTime) of the staging profile's summaries.
async fn staging_summaries(world: &World) -> Vec<(String, String, String)> {
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("config.projectsveltos.io", "v1beta1", "ClusterSummary"),
        "clustersummaries",
    );
    let api: kube::Api<kube::core::DynamicObject> =
        kube::Api::all_with(world_client(world), &resource);
    let mut rows: Vec<(String, String, String)> = api
        .list(
            &kube::api::ListParams::default()
                .labels("projectsveltos.io/cluster-profile-name=web-staging"),
        )
        .await
        .expect("list summaries")
        .items
        .into_iter()
        .map(|s| {
            let data = &s.data;
            let applied = data
                .pointer("/status/featureSummaries/0/lastAppliedTime")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let cluster = data
                .pointer("/spec/clusterName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            (cluster, s.metadata.uid.unwrap_or_default(), applied)
        })
        .collect();
    rows.sort();
    rows
}

fn world_client(world: &World) -> kube::Client {
    world.client.clone()
}

async fn events(world: &World, reason: &str) -> Vec<String> {
    world
        .events_of(WEB)
        .await
        .into_iter()
        .filter(|(r, _)| r == reason)
        .map(|(_, note)| note)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_halted_stage_is_retried_and_only_its_failed_clusters_are_reapplied() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", None));
    repo.write(
        "policy.yaml",
        &policy("fleet-defaults")
            .max_failures("0")
            .on_failure("Halt")
            .to_yaml(),
    );
    repo.commit("web with a halting policy");
    let mut fleet = fleet()
        .default_latency("50ms")
        .cluster(cluster("dev-1").ns("fleet").label("env", "dev"))
        .cluster(cluster("staging-3").ns("fleet").label("env", "staging"))
        .cluster(cluster("prod-1").ns("fleet").label("env", "prod"));
    for failing in ["staging-1", "staging-2"] {
        fleet = fleet.cluster(
            cluster(failing)
                .ns("fleet")
                .label("env", "staging")
                .fail_feature("Helm", HELM_ERROR),
        );
    }
    let mut world = World::start(repo, &fleet.to_yaml()).await;
    let halted = world.wait_phase(WEB, "Failed").await;
    let message = halted["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("`tollgate retry {WEB} staging`")),
        "the halted stage's hint names the retry: {message}"
    );
    assert_eq!(str_at(&halted, "/failure/stage"), Some("staging"));

    // Unhappy first: a retry naming another snapshot does nothing, and status says why.
    let text = std::fs::read_to_string(world.repo.path().join("web.yaml")).expect("web.yaml");
    let wrong = text.replacen(
        "metadata:\n",
        "metadata:\n  annotations:\n    retry.tollgate.dev/staging: 0123456789abcdef/1\n",
        1,
    );
    world.repo.write("web.yaml", &wrong);
    world.repo.commit("retry naming no snapshot of this run");
    world.poke();
    let refused = world
        .eventually("the retry refused", || async {
            let status = world.status(WEB).await?;
            let retry = status["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Retry")?
                .clone();
            (retry["status"] == "False").then_some(retry)
        })
        .await;
    assert!(
        str_at(&refused, "/message").is_some_and(|m| m.contains("not the run's snapshot")),
        "{refused}"
    );
    assert_eq!(world.status(WEB).await.expect("status")["phase"], "Failed");
    assert!(
        status_text(&world).contains("refused"),
        "{}",
        status_text(&world)
    );
    assert!(!events(&world, "RetryRefused").await.is_empty());

    // The fleet is fixed; the kept cluster's summary is what it was.
    for failing in ["fleet/staging-1", "fleet/staging-2"] {
        world
            .emulator
            .set_feature_failure(failing, Feature::Helm, None)
            .expect("fix the cluster");
    }
    let before = staging_summaries(&world).await;
    let kept_before = before
        .iter()
        .find(|(c, _, _)| c == "staging-3")
        .cloned()
        .expect("staging-3's summary");

    let output = retry_commit(&world);
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("retry 1"), "{printed}");
    let done = world.wait_phase(WEB, "Completed").await;
    assert!(done.get("failure").is_none());
    let retried = events(&world, "Retried").await;
    assert_eq!(retried.len(), 1, "{retried:?}");
    assert!(
        retried[0].contains("fleet/staging-1") && retried[0].contains("fleet/staging-2"),
        "{retried:?}"
    );
    assert!(!retried[0].contains("staging-3"), "{retried:?}");
    let after = staging_summaries(&world).await;
    for (cluster, uid, _) in &after {
        let old = before.iter().find(|(c, _, _)| c == cluster).expect("known");
        match cluster.as_str() {
            "staging-3" => assert_eq!(
                (
                    uid,
                    &after
                        .iter()
                        .find(|(c, _, _)| c == "staging-3")
                        .expect("kept")
                        .2
                ),
                (&kept_before.1, &kept_before.2),
                "the provisioned cluster was not touched"
            ),
            _ => assert_ne!(uid, &old.1, "{cluster} was deployed again from scratch"),
        }
    }
    assert!(world.profile("web-prod").await.is_some(), "the run went on");

    // The same value after a controller restart: consumed, it re-drives nothing.
    world.stop_controller().await;
    world.start_controller().await;
    world.poke();
    let status = world.wait_phase(WEB, "Completed").await;
    let consumed = status["retries"].as_array().expect("consumed retries");
    assert!(
        consumed
            .iter()
            .any(|r| r["stage"] == "staging" && r["n"] == 1 && r["redriven"] == true),
        "{consumed:?}"
    );
    world.settled().await;
    assert_eq!(events(&world, "Retried").await.len(), 1);
    assert_eq!(
        world.status(WEB).await.expect("status")["phase"],
        "Completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revert_after_a_full_rollout_with_30s_soaks_restores_production_on_the_fast_path() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", None));
    // No `rollback:` field: Fast is the default.
    repo.write(
        "policy.yaml",
        &policy("fleet-defaults").max_failures("0").to_yaml(),
    );
    repo.commit("web 1.0.0");
    let fleet = fleet()
        .default_latency("50ms")
        .cluster(cluster("dev-1").ns("fleet").label("env", "dev"))
        .cluster(cluster("staging-1").ns("fleet").label("env", "staging"))
        .cluster(cluster("prod-1").ns("fleet").label("env", "prod"));
    let world = World::start(repo, &fleet.to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    world.repo.write("web.yaml", &web("2.0.0", None));
    let release = world.repo.commit("web 2.0.0");
    world.poke();
    world
        .eventually("snapshot #2 completes", || async {
            world
                .status(WEB)
                .await
                .filter(|s| s["snapshotIndex"] == 2 && s["phase"] == "Completed")
        })
        .await;
    // Every stage now soaks 30 s (a trigger edit: the same snapshot #2).
    world.repo.write("web.yaml", &web("2.0.0", Some("30s")));
    world.repo.commit("soak 30s per stage");
    // The revert of the release brings back #1's content, with the soaks.
    world.repo.git(&["revert", "--no-edit", &release]);
    world.poke();
    let restored = world
        .eventually("the revert completes", || async {
            world
                .status(WEB)
                .await
                .filter(|s| s["snapshotIndex"] == 3 && s["phase"] == "Completed")
        })
        .await;
    assert_eq!(restored["rollbackOf"], 1);
    assert_eq!(restored["rollback"], "Fast");
    for st in restored["stages"].as_array().expect("stages") {
        assert_eq!(st["fastRollback"], true, "{st}");
        assert!(st.get("delayEndsAt").is_none(), "no soak was waited: {st}");
    }
    let prod = world.profile("web-prod").await.expect("prod profile");
    assert_eq!(
        prod.data
            .pointer("/spec/helmCharts/0/chartVersion")
            .and_then(Value::as_str),
        Some("1.0.0")
    );
    let rollback_events = events(&world, "Rollback").await;
    assert!(
        rollback_events.iter().any(|n| n.contains("rollback: Fast")),
        "{rollback_events:?}"
    );
    let text = status_text(&world);
    assert!(text.contains("rollback to #1, fast"), "{text}");
}
