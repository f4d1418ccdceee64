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
            rewound: None,
            dependencies: &[],
            dependency_problem: None,
            policy_problem: None,
            policy_unapproved: false,
            measurements: &[],
        };
        let output = step(&input);
        assert!(output.actions.is_empty(), "not at steady state");
        assert_eq!(Some(&output.status), world.status.as_ref());
        c.bench_function(name, |b| b.iter(|| step(black_box(&input))));
    }
}

criterion_group!(benches, bench_step, bench_fleet_step);
criterion_main!(benches);

/// One step of the scale harness's promotion (4 stages of 10 clusters each in a fleet of 1,000,
/// stage 3 provisioning), without and with a RolloutPolicy: the per-step cost of being governed.
fn bench_fleet_step(c: &mut Criterion) {
    let stages: Vec<serde_json::Value> = (0..4)
        .map(|s| json!({"name": format!("s{s}"), "clusterSelector": {"matchLabels": {"shard": s.to_string()}}}))
        .collect();
    let promotion = testing::promotion(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": "fleet"},
        "spec": {
            "profileSpec": {"helmCharts": [{"repositoryURL": "https://charts.example.com",
                "repositoryName": "example", "chartName": "example/app", "chartVersion": "1.0.0",
                "releaseName": "app", "releaseNamespace": "app"}]},
            "stages": stages,
        }
    }));
    let snapshot = testing::snapshot(promotion, 1, testing::commit(1));
    let desired = Desired::Snapshot {
        current: &snapshot,
        invalid: None,
    };
    let policy = |spec: serde_json::Value| -> tollgate_model::policy::RolloutPolicy {
        serde_json::from_value(json!({
            "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": "scale"}, "spec": spec,
        }))
        .expect("policy")
    };
    let gated: serde_json::Map<String, serde_json::Value> = (0..4)
        .map(|s| (format!("s{s}"), json!({"analyses": ["error-rate"]})))
        .collect();
    let policies = [
        ("", None),
        (
            ", governed by a policy",
            Some(policy(json!({"selector": {}}))),
        ),
        (
            ", one analysis per stage (two recorded)",
            Some(policy(
                json!({"selector": {}, "stages": gated, "analyses": [{
                "name": "error-rate",
                "prometheus": {"address": "http://prometheus.example:9090",
                    "query": "sum(rate(errors{cluster=~\"{{ clustersRegex }}\"}[1m]))"},
                "successCondition": "result < 0.01"}]}),
            )),
        ),
    ];
    for (what, policy) in policies {
        let mut world = World::new(DateTime::UNIX_EPOCH + Duration::days(20_000));
        world.policy = policy;
        for i in 0..1000 {
            world.add_cluster(&format!("c{i}"), &[("shard", &(i % 100).to_string())]);
            if i % 100 == 2 {
                world.slow_clusters.insert(format!("c{i}"));
            }
        }
        for _ in 0..20 {
            let out = world.step(desired, &[]);
            answer(&mut world, &out.measurements);
            world.sveltos();
            world.advance(Duration::seconds(1));
        }
        let current = world
            .status
            .as_ref()
            .and_then(|s| s.current_stage_name.clone());
        assert_eq!(current.as_deref(), Some("s2"), "stage 3 provisioning");
        let name = format!("step: 4 stages of 10 in 1,000 clusters, provisioning{what}");
        c.bench_function(&name, |b| {
            b.iter(|| world.evaluate(black_box(desired), &[]))
        });
    }
}

/// Plays the analysis runner: every measurement due succeeds at once.
fn answer(world: &mut World, due: &[tollgate_engine::measurement::MeasurementDue]) {
    for due in due {
        world
            .measurements
            .push(tollgate_engine::measurement::Measurement {
                key: due.key(),
                taken_at: world.now,
                value: Some("0.001".to_string()),
                verdict: tollgate_model::analysis::MeasurementVerdict::Successful,
                error: None,
                comparison: None,
            });
    }
}
