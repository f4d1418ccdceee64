//! What the watches show, converted to the engine's plain `Observed` types.
//!
//! Conversion happens once per watch event; assembling one promotion's view is then a few index
//! lookups. Profiles are indexed by the promotion label, summaries by the profile they belong to
//! (`projectsveltos.io/cluster-profile-name`, which Sveltos always sets), clusters not at all.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use kube::ResourceExt;
use serde_json::Value;
use tollgate_engine::fleet::Fleet;
use tollgate_engine::{Observed, ObservedCluster, ObservedProfile};
use tollgate_model::model::TimeWindow;
use tollgate_model::window::Window;
use tollgate_render::PROMOTION_LABEL;

use super::cache::IndexedCache;
use super::lean::LeanObject;
use spec_interner::intern_spec;
pub use stored_summary::StoredSummary;
pub use summary_object::SummaryObject;

mod intern;
mod spec_interner;
mod stored_summary;
mod summary_object;

pub const SUMMARY_PROFILE_LABEL: &str = "projectsveltos.io/cluster-profile-name";

/// The caches the controller reads, one per watched kind.
#[derive(Default)]
pub struct ObservedCaches {
    pub profiles: Arc<IndexedCache<ObservedProfile>>,
    pub summaries: Arc<IndexedCache<StoredSummary>>,
    pub clusters: Arc<IndexedCache<ObservedCluster>>,
    /// The fleet as every step sees it, rebuilt only when the cluster cache changed: a copy per
    /// step made cold start O(promotions × clusters).
    fleet: RwLock<Option<(u64, Arc<Fleet>)>>,
}

impl ObservedCaches {
    pub fn is_ready(&self) -> bool {
        self.profiles.is_ready() && self.summaries.is_ready() && self.clusters.is_ready()
    }

    /// The promotion a ClusterProfile belongs to, by its label.
    pub fn promotion_of_profile(&self, profile: &str) -> Option<String> {
        self.profiles
            .get(&(String::new(), profile.to_string()))
            .and_then(|p| p.promotion.as_deref().map(str::to_string))
    }

    /// The observed state of one promotion: its own profiles, any profile holding a name it would
    /// generate (`generated_names`, so that a foreign one is detected), their summaries, and every
    /// cluster.
    pub fn observe(&self, promotion: &str, generated_names: &[String]) -> Observed {
        let mut profiles: BTreeMap<String, ObservedProfile> = self
            .profiles
            .indexed(promotion)
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect();
        for name in generated_names {
            if !profiles.contains_key(name)
                && let Some(p) = self.profiles.get(&(String::new(), name.clone()))
            {
                profiles.insert(name.clone(), p);
            }
        }
        let mut summaries = Vec::new();
        for name in profiles.keys() {
            self.summaries
                .visit_indexed(name, |profile, namespace, name, summary| {
                    summaries.push(summary.observed(namespace, name, profile));
                });
        }
        let clusters = self.fleet();
        Observed {
            profiles,
            summaries,
            clusters,
        }
    }

    /// The shared fleet snapshot, rebuilt if the cluster cache moved on since it was taken.
    fn fleet(&self) -> Arc<Fleet> {
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
        let fleet = Arc::new(Fleet::new(clusters));
        *self.fleet.write().unwrap_or_else(|e| e.into_inner()) = Some((generation, fleet.clone()));
        fleet
    }
}

pub fn convert_profile(object: &LeanObject) -> Option<(Option<String>, ObservedProfile)> {
    let labels = object.labels();
    let annotations = object.annotations();
    let profile = ObservedProfile::from_metadata(
        object.name_any(),
        |key| labels.get(key).map(String::as_str),
        |key| annotations.get(key).map(String::as_str),
        intern_spec(object.spec.as_ref().unwrap_or(&Value::Null)),
        object.metadata.deletion_timestamp.is_some(),
    );
    let index = labels.get(PROMOTION_LABEL).cloned();
    Some((index, profile))
}

/// A ClusterSummary as the summary watch decodes it (lean: only the fields read here), filed
/// under its profile.
pub fn convert_summary_object(object: &SummaryObject) -> Option<(Option<String>, StoredSummary)> {
    let metadata = &object.metadata;
    let spec = object.spec.as_ref();
    let status = object.status.as_ref();
    let profile_name = metadata.labels.as_ref()?.get(SUMMARY_PROFILE_LABEL)?;
    let cluster_spec = spec.and_then(|s| s.cluster_profile_spec.as_ref());
    let spec_shared = intern_spec(cluster_spec.unwrap_or(&Value::Null));
    let mut strings = intern::strings();
    let features = status
        .and_then(|s| s.feature_summaries.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|f| {
            (
                strings.feature_label(
                    f.feature_id.as_deref().unwrap_or_default(),
                    f.status.as_deref().unwrap_or_default(),
                    f.hash.as_deref(),
                ),
                f.last_applied_time.as_deref().and_then(parse_time),
                f.failure_message.as_deref().map(Box::from),
            )
        })
        .collect();
    let cluster = spec
        .and_then(|s| s.cluster_name.as_deref())
        .unwrap_or_default();
    let name = metadata.name.as_deref().unwrap_or_default();
    let cluster_name = (stored_summary::cluster_in_name(name, profile_name) != Some(cluster))
        .then(|| strings.intern(cluster));
    let summary = StoredSummary::new(
        cluster_name,
        spec_shared,
        features,
        status
            .and_then(|s| s.failure_message.as_deref())
            .map(Box::from),
    );
    Some((Some(profile_name.clone()), summary))
}

pub fn convert_sveltos_cluster(object: &LeanObject) -> Option<(Option<String>, ObservedCluster)> {
    let ready = object.metadata.deletion_timestamp.is_none()
        && object
            .status
            .as_ref()
            .and_then(|s| s.get("ready"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    Some((None, cluster(object, ready, false)))
}

/// CAPI clusters are ready once their control plane is initialised (Sveltos's test, §5.4).
pub fn convert_capi_cluster(object: &LeanObject) -> Option<(Option<String>, ObservedCluster)> {
    let status = object.status.as_ref();
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
    let ready = object.metadata.deletion_timestamp.is_none()
        && (initialised_field || initialised_condition);
    Some((None, cluster(object, ready, true)))
}

/// Both kinds pause with `spec.paused`; a SveltosCluster also outside its `spec.activeWindow`
/// (evaluated by the engine at each step's `now`).
fn cluster(object: &LeanObject, ready: bool, capi: bool) -> ObservedCluster {
    let spec = object.spec.as_ref();
    let paused = spec
        .and_then(|s| s.get("paused"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let name = object.name_any();
    let active_window = match (capi, spec.and_then(|s| s.get("activeWindow"))) {
        (false, Some(window)) => active_window(window, &name),
        _ => None,
    };
    ObservedCluster {
        namespace: object.namespace().unwrap_or_default(),
        name,
        labels: object.labels().clone().into_iter().collect(),
        ready,
        paused,
        capi,
        active_window,
    }
}

/// `spec.activeWindow {from, to}` (cron), parsed. One that does not parse pauses nothing:
/// Sveltos cannot evaluate it either; said in the log, once per change of the cluster.
fn active_window(window: &Value, cluster: &str) -> Option<Window> {
    let parsed = serde_json::from_value::<TimeWindow>(window.clone())
        .map_err(|e| e.to_string())
        .and_then(|w| Window::parse(&w).map_err(|e| e.to_string()));
    match parsed {
        Ok(window) => Some(window),
        Err(error) => {
            tracing::warn!(cluster, %error, "SveltosCluster spec.activeWindow ignored");
            None
        }
    }
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

    fn object(value: Value) -> LeanObject {
        serde_json::from_value(value).expect("valid object")
    }

    fn summary_object(value: Value) -> SummaryObject {
        serde_json::from_value(value).expect("valid summary")
    }

    #[test]
    fn summary_is_indexed_by_its_profile_and_carries_feature_times() {
        let summary = summary_object(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": "p-dev-sveltos-c1", "namespace": "fleet",
                         "labels": {"projectsveltos.io/cluster-profile-name": "p-dev"}},
            "spec": {"clusterName": "c1", "clusterProfileSpec": {"tier": 100}},
            "status": {"featureSummaries": [{"featureID": "Helm", "status": "Provisioned",
                        "lastAppliedTime": "2025-10-07T10:00:00Z", "hash": "abc="}]}
        }));
        let (index, converted) = convert_summary_object(&summary).expect("converted");
        assert_eq!(index.as_deref(), Some("p-dev"));
        assert_eq!(&*converted.cluster_name("p-dev-sveltos-c1", "p-dev"), "c1");
        assert_eq!(
            &*converted.cluster_name("any", "p-dev"),
            "",
            "the name gives the cluster: it is not kept"
        );
        assert_eq!(converted.spec.value(), json!({"tier": 100}));
        let (_, again) = convert_summary_object(&summary).expect("converted");
        assert!(converted.spec.shares(&again.spec), "equal specs are shared");
        assert!(converted.features()[0].is_provisioned());
        assert_eq!(
            converted.features()[0]
                .last_applied_time
                .map(|t| t.to_rfc3339()),
            Some("2025-10-07T10:00:00+00:00".to_string())
        );
    }

    #[test]
    fn lean_summary_reads_every_field_the_engine_uses() {
        let text = json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": "p-dev-sveltos-c1", "namespace": "fleet", "resourceVersion": "42",
                         "labels": {"projectsveltos.io/cluster-profile-name": "p-dev"},
                         "managedFields": [{"manager": "sveltos", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"clusterName": "c1", "clusterType": "Sveltos",
                     "clusterProfileSpec": {"helmCharts": [{"chartName": "a"}]}},
            "status": {"failureMessage": "boom",
                       "featureSummaries": [{"featureID": "Helm", "status": "Failed",
                        "failureMessage": "chart", "hash": "h=",
                        "lastAppliedTime": "2025-10-07T10:00:00Z"}],
                       "helmReleaseSummaries": [{"releaseName": "a", "status": "Managing"}]}
        })
        .to_string();
        let lean: SummaryObject = serde_json::from_str(&text).expect("lean decode");
        assert_eq!(lean.metadata.resource_version.as_deref(), Some("42"));
        assert!(lean.metadata.managed_fields.is_none());
        let from_lean = convert_summary_object(&lean).expect("converted");
        assert_eq!(
            &*from_lean.1.cluster_name("p-dev-sveltos-c1", "p-dev"),
            "c1"
        );
        assert_eq!(
            from_lean.1.spec.value(),
            json!({"helmCharts": [{"chartName": "a"}]})
        );
        assert_eq!(from_lean.1.features().len(), 1);
        assert_eq!(&*from_lean.1.features()[0].feature_id, "Helm");
        assert_eq!(
            from_lean.1.features()[0].failure_message.as_deref(),
            Some("chart")
        );
        assert!(from_lean.1.features()[0].last_applied_time.is_some());
        assert_eq!(from_lean.0.as_deref(), Some("p-dev"));
        assert_eq!(from_lean.1.failure_message(), Some("boom"));
        assert!(from_lean.1.features()[0].is_failed());
    }

    #[test]
    fn lean_summary_tolerates_absent_and_null_sections() {
        let bare: SummaryObject = serde_json::from_value(json!({
            "metadata": {"name": "s", "namespace": "fleet",
                         "labels": {"projectsveltos.io/cluster-profile-name": "p"}},
            "status": {"featureSummaries": null}
        }))
        .expect("lean decode");
        let (_, summary) = convert_summary_object(&bare).expect("converted");
        assert!(summary.features().is_empty());
        assert_eq!(&*summary.cluster_name("s", "p"), "");
        assert!(summary.spec.is_null());
        let unlabelled: SummaryObject =
            serde_json::from_value(json!({"metadata": {"name": "x"}})).expect("lean decode");
        assert!(convert_summary_object(&unlabelled).is_none());
    }

    #[test]
    fn repeated_summary_strings_are_shared() {
        let summary = |name: &str| {
            summary_object(json!({
                "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
                "metadata": {"name": name, "namespace": "fleet",
                             "labels": {"projectsveltos.io/cluster-profile-name": "p-shared"}},
                "spec": {"clusterName": "c-shared"},
                "status": {"featureSummaries": [{"featureID": "Helm", "status": "Provisioned"}]}
            }))
        };
        let (_, a) = convert_summary_object(&summary("a")).expect("converted");
        let (_, b) = convert_summary_object(&summary("b")).expect("converted");
        assert!(Arc::ptr_eq(
            &a.cluster_name("a", "p-shared"),
            &b.cluster_name("b", "p-shared")
        ));
        assert!(Arc::ptr_eq(
            &a.features()[0].status,
            &b.features()[0].status
        ));
        assert!(Arc::ptr_eq(
            &a.features()[0].feature_id,
            &b.features()[0].feature_id
        ));
    }

    #[test]
    fn observe_rebuilds_summaries_from_their_key_and_profile() {
        let caches = ObservedCaches::default();
        let profile = object(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
            "metadata": {"name": "p-s1", "labels": {"tollgate.dev/promotion": "p",
                                                    "app.kubernetes.io/managed-by": "tollgate"},
                         "annotations": {"tollgate.dev/spec-hash": "h1", "other": "x"}},
            "spec": {"tier": 100}
        }));
        let (index, profile) = convert_profile(&profile).expect("converted");
        assert!(profile.is_owned_by("p"));
        assert_eq!(profile.applied_spec_hash(), Some("h1"));
        caches
            .profiles
            .upsert((String::new(), "p-s1".into()), index, profile);
        for (namespace, cluster) in [("fleet-b", "c1"), ("fleet-a", "c2")] {
            let summary = summary_object(json!({
                "metadata": {"name": format!("p-s1-sveltos-{cluster}"), "namespace": namespace,
                             "labels": {"projectsveltos.io/cluster-profile-name": "p-s1"}},
                "spec": {"clusterName": cluster, "clusterProfileSpec": {"tier": 100}},
                "status": {"failureMessage": "boom"}
            }));
            let (index, stored) = convert_summary_object(&summary).expect("converted");
            caches.summaries.upsert(
                (namespace.into(), format!("p-s1-sveltos-{cluster}")),
                index,
                stored,
            );
        }
        let observed = caches.observe("p", &[]);
        let seen: Vec<(&str, &str, &str, &str)> = observed
            .summaries
            .iter()
            .map(|s| (&*s.namespace, &*s.name, &*s.profile_name, &*s.cluster_name))
            .collect();
        assert_eq!(
            seen,
            [
                ("fleet-a", "p-s1-sveltos-c2", "p-s1", "c2"),
                ("fleet-b", "p-s1-sveltos-c1", "p-s1", "c1")
            ]
        );
        assert_eq!(
            observed.summaries[0].failure_message.as_deref(),
            Some("boom")
        );
        assert!(
            observed.summaries[0]
                .spec
                .shares(&observed.profiles["p-s1"].spec)
        );
    }

    #[test]
    fn a_profile_and_its_summaries_share_one_spec() {
        let spec = json!({"helmCharts": [{"chartName": "shared", "chartVersion": "1.0.0"}]});
        let profile = object(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
            "metadata": {"name": "p-shared-spec", "labels": {"tollgate.dev/promotion": "p"}},
            "spec": spec
        }));
        let summary = summary_object(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": "s", "namespace": "fleet",
                         "labels": {"projectsveltos.io/cluster-profile-name": "p-shared-spec"}},
            "spec": {"clusterName": "c1", "clusterProfileSpec": spec}
        }));
        let (index, profile) = convert_profile(&profile).expect("converted");
        assert_eq!(index.as_deref(), Some("p"));
        let (_, summary) = convert_summary_object(&summary).expect("converted");
        assert!(profile.spec.shares(&summary.spec));
        assert_eq!(profile.spec.value(), spec);
    }

    #[test]
    fn summary_without_profile_label_is_skipped() {
        let summary = summary_object(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": "x", "namespace": "fleet"}
        }));
        assert!(convert_summary_object(&summary).is_none());
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
        let windowed = object(json!({
            "apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
            "metadata": {"name": "c4", "namespace": "fleet"},
            "spec": {"activeWindow": {"from": "0 2 * * *", "to": "0 4 * * *"}},
            "status": {"ready": true}
        }));
        let (_, c) = convert_sveltos_cluster(&windowed).expect("converted");
        let noon: DateTime<Utc> = "2026-11-27T12:00:00Z".parse().expect("time");
        assert!(!c.paused && c.paused_at(noon), "outside 02:00-04:00");
        assert!(!c.paused_at("2026-11-27T03:00:00Z".parse().expect("time")));
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
