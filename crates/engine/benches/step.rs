//! One engine step for a 4-stage promotion over 100 clusters, at steady state mid-rollout
//! (stages 1–2 done, stage 3 provisioned and waiting for its delay). Target: under 20 µs.

use std::hint::black_box;

use chrono::{DateTime, Duration, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tollgate_engine::testing::{self, World};
use tollgate_engine::{Desired, StepInput, step};

fn bench_step(c: &mut Criterion) {
    let stage = |name: &str, trigger: serde_json::Value| {
        json!({"name": name, "clusterSelector": {"matchLabels": {"env": name}}, "trigger": trigger})
    };
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
    let desired = Desired::Snapshot { current: &snapshot, invalid: None };
    for _ in 0..12 {
        world.step(desired, &[]);
        world.sveltos();
        world.advance(Duration::minutes(1));
    }
    let status = world.status.clone();
    assert_eq!(
        status.as_ref().and_then(|s| s.current_stage_name.as_deref()),
        Some("staging")
    );
    let input = StepInput {
        desired,
        approvals: &[],
        observed: &world.observed,
        status: status.as_ref(),
        now: world.now,
    };
    assert!(step(&input).actions.is_empty(), "not at steady state");
    c.bench_function("step: 4 stages, 100 clusters, steady state", |b| {
        b.iter(|| step(black_box(&input)))
    });
}

criterion_group!(benches, bench_step);
criterion_main!(benches);
