//! End to end (issue #45): the corners of analysis gates, through the controller loop against
//! the emulator over HTTP with real git repositories and a Prometheus stand-in on loopback that
//! answers each query with the sample (or the error) a test set for it: measurements stay
//! `interval` apart after a leader failover; analyses end when their stage does; a `NaN` is no
//! data; `tollgate_analysis_last_value` has a series per cluster; errors name the server without
//! its secrets, numbers read well, and `tollgate status NAME` prints an error once.

use crate::support;

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::elected::{Elected, election};
use support::prometheus::read_head;
use support::{TestRepo, World, tollgate_binary};
use tollgate::cluster::leader::LeaderGate;
use tollgate_fixtures::{FleetBuilder, fleet_of_envs, promotion, stage};

const WEB: &str = "web";

/// A Prometheus stand-in: `GET /api/v1/query?query=…` answers the sample set for the `key`
/// label in the query (`ratio{key="a"}`), or Prometheus' error answer for `ERROR <text>`.
#[derive(Clone)]
struct StandIn {
    address: String,
    samples: Arc<Mutex<HashMap<String, String>>>,
}

impl StandIn {
    fn start() -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = format!("http://{}", listener.local_addr().expect("address"));
        let samples: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let served = samples.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let Ok(head) = read_head(&mut stream) else {
                    continue;
                };
                let sample =
                    key_of(&head).and_then(|k| served.lock().expect("samples").get(&k).cloned());
                let (code, body) = answer(sample);
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
        StandIn { address, samples }
    }

    fn set(&self, key: &str, sample: &str) {
        let mut samples = self.samples.lock().expect("samples");
        samples.insert(key.to_string(), sample.to_string());
    }
}

/// The `key` label of the query in a request's head.
fn key_of(head: &str) -> Option<String> {
    let target = head.split(' ').nth(1)?;
    let (_, query) = target.split_once('?')?;
    let text = form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "query")?
        .1
        .into_owned();
    let start = text.find("key=\"")? + 5;
    let end = text[start..].find('"')? + start;
    Some(text[start..end].to_string())
}

fn answer(sample: Option<String>) -> (u16, String) {
    let body = match sample.as_deref() {
        Some(error) if error.starts_with("ERROR ") => {
            let error = &error["ERROR ".len()..];
            return (
                422,
                json!({"status": "error", "errorType": "execution", "error": error}).to_string(),
            );
        }
        Some(value) => json!([{"metric": {}, "value": [1.7e9, value]}]),
        None => json!([]),
    };
    let data = json!({"resultType": "vector", "result": body});
    (200, json!({"status": "success", "data": data}).to_string())
}

/// An analysis `name` on the stand-in's series `key` (`{{ cluster }}` in it: one per cluster).
fn analysis(address: &str, name: &str, key: &str, extra: Value) -> Value {
    let mut analysis = json!({
        "name": name,
        "prometheus": {"address": address, "query": format!("ratio{{key=\"{key}\"}}")},
        "interval": "1s",
        "count": 1,
        "failureCondition": "result >= 0.05",
    });
    if let (Some(a), Some(extra)) = (analysis.as_object_mut(), extra.as_object()) {
        a.extend(extra.clone());
    }
    analysis
}

/// A RolloutPolicy gating `stage` by `analyses`, with `extra` spec fields.
fn gated_policy(analyses: Value, gated: &str, extra: Value) -> String {
    let names: Vec<&str> = analyses
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default();
    let mut spec = json!({"selector": {}, "analyses": analyses,
        "stages": {gated: {"analyses": names}}});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "gates"}, "spec": spec})
    .to_string()
}

/// `web` over dev then prod, both automatic with no soak.
fn web() -> String {
    promotion(WEB)
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("prod").selector("env", "prod").auto())
        .to_yaml()
}

fn repo(policy: &str) -> TestRepo {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web());
    repo.write("policy.yaml", policy);
    repo.commit("web with analysis gates");
    repo
}

fn two_envs(per_env: usize) -> FleetBuilder {
    fleet_of_envs(&["dev", "prod"], per_env, "50ms")
}

fn runs(status: &Value, stage: &str) -> Vec<Value> {
    status["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == stage))
        .and_then(|s| s["analyses"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// `tollgate status NAME` against the world's cluster, as a user reads it (80 columns).
fn status_text(world: &World) -> String {
    let output = tollgate_binary()
        .args(["status", WEB, "--kubeconfig"])
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate status runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The measurement times of a run, oldest first.
fn measured_at(run: &Value) -> Vec<chrono::DateTime<chrono::Utc>> {
    let mut at: Vec<_> = run["measurements"]
        .as_array()
        .expect("measurements")
        .iter()
        .map(|m| m["at"].as_str().expect("at").parse().expect("a time"))
        .collect();
    at.sort();
    at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_leader_failover_measurements_stay_an_interval_apart() {
    let prom = StandIn::start();
    prom.set("failover", "0");
    let gate = analysis(&prom.address, "error-rate", "failover", json!({"count": 8}));
    let world = World::without_controller(
        repo(&gated_policy(json!([gate]), "dev", json!({}))),
        &two_envs(1).to_yaml(),
    )
    .await;
    let elections: Vec<Elected> = (0..2)
        .map(|i| Elected::start(&world, election(&format!("replica-{i}"))))
        .collect();
    let gates: Vec<LeaderGate> = elections.iter().map(|e| e.gate.clone()).collect();
    let mut replicas = Vec::new();
    for gate in &gates {
        replicas.push(world.spawn_replica(gate.clone()).await);
    }
    let leader = world
        .eventually("two measurements under the first leader", || async {
            let status = world.status(WEB).await?;
            let taken = runs(&status, "dev").first()?["taken"].as_u64()?;
            (taken >= 2).then_some(())?;
            gates.iter().position(LeaderGate::is_leader)
        })
        .await;
    // A crash: the lease is not released, the successor waits for it to expire (3 s), and by
    // then the measurements due on the old schedule are overdue.
    elections[leader].crash();
    gates[leader].step_down();
    let (handle, task) = replicas.remove(leader);
    handle.shutdown();
    task.await.expect("leader stops");
    let status = world.wait_phase(WEB, "Completed").await;
    let run = &runs(&status, "dev")[0];
    assert_eq!(run["taken"], 8, "{status:#}");
    let at = measured_at(run);
    for pair in at.windows(2) {
        let apart = pair[1] - pair[0];
        assert!(
            apart >= chrono::Duration::seconds(1),
            "measurements {apart} apart, under the 1s interval: {at:?}"
        );
    }
    for (handle, task) in replicas {
        handle.shutdown();
        task.await.expect("replica stops");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_halted_stage_cancels_the_cluster_analyses_still_running() {
    let prom = StandIn::start();
    prom.set("halt-prod-1", "0.5");
    prom.set("halt-prod-2", "0");
    let gate = analysis(
        &prom.address,
        "error-rate",
        "halt-{{ cluster }}",
        json!({"scope": "Cluster", "count": 5}),
    );
    let policy = gated_policy(
        json!([gate]),
        "prod",
        json!({"maxFailures": 0, "onFailure": "Halt"}),
    );
    let world = World::start(repo(&policy), &two_envs(2).to_yaml()).await;
    let status = world.wait_phase(WEB, "Failed").await;
    let runs = runs(&status, "prod");
    let phase_of = |cluster: &str| {
        runs.iter()
            .find(|r| r["cluster"] == cluster)
            .map(|r| (r["phase"].clone(), r["message"].clone()))
            .unwrap_or_else(|| panic!("no run on {cluster}: {status:#}"))
    };
    assert_eq!(phase_of("fleet/prod-1").0, "Failed", "{status:#}");
    let (phase, message) = phase_of("fleet/prod-2");
    assert_eq!(phase, "Cancelled", "ended with its stage: {status:#}");
    assert!(
        message
            .as_str()
            .is_some_and(|m| m.contains("the run failed at stage prod")),
        "{message}"
    );
    let text = status_text(&world);
    assert!(text.contains("Cancelled"), "{text}");
    assert!(!text.contains("Running"), "nothing shown running: {text}");
    // Nothing more is measured (nothing in flight, nothing due), and the metrics count what
    // status records.
    world.settled().await;
    let after = world.status(WEB).await.expect("status");
    let recorded: usize = self::runs(&after, "prod")
        .iter()
        .map(|r| r["measurements"].as_array().map_or(0, Vec::len))
        .sum();
    let counted: usize = world
        .metrics
        .encode()
        .lines()
        .filter(|l| {
            l.starts_with("tollgate_analysis_measurements_total{") && l.contains("stage=\"prod\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(recorded, counted, "{after:#}");
    assert_eq!(
        self::runs(&after, "prod"),
        runs,
        "nothing measured after the halt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_still_measuring_when_its_stage_completes_is_cancelled() {
    let prom = StandIn::start();
    prom.set("dry", "0");
    let gate = analysis(
        &prom.address,
        "shadow",
        "dry",
        json!({"count": 5, "interval": "2s", "dryRun": true}),
    );
    let policy = gated_policy(json!([gate]), "dev", json!({}));
    let world = World::start(repo(&policy), &two_envs(1).to_yaml()).await;
    let status = world.wait_phase(WEB, "Completed").await;
    let run = world
        .eventually("the dry run ended with its stage", || async {
            let status = world.status(WEB).await?;
            let run = runs(&status, "dev").first()?.clone();
            (run["phase"] != "Running").then_some(run)
        })
        .await;
    assert_eq!(run["phase"], "Cancelled", "{status:#}");
    assert!(
        run["message"]
            .as_str()
            .is_some_and(|m| m.contains("stage dev completed first")),
        "{run}"
    );
    let text = status_text(&world);
    assert!(text.contains("Cancelled"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nan_with_only_a_success_condition_is_no_data_judged_by_on_no_data() {
    let prom = StandIn::start();
    prom.set("nan", "NaN");
    let mut gate = analysis(
        &prom.address,
        "error-rate",
        "nan",
        json!({"onNoData": "Fail"}),
    );
    gate.as_object_mut()
        .expect("object")
        .remove("failureCondition");
    gate["successCondition"] = json!("result < 0.01");
    let policy = gated_policy(json!([gate]), "dev", json!({"maxFailures": 0}));
    let world = World::start(repo(&policy), &two_envs(1).to_yaml()).await;
    let status = world.wait_phase(WEB, "Failed").await;
    let run = &runs(&status, "dev")[0];
    let measurement = &run["measurements"][0];
    assert_eq!(
        measurement["verdict"], "Failed",
        "onNoData: Fail: {status:#}"
    );
    assert!(
        measurement["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("no data") && e.contains("NaN")),
        "{measurement}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_value_has_a_series_per_cluster_under_scope_cluster() {
    let prom = StandIn::start();
    prom.set("value-prod-1", "0.002");
    prom.set("value-prod-2", "0.004");
    let gate = analysis(
        &prom.address,
        "error-rate",
        "value-{{ cluster }}",
        json!({"scope": "Cluster"}),
    );
    let policy = gated_policy(json!([gate]), "prod", json!({}));
    let world = World::start(repo(&policy), &two_envs(2).to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    let series: Vec<String> = [("fleet/prod-1", "0.002"), ("fleet/prod-2", "0.004")]
        .into_iter()
        .map(|(cluster, value)| format!(
            "tollgate_analysis_last_value{{promotion=\"web\",stage=\"prod\",analysis=\"error-rate\",cluster=\"{cluster}\"}} {value}"
        ))
        .collect();
    let scraped = world
        .scrape_when("both clusters' last values scraped", |scraped| {
            series.iter().all(|s| scraped.contains(s))
        })
        .await;
    for series in &series {
        assert!(scraped.contains(series), "{series} in {scraped}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_error_names_the_server_and_none_of_its_secrets() {
    // A port nothing listens on.
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("address").port();
    drop(closed);
    let address = format!("http://promuser:s3cret@127.0.0.1:{port}/prom?access_token=t0ken");
    let gate = analysis(
        &address,
        "error-rate",
        "unused",
        json!({"consecutiveErrorLimit": 0}),
    );
    let policy = gated_policy(json!([gate]), "dev", json!({"maxFailures": 0}));
    let world = World::start(repo(&policy), &two_envs(1).to_yaml()).await;
    let status = world.wait_phase(WEB, "Failed").await;
    let error = runs(&status, "dev")[0]["measurements"][0]["error"].clone();
    let error = error.as_str().unwrap_or_default();
    assert!(
        error.starts_with(&format!("cannot connect to http://127.0.0.1:{port}")),
        "{error}"
    );
    let everything = format!(
        "{status}{:?}{}",
        world.events_of(WEB).await,
        status_text(&world)
    );
    for secret in ["promuser", "s3cret", "t0ken"] {
        assert!(!everything.contains(secret), "{secret} shown: {everything}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_measured_number_reads_the_same_everywhere_without_float_noise() {
    let prom = StandIn::start();
    prom.set("noise", "0.500000000000002");
    let gate = analysis(&prom.address, "error-rate", "noise", json!({}));
    let policy = gated_policy(json!([gate]), "dev", json!({"maxFailures": 0}));
    let world = World::start(repo(&policy), &two_envs(1).to_yaml()).await;
    let status = world.wait_phase(WEB, "Failed").await;
    let run = &runs(&status, "dev")[0];
    assert_eq!(run["measurements"][0]["value"], "0.5", "{status:#}");
    assert!(
        run["message"]
            .as_str()
            .is_some_and(|m| m.contains("(last: 0.5)")),
        "{run}"
    );
    let event = world
        .eventually("the AnalysisFailed event", || async {
            world
                .events_of(WEB)
                .await
                .into_iter()
                .find(|(reason, _)| reason == "AnalysisFailed")
        })
        .await;
    assert!(event.1.contains("last: 0.5)"), "{event:?}");
    let everything = format!("{status}{event:?}{}", status_text(&world));
    assert!(!everything.contains("0.50000"), "{everything}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_name_prints_a_long_prometheus_error_once() {
    let prom = StandIn::start();
    let long = "ERROR query processing would load too many samples into memory in query \
                execution (limit 50000000, see --query.max-samples), marker Zq7Wx";
    prom.set("long", long);
    let gate = analysis(
        &prom.address,
        "error-rate",
        "long",
        json!({"consecutiveErrorLimit": 0}),
    );
    let policy = gated_policy(json!([gate]), "dev", json!({"maxFailures": 0}));
    let world = World::start(repo(&policy), &two_envs(1).to_yaml()).await;
    let status = world.wait_phase(WEB, "Failed").await;
    let error = runs(&status, "dev")[0]["measurements"][0]["error"].clone();
    assert!(
        error.as_str().is_some_and(|e| e.contains("Zq7Wx")),
        "{status:#}"
    );
    let text = status_text(&world);
    assert_eq!(text.matches("Zq7Wx").count(), 1, "printed once:\n{text}");
}
