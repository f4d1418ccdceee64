//! Adaptive concurrency end to end: the controller's own client (throttle included) against the
//! emulator over HTTP, with real git repositories.

mod support;

use std::time::Duration;

use kube::Api;
use kube::api::{DynamicObject, ListParams};
use support::{STEP_CONCURRENCY, TestRepo, World, fleet_yaml, seed};
use tollgate::cluster::leader::{ElectionConfig, LeaderGate, run_election};
use tollgate::cluster::resources;

fn election(identity: &str) -> ElectionConfig {
    ElectionConfig {
        lease_name: "tollgate-leader".into(),
        lease_namespace: "default".into(),
        identity: identity.into(),
        duration: Duration::from_secs(3),
        grace: Duration::from_secs(1),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_answers_shrink_the_limit_and_the_rollout_completes_after() {
    let repo = TestRepo::new();
    repo.write(
        "promotions/kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Add kyverno rollout");
    let mut world = World::without_controller(repo, &fleet_yaml(2, "100ms")).await;
    let initial = world.throttle.limit().expect("adaptive by default");
    assert_eq!(initial, STEP_CONCURRENCY);
    // Every patch (the profiles' server-side apply among them) is refused as overloaded until
    // the server recovers.
    world.emulator.set_error_code(429);
    world.emulator.set_error_rate("patch", 1.0);
    world.start_controller().await;

    world
        .eventually("the limit shrinks on 429s", || async {
            world.throttle.limit().filter(|limit| *limit < initial)
        })
        .await;
    let throttled = world.metrics.encode();
    assert!(
        throttled.contains("tollgate_api_throttled_total"),
        "{throttled}"
    );
    assert!(
        !throttled.contains("tollgate_api_throttled_total 0\n"),
        "429s are counted: {throttled}"
    );

    world.emulator.set_error_rate("patch", 0.0);
    world.wait_phase("kyverno-rollout-auto", "Completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_requests_and_watches_pass_a_full_throttle() {
    let world = World::without_controller(TestRepo::new(), &fleet_yaml(1, "100ms")).await;
    let limit = world.throttle.limit().expect("adaptive by default");
    // Every slot taken, as by writes queued behind a slow server.
    let mut held = Vec::new();
    for _ in 0..limit {
        held.push(world.throttle.acquire().await);
    }

    let gate = LeaderGate::follower();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let election = tokio::spawn(run_election(
        world.client.clone(),
        election("replica-a"),
        gate.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    world
        .eventually("the lease is taken past the full throttle", || async {
            gate.is_leader().then_some(())
        })
        .await;
    let profiles: Api<DynamicObject> =
        Api::all_with(world.client.clone(), &resources::cluster_profile());
    let watch = tokio::time::timeout(
        support::PATIENCE,
        profiles.watch(&kube::api::WatchParams::default().timeout(1), "0"),
    )
    .await
    .expect("a watch starts past the full throttle");
    assert!(watch.is_ok(), "watch: {:?}", watch.err());

    // A list is throttled: it waits for a slot, and gets one when a slot frees.
    let list = tokio::spawn({
        let profiles = profiles.clone();
        async move { profiles.list(&ListParams::default()).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!list.is_finished(), "a list got past a full throttle");
    drop(held);
    list.await
        .expect("list task")
        .expect("the list is served once slots free");

    let _ = stop.send(());
    election.await.expect("election ends");
}
