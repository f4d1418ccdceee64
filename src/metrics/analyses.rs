//! The analysis gates' series (issue #32), from persisted status transitions like the other step
//! counters: `tollgate_analysis_measurements_total{promotion,stage,analysis,result}` counts each
//! measurement recorded, `tollgate_analysis_last_value{promotion,stage,analysis[,cluster]}` is the
//! newest numeric value (a list, a boolean or no value leaves it as it was), per cluster under
//! `scope: Cluster` (one series per stage would show whichever cluster was measured last: a
//! healthy cluster's value hiding a failing one's). A comparative analysis (issue #48) sets
//! `tollgate_analysis_comparison{promotion,stage,analysis,cohort}` (each cohort's median,
//! `cohort` `test` or `baseline`) and `tollgate_analysis_comparison_p_value{promotion,stage,
//! analysis}` from its newest measurement with a record.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tollgate_engine::PromotionStatus;
use tollgate_engine::analysis_run::AnalysisRun;

use super::SecondsGauge as ValueGauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MeasurementLabels {
    promotion: String,
    stage: String,
    analysis: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct ValueLabels {
    promotion: String,
    stage: String,
    analysis: String,
    /// `namespace/name` under `scope: Cluster`; no label at all under `scope: Stage`.
    cluster: Option<String>,
}

impl EncodeLabelSet for ValueLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        let mut labels = vec![
            ("promotion", self.promotion.as_str()),
            ("stage", self.stage.as_str()),
            ("analysis", self.analysis.as_str()),
        ];
        if let Some(cluster) = &self.cluster {
            labels.push(("cluster", cluster.as_str()));
        }
        labels.encode(encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CohortLabels {
    promotion: String,
    stage: String,
    analysis: String,
    cohort: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnalysisLabels {
    promotion: String,
    stage: String,
    analysis: String,
}

/// The cohorts of a comparison, as the `cohort` label names them.
const COHORTS: [&str; 2] = ["test", "baseline"];

type Made = (String, String, Option<String>);

pub struct AnalysisSeries {
    measurements: Family<MeasurementLabels, Counter>,
    last_value: Family<ValueLabels, ValueGauge>,
    comparison: Family<CohortLabels, ValueGauge>,
    p_value: Family<AnalysisLabels, ValueGauge>,
    /// The (stage, analysis, cluster) made per promotion, so that forgetting it removes them.
    made: Mutex<HashMap<String, HashSet<Made>>>,
}

impl AnalysisSeries {
    pub fn register(registry: &mut Registry) -> AnalysisSeries {
        let measurements = Family::<MeasurementLabels, Counter>::default();
        registry.register(
            "analysis_measurements",
            "Analysis measurements recorded, by promotion, stage, analysis and verdict",
            measurements.clone(),
        );
        let last_value = Family::<ValueLabels, ValueGauge>::default();
        registry.register(
            "analysis_last_value",
            "The newest numeric value an analysis measured, by promotion, stage, analysis and (scope: Cluster) cluster",
            last_value.clone(),
        );
        let comparison = Family::<CohortLabels, ValueGauge>::default();
        registry.register(
            "analysis_comparison",
            "The median of each cohort (test, baseline) in a comparative analysis's newest measurement, by promotion, stage, analysis and cohort",
            comparison.clone(),
        );
        let p_value = Family::<AnalysisLabels, ValueGauge>::default();
        registry.register(
            "analysis_comparison_p_value",
            "The p-value of a comparative analysis's newest measurement (the rank test's), by promotion, stage and analysis",
            p_value.clone(),
        );
        AnalysisSeries {
            measurements,
            last_value,
            comparison,
            p_value,
            made: Mutex::new(HashMap::new()),
        }
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
        let new = run
            .measurements
            .iter()
            .filter(|m| seen.is_none_or(|seen| m.index > seen));
        let mut last = None;
        for record in new {
            let labels = MeasurementLabels {
                promotion: promotion.to_string(),
                stage: stage.to_string(),
                analysis: run.name.clone(),
                result: record.verdict.as_str().to_string(),
            };
            self.measurements.get_or_create(&labels).inc();
            self.made()
                .entry(promotion.to_string())
                .or_default()
                .insert((stage.to_string(), run.name.clone(), run.cluster.clone()));
            last = Some(record);
        }
        if let Some(value) = last
            .and_then(|m| m.value.as_deref())
            .and_then(|v| v.parse::<f64>().ok())
        {
            let labels = ValueLabels {
                promotion: promotion.to_string(),
                stage: stage.to_string(),
                analysis: run.name.clone(),
                cluster: run.cluster.clone(),
            };
            self.last_value.get_or_create(&labels).set(value);
        }
        if let Some(record) = last
            .and_then(|m| m.comparison.as_deref())
            .and_then(|c| c.record.as_ref())
        {
            let medians = [record.test_median, record.baseline_median];
            for (cohort, median) in COHORTS.into_iter().zip(medians) {
                let labels = cohort_labels(promotion, stage, &run.name, cohort);
                self.comparison.get_or_create(&labels).set(median);
            }
            let labels = analysis_labels(promotion, stage, &run.name);
            self.p_value.get_or_create(&labels).set(record.p_value);
        }
    }

    /// Removes every series of the promotion.
    pub fn forget(&self, promotion: &str) {
        let Some(made) = self.made().remove(promotion) else {
            return;
        };
        for (stage, analysis, cluster) in made {
            for result in ["Successful", "Failed", "Inconclusive", "Error"] {
                self.measurements.remove(&MeasurementLabels {
                    promotion: promotion.to_string(),
                    stage: stage.clone(),
                    analysis: analysis.clone(),
                    result: result.to_string(),
                });
            }
            for cohort in COHORTS {
                self.comparison
                    .remove(&cohort_labels(promotion, &stage, &analysis, cohort));
            }
            self.p_value
                .remove(&analysis_labels(promotion, &stage, &analysis));
            self.last_value.remove(&ValueLabels {
                promotion: promotion.to_string(),
                stage,
                analysis,
                cluster,
            });
        }
    }

    fn made(&self) -> MutexGuard<'_, HashMap<String, HashSet<Made>>> {
        // Plain values: a panic cannot leave the map half-updated in a way that matters.
        self.made.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn cohort_labels(promotion: &str, stage: &str, analysis: &str, cohort: &str) -> CohortLabels {
    CohortLabels {
        promotion: promotion.to_string(),
        stage: stage.to_string(),
        analysis: analysis.to_string(),
        cohort: cohort.to_string(),
    }
}

fn analysis_labels(promotion: &str, stage: &str, analysis: &str) -> AnalysisLabels {
    AnalysisLabels {
        promotion: promotion.to_string(),
        stage: stage.to_string(),
        analysis: analysis.to_string(),
    }
}

/// The run in `runs` that `run` continues: a new run (another snapshot, a restarted stage)
/// starts at another instant.
fn same_run<'a>(runs: &'a [AnalysisRun], run: &AnalysisRun) -> Option<&'a AnalysisRun> {
    runs.iter()
        .find(|r| r.name == run.name && r.cluster == run.cluster && r.started_at == run.started_at)
}
