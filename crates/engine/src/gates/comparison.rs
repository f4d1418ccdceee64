//! One measurement of a comparative analysis (issue #48): the samples of the test cohort (the
//! clusters that took the new snapshot) against those of the baseline cohort (clusters still on
//! the previous one), judged by the rank test. The record it makes is what `result` is in the
//! analysis' CEL conditions (`result.pValue < 0.05 && result.effect > 0.1`); without conditions,
//! [`default_verdict`] judges: a regression when the difference is significant at `confidence`,
//! in the `worse` direction and at least `minEffect`; too few samples is no data.

use tollgate_model::compare::{Compare, Worse};

use super::mann_whitney::{Alternative, mann_whitney_u};
pub use crate::status::comparison_record::{
    ClusterSample, ComparisonDue, ComparisonRecord, ComparisonSummary,
};

/// The comparison of the samples of two cohorts: what status keeps and the default verdict.
pub fn compare_samples(
    test: &[ClusterSample],
    baseline: &[ClusterSample],
    compare: &Compare,
) -> (ComparisonSummary, ComparisonVerdict) {
    let values = |samples: &[ClusterSample]| samples.iter().map(|s| s.value).collect::<Vec<_>>();
    let (test_cohort, baseline_cohort) = (cohort(test), cohort(baseline));
    let wanted = compare.min_clusters();
    // With `samples: Range` a cluster gives many samples: minClusters counts clusters.
    let (record, verdict) = if test_cohort.len() < wanted || baseline_cohort.len() < wanted {
        let why = format!(
            "{} test and {} baseline clusters answered, fewer than minClusters {wanted}",
            test_cohort.len(),
            baseline_cohort.len()
        );
        (None, ComparisonVerdict::NoData(why))
    } else {
        compare_cohorts(&values(test), &values(baseline), compare)
    };
    let summary = ComparisonSummary {
        baseline: compare.baseline,
        test_cohort,
        baseline_cohort,
        record,
    };
    (summary, verdict)
}

/// The clusters that gave samples, sorted, each once.
fn cohort(samples: &[ClusterSample]) -> Vec<String> {
    let mut clusters: Vec<String> = samples.iter().map(|s| s.cluster.clone()).collect();
    clusters.sort();
    clusters.dedup();
    clusters
}

/// The default verdict of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub enum ComparisonVerdict {
    Regression,
    NoRegression,
    /// Too few samples in a cohort (`onNoData` applies), with why.
    NoData(String),
}

/// The comparison of `test` with `baseline` under `compare`: the record (`None` with no data)
/// and its default verdict.
pub fn compare_cohorts(
    test: &[f64],
    baseline: &[f64],
    compare: &Compare,
) -> (Option<ComparisonRecord>, ComparisonVerdict) {
    let test: Vec<f64> = test.iter().copied().filter(|v| !v.is_nan()).collect();
    let baseline: Vec<f64> = baseline.iter().copied().filter(|v| !v.is_nan()).collect();
    let wanted = compare.min_clusters();
    if test.len() < wanted || baseline.len() < wanted {
        let why = format!(
            "{} test and {} baseline samples, fewer than minClusters {wanted}",
            test.len(),
            baseline.len()
        );
        return (None, ComparisonVerdict::NoData(why));
    }
    let alternative = match compare.worse {
        Worse::Higher => Alternative::Greater,
        Worse::Lower => Alternative::Less,
        Worse::Either => Alternative::TwoSided,
    };
    let Some(tested) = mann_whitney_u(&test, &baseline, alternative) else {
        return (None, ComparisonVerdict::NoData("no samples".to_string()));
    };
    let (test_median, baseline_median) = (median(&test), median(&baseline));
    let record = ComparisonRecord {
        test_size: test.len(),
        baseline_size: baseline.len(),
        test_median,
        baseline_median,
        u: tested.u,
        p_value: tested.p_value,
        effect: relative_effect(test_median, baseline_median),
    };
    let verdict = default_verdict(&record, compare);
    (Some(record), verdict)
}

/// A regression when `p < 1 − confidence`, the medians differ in the `worse` direction and by at
/// least `minEffect`; otherwise none.
pub fn default_verdict(record: &ComparisonRecord, compare: &Compare) -> ComparisonVerdict {
    let significant = record.p_value < 1.0 - compare.confidence();
    let worse_direction = match compare.worse {
        Worse::Higher => record.effect > 0.0,
        Worse::Lower => record.effect < 0.0,
        Worse::Either => record.effect != 0.0,
    };
    let large_enough = record.effect.abs() >= compare.min_effect().unwrap_or(0.0);
    match significant && worse_direction && large_enough {
        true => ComparisonVerdict::Regression,
        false => ComparisonVerdict::NoRegression,
    }
}

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() % 2 {
        0 => (sorted[middle - 1] + sorted[middle]) / 2.0,
        _ => sorted[middle],
    }
}

/// (test − baseline) / |baseline|; from a zero baseline, any rise is the largest number and none
/// is 0 (finite, so that status, written as JSON, keeps it).
fn relative_effect(test: f64, baseline: f64) -> f64 {
    if baseline == 0.0 {
        return match test.partial_cmp(&0.0) {
            Some(std::cmp::Ordering::Greater) => f64::MAX,
            Some(std::cmp::Ordering::Less) => f64::MIN,
            _ => 0.0,
        };
    }
    (test - baseline) / baseline.abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare(json: &str) -> Compare {
        serde_json::from_str(json).expect("a compare block")
    }

    #[test]
    fn a_forty_percent_slower_canary_is_a_regression_and_a_faster_one_is_not() {
        let baseline = [0.20, 0.21, 0.19, 0.20, 0.22, 0.18];
        let slower = [0.28, 0.28, 0.27, 0.29];
        let higher = compare(r#"{"worse": "Higher", "minEffect": "10%", "minClusters": 3}"#);
        let (record, verdict) = compare_cohorts(&slower, &baseline, &higher);
        let record = record.expect("a record");
        assert_eq!(verdict, ComparisonVerdict::Regression, "{record:?}");
        assert!((record.effect - 0.4).abs() < 1e-9, "{record:?}");
        assert_eq!((record.test_size, record.baseline_size), (4, 6));
        let faster = [0.15, 0.16, 0.14, 0.15];
        assert_eq!(
            compare_cohorts(&faster, &baseline, &higher).1,
            ComparisonVerdict::NoRegression
        );
        let lower = compare(r#"{"worse": "Lower", "minClusters": 3}"#);
        assert_eq!(
            compare_cohorts(&faster, &baseline, &lower).1,
            ComparisonVerdict::Regression
        );
    }

    #[test]
    fn a_small_difference_is_below_min_effect_and_few_samples_are_no_data() {
        let baseline = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98];
        let slightly = [1.05, 1.06, 1.04, 1.05];
        let ten_percent = compare(r#"{"minEffect": "10%", "minClusters": 3}"#);
        assert_eq!(
            compare_cohorts(&slightly, &baseline, &ten_percent).1,
            ComparisonVerdict::NoRegression
        );
        let (record, verdict) = compare_cohorts(&slightly[..2], &baseline, &ten_percent);
        assert!(record.is_none());
        assert!(matches!(verdict, ComparisonVerdict::NoData(why) if why.contains("minClusters 3")));
    }
}
