//! End to end: recovery from API-server faults, and watch failures made visible. Recovery times
//! are printed (figures for the notes), never asserted: the tests assert that recovery happens.

use crate::support;

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject};
use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, seed};
use tollgate::cluster::resources;

const AUTO: &str = "kyverno-rollout-auto";
const SUMMARIES: &str = "clustersummaries.config.projectsveltos.io";
const PROFILES: &str = "clusterprofiles.config.projectsveltos.io";

async fn completed_world() -> World {
    let repo = TestRepo::new();
    repo.write("auto.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
    repo.commit("One promotion");
    let world = World::start(repo, &fleet_yaml(1, "50ms")).await;
    world.wait_phase(AUTO, "Completed").await;
    world
}

/// Commits chart 3.6.2 (from 3.5.2) and pokes the controller.
fn commit_bump(world: &World, message: &str) {
    let bumped = seed("05-kyverno-rollout-auto-v1.yaml", "1s").replace("3.5.2", "3.6.2");
    world.repo.write("auto.yaml", &bumped);
    world.repo.commit(message);
    world.poke();
}

/// Reads through refusals: a restarted server refuses the test's reads for a moment too.
async fn first_stage_bumped(world: &World) {
    let profiles: Api<DynamicObject> =
        Api::all_with(world.client.clone(), &resources::cluster_profile());
    world
        .eventually("the first stage carries 3.6.2", || async {
            let profile = profiles.get_opt(&format!("{AUTO}-dev")).await.ok()??;
            (profile.data.pointer("/spec/helmCharts/0/chartVersion")? == "3.6.2").then_some(())
        })
        .await;
}

fn watch_condition(status: &Value) -> Option<(String, String)> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "WatchesHealthy")
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_watch_is_visible_on_the_promotions_and_clears_when_it_works_again() {
    let world = completed_world().await;
    // As if the ClusterSummary CRD were deleted: every request on it answers 404.
    world.emulator.set_resource_failure(SUMMARIES, Some(404));
    world.emulator.drop_watches();
    let message = world
        .eventually("WatchesHealthy False", || async {
            let status = world.status(AUTO).await?;
            match watch_condition(&status)? {
                (state, message) if state == "False" => Some(message),
                _ => None,
            }
        })
        .await;
    assert!(message.contains("clustersummaries"), "{message}");
    let health = world
        .controller
        .as_ref()
        .map(|(handle, _)| handle.watch_health.errors())
        .unwrap_or_default();
    assert!(
        health.keys().any(|r| r.contains("clustersummaries")),
        "{health:?}"
    );

    world.emulator.set_resource_failure(SUMMARIES, None);
    world
        .eventually("WatchesHealthy True again", || async {
            let status = world.status(AUTO).await?;
            (watch_condition(&status)?.0 == "True").then_some(())
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_made_during_an_outage_rolls_out_right_after_it() {
    let world = completed_world().await;
    world.emulator.outage_start();
    let failed = world.failed_steps();
    commit_bump(&world, "bump during the outage");
    // Five failed steps: the backoff is at its cap (a client-go style one would be past several
    // seconds by then).
    world
        .eventually("five steps failed against the outage", || async {
            (world.failed_steps() >= failed + 5).then_some(())
        })
        .await;
    // A restarted server has forgotten the watch history (every watch gets 410 and relists)
    // and refuses requests for a moment while its RBAC caches fill.
    world.emulator.expire_watch_history();
    world.emulator.forbid_requests_for(Duration::from_secs(1));
    world.emulator.outage_end();
    let back = Instant::now();
    first_stage_bumped(&world).await;
    println!(
        "recovery: first stage applied {} ms after the API server answered again",
        back.elapsed().as_millis()
    );
}

/// That the retries of a transient failure stay within 2 s however long it lasts is the
/// scheduler's synchronous test (`retry`'s
/// `transient_failures_retry_within_two_seconds_however_long_they_last`); here the real loop
/// classifies a starting server's 403 as transient and retries it: five refused applies (the
/// backoff at its cap) replace what was a 7 s sleep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_refused_by_a_starting_servers_403s_is_retried_within_seconds() {
    let world = completed_world().await;
    // A starting server refuses requests until its RBAC caches are filled.
    world.emulator.set_error_code(403);
    world.emulator.set_error_rate("patch", 1.0);
    let applies = || world.emulator.request_counts().get("patch", PROFILES);
    let before = applies();
    commit_bump(&world, "bump while writes are refused");
    world
        .eventually("five refused applies of the first stage", || async {
            (applies() >= before + 5).then_some(())
        })
        .await;
    // Each refusal is counted by its kind, as controller-rs labels reconcile failures.
    let scraped = world.metrics.encode();
    let exposition = support::exposition::parse_exposition(&scraped).expect("a valid scrape");
    let count = exposition.value("tollgate_reconcile_errors_total", &[("kind", "apply")]);
    assert!(count.is_some_and(|c| c >= 5.0), "{count:?} in:\n{scraped}");
    world.emulator.set_error_rate("patch", 0.0);
    let back = Instant::now();
    first_stage_bumped(&world).await;
    println!(
        "recovery: first stage applied {} ms after the 403s stopped",
        back.elapsed().as_millis()
    );
}
