//! End to end: `onNewSnapshot` and blackouts (RolloutPolicy, issue #18) through the controller
//! loop, against the emulator over HTTP, with real git repositories.

use crate::support;

use serde_json::Value;
use support::{TestRepo, World};
use tollgate_fixtures::{FleetBuilder, fleet_of_envs, policy, promotion, stage};

const WEB: &str = "web";

fn three_envs() -> FleetBuilder {
    fleet_of_envs(&["dev", "staging", "prod"], 1, "50ms")
}

/// dev (auto, `dev_delay`) → staging (manual, unless `manual` is false) → prod.
fn web(chart: &str, dev_delay: &str, manual: bool, approve: Option<&str>) -> String {
    let mut p = promotion(WEB).chart("web", chart);
    if let Some(id) = approve {
        p = p.annotation("approve.tollgate.dev/staging", id);
    }
    let staging = match manual {
        true => stage("staging").selector("env", "staging").manual(),
        false => stage("staging").selector("env", "staging").auto(),
    };
    p.stage(stage("dev").selector("env", "dev").delay(dev_delay))
        .stage(staging)
        .stage(stage("prod").selector("env", "prod").auto())
        .to_yaml()
}

async fn chart_of(world: &World, stage: &str) -> Option<String> {
    let profile = world.profile(&format!("{WEB}-{stage}")).await?;
    profile.data["spec"]["helmCharts"][0]["chartVersion"]
        .as_str()
        .map(str::to_string)
}

async fn status_where(world: &World, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    world
        .eventually(what, || async {
            world.status(WEB).await.filter(|s| check(s))
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_current_completes_the_running_run_then_starts_the_newest() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", "0s", true, None));
    repo.write(
        "policy.yaml",
        &policy("finish-first")
            .on_new_snapshot("FinishCurrent")
            .to_yaml(),
    );
    repo.commit("web 1.0.0, finish the current run first");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    let waiting = status_where(&world, "#1 waits at the staging gate", |s| {
        s["currentStageName"] == "staging" && s["phase"] == "Waiting"
    })
    .await;
    let first_id: String = waiting["snapshotId"]
        .as_str()
        .expect("snapshot id")
        .chars()
        .take(12)
        .collect();

    world
        .repo
        .write("web.yaml", &web("2.0.0", "0s", true, None));
    world.repo.commit("web 2.0.0");
    world
        .repo
        .write("web.yaml", &web("3.0.0", "0s", true, None));
    world.repo.commit("web 3.0.0");
    world.poke();
    let queued = status_where(&world, "#3 queued behind #1", |s| s["queuedSnapshot"] == 3).await;
    assert_eq!(queued["snapshotIndex"], 1);
    assert!(
        queued["message"]
            .as_str()
            .is_some_and(|m| m.contains("snapshot #3 waits for this run to finish")),
        "{queued}"
    );
    assert_eq!(chart_of(&world, "dev").await.as_deref(), Some("1.0.0"));

    // Approve #1 at staging, at HEAD (the file holds #3's content): #1 finishes, then #3 starts.
    world
        .repo
        .write("web.yaml", &web("3.0.0", "0s", true, Some(&first_id)));
    world.repo.commit("approve #1 at staging");
    world.poke();
    let started = status_where(&world, "#3 runs after #1 completed", |s| {
        s["snapshotIndex"] == 3
    })
    .await;
    assert_eq!(chart_of(&world, "prod").await.as_deref(), Some("1.0.0"));
    assert_eq!(started["supersededSnapshots"], serde_json::json!([2]));
    world
        .eventually("dev runs 3.0.0", || async {
            (chart_of(&world, "dev").await.as_deref() == Some("3.0.0")).then_some(())
        })
        .await;
    // Events are published after the status is written: wait for them, do not race them.
    world
        .eventually("the SnapshotsSuperseded event names #2", || async {
            let events = world.events_of(WEB).await;
            events
                .iter()
                .any(|(r, n)| r == "SnapshotsSuperseded" && n.contains("#2"))
                .then_some(())
        })
        .await;
    // 2.0.0 never reached any stage.
    for env in ["dev", "staging", "prod"] {
        assert_ne!(chart_of(&world, env).await.as_deref(), Some("2.0.0"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_runs_every_snapshot_to_completion_in_commit_order() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", "3s", false, None));
    repo.write(
        "policy.yaml",
        &policy("in-order").on_new_snapshot("Queue").to_yaml(),
    );
    repo.commit("web 1.0.0, queue new snapshots");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    status_where(&world, "#1 soaks in dev", |s| {
        s["currentStageName"] == "dev"
    })
    .await;
    world
        .repo
        .write("web.yaml", &web("2.0.0", "3s", false, None));
    world.repo.commit("web 2.0.0");
    world
        .repo
        .write("web.yaml", &web("3.0.0", "3s", false, None));
    world.repo.commit("web 3.0.0");
    world.poke();
    status_where(&world, "#1 runs with #3 queued", |s| {
        s["snapshotIndex"] == 1 && s["queuedSnapshot"] == 3
    })
    .await;
    // #2 runs next (each run soaks 3 s in dev, so it is seen), then #3 to the end.
    status_where(&world, "#2 runs after #1", |s| s["snapshotIndex"] == 2).await;
    assert_eq!(chart_of(&world, "prod").await.as_deref(), Some("1.0.0"));
    let done = status_where(&world, "#3 completes", |s| {
        s["snapshotIndex"] == 3 && s["phase"] == "Completed"
    })
    .await;
    assert!(done.get("supersededSnapshots").is_none(), "{done}");
    assert_eq!(chart_of(&world, "prod").await.as_deref(), Some("3.0.0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_stage_starts_in_a_blackout_and_the_rollout_goes_on_at_its_end() {
    let now = chrono::Utc::now();
    let from = (now - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%S");
    let to = now + chrono::Duration::seconds(4);
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", "0s", false, None));
    repo.write(
        "policy.yaml",
        &policy("freeze")
            .blackout(
                &from.to_string(),
                &to.format("%Y-%m-%dT%H:%M:%S").to_string(),
                Some("UTC"),
                Some("incident 42"),
            )
            .to_yaml(),
    );
    repo.commit("web during a freeze");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    let held = status_where(&world, "the first run held by the blackout", |s| {
        s["blackoutUntil"].is_string()
    })
    .await;
    assert_eq!(held["phase"], "Waiting");
    assert!(
        held["message"]
            .as_str()
            .is_some_and(|m| m.contains("blackout until")
                && m.contains("(incident 42)")
                && m.contains("waits to start")),
        "{held}"
    );
    assert!(
        world.profile("web-dev").await.is_none(),
        "nothing starts in a blackout"
    );
    // Events are published after the status write, asynchronously: wait for it.
    world
        .eventually("a Blackout event", || async {
            let events = world.events_of(WEB).await;
            events.iter().any(|(r, _)| r == "Blackout").then_some(())
        })
        .await;
    // The controller wakes at the end by itself (no commit, no poke).
    let done = world.wait_phase(WEB, "Completed").await;
    assert!(done.get("blackoutUntil").is_none());
}

/// The KubeFleet seed's member clusters: `member3` (order 1) goes before `member1` (order 2).
fn kubefleet_fleet() -> String {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/seeds/fleet-kubefleet-demo.yaml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waves_reach_member3_before_member1_and_never_a_later_wave_early() {
    let repo = TestRepo::new();
    let demo = promotion("demo")
        .chart("web", "1.0.0")
        .stage(stage("canary").selector("environment", "canary").auto())
        .stage(stage("staging").selector("environment", "staging").auto());
    repo.write("demo.yaml", &demo.to_yaml());
    repo.write(
        "policy.yaml",
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: ordered\nspec:\n  stages:\n    canary:\n      waves:\n        sortingLabelKey: order\n        size: 1\n        pause: 2s\n",
    );
    repo.commit("demo in waves");
    let world = World::start(repo, &kubefleet_fleet()).await;
    world
        .eventually("the first wave names member3 only", || async {
            let profile = world.profile("demo-canary").await?;
            let refs = profile.data["spec"]["clusterRefs"].as_array()?.clone();
            let names: Vec<&str> = refs.iter().filter_map(|r| r["name"].as_str()).collect();
            (names == ["member3"]).then_some(())
        })
        .await;
    let status = world.wait_phase("demo", "Completed").await;
    let canary = status["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "canary"))
        .expect("canary stage status");
    assert_eq!(canary["waves"]["reached"], 2);
    let log = world.emulator.write_log();
    // The safety rule, over every write: member1 got nothing of demo-canary before the profile
    // stopped naming member3 alone.
    let second_wave_at = log
        .iter()
        .filter(|w| w.resource.starts_with("clusterprofiles") && w.verb != "delete")
        .filter(|w| w.object["metadata"]["name"] == "demo-canary")
        .find(|w| w.object["spec"].get("clusterRefs").is_none())
        .map(|w| w.resource_version)
        .expect("the last wave restores the selector");
    let member1_early = log.iter().any(|w| {
        w.resource.starts_with("clustersummaries")
            && w.object["metadata"]["name"] == "demo-canary-sveltos-member1"
            && w.resource_version < second_wave_at
    });
    assert!(!member1_early, "member1 was reached before its wave");
    assert!(
        log.iter()
            .any(|w| w.object["metadata"]["name"] == "demo-canary-sveltos-member1"),
        "member1 is reached in its wave (and the check above looked at the right name)"
    );
    let events = world.events_of("demo").await;
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "WaveStarted" && n.contains("member1")),
        "{events:?}"
    );
}
