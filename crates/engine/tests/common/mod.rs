//! Fixtures shared by the engine's integration tests.
#![allow(dead_code)]

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use tollgate_engine::testing::{self, World};
use tollgate_engine::{Desired, StepOutput};
use tollgate_manifest::model::ClusterPromotion;
use tollgate_manifest::snapshot::{ApprovalEvent, Snapshot};

pub const P: &str = "demo";

pub fn t(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

pub fn t0() -> DateTime<Utc> {
    t("2025-10-07T10:00:00Z")
}

/// The default profileSpec: one Helm chart (CRD defaults as the parser writes them).
pub fn profile_spec(chart_version: &str) -> Value {
    json!({
        "syncMode": "Continuous",
        "tier": 100,
        "continueOnConflict": false,
        "continueOnError": false,
        "stopMatchingBehavior": "WithdrawPolicies",
        "reloader": false,
        "helmCharts": [{
            "repositoryURL": "https://kyverno.github.io/kyverno/",
            "repositoryName": "kyverno",
            "chartName": "kyverno/kyverno",
            "chartVersion": chart_version,
            "releaseName": "kyverno-latest",
            "releaseNamespace": "kyverno",
            "helmChartAction": "Install"
        }]
    })
}

/// A stage selecting `env=<name>`, with an optional trigger.
pub fn stage(name: &str, trigger: Option<Value>) -> Value {
    let mut stage = json!({"name": name, "clusterSelector": {"matchLabels": {"env": name}}});
    if let Some(trigger) = trigger {
        stage["trigger"] = trigger;
    }
    stage
}

pub fn promotion_with(profile_spec: Value, stages: Vec<Value>) -> ClusterPromotion {
    testing::promotion(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": P},
        "spec": {"profileSpec": profile_spec, "stages": stages}
    }))
}

/// The world, the snapshot git currently shows, and the approval events seen so far.
pub struct Harness {
    pub world: World,
    pub snapshot: Snapshot,
    pub approvals: Vec<ApprovalEvent>,
    pub invalid: Option<String>,
}

impl Harness {
    /// A fleet with two clusters per env (`dev`, `staging`, `prod`, `s1`…`s4`).
    pub fn new(promotion: ClusterPromotion) -> Self {
        let mut world = World::new(t0());
        for env in ["dev", "staging", "prod", "s1", "s2", "s3", "s4"] {
            for i in 1..=2 {
                world.add_cluster(&format!("{env}-{i}"), &[("env", env)]);
            }
        }
        let snapshot = testing::snapshot(promotion, 1, testing::commit(10));
        world.history.push(snapshot.clone());
        Harness {
            world,
            snapshot,
            approvals: Vec::new(),
            invalid: None,
        }
    }

    pub fn desired(&self) -> Desired<'_> {
        Desired::Snapshot {
            current: &self.snapshot,
            invalid: self.invalid.as_deref(),
        }
    }

    pub fn step(&mut self) -> StepOutput {
        let desired = Desired::Snapshot {
            current: &self.snapshot,
            invalid: self.invalid.as_deref(),
        };
        self.world.step(desired, &self.approvals)
    }

    pub fn step_failing(&mut self) -> StepOutput {
        let desired = Desired::Snapshot {
            current: &self.snapshot,
            invalid: self.invalid.as_deref(),
        };
        self.world.step_failing(desired, &self.approvals)
    }

    /// Step and let Sveltos react until nothing changes; returns the last step's output.
    pub fn settle(&mut self) -> StepOutput {
        let mut last = self.step();
        for _ in 0..20 {
            self.world.sveltos();
            let next = self.step();
            if next.actions.is_empty() && last.actions.is_empty() {
                return next;
            }
            last = next;
        }
        panic!("the world did not settle");
    }

    /// Move the clock to `at` and settle.
    pub fn settle_at(&mut self, at: DateTime<Utc>) -> StepOutput {
        self.world.now = at;
        self.settle()
    }

    pub fn later(&mut self, by: Duration) -> StepOutput {
        self.world.advance(by);
        self.settle()
    }

    /// New content committed at first-parent position `seq`: a new snapshot.
    /// Like git history: content equal to an earlier snapshot's names it (`same_content_as`).
    pub fn commit_content(&mut self, promotion: ClusterPromotion, seq: u64) {
        let index = self.snapshot.index + 1;
        let mut snapshot = testing::snapshot(promotion, index, testing::commit(seq));
        snapshot.same_content_as = self
            .world
            .history
            .iter()
            .find(|s| s.hashes == snapshot.hashes)
            .map(|s| s.index);
        self.snapshot = snapshot;
        self.world.history.push(self.snapshot.clone());
    }

    /// A trigger-only edit: same snapshot, newer promotion content.
    pub fn edit_triggers(&mut self, edit: impl FnOnce(&mut ClusterPromotion)) {
        let mut promotion = (*self.snapshot.promotion).clone();
        edit(&mut promotion);
        self.snapshot.promotion = std::sync::Arc::new(promotion);
    }

    pub fn status(&self) -> &tollgate_engine::PromotionStatus {
        self.world.status.as_ref().unwrap()
    }

    pub fn stage_status(&self, stage: &str) -> &tollgate_engine::StageStatus {
        self.status().stage(stage).unwrap()
    }

    pub fn has_profile(&self, name: &str) -> bool {
        self.world.profile(name).is_some()
    }

    pub fn profile_spec_of(&self, name: &str) -> Value {
        self.world.profile(name).unwrap().spec.value()
    }

    /// Stepping again once everything took effect changes nothing (the idempotence contract).
    pub fn assert_idempotent(&self) {
        let again = self.world.evaluate(self.desired(), &self.approvals);
        assert!(
            again.actions.is_empty(),
            "unexpected actions: {:?}",
            again.actions
        );
        assert_eq!(Some(&again.status), self.world.status.as_ref());
        assert!(
            again.events.is_empty(),
            "unexpected events: {:?}",
            again.events
        );
    }
}

pub fn profile_name(stage: &str) -> String {
    format!("{P}-{stage}")
}

/// The clusters `stage`'s profile targets now (its clusterRefs, or "selector").
pub fn targeted(h: &Harness, stage: &str) -> Vec<String> {
    let spec = h.profile_spec_of(&profile_name(stage));
    match spec.get("clusterRefs").and_then(Value::as_array) {
        Some(refs) => refs
            .iter()
            .map(|r| r["name"].as_str().unwrap_or_default().to_string())
            .collect(),
        None => vec!["selector".to_string()],
    }
}

/// The RolloutPolicy `fleet-defaults` with `spec`.
pub fn fleet_policy(spec: Value) -> tollgate_model::policy::RolloutPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "fleet-defaults"}, "spec": spec,
    }))
    .expect("valid policy")
}

/// Stages s1, s2 and s3 (no trigger) deploying `chart`.
pub fn three_stages(chart: &str) -> ClusterPromotion {
    promotion_with(
        profile_spec(chart),
        vec![stage("s1", None), stage("s2", None), stage("s3", None)],
    )
}

/// Rolls snapshot #1 out to every stage under `onFailure: on_failure` (no failure allowed),
/// then commits #2 whose s2 fails.
pub fn rolled_out_then_failing(on_failure: &str) -> Harness {
    let mut h = Harness::new(three_stages("1.0.0"));
    h.world.policy = Some(fleet_policy(
        json!({"maxFailures": 0, "onFailure": on_failure}),
    ));
    h.settle();
    assert_eq!(h.status().phase, tollgate_engine::Phase::Completed);
    h.commit_content(three_stages("9.9.9"), 20);
    h.world.failing_clusters.insert("s2-2".into());
    h
}
