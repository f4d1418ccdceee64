//! Adaptive concurrency end to end: the controller's own client (throttle included) against the
//! emulator over HTTP, with real git repositories.

mod support;

use support::{STEP_CONCURRENCY, TestRepo, World, fleet_yaml, seed};

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
