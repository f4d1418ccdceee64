//! End to end: removal and pruning (with preserve and the blast-radius guard), a controller killed
//! mid-delay and restarted, and an API outage mid-rollout.

use crate::support;

use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::{TestRepo, World, fleet_yaml, seed};
use tollgate::cluster::resources;

fn with_preserve(manifest: &str) -> String {
    manifest.replacen(
        "spec:\n",
        "spec:\n  preserveClusterProfilesOnDelete: true\n",
        1,
    )
}

/// Three promotions; one removed (prunes), one removed with preserve (kept). 2 of 3 is above the
/// default 50% guard share, so they are removed in two commits. The preserved one is removed
/// while the controller is down: the restarted controller never saw it in git, and reads
/// `preserveClusterProfilesOnDelete` from git's history of it (before, it knew no snapshot of it
/// and deleted the profiles).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_promotion_prunes_its_profiles_unless_preserved() {
    let repo = TestRepo::new();
    repo.write("a.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
    repo.write(
        "b.yaml",
        &with_preserve(&seed("01-core-payment-processor-ci.yaml", "1s")),
    );
    repo.write("c.yaml", &seed("02-test-kyverno-rollout-auto.yaml", "1s"));
    repo.commit("Three promotions");
    let mut world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    for name in [
        "kyverno-rollout-auto",
        "core-payment-processor-ci",
        "test-kyverno-rollout",
    ] {
        world.wait_phase(name, "Completed").await;
    }

    world.repo.remove("a.yaml");
    world.repo.commit("Remove kyverno-rollout-auto");
    world.poke();
    world
        .eventually("a's profiles and state pruned", || async {
            let gone = world.profiles_of("kyverno-rollout-auto").await.is_empty()
                && world.git_promotion("kyverno-rollout-auto").await.is_none();
            gone.then_some(())
        })
        .await;

    world.stop_controller().await;
    world.repo.remove("b.yaml");
    world
        .repo
        .commit("Remove core-payment-processor-ci (preserved)");
    world.start_controller().await;
    world
        .eventually("b's state object removed", || async {
            world
                .git_promotion("core-payment-processor-ci")
                .await
                .is_none()
                .then_some(())
        })
        .await;
    let kept = world.profiles_of("core-payment-processor-ci").await;
    assert_eq!(
        kept.len(),
        4,
        "preserveClusterProfilesOnDelete keeps every stage's profile (D9)"
    );
    // A deleted profile lingers while Sveltos' finalizer cleans up: kept means not deleted.
    assert!(
        kept.iter()
            .all(|profile| profile.metadata.deletion_timestamp.is_none()),
        "a preserved profile was deleted"
    );
    assert_eq!(
        world.profiles_of("test-kyverno-rollout").await.len(),
        2,
        "c untouched"
    );
}

/// A commit that removes every promotion is held by the blast-radius guard until confirmed, also
/// when it landed while the controller was down (the promotions it removed were then never in
/// this process's git: before the scheduler stepped held names it had no snapshot of, nothing
/// said they were held). A removal held while running is `e2e_safety`'s
/// `held_removal_freezes_the_promotion`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mass_removal_while_the_controller_is_down_is_held_until_confirmed() {
    let repo = TestRepo::new();
    repo.write("a.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
    repo.commit("One promotion");
    let mut world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    world.wait_phase("kyverno-rollout-auto", "Completed").await;

    world.stop_controller().await;
    world.repo.remove("a.yaml");
    world.repo.commit("Remove everything");
    world.start_controller().await;
    let status = world
        .eventually("status explains the held removal", || async {
            world.status("kyverno-rollout-auto").await.filter(|s| {
                s["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Removal held"))
            })
        })
        .await;
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("removes all 1 promotions"))
    );
    assert_eq!(
        world.profiles_of("kyverno-rollout-auto").await.len(),
        3,
        "nothing pruned"
    );

    // Confirm by annotating the GitPromotion.
    let api: Api<DynamicObject> = Api::all_with(world.client.clone(), &resources::git_promotion());
    api.patch(
        "kyverno-rollout-auto",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"tollgate.dev/confirm-prune": "true"}}})),
    )
    .await
    .expect("annotate");
    world
        .eventually("pruned after confirmation", || async {
            world
                .profiles_of("kyverno-rollout-auto")
                .await
                .is_empty()
                .then_some(())
        })
        .await;
}

fn time_at(value: &Value, pointer: &str) -> Option<DateTime<Utc>> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Killed mid-delay and restarted: the delay is neither shortened nor restarted, and nothing that
/// was applied is applied again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_mid_delay_neither_shortens_the_delay_nor_reapplies() {
    let repo = TestRepo::new();
    repo.write("a.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "4s"));
    repo.commit("Kyverno, 4s soak per stage");
    let mut world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    let status = world
        .eventually("dev provisioned, soaking", || async {
            world
                .status("kyverno-rollout-auto")
                .await
                .filter(|s| s["stages"][0]["lastSuccessfulAppliedTime"].is_string())
        })
        .await;
    let dev_done = time_at(&status, "/stages/0/lastSuccessfulAppliedTime").expect("time");

    world.stop_controller().await;
    let tollgate_writes = |world: &World| {
        world
            .emulator
            .write_log()
            .iter()
            .filter(|w| w.field_manager == "tollgate" && !w.status_subresource)
            .filter(|w| w.resource.starts_with("clusterprofiles"))
            .count()
    };
    let writes_before = tollgate_writes(&world);
    world.start_controller().await;
    // The restarted controller wakes when the delay from dev's success ends: not sooner (the
    // delay shortened), not a delay from its own start (restarted).
    let quiescence = world.quiescent().await;
    eprintln!(
        "restart: dev done {dev_done}, quiescent at {}, {quiescence:?}",
        Utc::now()
    );
    assert_eq!(
        quiescence.next_wake_at,
        Some(dev_done + chrono::Duration::seconds(4)),
        "the wake-up after the restart"
    );

    world.wait_phase("kyverno-rollout-auto", "Completed").await;
    let log = world.emulator.write_log();
    let staging_applied = log
        .iter()
        .find(|w| w.name == "kyverno-rollout-auto-staging" && w.field_manager == "tollgate")
        .map(|w| w.time)
        .expect("staging applied");
    assert!(
        staging_applied >= dev_done + chrono::Duration::seconds(4),
        "delay shortened: dev done {dev_done}, staging applied {staging_applied}"
    );
    assert!(
        staging_applied < dev_done + chrono::Duration::seconds(8),
        "delay restarted from the controller restart: dev done {dev_done}, staging applied {staging_applied}"
    );
    // After the restart, only staging and production were applied (once each): dev was not.
    assert_eq!(tollgate_writes(&world) - writes_before, 2);
}

/// A full API outage mid-rollout: the controller retries with backoff and finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_outage_mid_rollout_is_survived() {
    let repo = TestRepo::new();
    repo.write("a.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "2s"));
    repo.commit("Kyverno");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    world
        .eventually("dev applied", || async {
            world.profile("kyverno-rollout-auto-dev").await.map(|_| ())
        })
        .await;
    let failed = world.failed_steps();
    world.emulator.outage_start();
    world
        .eventually("three steps failed against the outage", || async {
            (world.failed_steps() >= failed + 3).then_some(())
        })
        .await;
    world.emulator.outage_end();
    let status = world.wait_phase("kyverno-rollout-auto", "Completed").await;
    assert_eq!(status["currentStageName"], "production");
}

/// Stopping a controller whose git thread is stuck in a fetch (a remote that accepts the
/// connection and says nothing) must not block the runtime: the thread is joined off the
/// workers. Joined on one, it froze every task behind it until the fetch timed out, the API
/// server of `run --embedded` and the lease deadlines included. On a single-threaded runtime the
/// controller's task must still be stopping when another task gets its turn.
#[tokio::test(flavor = "current_thread")]
async fn stopping_during_a_hung_fetch_does_not_block_the_runtime() {
    use tollgate::cluster::leader::LeaderGate;
    use tollgate_source::SourceConfig;

    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = silent.local_addr().expect("address");
    let (accepted_tx, accepted_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming() {
            held.push(stream);
            let _ = accepted_tx.send(());
        }
    });
    let world = World::without_controller(TestRepo::new(), &fleet_yaml(1, "100ms")).await;
    let mut config = world.controller_config();
    let url = format!("http://{addr}/fleet.git");
    config.source = SourceConfig::new(url, "main", "", world.cache.path());
    // 5 s each; the same for every source of this binary (libgit2's timeouts are process-wide).
    config.source.timeouts = support::NETWORK_TIMEOUTS;
    let (handle, mut task) =
        tollgate::controller::start(world.client.clone(), config, LeaderGate::always())
            .await
            .expect("controller starts");
    tokio::task::spawn_blocking(move || accepted_rx.recv())
        .await
        .expect("accept thread")
        .expect("the git thread connects to the silent remote");

    handle.shutdown();
    let stopped_first = tokio::select! {
        biased;
        _ = &mut task => true,
        () = tokio::time::sleep(Duration::from_millis(500)) => false,
    };
    assert!(
        !stopped_first,
        "the controller's stop held the only runtime thread until the hung fetch timed out"
    );
    task.await
        .expect("the controller stops once the fetch times out");
}
