//! The analysis gates' series (issue #32), from persisted status transitions like the other step
//! counters: `tollgate_analysis_measurements_total{promotion,stage,analysis,result}` counts each
//! measurement recorded, `tollgate_analysis_last_value{promotion,stage,analysis[,cluster]}` is the
//! newest numeric value (a list, a boolean or no value leaves it as it was), per cluster under
//! `scope: Cluster` (one series per stage would show whichever cluster was measured last: a
//! healthy cluster's value hiding a failing one's). A comparative analysis (issue #48) sets
//! `tollgate_analysis_comparison{promotion,stage,analysis,cohort}` (each cohort's median,
//! `cohort` `test` or `baseline`) and `tollgate_analysis_comparison_p_value{promotion,stage,
//! analysis}` from its newest measurement with a record.
//!
//! The series are written at scrape time from one small record per promotion, stage, analysis
//! and cluster, in a map that is also what forgetting a promotion removes: prometheus-client
//! families held an allocated atomic per series under a hashed copy of its labels, four families
//! deep, plus an index of each promotion's series to forget them by. Label values are shared,
//! not copied: one `Arc<str>` per distinct promotion, stage, analysis and cluster name.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use tollgate_engine::PromotionStatus;
use tollgate_engine::analysis_run::AnalysisRun;
use tollgate_model::analysis::MeasurementVerdict;

use super::shared_names::SharedNames;

/// The verdicts, in the order a record counts them, as the `result` label names them.
const RESULTS: [MeasurementVerdict; 4] = [
    MeasurementVerdict::Successful,
    MeasurementVerdict::Failed,
    MeasurementVerdict::Inconclusive,
    MeasurementVerdict::Error,
];

/// The cohorts of a comparison, as the `cohort` label names them.
const COHORTS: [&str; 2] = ["test", "baseline"];

/// What one (stage, analysis, cluster) of a promotion has shown.
#[derive(Debug)]
struct Record {
    stage: Arc<str>,
    analysis: Arc<str>,
    /// `namespace/name` under `scope: Cluster`.
    cluster: Option<Arc<str>>,
    /// Measurements recorded, by verdict in [`RESULTS`] order.
    counts: [u64; RESULTS.len()],
    /// The newest numeric value.
    value: Option<f64>,
    /// The newest comparison's cohort medians ([`COHORTS`] order) and p-value. Boxed: only a
    /// comparative analysis has one.
    comparison: Option<Box<([f64; 2], f64)>>,
}

impl Record {
    fn key(&self) -> (&str, &str, Option<&str>) {
        (&self.stage, &self.analysis, self.cluster.as_deref())
    }
}

#[derive(Debug, Default)]
struct Records {
    /// Per promotion (its name shared), its records sorted by stage, analysis and cluster.
    by_promotion: BTreeMap<Arc<str>, Vec<Record>>,
    /// Every name a label carries, once.
    names: SharedNames,
}

#[derive(Clone, Debug, Default)]
pub struct AnalysisSeries(Arc<Mutex<Records>>);

impl AnalysisSeries {
    pub fn register(registry: &mut prometheus_client::registry::Registry) -> AnalysisSeries {
        let series = AnalysisSeries::default();
        registry.register_collector(Box::new(series.clone()));
        series
    }

    fn records(&self) -> MutexGuard<'_, Records> {
        // Plain values: a panic cannot leave the records half-updated in a way that matters.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts the measurements `after` records that `before` (the same run) did not.
    pub fn observe(
        &self,
        promotion: &str,
        before: Option<&PromotionStatus>,
        after: &PromotionStatus,
    ) {
        for stage in &after.stages {
            let runs = stage.analyses.as_deref().map_or(&[][..], |r| r.as_slice());
            for run in runs {
                let seen = before
                    .and_then(|b| b.stage(&stage.name))
                    .and_then(|s| s.analyses.as_deref())
                    .and_then(|runs| same_run(runs, run))
                    .and_then(|r| r.measurements.last())
                    .map(|m| m.index);
                self.count_new(promotion, &stage.name, run, seen);
            }
        }
    }

    fn count_new(&self, promotion: &str, stage: &str, run: &AnalysisRun, seen: Option<u32>) {
        let mut counts = [0; RESULTS.len()];
        let mut last = None;
        for measurement in run.measurements.iter() {
            if seen.is_none_or(|seen| measurement.index > seen) {
                counts[slot(measurement.verdict)] += 1;
                last = Some(measurement);
            }
        }
        let Some(last) = last else {
            return;
        };
        let mut records = self.records();
        let record = records.record(promotion, stage, &run.name, run.cluster.as_deref());
        for (total, new) in record.counts.iter_mut().zip(counts) {
            *total += new;
        }
        if let Some(value) = last.value.as_deref().and_then(|v| v.parse::<f64>().ok()) {
            record.value = Some(value);
        }
        if let Some(compared) = last.comparison.as_deref().and_then(|c| c.record.as_ref()) {
            let medians = [compared.test_median, compared.baseline_median];
            record.comparison = Some(Box::new((medians, compared.p_value)));
        }
    }

    /// Removes every series of the promotion.
    pub fn forget(&self, promotion: &str) {
        let mut records = self.records();
        if records.by_promotion.remove(promotion).is_none() {
            return;
        }
        // The promotion's own name, and a stage or cluster only it had.
        records.names.prune();
    }
}

impl Records {
    /// The record of (stage, analysis, cluster), made if the promotion has none yet.
    fn record(
        &mut self,
        promotion: &str,
        stage: &str,
        analysis: &str,
        cluster: Option<&str>,
    ) -> &mut Record {
        let Records {
            by_promotion,
            names,
        } = self;
        if !by_promotion.contains_key(promotion) {
            by_promotion.insert(names.get(promotion), Vec::new());
        }
        let records = by_promotion.get_mut(promotion).expect("made above");
        let key = (stage, analysis, cluster);
        let at = match records.binary_search_by(|r| r.key().cmp(&key)) {
            Ok(at) => at,
            Err(at) => {
                let record = Record {
                    stage: names.get(stage),
                    analysis: names.get(analysis),
                    cluster: cluster.map(|c| names.get(c)),
                    counts: [0; RESULTS.len()],
                    value: None,
                    comparison: None,
                };
                records.insert(at, record);
                at
            }
        };
        &mut records[at]
    }
}

/// Where a verdict counts in a record (its place in [`RESULTS`]).
fn slot(verdict: MeasurementVerdict) -> usize {
    match verdict {
        MeasurementVerdict::Successful => 0,
        MeasurementVerdict::Failed => 1,
        MeasurementVerdict::Inconclusive => 2,
        MeasurementVerdict::Error => 3,
    }
}

impl Collector for AnalysisSeries {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let records = self.records();
        let all = || {
            records
                .by_promotion
                .iter()
                .flat_map(|(p, records)| records.iter().map(move |r| (&**p, r)))
        };
        encode_measurements(&mut encoder, all())?;
        let mut family = encoder.encode_descriptor(
            "analysis_last_value",
            "The newest numeric value an analysis measured, by promotion, stage, analysis and (scope: Cluster) cluster",
            None,
            MetricType::Gauge,
        )?;
        for (promotion, record) in all() {
            let Some(value) = record.value else { continue };
            let labels = [
                ("promotion", promotion),
                ("stage", &*record.stage),
                ("analysis", &*record.analysis),
                ("cluster", record.cluster.as_deref().unwrap_or_default()),
            ];
            let labels = &labels[..if record.cluster.is_some() { 4 } else { 3 }];
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
        let compared = || all().filter_map(|(p, r)| Some((p, r, r.comparison.as_deref()?)));
        let mut family = encoder.encode_descriptor(
            "analysis_comparison",
            "The median of each cohort (test, baseline) in a comparative analysis's newest measurement, by promotion, stage, analysis and cohort",
            None,
            MetricType::Gauge,
        )?;
        for (promotion, record, (medians, _)) in compared() {
            for (cohort, median) in COHORTS.into_iter().zip(medians) {
                let labels = [
                    ("promotion", promotion),
                    ("stage", &*record.stage),
                    ("analysis", &*record.analysis),
                    ("cohort", cohort),
                ];
                ConstGauge::new(*median).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "analysis_comparison_p_value",
            "The p-value of a comparative analysis's newest measurement (the rank test's), by promotion, stage and analysis",
            None,
            MetricType::Gauge,
        )?;
        for (promotion, record, (_, p_value)) in compared() {
            let labels = [
                ("promotion", promotion),
                ("stage", &*record.stage),
                ("analysis", &*record.analysis),
            ];
            ConstGauge::new(*p_value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// `analysis_measurements`: one counter per promotion, stage, analysis and verdict, summed over
/// clusters (records are sorted, so a (promotion, stage, analysis)'s clusters are adjacent).
fn encode_measurements<'a>(
    encoder: &mut DescriptorEncoder<'_>,
    all: impl Iterator<Item = (&'a str, &'a Record)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "analysis_measurements",
        "Analysis measurements recorded, by promotion, stage, analysis and verdict",
        None,
        MetricType::Counter,
    )?;
    let mut all = all.peekable();
    while let Some((promotion, record)) = all.next() {
        let mut counts = record.counts;
        while let Some((_, next)) = all.next_if(|(p, next)| {
            *p == promotion && next.stage == record.stage && next.analysis == record.analysis
        }) {
            for (sum, count) in counts.iter_mut().zip(next.counts) {
                *sum += count;
            }
        }
        for (result, count) in RESULTS.into_iter().zip(counts) {
            if count == 0 {
                continue;
            }
            let labels = [
                ("promotion", promotion),
                ("stage", &*record.stage),
                ("analysis", &*record.analysis),
                ("result", result.as_str()),
            ];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// The run in `runs` that `run` continues: a new run (another snapshot, a restarted stage)
/// starts at another instant.
fn same_run<'a>(runs: &'a [AnalysisRun], run: &AnalysisRun) -> Option<&'a AnalysisRun> {
    runs.iter()
        .find(|r| r.name == run.name && r.cluster == run.cluster && r.started_at == run.started_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn measured(stage: &str, cluster: Option<&str>, value: &str) -> PromotionStatus {
        serde_json::from_value(serde_json::json!({
            "hashScheme": 1, "phase": "Progressing",
            "stages": [{"name": stage, "snapshotIndex": 1, "appliedAt": "2026-12-06T10:00:00Z",
                        "appliedSpecHash": "h",
                        "analyses": [{"name": "errors", "query": "q", "count": 1, "taken": 1,
                                      "cluster": cluster,
                                      "startedAt": "2026-12-06T10:00:00Z", "phase": "Running",
                                      "measurements": [{"index": 0, "at": "2026-12-06T10:00:00Z",
                                                        "value": value, "verdict": "Successful"}]}]}],
        }))
        .expect("a status")
    }

    fn named(series: &AnalysisSeries, name: &str) -> bool {
        series.records().names.contains(name)
    }

    fn scrape(registry: &Registry) -> Vec<String> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encodes");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn each_verdict_counts_in_its_place_among_the_results() {
        for (place, verdict) in RESULTS.into_iter().enumerate() {
            assert_eq!(slot(verdict), place, "{verdict:?}");
        }
    }

    #[test]
    fn forgetting_a_promotion_forgets_the_names_only_it_carried() {
        let series = AnalysisSeries::register(&mut Registry::default());
        series.observe("gone", None, &measured("canary", None, "0"));
        series.observe("kept", None, &measured("prod", None, "0"));
        series.observe("gone", None, &measured("prod", None, "0"));
        assert!(named(&series, "gone") && named(&series, "canary"));
        series.forget("gone");
        assert!(!named(&series, "gone"), "the promotion's name");
        assert!(!named(&series, "canary"), "a stage only it had");
        assert!(named(&series, "kept") && named(&series, "prod") && named(&series, "errors"));
    }

    #[test]
    fn clusters_share_the_count_of_their_analysis_and_keep_their_own_value() {
        let mut registry = Registry::default();
        let series = AnalysisSeries::register(&mut registry);
        series.observe("web", None, &measured("canary", Some("fleet/a"), "1.5"));
        series.observe("web", None, &measured("canary", Some("fleet/b"), "2"));
        series.observe("web", None, &measured("canary", Some("fleet/b"), "oops"));
        assert_eq!(
            scrape(&registry),
            [
                r#"analysis_measurements_total{promotion="web",stage="canary",analysis="errors",result="Successful"} 3"#,
                r#"analysis_last_value{promotion="web",stage="canary",analysis="errors",cluster="fleet/a"} 1.5"#,
                r#"analysis_last_value{promotion="web",stage="canary",analysis="errors",cluster="fleet/b"} 2.0"#,
            ]
        );
        series.forget("web");
        assert!(
            scrape(&registry).is_empty(),
            "every series of the promotion is gone"
        );
    }
}
