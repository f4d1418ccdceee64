//! Latency harness for `tollgate run` (issue #6), against the in-process emulator over HTTP and a
//! real local git repository watched by the controller:
//!
//! - push-to-first-apply: `git commit` of a chart bump → the stage-1 ClusterProfile carries it;
//! - stage transition: the last ClusterSummary of a stage turns Provisioned → the next stage's
//!   profile is applied (from the emulator's write log, one clock);
//! - API requests at steady state: by verb over a quiet window (writes must be zero).
//!
//! `cargo run --release --example latency -- [--pushes 40] [--promotions 20] [--quiet-secs 10]`
//! prints one JSON document.

use std::path::Path;
use std::time::{Duration, Instant};

// The allocator the tollgate binary ships with, so the controller measured here is the one deployed.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use chrono::{DateTime, Utc};
use kube::{Client, Config};
use serde_json::json;
use tollgate::cluster::leader::LeaderGate;
use tollgate::controller::{self, ControllerConfig, PruneGuard};
use tollgate_emulator::{Emulator, EmulatorConfig, Fleet, WriteRecord};
use tollgate_source::SourceConfig;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) {
    tollgate_fixtures::git::git(dir, args);
}

/// A four-stage promotion with no triggers: every stage advances as soon as it is provisioned.
fn promotion(name: &str, version: u64) -> String {
    let stages: String = ["dev", "staging", "prod", "production"]
        .iter()
        .map(|env| {
            format!(
                "  - name: {env}\n    clusterSelector:\n      matchLabels:\n        env: {env}\n"
            )
        })
        .collect();
    format!(
        "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: {name}\nspec:\n  profileSpec:\n    helmCharts:\n    - repositoryURL: https://charts.example.com\n      repositoryName: example\n      chartName: example/app\n      chartVersion: 1.0.{version}\n      releaseName: app\n      releaseNamespace: app\n  stages:\n{stages}"
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn summary(mut samples: Vec<f64>) -> serde_json::Value {
    samples.sort_by(f64::total_cmp);
    json!({
        "samples": samples.len(),
        "p50_ms": percentile(&samples, 50.0),
        "p99_ms": percentile(&samples, 99.0),
        "max_ms": samples.last().copied().unwrap_or(f64::NAN),
    })
}

fn ms(d: chrono::Duration) -> f64 {
    d.num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

/// For every tollgate apply of a non-first stage profile, the time since the last status write
/// that made the previous stage's summaries Provisioned.
fn stage_transitions(log: &[WriteRecord]) -> Vec<(DateTime<Utc>, f64)> {
    let order = ["dev", "staging", "prod", "production"];
    let mut samples = Vec::new();
    for (i, record) in log.iter().enumerate() {
        if record.field_manager != "tollgate" || record.status_subresource {
            continue;
        }
        let Some((promotion, stage)) = record.name.rsplit_once('-') else {
            continue;
        };
        let Some(position) = order.iter().position(|s| *s == stage) else {
            continue;
        };
        if position == 0 || !record.resource.starts_with("clusterprofiles") {
            continue;
        }
        let previous = format!("{promotion}-{}-sveltos-", order[position - 1]);
        let provisioned = log[..i].iter().rev().find(|w| {
            w.field_manager == "addon-controller"
                && w.name.starts_with(&previous)
                && w.object.to_string().contains("\"Provisioned\"")
        });
        if let Some(provisioned) = provisioned {
            samples.push((record.time, ms(record.time - provisioned.time)));
        }
    }
    samples
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    tollgate::memory::disable_transparent_huge_pages();
    let pushes = arg("--pushes", 40);
    let promotions = arg("--promotions", 20);
    let quiet = Duration::from_secs(arg("--quiet-secs", 10));

    let mut fleet_yaml = String::from("defaults: {latency: 50ms}\nclusters:\n");
    for env in ["dev", "staging", "prod", "production"] {
        for i in 0..3 {
            fleet_yaml.push_str(&format!(
                "- {{name: {env}-{i}, namespace: fleet, labels: {{env: {env}}}}}\n"
            ));
        }
    }
    let fleet = Fleet::parse(&fleet_yaml, Path::new("latency-fleet.yaml")).expect("fleet");
    let emulator = Emulator::start(EmulatorConfig {
        fleet,
        write_log_capacity: None,
        crds: vec![tollgate::cluster::crd::git_promotion_crd_json()],
        ..EmulatorConfig::default()
    })
    .await
    .expect("emulator");
    let client =
        Client::try_from(Config::new(emulator.url().parse().expect("url"))).expect("client");

    let repo = tempfile::tempdir().expect("repo dir");
    let cache = tempfile::tempdir().expect("cache dir");
    git(repo.path(), &["init", "-q", "-b", "main"]);
    git(repo.path(), &["config", "user.name", "Latency"]);
    git(
        repo.path(),
        &["config", "user.email", "latency@example.com"],
    );
    for p in 0..promotions {
        std::fs::write(
            repo.path().join(format!("p{p}.yaml")),
            promotion(&format!("p{p}"), 0),
        )
        .expect("write");
    }
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "initial"]);

    let config = ControllerConfig {
        source: SourceConfig::new(repo.path().to_string_lossy(), "main", "", cache.path()),
        poll_interval: Duration::from_secs(60),
        dry_run: false,
        guard: PruneGuard::default(),
        concurrency: 16,
        // This harness times the step path with today's fixed concurrency; see scale.rs for the sweep.
        throttle: tollgate::cluster::throttle::Throttle::unbounded(Default::default()),
        instance: None,
        metrics: std::sync::Arc::new(tollgate::metrics::Metrics::new()),
        traces: Default::default(),
        analysis: Default::default(),
    };
    let started = Instant::now();
    let (handle, _task) = controller::start(client, config, LeaderGate::always())
        .await
        .expect("controller");
    let statuses = |emulator: &tollgate_emulator::EmulatorHandle| -> usize {
        let state = emulator.state_json();
        state.to_string().matches("\"phase\":\"Completed\"").count()
    };
    while statuses(&emulator) < promotions as usize {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cold_rollout = started.elapsed();
    let cold_done_at = Utc::now();

    // push-to-first-apply: bump p0's chart and time until its dev profile carries the version.
    let mut push_samples = Vec::new();
    for version in 1..=pushes {
        std::fs::write(repo.path().join("p0.yaml"), promotion("p0", version)).expect("write");
        git(repo.path(), &["add", "-A"]);
        let pushed_at: DateTime<Utc> = Utc::now();
        git(
            repo.path(),
            &["commit", "-q", "-m", &format!("bump {version}")],
        );
        let needle = format!("1.0.{version}");
        loop {
            let applied = emulator.write_log().into_iter().rev().find(|w| {
                w.name == "p0-dev"
                    && w.field_manager == "tollgate"
                    && w.object.to_string().contains(&needle)
            });
            if let Some(applied) = applied {
                push_samples.push(ms(applied.time - pushed_at));
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // Let the pipeline finish before the next push, so each push measures a quiet start.
        while statuses(&emulator) < promotions as usize {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    // Steady state: nothing changes for `quiet`; count requests by verb.
    tokio::time::sleep(Duration::from_secs(1)).await;
    emulator.reset_request_counts();
    tokio::time::sleep(quiet).await;
    let counts = emulator.request_counts();
    let by_verb: serde_json::Map<String, serde_json::Value> = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ]
    .iter()
    .map(|v| (v.to_string(), json!(counts.verb(v))))
    .collect();

    // Transitions while every promotion rolls out at once (the emulator's Sveltos stand-in, in
    // this process, does a full pass per write: its cost grows with the fleet) and while one
    // promotion rolls out after each push.
    let (cold, single): (Vec<_>, Vec<_>) = stage_transitions(&emulator.write_log())
        .into_iter()
        .partition(|(at, _)| *at < cold_done_at);
    let samples =
        |v: Vec<(DateTime<Utc>, f64)>| v.into_iter().map(|(_, ms)| ms).collect::<Vec<_>>();
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "promotions": promotions,
            "stages": 4,
            "clusters": 12,
            "cold_rollout_all_completed_ms": cold_rollout.as_millis() as u64,
            "push_to_first_apply": summary(push_samples),
            "stage_transition_one_rollout": summary(samples(single)),
            "stage_transition_all_rolling_at_once": summary(samples(cold)),
            "steady_state": {"window_s": quiet.as_secs(), "requests_by_verb": by_verb, "writes": counts.writes()},
        }))
        .expect("json")
    );
    handle.shutdown();
}
