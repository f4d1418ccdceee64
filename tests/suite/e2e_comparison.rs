//! End to end: comparative analyses (issue #48, "Judged by") through the controller loop,
//! against the emulator over HTTP, with real git repositories and a REAL Prometheus (Debian's,
//! started once for this binary by `support::prometheus`) scraping a latency gauge per cluster
//! that each test sets. The clusters' latencies differ by more than a regression does (0.18 to
//! 0.26 s: a fixed threshold that lets every healthy cluster through lets a 30 % regression of
//! the fastest ones through too); the rank test tells the cohorts apart anyway.
//!
//! Each test owns its series through a `test="<name>"` label: the Prometheus is shared.

use crate::support;

use serde_json::{Value, json};
use support::prometheus::{Prometheus, prometheus};
use support::{TestRepo, World, str_at, tollgate_binary};
use tollgate_fixtures::{FleetBuilder, cluster, fleet, promotion, stage};

const WEB: &str = "web";
const LATENCY: &str = "app_latency_p99_seconds";
/// A regression: 30 % slower.
const SLOWER: f64 = 1.3;

/// This binary's Prometheus; `None` (the test passes with a notice) only outside CI.
fn prom() -> Option<&'static Prometheus> {
    tokio::task::block_in_place(prometheus)
}

/// `prod-01` … `prod-<n>` (label `order` = the number), in namespace `fleet`.
fn prod(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("prod-{i:02}")).collect()
}

fn fleet_of(clusters: &[String], latency: &str) -> FleetBuilder {
    let mut fleet = fleet().default_latency(latency);
    for (i, name) in clusters.iter().enumerate() {
        fleet = fleet.cluster(
            cluster(name)
                .ns("fleet")
                .label("env", "prod")
                .label("order", &(i + 1).to_string()),
        );
    }
    fleet
}

/// Healthy latencies, 0.18 to 0.26 s, interleaved so that the first and the second half of
/// the clusters are alike.
fn healthy(clusters: &[String]) -> Vec<(String, f64)> {
    let n = clusters.len();
    let half = n.div_ceil(2);
    clusters
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let rank = if i < half { 2 * i } else { 2 * (i - half) + 1 };
            let value = 0.18 + 0.08 * rank as f64 / (n - 1).max(1) as f64;
            (c.clone(), (value * 1e4).round() / 1e4)
        })
        .collect()
}

fn slower(latencies: &[(String, f64)], which: &[String]) -> Vec<(String, f64)> {
    latencies
        .iter()
        .map(|(c, v)| match which.contains(c) {
            true => (c.clone(), ((v * SLOWER) * 1e4).round() / 1e4),
            false => (c.clone(), *v),
        })
        .collect()
}

/// Serves this test's latencies and waits until Prometheus has scraped them.
fn set_latencies(prom: &Prometheus, test: &str, latencies: &[(String, f64)]) {
    tokio::task::block_in_place(|| {
        for (cluster, value) in latencies {
            prom.set(LATENCY, &[("test", test), ("cluster", cluster)], *value);
        }
        for (cluster, value) in latencies {
            let query = format!("{LATENCY}{{test=\"{test}\",cluster=\"{cluster}\"}}");
            prom.wait_for(&query, &[*value]);
        }
    });
}

fn web(chart: &str) -> String {
    promotion(WEB)
        .chart("web", chart)
        .stage(stage("prod").selector("env", "prod").auto())
        .to_yaml()
}

/// A policy comparing prod's latency with `compare`, plus `prod` override fields.
fn policy(prom: &Prometheus, test: &str, compare: Value, analysis: Value, prod: Value) -> String {
    let mut latency = json!({
        "name": "latency",
        "prometheus": {
            "address": prom.address,
            "query": format!("max by (cluster) ({LATENCY}{{test=\"{test}\",cluster=~\"{{{{ clustersRegex }}}}\"}})"),
        },
        "compare": compare,
        "interval": "1s",
        "count": 1,
    });
    if let (Some(a), Some(extra)) = (latency.as_object_mut(), analysis.as_object()) {
        a.extend(extra.clone());
    }
    let mut stage = json!({"analyses": ["latency"]});
    if let (Some(s), Some(extra)) = (stage.as_object_mut(), prod.as_object()) {
        s.extend(extra.clone());
    }
    json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "compared"},
        "spec": {"selector": {}, "maxFailures": 0, "onFailure": "Rollback",
                 "analyses": [latency], "stages": {"prod": stage}},
    })
    .to_string()
}

async fn start(fleet: FleetBuilder, policy: String) -> World {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write("policy.yaml", &policy);
    repo.commit("web with a comparative analysis");
    World::start(repo, &fleet.to_yaml()).await
}

async fn release(world: &World, chart: &str) {
    world.repo.write("web.yaml", &web(chart));
    world.repo.commit(&format!("web {chart}"));
    world.poke();
}

/// prod's analysis runs.
fn runs(status: &Value) -> Vec<Value> {
    status["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "prod"))
        .and_then(|s| s["analyses"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// The comparison of the first measurement of the run of `wave` (`None`: no waves).
fn comparison(status: &Value, wave: Option<u64>) -> Value {
    let run = runs(status)
        .into_iter()
        .find(|r| r["wave"].as_u64() == wave)
        .unwrap_or_else(|| panic!("no run of wave {wave:?} in {status:#}"));
    run["measurements"][0]["comparison"].clone()
}

fn cohort(comparison: &Value, which: &str) -> Vec<String> {
    comparison[which]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// prod in two waves of 8 (ordered by `order`), compared with the waves not reached. The last
/// wave has none left: the first wave's comparison decided (no `onNoData` needed).
async fn waved(prom: &Prometheus, test: &str, samples: &str) -> (World, Vec<String>) {
    let clusters = prod(16);
    set_latencies(prom, test, &healthy(&clusters));
    // A range looks back over the interval: from 2 s after provisioning, only at what was set.
    let delay = if samples == "Range" { "2s" } else { "0s" };
    let policy = policy(
        prom,
        test,
        json!({"baseline": "OtherWaves", "worse": "Higher", "confidence": 0.95, "minEffect": "10%", "minClusters": 3, "samples": samples}),
        json!({"initialDelay": delay}),
        json!({"waves": {"sortingLabelKey": "order", "size": 8}}),
    );
    let world = start(fleet_of(&clusters, "50ms"), policy).await;
    (world, clusters)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thirty_percent_regression_in_the_first_wave_fails_the_comparison_and_rolls_back() {
    let Some(prom) = prom() else { return };
    let test = "compare-regression";
    let (world, clusters) = waved(prom, test, "Instant").await;
    let status = world.wait_phase(WEB, "Completed").await;
    let first = comparison(&status, Some(1));
    assert_eq!(cohort(&first, "testCohort"), clusters[..8], "{status:#}");
    assert_eq!(
        cohort(&first, "baselineCohort"),
        clusters[8..],
        "{status:#}"
    );

    // 2.0.0 is 30 % slower; the first wave's clusters get it.
    set_latencies(prom, test, &slower(&healthy(&clusters), &clusters[..8]));
    release(&world, "2.0.0").await;
    let status = world.wait_phase(WEB, "RolledBack").await;
    assert_eq!(
        str_at(&status, "/failure/stage"),
        Some("prod"),
        "{status:#}"
    );
    let failed = runs(&status)
        .into_iter()
        .find(|r| r["phase"] == "Failed")
        .unwrap_or_else(|| panic!("a failed run in {status:#}"));
    let measured = &failed["measurements"][0];
    assert_eq!(measured["verdict"], "Failed", "{status:#}");
    let record = &measured["comparison"]["record"];
    let p = record["pValue"].as_f64().unwrap_or(1.0);
    let effect = record["effect"].as_f64().unwrap_or(0.0);
    assert!(p < 0.05, "significant: {record:#}");
    assert!(effect > 0.2, "about 27 % slower by the medians: {record:#}");
    let value = measured["value"].as_str().unwrap_or_default();
    assert!(value.contains("effect=+"), "{value}");
    let metrics = world.metrics.encode();
    for series in [
        "tollgate_analysis_comparison{promotion=\"web\",stage=\"prod\",analysis=\"latency\",cohort=\"test\"} ",
        "tollgate_analysis_comparison{promotion=\"web\",stage=\"prod\",analysis=\"latency\",cohort=\"baseline\"} ",
        "tollgate_analysis_comparison_p_value{promotion=\"web\",stage=\"prod\",analysis=\"latency\"} ",
    ] {
        assert!(metrics.contains(series), "missing {series} in:\n{metrics}");
    }
    // `tollgate timeline`: the failed run's analysis bar tells what it compared.
    let svg = tollgate_binary()
        .args(["timeline", WEB, "--kubeconfig"])
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate timeline runs");
    let svg = String::from_utf8_lossy(&svg.stdout);
    assert!(
        svg.contains("compared latency: ")
            && svg.contains("vs OtherWaves")
            && svg.contains("(Failed)"),
        "{svg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_noise_without_regression_passes_and_a_shift_of_every_cluster_passes_too() {
    let Some(prom) = prom() else { return };
    let test = "compare-traffic";
    let (world, clusters) = waved(prom, test, "Instant").await;
    let status = world.wait_phase(WEB, "Completed").await;
    let first = comparison(&status, Some(1));
    assert!(
        first["record"]["pValue"].as_f64().is_some_and(|p| p > 0.05),
        "no difference: {status:#}"
    );

    // Traffic: every cluster 30 % slower at once, the new release or not.
    set_latencies(prom, test, &slower(&healthy(&clusters), &clusters));
    release(&world, "2.0.0").await;
    let status = world
        .eventually("2.0.0 completes", || async {
            let status = world.status(WEB).await?;
            let done = status["phase"] == "Completed" && status["snapshotIndex"] == 2;
            done.then_some(status)
        })
        .await;
    let first = comparison(&status, Some(1));
    assert!(
        first["record"]["pValue"].as_f64().is_some_and(|p| p > 0.05),
        "both cohorts moved: {status:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_catches_a_regression_in_the_last_stage() {
    let Some(prom) = prom() else { return };
    let test = "compare-before";
    let clusters = prod(8);
    set_latencies(prom, test, &healthy(&clusters));
    let policy = policy(
        prom,
        test,
        json!({"baseline": "Before", "minEffect": "10%"}),
        json!({"initialDelay": "6s"}),
        json!({}),
    );
    // Provisioning takes 2 s, then 6 s before the measurement: time to set the new latencies
    // once the profile is applied (the baseline is measured up to that instant).
    let world = start(fleet_of(&clusters, "2s"), policy).await;
    world.wait_phase(WEB, "Completed").await;

    release(&world, "2.0.0").await;
    world
        .eventually("2.0.0 is applied to prod", || async {
            let profile = world.profile("web-prod").await?;
            let chart = str_at(&profile.data, "/spec/helmCharts/0/chartVersion")?;
            (chart == "2.0.0").then_some(())
        })
        .await;
    set_latencies(prom, test, &slower(&healthy(&clusters), &clusters));
    let status = world.wait_phase(WEB, "RolledBack").await;
    let compared = comparison(&status, None);
    assert_eq!(compared["baseline"], "Before", "{status:#}");
    assert_eq!(cohort(&compared, "testCohort"), clusters, "{status:#}");
    assert_eq!(cohort(&compared, "baselineCohort"), clusters, "{status:#}");
    let p = compared["record"]["pValue"].as_f64().unwrap_or(1.0);
    assert!(p < 0.05, "{status:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_clusters_is_no_data_and_on_no_data_applies() {
    let Some(prom) = prom() else { return };
    let test = "compare-few";
    let clusters = prod(4);
    set_latencies(prom, test, &healthy(&clusters));
    let policy = policy(
        prom,
        test,
        json!({"baseline": "OtherWaves", "minClusters": 3}),
        json!({"onNoData": "Fail"}),
        json!({"waves": {"sortingLabelKey": "order", "size": 2}}),
    );
    let world = start(fleet_of(&clusters, "50ms"), policy).await;
    // The policy rolls back: the first snapshot's failure leaves prod without it.
    let status = world.wait_phase(WEB, "RolledBack").await;
    assert_eq!(
        str_at(&status, "/failure/stage"),
        Some("prod"),
        "{status:#}"
    );
    let run = runs(&status)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("a run in {status:#}"));
    let measured = &run["measurements"][0];
    assert_eq!(measured["verdict"], "Failed", "{status:#}");
    let error = measured["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(
            "no data: 2 test and 2 baseline clusters answered, fewer than minClusters 3"
        ),
        "{error}"
    );
    assert_eq!(
        cohort(&measured["comparison"], "baselineCohort"),
        clusters[2..],
        "{status:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_samples_take_every_point_of_the_interval_and_catch_the_regression_too() {
    let Some(prom) = prom() else { return };
    let test = "compare-range";
    let (world, clusters) = waved(prom, test, "Range").await;
    world.wait_phase(WEB, "Completed").await;
    set_latencies(prom, test, &slower(&healthy(&clusters), &clusters[..8]));
    release(&world, "2.0.0").await;
    let status = world.wait_phase(WEB, "RolledBack").await;
    let compared = comparison(&status, Some(1));
    let record = &compared["record"];
    assert!(
        record["testSize"].as_u64().is_some_and(|n| n > 8),
        "more than one point per cluster: {record:#}"
    );
    assert_eq!(cohort(&compared, "testCohort"), clusters[..8], "{status:#}");
    assert!(
        record["pValue"].as_f64().is_some_and(|p| p < 0.05),
        "{record:#}"
    );
}

/// `result` in CEL conditions is the comparison's record: a user's condition replaces the
/// default verdict. Here only a regression above 50 % fails, so the 30 % one that the default
/// verdict rolls back (the first test) completes, and the record is kept as measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_over_the_record_replaces_the_default_verdict() {
    let Some(prom) = prom() else { return };
    let test = "compare-condition";
    let clusters = prod(16);
    set_latencies(prom, test, &healthy(&clusters));
    let policy = policy(
        prom,
        test,
        json!({"baseline": "OtherWaves", "worse": "Higher", "confidence": 0.95, "minEffect": "10%", "minClusters": 3}),
        json!({"failureCondition": "result.pValue < 0.05 && result.effect > 0.5"}),
        json!({"waves": {"sortingLabelKey": "order", "size": 8}}),
    );
    let world = start(fleet_of(&clusters, "50ms"), policy).await;
    world.wait_phase(WEB, "Completed").await;
    set_latencies(prom, test, &slower(&healthy(&clusters), &clusters[..8]));
    release(&world, "2.0.0").await;
    let status = world
        .eventually("2.0.0 completes under the user's condition", || async {
            let status = world.status(WEB).await?;
            assert_ne!(
                status["phase"], "RolledBack",
                "the default verdict ruled: {status:#}"
            );
            (status["phase"] == "Completed" && status["snapshotIndex"] == 2).then_some(status)
        })
        .await;
    let measured = &comparison(&status, Some(1))["record"];
    assert!(
        measured["pValue"].as_f64().is_some_and(|p| p < 0.05)
            && measured["effect"]
                .as_f64()
                .is_some_and(|e| e > 0.2 && e < 0.5),
        "a significant regression under 50 %: {measured:#}"
    );
}
