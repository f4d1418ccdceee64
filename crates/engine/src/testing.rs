//! A tiny in-memory world for driving the engine in tests: it executes actions against an
//! [`Observed`], persists status only when every action succeeded (the controller's contract),
//! and can play Sveltos (ClusterSummaries for matching clusters, features Provisioned later).
//!
//! Available to other crates' tests with the `testing` feature.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use tollgate_model::hash::SpecHashes;
use tollgate_model::model::{ClusterPromotion, LabelSelector};
use tollgate_model::policy::RolloutPolicy;
use tollgate_model::snapshot::{ApprovalEvent, ApprovalKind, CommitInfo, Snapshot};

use crate::depends_on::Dependency;
use crate::features::{changed_features, required_features};
use crate::input::{Desired, StepInput};
use crate::observed::{
    FeatureSummary, Observed, ObservedCluster, ObservedProfile, ObservedSpec, ObservedSummary,
};
use crate::output::{Action, EngineEvent, StepOutput};
use crate::run::step::step;
use crate::status::PromotionStatus;

/// The management cluster, the controller's persistence, and a fake clock.
#[derive(Clone, Debug)]
pub struct World {
    pub observed: Observed,
    /// What the controller persisted after the last fully successful step.
    pub status: Option<PromotionStatus>,
    pub now: DateTime<Utc>,
    /// Every action executed, in order.
    pub executed: Vec<Action>,
    /// Every event emitted (only for steps whose actions all succeeded).
    pub events: Vec<EngineEvent>,
    /// Clusters whose deployments fail (their features report `Failed`).
    pub failing_clusters: BTreeSet<String>,
    /// Clusters whose deployments never finish (their features stay `Provisioning`).
    pub slow_clusters: BTreeSet<String>,
    /// The RolloutPolicy governing the promotion.
    pub policy: Option<RolloutPolicy>,
    /// The promotion's snapshots (for rollbacks).
    pub history: Vec<Snapshot>,
    /// What the controller says about its watches.
    pub watch_problem: Option<String>,
    /// Why the branch tip failed commit verification (`--verify-commits`).
    pub unverified: Option<String>,
    pub rewound: Option<String>,
    /// Why the governing policy cannot be resolved (`policy` is then its last valid version).
    pub policy_problem: Option<String>,
    pub policy_unapproved: bool,
    /// The promotions this one depends on: name, stage names, persisted status.
    pub dependencies: Vec<(String, Vec<String>, Option<PromotionStatus>)>,
    /// Why its `tollgate.dev/depends-on` is refused.
    pub dependency_problem: Option<String>,
    /// Analysis measurements taken (as the controller's runner would feed them).
    pub measurements: Vec<crate::measurement::Measurement>,
}

impl World {
    pub fn new(now: DateTime<Utc>) -> Self {
        World {
            observed: Observed::default(),
            status: None,
            now,
            executed: Vec::new(),
            events: Vec::new(),
            failing_clusters: BTreeSet::new(),
            slow_clusters: BTreeSet::new(),
            policy: None,
            history: Vec::new(),
            watch_problem: None,
            unverified: None,
            rewound: None,
            dependencies: Vec::new(),
            dependency_problem: None,
            policy_problem: None,
            policy_unapproved: false,
            measurements: Vec::new(),
        }
    }

    /// A ready, unpaused SveltosCluster in namespace `default`.
    pub fn add_cluster(&mut self, name: &str, labels: &[(&str, &str)]) {
        std::sync::Arc::make_mut(&mut self.observed.clusters).push(ObservedCluster {
            namespace: "default".to_string(),
            name: name.to_string(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ready: true,
            paused: false,
            capi: false,
            active_window: None,
        });
    }

    pub fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    pub fn profile(&self, name: &str) -> Option<&ObservedProfile> {
        self.observed.profiles.get(name)
    }

    /// Run the engine on the world's current state without executing anything.
    pub fn evaluate(&self, desired: Desired<'_>, approvals: &[ApprovalEvent]) -> StepOutput {
        let dependencies: Vec<Dependency<'_>> = self
            .dependencies
            .iter()
            .map(|(promotion, stages, status)| Dependency {
                promotion,
                stages,
                status: status.as_ref(),
            })
            .collect();
        step(&StepInput {
            desired,
            approvals,
            observed: &self.observed,
            status: self.status.as_ref(),
            now: self.now,
            policy: self.policy.as_ref(),
            history: &self.history,
            watch_problem: self.watch_problem.as_deref(),
            unverified: self.unverified.as_deref(),
            rewound: self.rewound.as_deref(),
            dependencies: &dependencies,
            dependency_problem: self.dependency_problem.as_deref(),
            policy_problem: self.policy_problem.as_deref(),
            policy_unapproved: self.policy_unapproved,
            measurements: &self.measurements,
        })
    }

    /// One controller iteration: step, execute every action, persist status, record events.
    pub fn step(&mut self, desired: Desired<'_>, approvals: &[ApprovalEvent]) -> StepOutput {
        let output = self.evaluate(desired, approvals);
        for action in &output.actions {
            self.execute(action);
        }
        self.status = Some(output.status.clone());
        self.events.extend(output.events.iter().cloned());
        output
    }

    /// One controller iteration whose first action fails: nothing is executed or persisted.
    pub fn step_failing(
        &mut self,
        desired: Desired<'_>,
        approvals: &[ApprovalEvent],
    ) -> StepOutput {
        self.evaluate(desired, approvals)
    }

    /// Execute one action like the API server would (deletion is immediate here).
    pub fn execute(&mut self, action: &Action) {
        self.executed.push(action.clone());
        match action {
            Action::ApplyProfile { name, object } => {
                let profile = ObservedProfile::of_applied(name.clone(), object);
                self.observed.profiles.insert(name.clone(), profile);
            }
            Action::DeleteProfile { name } => {
                self.observed.profiles.remove(name);
                self.observed
                    .summaries
                    .retain(|s| *s.profile_name != **name);
            }
        }
    }

    /// Play Sveltos at `now`: keep one ClusterSummary per (profile, ready matching cluster) with
    /// the profile's spec, and redeploy (Provisioned, `lastAppliedTime = now`) every feature
    /// whose inputs changed. Paused clusters get a summary but no deployment.
    pub fn sveltos(&mut self) {
        let now = self.now;
        let mut wanted: Vec<ObservedSummary> = Vec::new();
        for profile in self.observed.profiles.values().filter(|p| !p.deleting) {
            // Sveltos: an absent or empty selector selects nothing; `clusterRefs` name clusters.
            let spec = profile.spec.value();
            let selector: Option<LabelSelector> = spec
                .get("clusterSelector")
                .and_then(|s| serde_json::from_value(s.clone()).ok())
                .filter(|s: &LabelSelector| !s.is_empty());
            let refs: Vec<(&str, &str)> = spec
                .get("clusterRefs")
                .and_then(Value::as_array)
                .map(|refs| {
                    refs.iter()
                        .filter_map(|r| {
                            Some((r.get("namespace")?.as_str()?, r.get("name")?.as_str()?))
                        })
                        .collect()
                })
                .unwrap_or_default();
            for cluster in self.observed.clusters.iter() {
                let selected = selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&cluster.labels))
                    || refs.contains(&(cluster.namespace.as_str(), cluster.name.as_str()));
                if !cluster.ready || !selected {
                    continue;
                }
                let name = format!("{}-sveltos-{}", profile.name, cluster.name);
                let previous = self
                    .observed
                    .summaries
                    .iter()
                    .find(|s| *s.namespace == *cluster.namespace && *s.name == *name);
                let mut summary = previous.cloned().unwrap_or_else(|| ObservedSummary {
                    namespace: cluster.namespace.as_str().into(),
                    name: name.as_str().into(),
                    profile_name: profile.name.as_str().into(),
                    cluster_name: cluster.name.as_str().into(),
                    spec: ObservedSpec::null(),
                    features: Vec::new(),
                    failure_message: None,
                });
                let old_spec = previous.map(|s| s.spec.value()).filter(|s| !s.is_null());
                let redeploy = changed_features(old_spec.as_ref(), &spec);
                let required = required_features(&spec);
                summary
                    .features
                    .retain(|f| required.contains(&&*f.feature_id));
                for feature in required {
                    let existing = summary.features.iter().find(|f| &*f.feature_id == feature);
                    let failing = self.failing_clusters.contains(&cluster.name);
                    // Sveltos retries a failed deployment: it recovers once the cause is gone.
                    let retried = existing.is_some_and(|f| f.is_failed()) && !failing;
                    // A deployment a pause held back (never applied) goes out once it unpauses.
                    if existing.is_some_and(|f| f.last_applied_time.is_some())
                        && !redeploy.iter().any(|r| r == feature)
                        && !cluster.paused_at(now)
                        && !retried
                    {
                        continue;
                    }
                    let slow = self.slow_clusters.contains(&cluster.name);
                    let state = if cluster.paused_at(now) || slow {
                        FeatureSummary {
                            feature_id: feature.into(),
                            status: "Provisioning".into(),
                            last_applied_time: None,
                            failure_message: None,
                            hash: Some(feature_hash(feature, &spec)),
                        }
                    } else if failing {
                        FeatureSummary {
                            feature_id: feature.into(),
                            status: "Failed".into(),
                            last_applied_time: Some(now),
                            failure_message: Some("deployment failed".into()),
                            hash: Some(feature_hash(feature, &spec)),
                        }
                    } else {
                        FeatureSummary {
                            feature_id: feature.into(),
                            status: "Provisioned".into(),
                            last_applied_time: Some(now),
                            failure_message: None,
                            hash: Some(feature_hash(feature, &spec)),
                        }
                    };
                    summary.features.retain(|f| &*f.feature_id != feature);
                    summary.features.push(state);
                }
                summary.spec = profile.spec.clone();
                wanted.push(summary);
            }
        }
        self.observed.summaries = wanted;
    }
}

/// A commit at first-parent position `seq`, with a SHA derived from it.
/// Sveltos' feature `hash` as this stand-in plays it: it changes with the spec it deploys.
fn feature_hash(feature: &str, spec: &Value) -> Arc<str> {
    Arc::from(format!("{feature}-{}", tollgate_render::spec_hash(spec)))
}

pub fn commit(seq: u64) -> CommitInfo {
    CommitInfo {
        sha: format!("{:040x}", 0xc0ffee_u64.wrapping_mul(seq + 1)),
        seq,
        author: format!("author{seq}"),
        author_email: format!("author{seq}@example.com"),
        committer: format!("committer{seq}"),
        committer_email: format!("committer{seq}@example.com"),
        time: DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(i64::try_from(seq).unwrap_or(0)),
        committed: DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(i64::try_from(seq).unwrap_or(0)),
        subject: format!("commit {seq}"),
        signature: None,
    }
}

/// A snapshot of `promotion` introduced by `commit`.
pub fn snapshot(promotion: ClusterPromotion, index: u64, commit: CommitInfo) -> Snapshot {
    Snapshot {
        index,
        hashes: Arc::new(SpecHashes::of(&promotion)),
        commit: commit.into(),
        same_content_as: None,
        promotion: Arc::new(promotion),
        file: "promotions.yaml".to_string(),
        contributors: std::sync::Arc::from([]),
    }
}

/// A promotion from its JSON form (tests write it with `serde_json::json!`).
pub fn promotion(value: Value) -> ClusterPromotion {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("test promotion does not parse: {e}"))
}

/// An approval event of `kind` for `stage` in `commit`.
pub fn approval(stage: &str, kind: ApprovalKind, commit: CommitInfo) -> ApprovalEvent {
    ApprovalEvent {
        stage: stage.to_string(),
        kind,
        commit: commit.into(),
    }
}
