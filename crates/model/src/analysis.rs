//! Fleet analysis gates (`RolloutPolicy.spec.analyses`): named, reusable checks a stage runs over
//! its soak — a Prometheus query, a web endpoint, or the snapshot commit's checks on the git host —
//! each measured `count` times at `interval`, judged by CEL conditions over `result`, within
//! failure, inconclusive and error limits. Field names follow Argo Rollouts' AnalysisTemplate where
//! they mean the same. The reader (`tollgate-manifest`) validates them (PromQL parses, CEL
//! compiles, names resolve) before they reach these types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compare::Compare;
use crate::model::GoDuration;

/// `interval` when an analysis sets none.
pub const DEFAULT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);
/// `consecutiveErrorLimit` when an analysis sets none (as Argo Rollouts).
pub const DEFAULT_CONSECUTIVE_ERROR_LIMIT: u32 = 4;

/// One `spec.analyses` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Analysis {
    /// Unique in the policy; stages name it in `stages.<stage>.analyses`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web: Option<WebCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_status: Option<CommitStatusCheck>,
    /// Compare the stage's updated clusters with a baseline cohort instead of a threshold
    /// (issue #48; `prometheus` only). Skipped when unset, so the version of a policy without
    /// one is what it was before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare: Option<Compare>,
    /// `Stage`: one measurement for the stage; `Cluster`: one per member cluster.
    #[serde(default)]
    pub scope: AnalysisScope,
    /// Wait after the stage's clusters are provisioned before the first measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay: Option<GoDuration>,
    /// Between measurements; default [`DEFAULT_INTERVAL`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<GoDuration>,
    /// Measurements needed; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub count: Option<u32>,
    /// CEL over `result`: the measurement succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,
    /// CEL over `result`: the measurement failed (checked first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_condition: Option<String>,
    /// Failed measurements tolerated; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_limit: Option<u32>,
    /// Inconclusive measurements tolerated (neither condition held); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive_limit: Option<u32>,
    /// Query errors in a row tolerated; default [`DEFAULT_CONSECUTIVE_ERROR_LIMIT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_error_limit: Option<u32>,
    /// What a query that returns no data is.
    #[serde(default)]
    pub on_no_data: OnNoData,
    /// Measured and shown, never decides.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

impl Analysis {
    /// The provider the analysis uses (the reader ensures exactly one is set).
    pub fn provider(&self) -> Option<Provider<'_>> {
        match (&self.prometheus, &self.web, &self.commit_status) {
            (Some(p), None, None) => Some(Provider::Prometheus(p)),
            (None, Some(w), None) => Some(Provider::Web(w)),
            (None, None, Some(c)) => Some(Provider::CommitStatus(c)),
            _ => None,
        }
    }

    pub fn interval(&self) -> std::time::Duration {
        self.interval.as_ref().map_or(DEFAULT_INTERVAL, |d| d.value)
    }

    pub fn initial_delay(&self) -> std::time::Duration {
        self.initial_delay
            .as_ref()
            .map_or(std::time::Duration::ZERO, |d| d.value)
    }

    pub fn count(&self) -> u32 {
        self.count.unwrap_or(1).max(1)
    }

    pub fn failure_limit(&self) -> u32 {
        self.failure_limit.unwrap_or(0)
    }

    pub fn inconclusive_limit(&self) -> u32 {
        self.inconclusive_limit.unwrap_or(0)
    }

    pub fn consecutive_error_limit(&self) -> u32 {
        self.consecutive_error_limit
            .unwrap_or(DEFAULT_CONSECUTIVE_ERROR_LIMIT)
    }

    /// From the stage's provisioning to the last measurement: `initialDelay + (count - 1) ×
    /// interval` (the first measurement is taken after the initial delay).
    pub fn duration(&self) -> std::time::Duration {
        self.initial_delay() + self.interval() * (self.count() - 1)
    }
}

/// Where a measurement comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Provider<'a> {
    Prometheus(&'a PrometheusCheck),
    Web(&'a WebCheck),
    CommitStatus(&'a CommitStatusCheck),
}

/// An instant PromQL query against a Prometheus HTTP API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct PrometheusCheck {
    /// Base URL, e.g. `http://prometheus.monitoring:9090`.
    pub address: String,
    /// A file holding a bearer token, or `user:password` for basic auth (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_file: Option<String>,
    /// PromQL with templates (`{{ clustersRegex }}`, …).
    pub query: String,
}

/// A GET of a URL whose JSON answer is read at `jsonPath`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct WebCheck {
    /// With templates (`{{ stage }}`, `{{ snapshot.commit }}`, …).
    pub url: String,
    /// A file of `Name: value` header lines (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_secret_file: Option<String>,
    /// JSONPath of the value, e.g. `{.ok}` (default: the whole document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
}

/// The snapshot commit's checks on the git host must be green.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CommitStatusCheck {
    pub provider: CommitStatusProvider,
    /// A file whose first line is the API URL of the repository and the second a token (as a
    /// notify endpoint's `addressSecretFile`).
    pub address_secret_file: String,
    /// The status contexts that must be green (all of the commit's when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contexts: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CommitStatusProvider {
    Github,
    Gitlab,
    Gitea,
}

impl CommitStatusProvider {
    pub const VALUES: [&'static str; 3] = ["github", "gitlab", "gitea"];
}

/// One measurement for the stage, or one per member cluster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AnalysisScope {
    #[default]
    Stage,
    Cluster,
}

impl AnalysisScope {
    pub const VALUES: [&'static str; 2] = ["Stage", "Cluster"];
}

/// What a query that returns no data counts as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OnNoData {
    Fail,
    Pass,
    #[default]
    Inconclusive,
}

impl OnNoData {
    pub const VALUES: [&'static str; 3] = ["Fail", "Pass", "Inconclusive"];
}

/// How one measurement turned out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MeasurementVerdict {
    Successful,
    Failed,
    /// Neither condition held (or no data, under `onNoData: Inconclusive`).
    Inconclusive,
    /// The query could not be made or answered: never a success.
    Error,
}

impl MeasurementVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            MeasurementVerdict::Successful => "Successful",
            MeasurementVerdict::Failed => "Failed",
            MeasurementVerdict::Inconclusive => "Inconclusive",
            MeasurementVerdict::Error => "Error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example_reads_with_argo_defaults() {
        let analysis: Analysis = serde_json::from_value(serde_json::json!({
            "name": "error-rate",
            "prometheus": {"address": "http://p:9090", "query": "up"},
            "initialDelay": "30s", "interval": "30s", "count": 6,
            "successCondition": "result < 0.01",
        }))
        .expect("analysis");
        assert!(matches!(analysis.provider(), Some(Provider::Prometheus(_))));
        assert_eq!(analysis.scope, AnalysisScope::Stage);
        assert_eq!(analysis.on_no_data, OnNoData::Inconclusive);
        assert_eq!(analysis.consecutive_error_limit(), 4);
        assert_eq!(analysis.failure_limit(), 0);
        assert_eq!(analysis.duration(), std::time::Duration::from_secs(180));
    }
}
