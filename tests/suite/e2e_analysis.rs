//! End to end: fleet analysis gates (issue #32) through the controller loop, against the
//! emulator over HTTP, with real git repositories and a REAL Prometheus (Debian's, started once
//! for this binary by `support::prometheus`, scraping series the tests set per cluster), a
//! loopback web check and a loopback server emulating GitHub's commit status API.
//!
//! Each test owns its series through a `test="<name>"` label: the Prometheus is shared.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::prometheus::{Prometheus, prometheus, read_head};
use support::{TestRepo, World, str_at};
use tollgate_fixtures::{FleetBuilder, cluster, fleet, fleet_of_envs, promotion, stage};

const WEB: &str = "web";
const RATIO: &str = "app_error_ratio";

/// This binary's Prometheus; `None` (the test passes with a notice) only outside CI.
fn prom() -> Option<&'static Prometheus> {
    tokio::task::block_in_place(prometheus)
}

/// `web` staged over `envs`, each stage automatic (no soak: the analyses are the gate).
fn web(chart: &str, envs: &[&str]) -> String {
    let mut p = promotion(WEB).chart("web", chart);
    for env in envs {
        p = p.stage(stage(env).selector("env", env).auto());
    }
    p.to_yaml()
}

/// A RolloutPolicy (JSON is YAML) with `analyses` gating the `gated` stages.
fn gated_policy(analyses: Value, gated: &[&str], extra: Value) -> String {
    let names: Vec<&str> = analyses
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default();
    let stages: serde_json::Map<String, Value> = gated
        .iter()
        .map(|s| (s.to_string(), json!({"analyses": names})))
        .collect();
    let mut spec = json!({"selector": {}, "analyses": analyses, "stages": stages});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "gates"}, "spec": spec,
    })
    .to_string()
}

/// The error-rate analysis of the issue, on this test's series, plus `extra` fields.
fn error_rate(prom: &Prometheus, test: &str, extra: Value) -> Value {
    let mut analysis = json!({
        "name": "error-rate",
        "prometheus": {
            "address": prom.address,
            "query": format!("max({RATIO}{{test=\"{test}\",cluster=~\"{{{{ clustersRegex }}}}\"}})"),
        },
        "interval": "1s",
        "count": 2,
        "successCondition": "result < 0.01",
        "failureCondition": "result >= 0.05",
    });
    if let (Some(a), Some(extra)) = (analysis.as_object_mut(), extra.as_object()) {
        a.extend(extra.clone());
    }
    analysis
}

/// Sets this test's error ratio of each cluster, and waits until Prometheus has scraped them.
fn set_ratios(prom: &Prometheus, test: &str, ratios: &[(&str, f64)]) {
    tokio::task::block_in_place(|| {
        for (cluster, ratio) in ratios {
            prom.set(RATIO, &[("test", test), ("cluster", cluster)], *ratio);
        }
        for (cluster, ratio) in ratios {
            let query = format!("{RATIO}{{test=\"{test}\",cluster=\"{cluster}\"}}");
            prom.wait_for(&query, &[*ratio]);
        }
    });
}

fn stage_of<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no stage {name} in {status:#}"))
}

/// The stage's analysis runs (one per analysis, or per analysis and cluster).
fn runs<'a>(status: &'a Value, stage: &str) -> Vec<&'a Value> {
    stage_of(status, stage)["analyses"]
        .as_array()
        .map(|r| r.iter().collect())
        .unwrap_or_default()
}

fn verdicts(run: &Value) -> Vec<&str> {
    run["measurements"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["verdict"].as_str()).collect())
        .unwrap_or_default()
}

async fn has_event(world: &World, reason: &str) -> bool {
    world.events_of(WEB).await.iter().any(|(r, _)| r == reason)
}

async fn chart(world: &World, profile: &str) -> Option<String> {
    let profile = world.profile(profile).await?;
    str_at(&profile.data, "/spec/helmCharts/0/chartVersion").map(String::from)
}

async fn start(fleet: FleetBuilder, files: &[(&str, String)]) -> World {
    let repo = TestRepo::new();
    for (file, text) in files {
        repo.write(file, text);
    }
    repo.commit("web with analysis gates");
    World::start(repo, &fleet.to_yaml()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_rate_rising_only_in_production_fails_its_analysis_and_rolls_back() {
    let Some(prom) = prom() else { return };
    let test = "rollback";
    let all = ["dev-1", "dev-2", "prod-1", "prod-2"];
    set_ratios(prom, test, &all.map(|c| (c, 0.0)));
    let policy = gated_policy(
        json!([error_rate(prom, test, json!({}))]),
        &["dev", "prod"],
        json!({"maxFailures": 0, "onFailure": "Rollback"}),
    );
    let envs = ["dev", "prod"];
    let world = start(
        fleet_of_envs(&envs, 2, "50ms"),
        &[("web.yaml", web("1.0.0", &envs)), ("policy.yaml", policy)],
    )
    .await;
    let status = world.wait_phase(WEB, "Completed").await;
    let dev = runs(&status, "dev");
    assert_eq!(dev.len(), 1, "{status:#}");
    assert_eq!(dev[0]["phase"], "Successful", "{status:#}");
    assert_eq!(verdicts(dev[0]), ["Successful", "Successful"]);
    assert_eq!(dev[0]["measurements"][0]["value"], "0");
    let query = dev[0]["query"].as_str().unwrap_or_default();
    assert!(query.contains("cluster=~\"dev-1|dev-2\""), "{query}");

    // 2.0.0 breaks traffic in production only.
    set_ratios(prom, test, &[("prod-1", 0.2), ("prod-2", 0.0)]);
    world.repo.write("web.yaml", &web("2.0.0", &envs));
    world.repo.commit("web 2.0.0");
    world.poke();
    let status = world.wait_phase(WEB, "RolledBack").await;
    for profile in ["web-dev", "web-prod"] {
        assert_eq!(
            chart(&world, profile).await.as_deref(),
            Some("1.0.0"),
            "{profile}"
        );
    }
    assert_eq!(
        str_at(&status, "/failure/stage"),
        Some("prod"),
        "{status:#}"
    );
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("snapshot #2 rejected"), "{message}");
    let prod = runs(&status, "prod");
    assert_eq!(prod[0]["phase"], "Failed", "{status:#}");
    assert_eq!(prod[0]["measurements"][0]["value"], "0.2", "{status:#}");
    assert_eq!(verdicts(prod[0])[0], "Failed");
    assert!(
        prod[0]["query"]
            .as_str()
            .is_some_and(|q| q.contains("prod-1|prod-2")),
        "the resolved query is shown: {status:#}"
    );
    for reason in ["AnalysisFailed", "RolledBack"] {
        world
            .eventually(&format!("a {reason} event"), || async {
                has_event(&world, reason).await.then_some(())
            })
            .await;
    }
    let metrics = world.metrics.encode();
    for series in [
        "tollgate_analysis_measurements_total{promotion=\"web\",stage=\"prod\",analysis=\"error-rate\",result=\"Failed\"} 1",
        "tollgate_analysis_measurements_total{promotion=\"web\",stage=\"dev\",analysis=\"error-rate\",result=\"Successful\"} 4",
        "tollgate_analysis_last_value{promotion=\"web\",stage=\"prod\",analysis=\"error-rate\"} 0.2",
    ] {
        assert!(metrics.contains(series), "missing {series} in:\n{metrics}");
    }
}

/// One stage gated by an analysis of a series nobody serves, under `onNoData`.
async fn no_data(on_no_data: &str) -> (World, Value) {
    let prom = prom().expect("checked by the caller");
    let analysis = error_rate(
        prom,
        &format!("never-served-{on_no_data}"),
        json!({"count": 1, "onNoData": on_no_data}),
    );
    let policy = gated_policy(json!([analysis]), &["dev"], json!({"maxFailures": 0}));
    let envs = ["dev", "prod"];
    let world = start(
        fleet_of_envs(&envs, 1, "50ms"),
        &[("web.yaml", web("1.0.0", &envs)), ("policy.yaml", policy)],
    )
    .await;
    let run = world
        .eventually("the no-data measurement is recorded", || async {
            let status = world.status(WEB).await?;
            let recorded = runs(&status, "dev")
                .first()
                .is_some_and(|r| r["phase"] != "Running");
            recorded.then_some(status)
        })
        .await;
    (world, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_data_under_on_no_data_fail_fails_the_stage() {
    if prom().is_none() {
        return;
    }
    let (world, status) = no_data("Fail").await;
    let run = runs(&status, "dev")[0].clone();
    assert_eq!(run["phase"], "Failed", "{status:#}");
    assert_eq!(verdicts(&run), ["Failed"]);
    let error = run["measurements"][0]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("no data: "), "{error}");
    let status = world.wait_phase(WEB, "Failed").await;
    assert_eq!(str_at(&status, "/failure/stage"), Some("dev"));
    assert!(
        world.profile("web-prod").await.is_none(),
        "prod never starts"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_data_under_on_no_data_pass_lets_the_stage_complete() {
    if prom().is_none() {
        return;
    }
    let (world, status) = no_data("Pass").await;
    let run = runs(&status, "dev")[0].clone();
    assert_eq!(run["phase"], "Successful", "{status:#}");
    assert_eq!(verdicts(&run), ["Successful"]);
    world.wait_phase(WEB, "Completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_data_under_on_no_data_inconclusive_holds_the_stage_until_approved_through_git() {
    if prom().is_none() {
        return;
    }
    let (world, status) = no_data("Inconclusive").await;
    let run = runs(&status, "dev")[0].clone();
    assert_eq!(run["phase"], "Inconclusive", "{status:#}");
    assert_eq!(verdicts(&run), ["Inconclusive"]);
    let status = world.wait_phase(WEB, "Paused").await;
    let dev = stage_of(&status, "dev");
    assert_eq!(
        dev["activity"]["kind"], "AnalysisInconclusive",
        "{status:#}"
    );
    assert!(
        status.get("failure").is_none(),
        "held, not failed: {status:#}"
    );
    assert!(
        world.profile("web-prod").await.is_none(),
        "prod never starts"
    );
    world
        .eventually("an AnalysisInconclusive event", || async {
            has_event(&world, "AnalysisInconclusive")
                .await
                .then_some(())
        })
        .await;
    // `tollgate approve web dev`, merged, lets the held stage go on (as for a manual gate).
    support::approve_and_merge(&world, WEB, "dev");
    world.wait_phase(WEB, "Completed").await;
    assert_eq!(chart(&world, "web-prod").await.as_deref(), Some("1.0.0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streak_of_query_errors_over_the_limit_fails_the_analysis() {
    let Some(prom) = prom() else { return };
    let test = "error-streak";
    // Two series matched one-to-one against one: Prometheus refuses to execute the query.
    set_ratios(prom, test, &[("a", 0.0), ("b", 0.0)]);
    let query = format!("{RATIO}{{test=\"{test}\"}} + on() vector(0)");
    let refused = tokio::task::block_in_place(|| prom.query(&query)).expect_err("refused");
    assert!(refused.contains("many-to-one"), "{refused}");
    let mut analysis = error_rate(prom, test, json!({"count": 5, "consecutiveErrorLimit": 2}));
    analysis["prometheus"]["query"] = json!(query);
    let policy = gated_policy(json!([analysis]), &["dev"], json!({"maxFailures": 0}));
    let envs = ["dev", "prod"];
    let world = start(
        fleet_of_envs(&envs, 1, "50ms"),
        &[("web.yaml", web("1.0.0", &envs)), ("policy.yaml", policy)],
    )
    .await;
    let status = world.wait_phase(WEB, "Failed").await;
    let run = runs(&status, "dev")[0].clone();
    assert_eq!(run["phase"], "Failed", "{status:#}");
    assert_eq!(verdicts(&run), ["Error", "Error", "Error"], "{status:#}");
    assert_eq!(run["taken"], 0, "an error is never a measurement taken");
    for measurement in run["measurements"].as_array().expect("measurements") {
        let error = measurement["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("Prometheus answered 422") && error.contains("many-to-one"),
            "Prometheus' own message: {error}"
        );
    }
    let message = run["message"].as_str().unwrap_or_default();
    assert!(message.contains("consecutiveErrorLimit 2"), "{message}");
}

/// prod has three clusters; prod-2's error ratio is high. `scope: Cluster` measures each.
async fn per_cluster(test: &str, max_failures: u32) -> World {
    let prom = prom().expect("checked by the caller");
    set_ratios(
        prom,
        test,
        &[
            ("dev-1", 0.0),
            ("prod-1", 0.0),
            ("prod-2", 0.3),
            ("prod-3", 0.0),
        ],
    );
    let mut analysis = error_rate(prom, test, json!({"scope": "Cluster"}));
    analysis["prometheus"]["query"] = json!(format!(
        "max({RATIO}{{test=\"{test}\",cluster=\"{{{{ cluster }}}}\"}})"
    ));
    let policy = gated_policy(
        json!([analysis]),
        &["prod"],
        json!({"maxFailures": max_failures, "onFailure": "Halt"}),
    );
    let mut fleet = fleet().default_latency("50ms");
    fleet = fleet.cluster(cluster("dev-1").ns("fleet").label("env", "dev"));
    for name in ["prod-1", "prod-2", "prod-3"] {
        fleet = fleet.cluster(cluster(name).ns("fleet").label("env", "prod"));
    }
    let envs = ["dev", "prod"];
    start(
        fleet,
        &[("web.yaml", web("1.0.0", &envs)), ("policy.yaml", policy)],
    )
    .await
}

fn failed_by_analysis(status: &Value) -> Vec<String> {
    stage_of(status, "prod")["notProvisioned"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|c| {
                    c["state"] == "Failed"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.starts_with("AnalysisFailed"))
                })
                .filter_map(|c| c["cluster"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_cluster_analysis_fails_one_cluster_within_max_failures() {
    if prom().is_none() {
        return;
    }
    let world = per_cluster("per-cluster-1", 1).await;
    let status = world.wait_phase(WEB, "Completed").await;
    assert_eq!(failed_by_analysis(&status), ["fleet/prod-2"], "{status:#}");
    let runs = runs(&status, "prod");
    let phases: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| {
            (
                r["cluster"].as_str().unwrap_or(""),
                r["phase"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        phases,
        [
            ("fleet/prod-1", "Successful"),
            ("fleet/prod-2", "Failed"),
            ("fleet/prod-3", "Successful")
        ]
    );
    assert_eq!(
        stage_of(&status, "prod")["counts"]["failed"],
        1,
        "{status:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_cluster_analysis_failure_over_max_failures_fails_the_stage() {
    if prom().is_none() {
        return;
    }
    let world = per_cluster("per-cluster-0", 0).await;
    let status = world.wait_phase(WEB, "Failed").await;
    assert_eq!(
        str_at(&status, "/failure/stage"),
        Some("prod"),
        "{status:#}"
    );
    let failed: Vec<&str> = runs(&status, "prod")
        .iter()
        .filter(|r| r["phase"] == "Failed")
        .filter_map(|r| r["cluster"].as_str())
        .collect();
    assert_eq!(failed, ["fleet/prod-2"], "{status:#}");
    let reason = str_at(&status, "/failure/reason").unwrap_or_default();
    assert!(
        reason.contains("over maxFailures 0: fleet/prod-2 AnalysisFailed: analysis error-rate"),
        "{reason}"
    );
    // The cluster is Failed in the per-cluster state and named by the run's failure.
    assert_eq!(failed_by_analysis(&status), ["fleet/prod-2"], "{status:#}");
    assert_eq!(
        str_at(&status, "/failure/clusters/0/cluster"),
        Some("fleet/prod-2"),
        "{status:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_wave_whose_error_rate_rises_fails_before_any_other_wave_is_reached() {
    let Some(prom) = prom() else { return };
    let test = "canary-wave";
    set_ratios(
        prom,
        test,
        &[
            ("dev-1", 0.0),
            ("prod-1", 0.3),
            ("prod-2", 0.0),
            ("prod-3", 0.0),
        ],
    );
    let analysis = error_rate(prom, test, json!({"count": 1}));
    let mut policy: Value = serde_json::from_str(&gated_policy(
        json!([analysis]),
        &["prod"],
        json!({"maxFailures": 0, "onFailure": "Halt"}),
    ))
    .expect("policy JSON");
    policy["spec"]["stages"]["prod"]["waves"] =
        json!({"sortingLabelKey": "order", "canary": 1, "size": 2});
    let mut fleet = fleet().default_latency("50ms");
    fleet = fleet.cluster(cluster("dev-1").ns("fleet").label("env", "dev"));
    for (name, order) in [("prod-1", "1"), ("prod-2", "2"), ("prod-3", "3")] {
        fleet = fleet.cluster(
            cluster(name)
                .ns("fleet")
                .label("env", "prod")
                .label("order", order),
        );
    }
    let envs = ["dev", "prod"];
    let world = start(
        fleet,
        &[
            ("web.yaml", web("1.0.0", &envs)),
            ("policy.yaml", policy.to_string()),
        ],
    )
    .await;
    let status = world.wait_phase(WEB, "Failed").await;
    let prod = runs(&status, "prod");
    assert_eq!(prod.len(), 1, "the canary wave's run only: {status:#}");
    assert_eq!(prod[0]["wave"], 1, "{status:#}");
    assert_eq!(prod[0]["phase"], "Failed", "{status:#}");
    let query = prod[0]["query"].as_str().unwrap_or_default();
    assert!(
        query.contains("cluster=~\"prod-1\""),
        "the canary only: {query}"
    );
    let profile = world.profile("web-prod").await.expect("web-prod");
    let refs: Vec<&str> = profile.data["spec"]["clusterRefs"]
        .as_array()
        .map(|r| r.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(refs, ["prod-1"], "no later wave is targeted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_analysis_keeps_its_count_and_repeats_no_measurement() {
    let Some(prom) = prom() else { return };
    let test = "restart";
    set_ratios(prom, test, &[("dev-1", 0.0)]);
    let analysis = error_rate(prom, test, json!({"count": 5}));
    let policy = gated_policy(json!([analysis]), &["dev"], json!({}));
    let envs = ["dev", "prod"];
    let mut world = start(
        fleet_of_envs(&envs, 1, "50ms"),
        &[("web.yaml", web("1.0.0", &envs)), ("policy.yaml", policy)],
    )
    .await;
    let before = world
        .eventually("two measurements taken", || async {
            let status = world.status(WEB).await?;
            let taken = runs(&status, "dev").first()?["taken"].as_u64()?;
            (taken >= 2).then_some(status)
        })
        .await;
    world.stop_controller().await;
    let stopped = world.status(WEB).await.expect("status");
    let kept = runs(&stopped, "dev")[0]["measurements"].clone();
    assert!(kept.as_array().is_some_and(|m| m.len() >= 2), "{before:#}");
    assert_ne!(
        stopped["phase"], "Completed",
        "stopped mid-analysis: {stopped:#}"
    );

    world.start_controller().await;
    let status = world.wait_phase(WEB, "Completed").await;
    let run = runs(&status, "dev")[0].clone();
    assert_eq!(run["phase"], "Successful", "{status:#}");
    assert_eq!(run["taken"], 5, "{status:#}");
    let indexes: Vec<u64> = run["measurements"]
        .as_array()
        .expect("measurements")
        .iter()
        .filter_map(|m| m["index"].as_u64())
        .collect();
    assert_eq!(
        indexes,
        [0, 1, 2, 3, 4],
        "each measurement once: {status:#}"
    );
    for old in kept.as_array().expect("kept") {
        let index = old["index"].as_u64().expect("index") as usize;
        assert_eq!(
            &run["measurements"][index], old,
            "measurement {index} from before the restart is kept as it was"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_analysis_is_measured_and_shown_but_never_decides() {
    let Some(prom) = prom() else { return };
    let test = "dry-run";
    set_ratios(prom, test, &[("dev-1", 0.5), ("prod-1", 0.5)]);
    let analysis = error_rate(prom, test, json!({"count": 1, "dryRun": true}));
    let policy = gated_policy(json!([analysis]), &["dev"], json!({"maxFailures": 0}));
    // A dry run holds nothing: dev soaks 3 s, during which it is measured.
    let soaking = promotion(WEB)
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").delay("3s"))
        .stage(stage("prod").selector("env", "prod").auto())
        .to_yaml();
    let world = start(
        fleet_of_envs(&["dev", "prod"], 1, "50ms"),
        &[("web.yaml", soaking), ("policy.yaml", policy)],
    )
    .await;
    let status = world.wait_phase(WEB, "Completed").await;
    let run = runs(&status, "dev")[0].clone();
    assert_eq!(run["dryRun"], true, "{status:#}");
    assert_eq!(run["phase"], "Failed", "measured and shown: {status:#}");
    assert_eq!(run["measurements"][0]["value"], "0.5");
    assert!(status.get("failure").is_none(), "{status:#}");
    assert!(!has_event(&world, "StageFailed").await);
}

/// A loopback server: `/smoke` answers the web check (only with the header of the secret file),
/// `/repos/o/r/commits/<sha>/status` GitHub's combined status (pending at first, then green),
/// `/ok` a green check at once and `/slow` the same after [`SLOW`].
/// Longer than the controller holds a write for a first measurement (2 s), within the
/// runner's timeout (10 s).
const SLOW: std::time::Duration = std::time::Duration::from_secs(4);

struct Loopback {
    address: String,
    /// Paths asked, in order.
    asked: Arc<Mutex<Vec<String>>>,
}

fn loopback() -> Loopback {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let statuses_asked = Arc::new(AtomicUsize::new(0));
    let log = asked.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let Ok(head) = read_head(&mut stream) else {
                continue;
            };
            // Header names are case-insensitive (hyper writes them in lower case).
            let head = head.to_ascii_lowercase();
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            log.lock().expect("log").push(path.clone());
            let (code, body) = if path.starts_with("/ok") {
                (200, json!({"ok": true}))
            } else if path.starts_with("/slow") {
                std::thread::sleep(SLOW);
                (200, json!({"ok": true}))
            } else if path.starts_with("/smoke") {
                match head.contains("x-smoke-token: s3cret") {
                    true => (200, json!({"ok": true, "p99": 120})),
                    false => (401, json!({"message": "no token"})),
                }
            } else if path.contains("/commits/") && head.contains("authorization: bearer gh-t0ken")
            {
                let state = match statuses_asked.fetch_add(1, Ordering::SeqCst) {
                    0 => "pending",
                    _ => "success",
                };
                let statuses = json!([{"context": "e2e/canary", "state": state},
                    {"context": "lint", "state": "failure"}]);
                (200, json!({"state": state, "statuses": statuses}))
            } else {
                (404, json!({"message": "Not Found"}))
            };
            let body = body.to_string();
            let _ = std::io::Write::write_all(
                &mut stream,
                format!(
                    "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    Loopback { address, asked }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_and_commit_status_checks_gate_a_stage_on_loopback_servers() {
    let server = loopback();
    let secrets = tempfile::tempdir().expect("temp dir");
    let headers = secrets.path().join("smoke-headers");
    std::fs::write(&headers, "# smoke\nX-Smoke-Token: s3cret\n").expect("headers");
    let github = secrets.path().join("github");
    std::fs::write(&github, format!("{}/repos/o/r\ngh-t0ken\n", server.address)).expect("secret");
    let analyses = json!([
        {"name": "smoke", "web": {
            "url": format!("{}/smoke?stage={{{{ stage }}}}&snapshot={{{{ snapshot.commit }}}}", server.address),
            "headersSecretFile": headers, "jsonPath": "{.ok}"},
         "successCondition": "result == true"},
        {"name": "ci-checks", "commitStatus": {
            "provider": "github", "addressSecretFile": github, "contexts": ["e2e/canary"]},
         "count": 2, "interval": "1s", "inconclusiveLimit": 1},
    ]);
    let policy = gated_policy(analyses, &["dev"], json!({"maxFailures": 0}));
    let envs = ["dev", "prod"];
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", &envs));
    repo.write("policy.yaml", &policy);
    let sha = repo.commit("web gated by a smoke check and CI");
    let world = World::start(repo, &fleet_of_envs(&envs, 1, "50ms").to_yaml()).await;
    let status = world.wait_phase(WEB, "Completed").await;
    let runs = runs(&status, "dev");
    let smoke = runs
        .iter()
        .find(|r| r["name"] == "smoke")
        .expect("smoke run");
    assert_eq!(smoke["phase"], "Successful", "{status:#}");
    assert_eq!(smoke["measurements"][0]["value"], "true");
    assert!(
        smoke["query"]
            .as_str()
            .is_some_and(|q| q.contains(&format!("stage=dev&snapshot={sha}"))),
        "{status:#}"
    );
    let ci = runs
        .iter()
        .find(|r| r["name"] == "ci-checks")
        .expect("ci run");
    assert_eq!(ci["phase"], "Successful", "{status:#}");
    assert_eq!(
        verdicts(ci),
        ["Inconclusive", "Successful"],
        "a pending check is not green yet: {status:#}"
    );
    let asked = server.asked.lock().expect("log").clone();
    assert!(
        asked.contains(&format!("/repos/o/r/commits/{sha}/status?per_page=100")),
        "the snapshot's commit is read: {asked:?}"
    );
    let text = serde_json::to_string(&status).unwrap_or_default();
    for secret in ["s3cret", "gh-t0ken"] {
        assert!(!text.contains(secret), "a secret in status");
    }
}

/// One green check of `server`'s `path` gating every stage of `envs`.
fn one_check(server: &Loopback, path: &str, envs: &[&str]) -> String {
    let analyses = json!([{"name": "check", "web": {
        "url": format!("{}{path}", server.address), "jsonPath": "{.ok}"},
        "successCondition": "result == true"}]);
    gated_policy(analyses, envs, json!({}))
}

/// The persisted status shows `stage`'s analysis started and nothing measured yet.
fn started_unmeasured(status: &Value, stage: &str) -> bool {
    let stages = status["stages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    stages
        .iter()
        .filter(|s| s["name"] == stage)
        .flat_map(|s| s["analyses"].as_array().map(Vec::as_slice).unwrap_or(&[]))
        .any(|run| run["phase"] == "Running" && verdicts(run).is_empty())
}

/// Unhappy path of the write economy below: a measurement slower than the hold never hides that
/// the stage is being analysed (the start is written, then the result), and is made once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_measurement_slower_than_the_hold_shows_its_analysis_started_before_its_result() {
    let server = loopback();
    let envs = ["dev", "prod"];
    let policy = one_check(&server, "/slow", &["dev"]);
    let files = [("web.yaml", web("1.0.0", &envs)), ("policy.yaml", policy)];
    let world = start(fleet_of_envs(&envs, 1, "10ms"), &files).await;
    world
        .eventually(
            "dev's analysis shown started, before its result",
            || async {
                let status = world.status(WEB).await?;
                started_unmeasured(&status, "dev").then_some(())
            },
        )
        .await;
    let status = world.wait_phase(WEB, "Completed").await;
    assert_eq!(
        verdicts(runs(&status, "dev")[0]),
        ["Successful"],
        "{status:#}"
    );
    let asked = server.asked.lock().expect("log").clone();
    assert_eq!(
        asked,
        ["/slow"],
        "measured once, not again by the steps that waited"
    );
}

/// API-server economy (issue #20) with analyses: a step that only starts analyses waits (a
/// moment) for their first results, so a stage gated by one quick measurement costs what an
/// ungated handoff costs: the counts of `e2e_write_economy`'s three-stage rollout, no status
/// write and no Events more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_gated_by_one_measurement_costs_the_writes_of_an_ungated_handoff() {
    let server = loopback();
    let envs = ["dev", "staging", "prod"];
    let policy = one_check(&server, "/ok", &envs);
    let files = [("web.yaml", web("1.0.0", &envs)), ("policy.yaml", policy)];
    let world = start(fleet_of_envs(&envs, 2, "10ms"), &files).await;
    let status = world.wait_phase(WEB, "Completed").await;
    for env in envs {
        assert_eq!(
            verdicts(runs(&status, env)[0]),
            ["Successful"],
            "{status:#}"
        );
    }
    // Until nothing is held back, measured or due: no write is left to come.
    world.settled().await;
    let expected: std::collections::BTreeMap<String, u32> = [
        ("apply clusterprofiles.config.projectsveltos.io", 3),
        ("apply gitpromotions.tollgate.dev", 1),
        ("update gitpromotions.tollgate.dev/status", 4),
        ("create events.events.k8s.io", 2),
    ]
    .into_iter()
    .map(|(what, n)| (what.to_string(), n))
    .collect();
    assert_eq!(world.controller_writes(), expected);
}
