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

impl ComparisonSummary {
    /// One line for every view: "prod-01, prod-02 (median 0.26) vs OtherWaves prod-03, prod-04
    /// (median 0.2): effect +30%, p=0.0012", or the cohorts alone with no record.
    pub fn describe(&self) -> String {
        let cohorts = |clusters: &[String], median: Option<f64>| {
            let listed = listed(clusters);
            match median {
                Some(m) => format!("{listed} (median {})", short(m)),
                None => listed,
            }
        };
        let record = self.record.as_ref();
        let mut line = format!(
            "{} vs {:?} {}",
            cohorts(&self.test_cohort, record.map(|r| r.test_median)),
            self.baseline,
            cohorts(&self.baseline_cohort, record.map(|r| r.baseline_median)),
        );
        if let Some(record) = record {
            let sign = if record.effect >= 0.0 { "+" } else { "" };
            line.push_str(&format!(
                ": effect {sign}{}%, p={}",
                short(record.effect * 100.0),
                short(record.p_value)
            ));
        }
        line
    }
}

/// Clusters kept in a description; the rest are counted.
const CLUSTERS_DESCRIBED: usize = 6;

fn listed(clusters: &[String]) -> String {
    if clusters.is_empty() {
        return "no cluster".to_string();
    }
    let shown = clusters[..clusters.len().min(CLUSTERS_DESCRIBED)].join(", ");
    match clusters.len().saturating_sub(CLUSTERS_DESCRIBED) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// At most four significant digits, no float noise (`0.0012`, `32.5`, `1.2e-7`).
fn short(number: f64) -> String {
    significant(number, 4)
}

/// `number` rounded to `digits` significant digits, then written as the shortest text that
/// reads back to that (`0.5`, `0.0123`, `120`), with an exponent when it is very large or small
/// (`1.5e9`, `2e-7`). Every view of a measured number writes it so.
pub fn significant(number: f64, digits: usize) -> String {
    let precision = digits.max(1) - 1;
    let rounded: f64 = format!("{number:.precision$e}").parse().unwrap_or(number);
    let magnitude = rounded.abs();
    if magnitude != 0.0 && !(1e-4..1e6).contains(&magnitude) {
        format!("{rounded:e}")
    } else {
        format!("{rounded}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_names_the_cohorts_medians_effect_and_p_value() {
        let summary = ComparisonSummary {
            baseline: Baseline::OtherWaves,
            test_cohort: vec!["a".into(), "b".into()],
            baseline_cohort: (1..=8).map(|i| format!("c{i}")).collect(),
            record: Some(ComparisonRecord {
                test_size: 2,
                baseline_size: 8,
                test_median: 0.264,
                baseline_median: 0.2,
                u: 16.0,
                p_value: 0.00123456,
                effect: 0.32,
            }),
        };
        assert_eq!(
            summary.describe(),
            "a, b (median 0.264) vs OtherWaves c1, c2, c3, c4, c5, c6 and 2 more (median 0.2): effect +32%, p=0.001235"
        );
        let no_data = ComparisonSummary {
            record: None,
            baseline_cohort: Vec::new(),
            ..summary
        };
        assert_eq!(no_data.describe(), "a, b vs OtherWaves no cluster");
    }
}
