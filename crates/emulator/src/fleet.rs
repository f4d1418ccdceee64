//! The fleet file: which managed clusters exist, their labels and readiness, and how the Sveltos
//! stand-in behaves for each (latency, injected failures, failures that depend on what was applied).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::failure_rules::FailureRule;
pub use crate::feature::Feature;

fn go_duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    tollgate_model::duration::parse_go_duration(&text)
        .map_err(|e| serde::de::Error::custom(format!("invalid Go duration {text:?}: {e}")))
}

fn optional_go_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    go_duration(deserializer).map(Some)
}

fn default_latency() -> Duration {
    Duration::from_secs(2)
}

fn default_namespace() -> String {
    "default".into()
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FleetDefaults {
    /// Provisioning → Provisioned delay.
    #[serde(default = "default_latency", deserialize_with = "go_duration")]
    pub latency: Duration,
    /// What every cluster's health endpoint answers (see [`Fleet::health_endpoint`]), unless the
    /// cluster sets a value itself.
    #[serde(default)]
    pub health: BTreeMap<String, serde_json::Value>,
}

impl Default for FleetDefaults {
    fn default() -> Self {
        Self {
            latency: default_latency(),
            health: BTreeMap::new(),
        }
    }
}

/// One managed cluster (a SveltosCluster in the emulator).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FleetCluster {
    pub name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default = "yes")]
    pub ready: bool,
    #[serde(default)]
    pub paused: bool,
    #[serde(default, deserialize_with = "optional_go_duration")]
    pub latency: Option<Duration>,
    /// Feature → failure message.
    #[serde(default)]
    pub fail_features: BTreeMap<Feature, String>,
    /// Health check name → failure detail.
    #[serde(default)]
    pub fail_health_checks: BTreeMap<String, String>,
    /// Values its health endpoint answers, over `defaults.health`.
    #[serde(default)]
    pub health: BTreeMap<String, serde_json::Value>,
}

impl FleetCluster {
    /// A ready cluster with labels and nothing injected.
    pub fn new(namespace: &str, name: &str, labels: &[(&str, &str)]) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ready: true,
            paused: false,
            latency: None,
            fail_features: BTreeMap::new(),
            fail_health_checks: BTreeMap::new(),
            health: BTreeMap::new(),
        }
    }

    /// What its health endpoint answers: its name and namespace, `defaults.health`, and its own
    /// `health` values over those.
    pub fn health_answer(&self, defaults: &FleetDefaults) -> serde_json::Value {
        let mut answer = serde_json::Map::new();
        answer.insert("cluster".into(), self.name.clone().into());
        answer.insert("namespace".into(), self.namespace.clone().into());
        for (key, value) in defaults.health.iter().chain(&self.health) {
            answer.insert(key.clone(), value.clone());
        }
        serde_json::Value::Object(answer)
    }
}

/// The whole fleet file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fleet {
    #[serde(default)]
    pub defaults: FleetDefaults,
    #[serde(default)]
    pub clusters: Vec<FleetCluster>,
    /// Failures that depend on the applied profile spec (see `failure_rules`).
    #[serde(default)]
    pub failures: Vec<FailureRule>,
    /// A loopback address where `run --embedded` serves each cluster's health as JSON over plain
    /// HTTP (`GET /clusters/<namespace>/<name>`), for `web` analyses to measure.
    #[serde(default)]
    pub health_endpoint: Option<std::net::SocketAddr>,
}

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("{path}: cannot read fleet file: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: clusters: duplicate cluster {namespace}/{name}")]
    Duplicate {
        path: PathBuf,
        namespace: String,
        name: String,
    },
}

impl Fleet {
    pub fn load(path: &Path) -> Result<Self, FleetError> {
        let text = std::fs::read_to_string(path).map_err(|source| FleetError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses fleet YAML; `path` only labels errors (which carry line and column).
    pub fn parse(text: &str, path: &Path) -> Result<Self, FleetError> {
        let fleet: Fleet = serde_saphyr::from_str(text).map_err(|e| FleetError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut seen = std::collections::BTreeSet::new();
        for cluster in &fleet.clusters {
            if !seen.insert((cluster.namespace.clone(), cluster.name.clone())) {
                return Err(FleetError::Duplicate {
                    path: path.to_path_buf(),
                    namespace: cluster.namespace.clone(),
                    name: cluster.name.clone(),
                });
            }
        }
        Ok(fleet)
    }
}

/// How the stand-in treats one cluster at runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterBehaviour {
    pub latency: Option<Duration>,
    pub fail_features: BTreeMap<Feature, String>,
    pub fail_health_checks: BTreeMap<String, String>,
}

/// Runtime behaviour of every cluster, changed through the handle.
#[derive(Debug, Clone, Default)]
pub struct FleetBehaviour {
    pub default_latency: Duration,
    /// (namespace, name) → behaviour. Clusters not listed behave by default.
    pub clusters: BTreeMap<(String, String), ClusterBehaviour>,
    /// The fleet file's `failures:`, checked after each cluster's own `fail_features`.
    pub failure_rules: Vec<FailureRule>,
}

impl FleetBehaviour {
    pub fn from_fleet(fleet: &Fleet) -> Self {
        let clusters = fleet
            .clusters
            .iter()
            .map(|c| {
                let behaviour = ClusterBehaviour {
                    latency: c.latency,
                    fail_features: c.fail_features.clone(),
                    fail_health_checks: c.fail_health_checks.clone(),
                };
                ((c.namespace.clone(), c.name.clone()), behaviour)
            })
            .collect();
        Self {
            default_latency: fleet.defaults.latency,
            clusters,
            failure_rules: fleet.failures.clone(),
        }
    }

    pub fn cluster(&self, namespace: &str, name: &str) -> ClusterBehaviour {
        self.clusters
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    pub fn cluster_mut(&mut self, namespace: &str, name: &str) -> &mut ClusterBehaviour {
        self.clusters
            .entry((namespace.to_string(), name.to_string()))
            .or_default()
    }

    pub fn latency(&self, namespace: &str, name: &str) -> Duration {
        self.cluster(namespace, name)
            .latency
            .unwrap_or(self.default_latency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_shape_with_defaults() {
        let text = "defaults: { latency: 2s }\nclusters:\n- name: dev-1\n  namespace: fleet\n  labels: {env: dev}\n  latency: 500ms\n  failFeatures: {Helm: \"bad values\"}\n  failHealthChecks: {deployment-health: \"0/1\"}\n- name: dev-2\n";
        let fleet = Fleet::parse(text, Path::new("fleet.yaml")).unwrap();
        assert_eq!(fleet.defaults.latency, Duration::from_secs(2));
        let first = &fleet.clusters[0];
        assert_eq!(first.latency, Some(Duration::from_millis(500)));
        assert_eq!(
            first.fail_features.get(&Feature::Helm).map(String::as_str),
            Some("bad values")
        );
        let second = &fleet.clusters[1];
        assert_eq!(
            (second.namespace.as_str(), second.ready, second.paused),
            ("default", true, false)
        );
        let behaviour = FleetBehaviour::from_fleet(&fleet);
        assert_eq!(
            behaviour.latency("default", "dev-2"),
            Duration::from_secs(2)
        );
        assert_eq!(
            behaviour.latency("fleet", "dev-1"),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let text = "clusters:\n- name: a\n  latncy: 1s\n";
        let error = Fleet::parse(text, Path::new("f.yaml"))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("f.yaml: "), "{error}");
        assert!(error.contains("latncy"), "{error}");
        assert!(error.contains('3'), "line missing: {error}");
        let bad_duration = Fleet::parse("defaults: {latency: soon}\n", Path::new("f.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            bad_duration.contains("soon") && bad_duration.contains('1'),
            "{bad_duration}"
        );
        let bad_feature = Fleet::parse(
            "clusters:\n- name: a\n  failFeatures: {Chart: x}\n",
            Path::new("f.yaml"),
        );
        assert!(bad_feature.is_err());
        let duplicate =
            Fleet::parse("clusters:\n- name: a\n- name: a\n", Path::new("f.yaml")).unwrap_err();
        assert!(
            duplicate
                .to_string()
                .contains("duplicate cluster default/a")
        );
    }

    const DOCUMENTED_FAILURES: &str = "clusters:\n- name: prod-1\n  labels: {env: production}\nfailures:\n- chartVersion: \"9.9.*\"\n  selector: {env: production}\n  feature: Helm\n  message: \"values: replicas must be an integer\"\n- chartVersion: \"1.?.0\"\n  message: every cluster\n";

    #[test]
    fn parses_the_documented_failures_with_defaults() {
        let fleet = Fleet::parse(DOCUMENTED_FAILURES, Path::new("fleet.yaml")).unwrap();
        let [production, everywhere] = fleet.failures.as_slice() else {
            panic!("two rules: {:?}", fleet.failures);
        };
        assert_eq!(production.chart_version.as_str(), "9.9.*");
        assert_eq!(
            production.selector,
            BTreeMap::from([("env".to_string(), "production".to_string())])
        );
        assert_eq!(production.feature, Feature::Helm);
        assert_eq!(production.message, "values: replicas must be an integer");
        assert!(everywhere.selector.is_empty(), "default: every cluster");
        assert_eq!(everywhere.feature, Feature::Helm, "default feature");
        assert_eq!(
            FleetBehaviour::from_fleet(&fleet).failure_rules,
            fleet.failures,
            "the rules are runtime behaviour"
        );
        assert!(
            Fleet::parse("clusters: []\n", Path::new("f.yaml"))
                .unwrap()
                .failures
                .is_empty()
        );
    }

    fn parse_error(text: &str) -> String {
        Fleet::parse(text, Path::new("f.yaml"))
            .expect_err(text)
            .to_string()
    }

    #[test]
    fn failure_rule_errors_name_file_line_and_field() {
        let unknown = parse_error(
            "failures:\n- chartVersion: \"9.9.*\"\n  message: m\n  selectr: {env: x}\n",
        );
        assert!(unknown.starts_with("f.yaml: "), "{unknown}");
        assert!(unknown.contains("selectr"), "{unknown}");
        assert!(unknown.contains("line 4"), "line missing: {unknown}");

        let empty = parse_error("failures:\n- message: m\n  chartVersion: \"\"\n");
        assert!(empty.contains("must not be empty"), "{empty}");
        assert!(empty.contains("line 3"), "line missing: {empty}");

        let class = parse_error("failures:\n- chartVersion: \"9.[89].*\"\n  message: m\n");
        assert!(class.contains("'[' is not supported"), "{class}");
        assert!(class.contains("line 2"), "line missing: {class}");

        let missing_version = parse_error("failures:\n- message: m\n");
        assert!(
            missing_version.contains("chartVersion"),
            "{missing_version}"
        );
        let missing_message = parse_error("failures:\n- chartVersion: \"9.*\"\n");
        assert!(missing_message.contains("message"), "{missing_message}");
        let blank_message = parse_error("failures:\n- chartVersion: \"9.*\"\n  message: \" \"\n");
        assert!(
            blank_message.contains("message must not be empty"),
            "{blank_message}"
        );
        let bad_feature =
            parse_error("failures:\n- chartVersion: \"9.*\"\n  message: m\n  feature: Chart\n");
        assert!(bad_feature.contains("Chart"), "{bad_feature}");
    }
}
