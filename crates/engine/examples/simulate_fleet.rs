//! How long `simulate` takes (the estimate `tollgate plan` draws) as the fleet grows: a promotion
//! of two stages, `s1` one cluster with a 10m delay, `prod` every other cluster in waves of 10%
//! after a canary of one, 5m pauses between them; Sveltos provisions in 1m.
//!
//! `cargo run --release -p tollgate-engine --example simulate_fleet -- [CLUSTERS ...]`
//! (default 100 1000 5000). Prints one line per fleet size: steps taken, wall time, simulated end.

use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use tollgate_engine::simulate::DEFAULT_MAX_STEPS;
use tollgate_engine::testing;
use tollgate_engine::{ObservedCluster, SimulationInput, simulate};
use tollgate_model::policy::RolloutPolicy;

// The example times the engine from outside it: the clock it reads is the harness's, never an input.
#[allow(clippy::disallowed_methods)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<usize> = match std::env::args().skip(1).map(|a| a.parse()).collect() {
        Ok(sizes) if !Vec::<usize>::is_empty(&sizes) => sizes,
        Ok(_) => vec![100, 1_000, 5_000],
        Err(e) => return Err(format!("a fleet size is a number of clusters: {e}").into()),
    };
    let stage = |name: &str, trigger: serde_json::Value| json!({"name": name, "clusterSelector": {"matchLabels": {"env": name}}, "trigger": trigger});
    let promotion = testing::promotion(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": "fleet"},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", "tier": 100,
                "helmCharts": [{"repositoryURL": "https://kyverno.github.io/kyverno/",
                    "repositoryName": "kyverno", "chartName": "kyverno/kyverno",
                    "chartVersion": "3.6.2", "releaseName": "kyverno-latest",
                    "releaseNamespace": "kyverno", "helmChartAction": "Install"}]},
            "stages": [stage("s1", json!({"auto": {"delay": "10m"}})), stage("prod", json!({"auto": {}}))]
        }
    }));
    let snapshot = testing::snapshot(promotion, 1, testing::commit(1));
    let policy: RolloutPolicy = serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy", "metadata": {"name": "fleet"},
        "spec": {"stages": {"prod": {"waves": {"size": "10%", "canary": 1, "pause": "5m"}}}}
    }))?;
    let now: DateTime<Utc> = DateTime::UNIX_EPOCH + Duration::days(20_000);
    for clusters in sizes {
        let fleet: Vec<ObservedCluster> = (0..clusters)
            .map(|i| ObservedCluster {
                namespace: "fleet".into(),
                name: format!("c{i}"),
                labels: [(
                    "env".to_string(),
                    if i == 0 { "s1" } else { "prod" }.to_string(),
                )]
                .into(),
                ready: true,
                paused: false,
                capi: false,
                active_window: None,
            })
            .collect();
        let started = Instant::now();
        let simulation = simulate(&SimulationInput {
            snapshot: &snapshot,
            approvals: &[],
            history: std::slice::from_ref(&snapshot),
            policy: Some(&policy),
            policy_problem: None,
            status: None,
            fleet: Some(&fleet),
            now,
            provisioning_latency: Duration::minutes(1).into(),
            max_steps: DEFAULT_MAX_STEPS,
        });
        let elapsed = started.elapsed();
        println!(
            "clusters={clusters} steps={} elapsed={:.1}ms simulated={}m end={:?}",
            simulation.steps,
            elapsed.as_secs_f64() * 1e3,
            (simulation.end.at() - now).num_minutes(),
            simulation.end,
        );
    }
    Ok(())
}
