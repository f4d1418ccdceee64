//! End to end: corners found when tried as users would (issue #45, items 4, 10–13), through the
//! controller loop and the CLI, against the emulator over HTTP, with real git repositories.

use crate::support;

use serde_json::Value;
use support::{TestRepo, World};
use tollgate_fixtures::{FleetBuilder, fleet_of_envs, policy, promotion, stage};

const WEB: &str = "web";

fn three_envs() -> FleetBuilder {
    fleet_of_envs(&["dev", "staging", "prod"], 1, "50ms")
}

/// dev (auto) → staging (manual) → prod (auto), chart version `chart`.
fn web(chart: &str) -> String {
    promotion(WEB)
        .chart("web", chart)
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("staging").selector("env", "staging").manual())
        .stage(stage("prod").selector("env", "prod").auto())
        .to_yaml()
}

async fn status_where(world: &World, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    world
        .eventually(what, || async {
            world.status(WEB).await.filter(|s| check(s))
        })
        .await
}

/// What `history --kubeconfig` says of each snapshot's run, in order.
fn runs_in_history(world: &World) -> Vec<String> {
    world.history_json(WEB)["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["run"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// #1 waits at the staging gate; #2 and #3 land behind it under `onNewSnapshot: policy`.
async fn two_behind_a_waiting_run(on_new_snapshot: &str) -> World {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write(
        "policy.yaml",
        &policy("new-snapshots")
            .on_new_snapshot(on_new_snapshot)
            .to_yaml(),
    );
    repo.commit("web 1.0.0");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    status_where(&world, "#1 waits at the staging gate", |s| {
        s["currentStageName"] == "staging" && s["phase"] == "Waiting"
    })
    .await;
    for chart in ["2.0.0", "3.0.0"] {
        world.repo.write("web.yaml", &web(chart));
        world.repo.commit(&format!("web {chart}"));
    }
    world.poke();
    status_where(&world, "#3 queued behind #1", |s| s["queuedSnapshot"] == 3).await;
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_says_an_intermediate_snapshot_will_be_skipped_when_only_the_newest_runs_next() {
    let world = two_behind_a_waiting_run("FinishCurrent").await;
    let runs = runs_in_history(&world);
    assert_eq!(runs[0], "running", "{runs:?}");
    assert_eq!(runs[1], "skipped: #3 runs next", "{runs:?}");
    assert_eq!(runs[2], "waiting", "{runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_says_every_queued_snapshot_waits_under_queue() {
    let world = two_behind_a_waiting_run("Queue").await;
    let runs = runs_in_history(&world);
    assert_eq!(runs[1..], ["waiting", "waiting"], "{runs:?}");
}

// ---- paused clusters and order between promotions (item 10) ----

/// A cluster in `fleet` labelled `env`.
fn in_env(name: &str, env: &str) -> tollgate_fixtures::ClusterBuilder {
    tollgate_fixtures::cluster(name)
        .ns("fleet")
        .label("env", env)
}

/// dev-1, staging-1, and staging-2 paused by Sveltos.
fn fleet_with_a_paused_cluster() -> String {
    tollgate_fixtures::fleet()
        .default_latency("20ms")
        .cluster(in_env("dev-1", "dev"))
        .cluster(in_env("staging-1", "staging"))
        .cluster(in_env("staging-2", "staging").paused())
        .to_yaml()
}

async fn set_paused(world: &World, cluster: &str, paused: bool) {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    let api: Api<DynamicObject> = Api::namespaced_with(
        world.client.clone(),
        "fleet",
        &tollgate::cluster::resources::sveltos_cluster(),
    );
    api.patch(
        cluster,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"paused": paused}})),
    )
    .await
    .expect("patch the cluster");
}

fn status_text(world: &World, name: &str) -> String {
    let out = support::tollgate_binary()
        .args(["status", name, "--kubeconfig"])
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate status");
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_unpaused_after_its_skip_stage_completed_no_longer_shows_paused() {
    let repo = TestRepo::new();
    repo.write(
        "web.yaml",
        &promotion(WEB)
            .chart("web", "1.0.0")
            .stage(stage("dev").selector("env", "dev").auto())
            .stage(stage("staging").selector("env", "staging").auto())
            .to_yaml(),
    );
    repo.write(
        "policy.yaml",
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: fleet-defaults\nspec:\n  selector: {}\n  stages:\n    staging:\n      pausedClusters: Skip\n",
    );
    repo.commit("web: staging skips paused clusters");
    let world = World::start(repo, &fleet_with_a_paused_cluster()).await;
    let status = world.wait_phase(WEB, "Completed").await;
    assert_eq!(status["stages"][1]["counts"]["paused"], 1, "{status:#}");
    // Its window opens after the stage completed: Sveltos deploys there, and every view says so.
    set_paused(&world, "staging-2", false).await;
    let status = status_where(&world, "staging-2 provisioned", |s| {
        s["stages"][1]["counts"]["provisioned"] == 2
    })
    .await;
    // A zero count is left out of the status.
    assert_eq!(
        status["stages"][1]["counts"].get("paused"),
        None,
        "{status:#}"
    );
    assert!(
        status["stages"][1].get("notProvisioned").is_none(),
        "{status:#}"
    );
    let text = status_text(&world, WEB);
    assert!(
        !text.contains("maintenance window") && !text.contains("┆ Paused"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependant_of_a_halted_promotion_says_its_dependency_halted_and_how_it_goes_on() {
    const CERT: &str = "cert-manager";
    const APPS: &str = "apps";
    let three_stages = |name: &str| {
        let mut p = promotion(name).chart(name, "1.0.0");
        for env in ["dev", "staging", "prod"] {
            p = p.stage(stage(env).selector("env", env).auto());
        }
        p
    };
    let repo = TestRepo::new();
    repo.write("cert-manager.yaml", &three_stages(CERT).to_yaml());
    repo.write(
        "apps.yaml",
        &three_stages(APPS)
            .annotation("tollgate.dev/depends-on", CERT)
            .to_yaml(),
    );
    repo.write(
        "policy.yaml",
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: fleet-defaults\nspec:\n  selector: {}\n  progressDeadline: 30s\n  maxFailures: 0\n  onFailure: Halt\n",
    );
    repo.commit("cert-manager, then apps");
    // cert-manager's chart fails on the staging cluster: it halts there.
    let fleet = tollgate_fixtures::fleet()
        .default_latency("20ms")
        .cluster(in_env("dev-1", "dev"))
        .cluster(in_env("staging-1", "staging").fail_feature("Helm", "cert-manager: values: bad"))
        .cluster(in_env("prod-1", "prod"))
        .to_yaml();
    let world = World::start(repo, &fleet).await;
    world.wait_phase(CERT, "Failed").await;
    let expected = "cert-manager halted at stage staging: it goes on after `tollgate retry cert-manager staging` or a new commit";
    let status = world
        .eventually("apps says cert-manager halted", || async {
            let status = world.status(APPS).await?;
            status["message"]
                .as_str()
                .is_some_and(|m| m.contains(expected))
                .then_some(status)
        })
        .await;
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("stage staging waits for cert-manager/staging")),
        "{status:#}"
    );
    // `status NAME` says it too.
    let text = status_text(&world, APPS);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains(expected), "{text}");
}

// ---- a waved stage approved per wave (item 4) ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_wave_of_an_inconclusive_stage_records_who_approved_it() {
    let Some(prom) = tokio::task::block_in_place(support::prometheus::prometheus) else {
        return;
    };
    // A series nobody serves: every wave's analysis is inconclusive and waits for an approval.
    let analysis = serde_json::json!({
        "name": "error-rate",
        "prometheus": {"address": prom.address, "query": "max(never_served{test=\"per-wave\"})"},
        "interval": "1s", "count": 1, "onNoData": "Inconclusive",
        "successCondition": "result < 0.01",
    });
    let policy = serde_json::json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "gates"},
        "spec": {
            "selector": {}, "analyses": [analysis],
            "stages": {"prod": {"analyses": ["error-rate"], "waves": {"sortingLabelKey": "order", "size": 1}}},
        },
    });
    let mut fleet = tollgate_fixtures::fleet().default_latency("50ms");
    for (name, order) in [("prod-1", "1"), ("prod-2", "2")] {
        fleet = fleet.cluster(
            tollgate_fixtures::cluster(name)
                .ns("fleet")
                .label("env", "prod")
                .label("order", order),
        );
    }
    let repo = TestRepo::new();
    repo.write(
        "web.yaml",
        &promotion(WEB)
            .chart("web", "1.0.0")
            .stage(stage("prod").selector("env", "prod").auto())
            .to_yaml(),
    );
    repo.write("policy.yaml", &policy.to_string());
    repo.commit("web, analysed per wave");
    let world = World::start(repo, &fleet.to_yaml()).await;
    let inconclusive_in = |wave: u64| {
        let world = &world;
        async move {
            world
                .eventually(&format!("wave {wave} inconclusive"), || async {
                    let status = world.status(WEB).await?;
                    let runs = status["stages"][0]["analyses"].as_array()?.clone();
                    runs.iter()
                        .any(|r| r["wave"] == wave && r["phase"] == "Inconclusive")
                        .then_some(())
                })
                .await
        }
    };
    let mut approvers = Vec::new();
    for (wave, who) in [(1, "Alice"), (2, "Bob")] {
        inconclusive_in(wave).await;
        world.repo.git(&["config", "user.name", who]);
        world.repo.git(&[
            "config",
            "user.email",
            &format!("{}@example.com", who.to_lowercase()),
        ]);
        support::approve_and_merge(&world, WEB, "prod");
        approvers.push(world.repo.git(&["rev-parse", "HEAD"]));
    }
    let status = world.wait_phase(WEB, "Completed").await;
    let runs = status["stages"][0]["analyses"]
        .as_array()
        .expect("analysis runs")
        .clone();
    for wave in [1, 2] {
        let run = runs
            .iter()
            .find(|r| r["wave"] == wave)
            .unwrap_or_else(|| panic!("wave {wave}'s run: {status:#}"));
        let approved_by = run["approvedBy"].as_str().unwrap_or_default();
        assert!(
            !approved_by.is_empty()
                && approvers.iter().any(
                    |sha| sha.starts_with(approved_by) || approved_by.starts_with(sha.as_str())
                ),
            "wave {wave} approved by one of {approvers:?}: {run:#}"
        );
    }
    let text = status_text(&world, WEB);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("by Alice") && words.contains("by Bob"),
        "both approvers shown:\n{text}"
    );
}

// ---- fail-closed messages name files and lines (item 11) ----

/// `web` governed by the policy its annotation names (line 6, column 5), when `policy` is set.
fn web_naming(policy: Option<&str>) -> String {
    let annotation = match policy {
        Some(name) => format!("  annotations:\n    tollgate.dev/policy: {name}\n"),
        None => String::new(),
    };
    format!(
        "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: web\n{annotation}spec:\n  profileSpec:\n    helmCharts:\n    - repositoryURL: https://charts.example.com\n      repositoryName: example\n      chartName: example/web\n      chartVersion: 1.0.0\n      releaseName: web\n      releaseNamespace: web\n  stages:\n  - name: dev\n    clusterSelector:\n      matchLabels:\n        env: dev\n    trigger:\n      auto: {{}}\n"
    )
}

async fn held_message(world: &World) -> String {
    status_where(world, "web held", |s| s["phase"] == "Held").await["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_held_by_a_policy_without_a_valid_version_names_both_places() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web_naming(Some("alpha")));
    repo.write(
        "alpha.yaml",
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: alpha\nspec:\n  progressDeadline: soon\n",
    );
    repo.commit("web under a broken policy");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    let message = held_message(&world).await;
    assert!(
        message.contains("web.yaml:6:5"),
        "the annotation's place: {message}"
    );
    assert!(
        message.contains("alpha.yaml:6:"),
        "the policy's error: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_two_policies_select_is_held_naming_each_selector_line() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web_naming(None));
    for name in ["p1", "p2"] {
        repo.write(
            &format!("{name}.yaml"),
            &format!("# {name}: the fleet's defaults\napiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: {name}\nspec:\n  progressDeadline: 5m\n  selector: {{}}\n"),
        );
    }
    repo.commit("web under two policies");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    let message = held_message(&world).await;
    assert!(
        message.contains("p1.yaml:8") && message.contains("p2.yaml:8"),
        "each policy's selector line: {message}"
    );
}
