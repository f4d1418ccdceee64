//! What the watches show, converted to the engine's plain `Observed` types.
//!
//! Conversion happens once per watch event; assembling one promotion's view is then a few index
//! lookups. Profiles are indexed by the promotion label, summaries by the profile they belong to
//! (`projectsveltos.io/cluster-profile-name`, which Sveltos always sets), clusters not at all.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, RwLock, Weak};

use chrono::{DateTime, Utc};
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;
use tollgate_engine::{
    FeatureSummary, Observed, ObservedCluster, ObservedProfile, ObservedSummary,
};
use tollgate_render::PROMOTION_LABEL;

use super::cache::IndexedCache;

pub const SUMMARY_PROFILE_LABEL: &str = "projectsveltos.io/cluster-profile-name";

/// The caches the controller reads, one per watched kind.
#[derive(Default)]
pub struct ObservedCaches {
    pub profiles: Arc<IndexedCache<ObservedProfile>>,
    pub summaries: Arc<IndexedCache<ObservedSummary>>,
    pub clusters: Arc<IndexedCache<ObservedCluster>>,
    /// The fleet as every step sees it, rebuilt only when the cluster cache changed: a copy per
    /// step made cold start O(promotions × clusters).
    fleet: RwLock<Option<(u64, Arc<Vec<ObservedCluster>>)>>,
}

impl ObservedCaches {
    pub fn is_ready(&self) -> bool {
        self.profiles.is_ready() && self.summaries.is_ready() && self.clusters.is_ready()
    }

    /// The promotion a ClusterProfile belongs to, by its label.
    pub fn promotion_of_profile(&self, profile: &str) -> Option<String> {
        self.profiles
            .get(&(String::new(), profile.to_string()))
            .and_then(|p| p.labels.get(PROMOTION_LABEL).cloned())
    }

    /// The observed state of one promotion: its own profiles, any profile holding a name it would
    /// generate (`generated_names`, so that a foreign one is detected), their summaries, and every
    /// cluster.
    pub fn observe(&self, promotion: &str, generated_names: &[String]) -> Observed {
        let mut profiles: BTreeMap<String, ObservedProfile> = self
            .profiles
            .indexed(promotion)
            .into_iter()
            .map(|p| (p.name.clone(), (*p).clone()))
            .collect();
        for name in generated_names {
            if !profiles.contains_key(name)
                && let Some(p) = self.profiles.get(&(String::new(), name.clone()))
            {
                profiles.insert(name.clone(), (*p).clone());
            }
        }
        let summaries = profiles
            .keys()
            .flat_map(|name| self.summaries.indexed(name))
            .map(|s| (*s).clone())
            .collect();
        let clusters = self.fleet();
        Observed {
            profiles,
            summaries,
            clusters,
        }
    }

    /// The shared fleet snapshot, rebuilt if the cluster cache moved on since it was taken.
    fn fleet(&self) -> Arc<Vec<ObservedCluster>> {
        let generation = self.clusters.generation();
        if let Some((taken_at, fleet)) = self
            .fleet
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            && *taken_at == generation
        {
            return fleet.clone();
        }
        let (generation, clusters) = self.clusters.all_sorted();
        let fleet = Arc::new(
            clusters
                .into_iter()
                .map(|c| (*c).clone())
                .collect::<Vec<_>>(),
        );
        *self.fleet.write().unwrap_or_else(|e| e.into_inner()) = Some((generation, fleet.clone()));
        fleet
    }
}

pub fn convert_profile(object: &DynamicObject) -> Option<(Option<String>, ObservedProfile)> {
    let labels: BTreeMap<String, String> = object.labels().clone().into_iter().collect();
    let index = labels.get(PROMOTION_LABEL).cloned();
    let profile = ObservedProfile {
        name: object.name_any(),
        annotations: object.annotations().clone().into_iter().collect(),
        labels,
        spec: object.data.get("spec").cloned().unwrap_or(Value::Null),
        deleting: object.metadata.deletion_timestamp.is_some(),
    };
    Some((index, profile))
}

pub fn convert_summary(object: &DynamicObject) -> Option<(Option<String>, ObservedSummary)> {
    let profile_name = object.labels().get(SUMMARY_PROFILE_LABEL)?.clone();
    let spec = object.data.get("spec");
    let status = object.data.get("status");
    let features = status
        .and_then(|s| s.get("featureSummaries"))
        .and_then(Value::as_array)
        .map(|list| list.iter().map(convert_feature).collect())
        .unwrap_or_default();
    let summary = ObservedSummary {
        namespace: object.namespace().unwrap_or_default(),
        name: object.name_any(),
        profile_name: profile_name.clone(),
        cluster_name: str_at(spec, "clusterName").unwrap_or_default(),
        spec: intern_spec(
            spec.and_then(|s| s.get("clusterProfileSpec"))
                .cloned()
                .unwrap_or(Value::Null),
        ),
        features,
        failure_message: str_at(status, "failureMessage"),
    };
    Some((Some(profile_name), summary))
}

/// Specs held by cached summaries, by their JSON text.
struct SpecInterner {
    specs: HashMap<String, Weak<Value>>,
    /// Dropped specs are pruned when the map outgrows this.
    prune_at: usize,
}

static SPECS: LazyLock<Mutex<SpecInterner>> = LazyLock::new(|| {
    Mutex::new(SpecInterner {
        specs: HashMap::new(),
        prune_at: 1024,
    })
});

/// The summaries of one profile all carry the profile's spec: one shared copy instead of one per
/// summary (at 400,000 summaries the copies were most of the controller's memory).
fn intern_spec(spec: Value) -> Arc<Value> {
    let key = spec.to_string();
    let mut interner = SPECS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(shared) = interner.specs.get(&key).and_then(Weak::upgrade) {
        return shared;
    }
    let shared = Arc::new(spec);
    interner.specs.insert(key, Arc::downgrade(&shared));
    if interner.specs.len() > interner.prune_at {
        interner.specs.retain(|_, spec| spec.strong_count() > 0);
        interner.prune_at = (interner.specs.len() * 2).max(1024);
    }
    shared
}

fn convert_feature(value: &Value) -> FeatureSummary {
    FeatureSummary {
        feature_id: str_at(Some(value), "featureID").unwrap_or_default(),
        status: str_at(Some(value), "status").unwrap_or_default(),
        last_applied_time: str_at(Some(value), "lastAppliedTime").and_then(|t| parse_time(&t)),
        failure_message: str_at(Some(value), "failureMessage"),
        hash: str_at(Some(value), "hash"),
    }
}

pub fn convert_sveltos_cluster(
    object: &DynamicObject,
) -> Option<(Option<String>, ObservedCluster)> {
    let ready = object.metadata.deletion_timestamp.is_none()
        && object
            .data
            .get("status")
            .and_then(|s| s.get("ready"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    let paused = object
        .data
        .get("spec")
        .and_then(|s| s.get("paused"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Some((None, cluster(object, ready, paused)))
}

/// CAPI clusters are ready once their control plane is initialised (Sveltos's test, §5.4).
pub fn convert_capi_cluster(object: &DynamicObject) -> Option<(Option<String>, ObservedCluster)> {
    let status = object.data.get("status");
    let initialised_field = status
        .and_then(|s| s.get("initialization"))
        .and_then(|i| i.get("controlPlaneInitialized"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let initialised_condition = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("ControlPlaneInitialized")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        });
    let paused = object
        .data
        .get("spec")
        .and_then(|s| s.get("paused"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let ready = object.metadata.deletion_timestamp.is_none()
        && (initialised_field || initialised_condition);
    Some((None, cluster(object, ready, paused)))
}

fn cluster(object: &DynamicObject, ready: bool, paused: bool) -> ObservedCluster {
    ObservedCluster {
        namespace: object.namespace().unwrap_or_default(),
        name: object.name_any(),
        labels: object.labels().clone().into_iter().collect(),
        ready,
        paused,
    }
}

fn str_at(value: Option<&Value>, field: &str) -> Option<String> {
    value?.get(field)?.as_str().map(str::to_string)
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).expect("valid object")
    }

    #[test]
    fn summary_is_indexed_by_its_profile_and_carries_feature_times() {
        let summary = object(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": "p-dev-sveltos-c1", "namespace": "fleet",
                         "labels": {"projectsveltos.io/cluster-profile-name": "p-dev"}},
            "spec": {"clusterName": "c1", "clusterProfileSpec": {"tier": 100}},
            "status": {"featureSummaries": [{"featureID": "Helm", "status": "Provisioned",
                        "lastAppliedTime": "2025-10-07T10:00:00Z", "hash": "abc="}]}
        }));
        let (index, converted) = convert_summary(&summary).expect("converted");
        assert_eq!(index.as_deref(), Some("p-dev"));
        assert_eq!(converted.cluster_name, "c1");
        assert_eq!(*converted.spec, json!({"tier": 100}));
        let (_, again) = convert_summary(&summary).expect("converted");
        assert!(
            Arc::ptr_eq(&converted.spec, &again.spec),
            "equal specs are shared"
        );
        assert!(converted.features[0].is_provisioned());
        assert_eq!(
            converted.features[0]
                .last_applied_time
                .map(|t| t.to_rfc3339()),
            Some("2025-10-07T10:00:00+00:00".to_string())
        );
    }

    #[test]
    fn summary_without_profile_label_is_skipped() {
        let summary = object(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": "x", "namespace": "fleet"}
        }));
        assert!(convert_summary(&summary).is_none());
    }

    #[test]
    fn sveltos_cluster_readiness_and_pause() {
        let ready = object(json!({
            "apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
            "metadata": {"name": "c1", "namespace": "fleet", "labels": {"env": "dev"}},
            "spec": {"paused": true}, "status": {"ready": true}
        }));
        let (_, c) = convert_sveltos_cluster(&ready).expect("converted");
        assert!(c.ready && c.paused);
        let unready = object(json!({
            "apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
            "metadata": {"name": "c2", "namespace": "fleet"}
        }));
        assert!(
            !convert_sveltos_cluster(&unready)
                .expect("converted")
                .1
                .ready
        );
    }

    #[test]
    fn capi_cluster_ready_by_condition() {
        let capi = object(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "c3", "namespace": "fleet"},
            "status": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]}
        }));
        assert!(convert_capi_cluster(&capi).expect("converted").1.ready);
    }
}
