//! Adaptive concurrency end to end: the controller's own client (throttle included) against the
//! emulator over HTTP, with real git repositories.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::{DynamicObject, ListParams, PostParams};
use support::elected::{Elected, election};
use support::{STEP_CONCURRENCY, TestRepo, World, fleet_yaml, seed};
use tollgate::cli::run::controller_client;
use tollgate::cluster::leader::ElectionConfig;
use tollgate::cluster::resources;
use tollgate::cluster::throttle::Concurrency;
use tollgate::controller::{self, ControllerConfig};

/// The seed kyverno rollout (dev, staging, prod; 1 s delays) on two clusters per env, with the
/// controller not started yet.
async fn kyverno_world() -> World {
    let repo = TestRepo::new();
    repo.write(
        "promotions/kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Add kyverno rollout");
    World::without_controller(repo, &fleet_yaml(2, "100ms")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_answers_shrink_the_limit_and_the_rollout_completes_after() {
    let mut world = kyverno_world().await;
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
async fn lease_requests_watches_and_events_pass_a_full_throttle() {
    let world = World::without_controller(TestRepo::new(), &fleet_yaml(1, "100ms")).await;
    let limit = world.throttle.limit().expect("adaptive by default");
    // Every slot taken, as by writes queued behind a slow server.
    let mut held = Vec::new();
    for _ in 0..limit {
        held.push(world.throttle.acquire().await);
    }

    let elected = Elected::start(&world, election("replica-a"));
    world
        .eventually("the lease is taken past the full throttle", || async {
            elected.gate.is_leader().then_some(())
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
    // Events have their own bound (their senders) and must not wait for a step's slot.
    let events: Api<Event> = Api::namespaced(world.client.clone(), "default");
    let event = Event {
        metadata: ObjectMeta {
            name: Some("past-the-throttle".into()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        type_: Some("Normal".into()),
        reason: Some("Test".into()),
        action: Some("Test".into()),
        reporting_controller: Some("tollgate".into()),
        reporting_instance: Some("test".into()),
        ..Event::default()
    };
    let created = tokio::time::timeout(
        support::PATIENCE,
        events.create(&PostParams::default(), &event),
    )
    .await
    .expect("an Event is sent past the full throttle");
    assert!(created.is_ok(), "event: {:?}", created.err());

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

    elected.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429s_retry_after_delays_that_promotions_retry() {
    const RETRY_AFTER: Duration = Duration::from_secs(3);
    let mut world = kyverno_world().await;
    world
        .emulator
        .set_retry_after_seconds(RETRY_AFTER.as_secs());
    world.emulator.set_error_code(429);
    world.emulator.set_error_rate("patch", 1.0);
    world.start_controller().await;

    let refused_at = world
        .eventually("the first apply is refused with 429", || async {
            (world.emulator.request_counts().verb("patch") > 0).then(chrono::Utc::now)
        })
        .await;
    world.emulator.set_error_rate("patch", 0.0);
    let applied_at = world
        .eventually("the stage-1 profile is applied on a retry", || async {
            world
                .emulator
                .write_log()
                .iter()
                .find(|w| w.name == "kyverno-rollout-auto-dev" && w.field_manager == "tollgate")
                .map(|w| w.time)
        })
        .await;
    // Seen by polling after the refusal, so the real wait was at least this long.
    let waited = (applied_at - refused_at).to_std().unwrap_or_default();
    assert!(
        waited >= RETRY_AFTER - Duration::from_millis(500),
        "retried {waited:?} after a 429 asking for {RETRY_AFTER:?}"
    );
}

/// Promotions enough to keep more requests in flight than the server allows.
const LOADED_PROMOTIONS: usize = 100;

fn loaded_promotion(index: usize) -> String {
    format!(
        "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: p{index}\nspec:\n  profileSpec:\n    helmCharts:\n    - repositoryURL: https://charts.example.com\n      repositoryName: example\n      chartName: example/app\n      chartVersion: 1.0.0\n      releaseName: app\n      releaseNamespace: app\n  stages:\n  - name: dev\n    clusterSelector:\n      matchLabels:\n        env: dev\n  - name: prod\n    clusterSelector:\n      matchLabels:\n        env: prod\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_servers_inflight_limit_a_rollout_completes_with_few_429s_and_the_leader_keeps_its_lease()
 {
    // Above the adaptive start (16), as real servers are (hundreds): the probe finds it.
    const SERVER_LIMIT: usize = 24;
    let repo = TestRepo::new();
    for index in 0..LOADED_PROMOTIONS {
        repo.write(&format!("p{index}.yaml"), &loaded_promotion(index));
    }
    repo.commit("Promotions");
    let mut world = World::without_controller(repo, &fleet_yaml(1, "100ms")).await;
    // A slow server with room for few requests; the controller may step far more at once.
    world
        .emulator
        .set_request_latency(Duration::from_millis(20));
    world
        .emulator
        .set_max_inflight(Some(SERVER_LIMIT), Some(SERVER_LIMIT));
    world.throttle = Concurrency::Adaptive { ceiling: 64 }.throttle(world.metrics.throttle());
    let url = world.emulator.url().parse().expect("emulator URL");
    world.client = controller_client(kube::Config::new(url), &world.throttle).expect("client");

    // Nearer the deployed 15 s than the 3 s of the other tests: this one loads a debug build on a
    // shared machine, and the property is that leases do not queue behind writes.
    let lease = ElectionConfig {
        duration: Duration::from_secs(10),
        grace: Duration::from_secs(2),
        ..election("replica-a")
    };
    let elected = Elected::start(&world, lease);
    let gate = elected.gate.clone();
    world
        .eventually("the replica leads", || async {
            gate.is_leader().then_some(())
        })
        .await;
    let config = ControllerConfig {
        concurrency: 64,
        ..world.controller_config()
    };
    let (handle, task) = controller::start(world.client.clone(), config, gate.clone())
        .await
        .expect("controller starts");

    let mut lost_lead = false;
    world
        .eventually("every promotion completes", || {
            lost_lead |= !gate.is_leader();
            // Read in-process, so the test's polling adds no requests to the server's count.
            let completed = world
                .emulator
                .state_json()
                .to_string()
                .matches("\"phase\":\"Completed\"")
                .count();
            async move { (completed >= LOADED_PROMOTIONS).then_some(()) }
        })
        .await;
    assert!(!lost_lead, "the leader lost its lease under load");
    let counts = world.emulator.request_counts();
    let total: u64 = counts.0.values().sum();
    let throttled = world.emulator.throttled();
    // A few percent: the probe's first overshoot (slow start from 16 past the server's 24) is a
    // fixed ~30 refusals, a large share of this small run's ~850 requests; runs measured 4–8 %,
    // and fixed concurrency 64 ~19 %. At fleet scale the rate is ~1 % (the scale harness).
    assert!(
        throttled * 100 <= total * 10,
        "{throttled} of {total} requests refused with 429: {:?}",
        counts.0
    );

    handle.shutdown();
    task.await.expect("controller ends");
    elected.shut_down().await;
}

/// A write refused with 429 is sent again after the server's Retry-After within the same step
/// (through the lease gate again), instead of failing the step and waiting for the next batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_write_is_sent_again_within_its_step() {
    let mut world = kyverno_world().await;
    world.emulator.set_retry_after_seconds(1);
    world.emulator.set_error_code(429);
    world.emulator.set_error_rate("patch", 1.0);
    world.start_controller().await;
    world
        .eventually("the first apply is refused with 429", || async {
            (world.emulator.request_counts().verb("patch") > 0).then_some(())
        })
        .await;
    world.emulator.set_error_rate("patch", 0.0);
    world.wait_phase("kyverno-rollout-auto", "Completed").await;
    let metrics = world.metrics.encode();
    assert!(
        !metrics.contains("result=\"error\""),
        "a step failed on the 429 instead of sending the write again:\n{metrics}"
    );
    assert!(
        metrics.contains("tollgate_api_throttled_total "),
        "{metrics}"
    );
}
