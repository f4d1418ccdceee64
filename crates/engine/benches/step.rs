//! One engine step for a 4-stage promotion over 100 clusters, at steady state mid-rollout
//! (stages 1–2 done, stage 3 provisioned and waiting for its delay), and the same promotion
//! waiting at its manual gate (stage 4), where every step re-checks health. Target: under 20 µs.

use std::hint::black_box;

use chrono::{DateTime, Duration, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tollgate_engine::testing::{self, World};
use tollgate_engine::{Desired, StepInput, step};

fn bench_step(c: &mut Criterion) {
    let stage = |name: &str, trigger: serde_json::Value| json!({"name": name, "clusterSelector": {"matchLabels": {"env": name}}, "trigger": trigger});
    let promotion = testing::promotion(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": "bench"},
        "spec": {
            "profileSpec": {
                "syncMode": "Continuous", "tier": 100,
                "helmCharts": [{"repositoryURL": "https://kyverno.github.io/kyverno/", "repositoryName": "kyverno",
                    "chartName": "kyverno/kyverno", "chartVersion": "3.6.2", "releaseName": "kyverno-latest",
                    "releaseNamespace": "kyverno", "helmChartAction": "Install"}],
                "policyRefs": [{"kind": "ConfigMap", "namespace": "default", "name": "policies"}]
            },
            "stages": [
                stage("dev", json!({"auto": {"delay": "1m"}})),
                stage("uat", json!({"auto": {"delay": "1m"}})),
                stage("staging", json!({"auto": {"delay": "1h"}})),
                stage("production", json!({"manual": {}})),
            ]
        }
    }));
    let snapshot = testing::snapshot(promotion, 1, testing::commit(1));
    let start: DateTime<Utc> = DateTime::UNIX_EPOCH + Duration::days(20_000);
    let mut world = World::new(start);
    for env in ["dev", "uat", "staging", "production"] {
        for i in 0..25 {
            world.add_cluster(&format!("{env}-{i}"), &[("env", env)]);
        }
    }
    let desired = Desired::Snapshot {
        current: &snapshot,
        invalid: None,
    };
    // Drive the rollout until `stage` is current and the engine has nothing left to do.
    let mut run_until = |stage: &str| {
        for _ in 0..200 {
            world.step(desired, &[]);
            world.sveltos();
            world.step(desired, &[]);
            let current = world
                .status
                .as_ref()
                .and_then(|s| s.current_stage_name.as_deref());
            let again = world.evaluate(desired, &[]);
            let settled = again.actions.is_empty() && Some(&again.status) == world.status.as_ref();
            if current == Some(stage) && settled {
                return world.clone();
            }
            world.advance(Duration::minutes(1));
        }
        panic!("never reached {stage}");
    };
    // Stage 3 provisioned, waiting for its 1h delay.
    let in_delay = run_until("staging");
    // Stage 4 provisioned, waiting for approval: every step re-checks 25 ClusterSummaries.
    let at_gate = run_until("production");
    for (name, world) in [
        (
            "step: 4 stages, 100 clusters, steady state (delay)",
            &in_delay,
        ),
        (
            "step: 4 stages, 100 clusters, steady state (manual gate, health re-check)",
            &at_gate,
        ),
    ] {
        let input = StepInput {
            desired,
            approvals: &[],
            observed: &world.observed,
            status: world.status.as_ref(),
            now: world.now,
            policy: None,
            history: &[],
            watch_problem: None,
            unverified: None,
            dependencies: &[],
            dependency_problem: None,
            policy_problem: None,
            measurements: &[],
        };
        let output = step(&input);
        assert!(output.actions.is_empty(), "not at steady state");
        assert_eq!(Some(&output.status), world.status.as_ref());
        c.bench_function(name, |b| b.iter(|| step(black_box(&input))));
    }
}

criterion_group!(benches, bench_step);
criterion_main!(benches);
