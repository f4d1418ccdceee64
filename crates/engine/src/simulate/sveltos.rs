//! Sveltos as a simulation plays it: the controller's writes take effect at once, and Sveltos keeps
//! one ClusterSummary per (profile, ready selected cluster) whose changed features deploy for a
//! fixed latency and then report `Provisioned`. Nothing fails and no health check is slow: the
//! simulation estimates a rollout that goes well.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use tollgate_model::model::LabelSelector;

use crate::features::{changed_features, required_features};
use crate::observed::{
    FeatureSummary, Observed, ObservedCluster, ObservedProfile, ObservedSpec, ObservedSummary,
};
use crate::output::Action;

/// The simulated Sveltos: when each deploy in progress finishes.
pub(crate) struct SimulatedSveltos {
    /// How long a deploy takes: its profile's latency, or the default.
    latency: Duration,
    latency_by_profile: HashMap<String, Duration>,
    /// (summary namespace/name, feature) → when its deploy finishes.
    due: HashMap<(String, String), DateTime<Utc>>,
    /// Content the persisted status says was applied before the simulation: per profile, the
    /// spec hash and when its deploy finished (or will: it started before `now`).
    deployed_before: HashMap<String, (String, DateTime<Utc>)>,
}

impl SimulatedSveltos {
    pub fn new(
        latency: Duration,
        latency_by_profile: HashMap<String, Duration>,
        deployed_before: HashMap<String, (String, DateTime<Utc>)>,
    ) -> Self {
        SimulatedSveltos {
            latency: latency.max(Duration::zero()),
            latency_by_profile,
            due: HashMap::new(),
            deployed_before,
        }
    }

    /// The earliest instant a deploy in progress finishes.
    pub fn next_due(&self) -> Option<DateTime<Utc>> {
        self.due.values().min().copied()
    }

    /// Executes one of the controller's actions on the management cluster (at once).
    pub fn execute(&self, observed: &mut Observed, action: &Action) {
        match action {
            Action::ApplyProfile { name, object } => {
                let profile = ObservedProfile::of_applied(name.clone(), object);
                observed.profiles.insert(name.clone(), profile);
            }
            Action::DeleteProfile { name } => {
                observed.profiles.remove(name);
                observed.summaries.retain(|s| *s.profile_name != **name);
            }
        }
    }

    /// Sveltos at `now`: a summary per (profile, ready selected cluster) carrying the profile's
    /// spec; a feature whose inputs changed starts deploying, and a deploy whose time is up
    /// reports `Provisioned` (its `lastAppliedTime` the instant it finished).
    pub fn play(&mut self, observed: &mut Observed, now: DateTime<Utc>) {
        // By namespace/name: a fleet of thousands is looked up once per summary, not scanned.
        let existing: HashMap<(&str, &str), &ObservedSummary> = observed
            .summaries
            .iter()
            .map(|s| ((&*s.namespace, &*s.name), s))
            .collect();
        let mut wanted: Vec<ObservedSummary> = Vec::new();
        for profile in observed.profiles.values().filter(|p| !p.deleting) {
            let mut view = ProfileView::new(profile);
            for cluster in observed.clusters.iter() {
                if !cluster.ready || !view.selects(cluster) {
                    continue;
                }
                let name = format!("{}-sveltos-{}", profile.name, cluster.name);
                let previous = existing
                    .get(&(cluster.namespace.as_str(), name.as_str()))
                    .copied();
                wanted.push(self.summary(&mut view, cluster, name, previous, now));
            }
        }
        let kept: HashSet<String> = wanted
            .iter()
            .map(|s| format!("{}/{}", s.namespace, s.name))
            .collect();
        self.due.retain(|(summary, _), _| kept.contains(summary));
        self.deployed_before.clear();
        observed.summaries = wanted;
    }

    /// The summary of `view`'s profile on `cluster` at `now`, from the one Sveltos kept before.
    fn summary(
        &mut self,
        view: &mut ProfileView<'_>,
        cluster: &ObservedCluster,
        name: String,
        previous: Option<&ObservedSummary>,
        now: DateTime<Utc>,
    ) -> ObservedSummary {
        let profile = view.profile;
        let mut summary = previous.cloned().unwrap_or_else(|| ObservedSummary {
            namespace: cluster.namespace.as_str().into(),
            name: name.as_str().into(),
            profile_name: profile.name.as_str().into(),
            cluster_name: cluster.name.as_str().into(),
            spec: ObservedSpec::null(),
            features: Vec::new(),
            failure_message: None,
        });
        let redeploy = view.changed_since(&summary.spec);
        let required = view.required.clone();
        summary
            .features
            .retain(|f| required.contains(&&*f.feature_id));
        let key = format!("{}/{name}", cluster.namespace);
        let done = self.deploy_done(profile, now);
        for feature in required {
            let present = summary.features.iter().any(|f| &*f.feature_id == feature);
            let due_key = (key.clone(), feature.to_string());
            if !present || redeploy.iter().any(|r| r == feature) {
                summary.features.retain(|f| &*f.feature_id != feature);
                summary.features.push(FeatureSummary {
                    feature_id: feature.into(),
                    status: "Provisioning".into(),
                    last_applied_time: None,
                    failure_message: None,
                    hash: None,
                });
                // A paused cluster gets a summary but no deployment.
                if cluster.paused_at(now) {
                    self.due.remove(&due_key);
                } else {
                    self.due.insert(due_key.clone(), done);
                }
            }
            let finished = self.due.get(&due_key).copied().filter(|at| *at <= now);
            if let Some(at) = finished {
                self.due.remove(&due_key);
                for f in summary
                    .features
                    .iter_mut()
                    .filter(|f| &*f.feature_id == feature)
                {
                    f.status = "Provisioned".into();
                    f.last_applied_time = Some(at);
                }
            }
        }
        summary.spec = profile.spec.clone();
        summary
    }

    /// When a deploy of `profile`'s content that starts at `now` finishes: after the latency, or,
    /// for content the status says was applied before the simulation, when that deploy did.
    fn deploy_done(&self, profile: &ObservedProfile, now: DateTime<Utc>) -> DateTime<Utc> {
        self.deployed_before
            .get(&profile.name)
            .filter(|(hash, _)| profile.applied_spec_hash() == Some(hash.as_str()))
            .map_or_else(
                || {
                    let latency = self.latency_by_profile.get(&profile.name);
                    now + latency.copied().unwrap_or(self.latency)
                },
                |(_, done)| *done,
            )
    }
}

/// What Sveltos reads of one profile, once per play: a waved stage's profile names thousands of
/// clusters, and its spec is read once, not once per cluster.
struct ProfileView<'p> {
    profile: &'p ObservedProfile,
    spec: Value,
    /// Its `clusterSelector` (an absent or empty one selects nothing).
    selector: Option<LabelSelector>,
    /// Its `clusterRefs`, as (namespace, name).
    refs: HashSet<(String, String)>,
    required: Vec<&'static str>,
    /// The features to redeploy over each earlier spec seen (summaries share their specs).
    changes: Vec<(ObservedSpec, Vec<String>)>,
}

impl<'p> ProfileView<'p> {
    fn new(profile: &'p ObservedProfile) -> Self {
        let spec = profile.spec.value();
        let selector = spec
            .get("clusterSelector")
            .and_then(|s| serde_json::from_value::<LabelSelector>(s.clone()).ok())
            .filter(|s| !s.is_empty());
        let refs = spec
            .get("clusterRefs")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| {
                        let namespace = r.get("namespace")?.as_str()?;
                        Some((namespace.to_string(), r.get("name")?.as_str()?.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let required = required_features(&spec);
        ProfileView {
            profile,
            spec,
            selector,
            refs,
            required,
            changes: Vec::new(),
        }
    }

    /// Sveltos's selection: the selector, or the cluster named in `clusterRefs`.
    fn selects(&self, cluster: &ObservedCluster) -> bool {
        self.selector
            .as_ref()
            .is_some_and(|s| s.matches(&cluster.labels))
            || self
                .refs
                .contains(&(cluster.namespace.clone(), cluster.name.clone()))
    }

    /// The features whose inputs changed since `old` (every one when there was none).
    fn changed_since(&mut self, old: &ObservedSpec) -> Vec<String> {
        if old.shares(&self.profile.spec) {
            return Vec::new();
        }
        if let Some((_, changed)) = self.changes.iter().find(|(spec, _)| spec.shares(old)) {
            return changed.clone();
        }
        let old_value = Some(old.value()).filter(|v| !v.is_null());
        let changed = changed_features(old_value.as_ref(), &self.spec);
        self.changes.push((old.clone(), changed.clone()));
        changed
    }
}
