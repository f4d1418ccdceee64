//! What a comparative analysis (issue #48) asks the runner to measure and what status keeps of
//! each measurement: the cohorts, the baseline's query, and the comparison's record (sizes,
//! medians, U, p-value, effect). The rules that make them are `gates::cohorts` and
//! `gates::comparison`.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tollgate_model::compare::Baseline;

/// What one comparison measured. Its numbers are never NaN (NaN samples are left out), so
/// equality compares them bit for bit.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonRecord {
    pub test_size: usize,
    pub baseline_size: usize,
    pub test_median: f64,
    pub baseline_median: f64,
    /// U of the test cohort.
    pub u: f64,
    pub p_value: f64,
    /// The medians' difference relative to the baseline's: `0.4` is 40 % higher.
    pub effect: f64,
}

impl PartialEq for ComparisonRecord {
    fn eq(&self, other: &Self) -> bool {
        let numbers = |r: &Self| {
            [r.test_median, r.baseline_median, r.u, r.p_value, r.effect].map(f64::to_bits)
        };
        (self.test_size, self.baseline_size) == (other.test_size, other.baseline_size)
            && numbers(self) == numbers(other)
    }
}

impl Eq for ComparisonRecord {}

/// What the runner measures for one comparison: the cohorts (`namespace/name`), the query of
/// the baseline cohort (the test cohort's is the measurement's), and when and over what the
/// baseline is measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonDue {
    pub baseline: Baseline,
    pub test_clusters: Vec<String>,
    pub baseline_clusters: Vec<String>,
    pub baseline_query: String,
    /// `Before`: the baseline is measured up to this instant (the stage's apply) rather than now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_until: Option<DateTime<Utc>>,
    /// `samples: Range`: every point of this many seconds up to the measured instant, rather
    /// than one sample per cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_seconds: Option<u64>,
}

/// One sample of one cluster (the `cluster` label of the series, a cluster's name).
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSample {
    pub cluster: String,
    pub value: f64,
}

/// One comparison as status keeps it per measurement: the clusters that answered in each
/// cohort, and the record (none with no data).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonSummary {
    pub baseline: Baseline,
    pub test_cohort: Vec<String>,
    pub baseline_cohort: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<ComparisonRecord>,
}
