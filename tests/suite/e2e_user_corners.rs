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
