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
//! Label values are shared, not copied: one `Arc<str>` per distinct promotion, stage, analysis
//! and cluster name serves every series naming it (owned `String`s per series and per lookup
//! weighed ~14 MB at 10,000 promotions with one analysis per stage).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tollgate_engine::PromotionStatus;
use tollgate_engine::analysis_run::AnalysisRun;

use super::SecondsGauge as ValueGauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MeasurementLabels {
    promotion: Arc<str>,
    stage: Arc<str>,
    analysis: Arc<str>,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct ValueLabels {
    promotion: Arc<str>,
    stage: Arc<str>,
    analysis: Arc<str>,
    /// `namespace/name` under `scope: Cluster`; no label at all under `scope: Stage`.
    cluster: Option<Arc<str>>,
}

impl EncodeLabelSet for ValueLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        let mut labels = vec![
            ("promotion", &*self.promotion),
            ("stage", &*self.stage),
            ("analysis", &*self.analysis),
        ];
        if let Some(cluster) = &self.cluster {
            labels.push(("cluster", &**cluster));
        }
        labels.encode(encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CohortLabels {
    promotion: Arc<str>,
    stage: Arc<str>,
    analysis: Arc<str>,
    cohort: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnalysisLabels {
    promotion: Arc<str>,
    stage: Arc<str>,
    analysis: Arc<str>,
}

/// The cohorts of a comparison, as the `cohort` label names them.
const COHORTS: [&str; 2] = ["test", "baseline"];

/// A series' (stage, analysis, cluster).
type Made = (Arc<str>, Arc<str>, Option<Arc<str>>);

/// The names of one analysis run's series, shared.
struct Names {
    promotion: Arc<str>,
    stage: Arc<str>,
    analysis: Arc<str>,
    cluster: Option<Arc<str>>,
}

pub struct AnalysisSeries {
    measurements: Family<MeasurementLabels, Counter>,
    last_value: Family<ValueLabels, ValueGauge>,
    comparison: Family<CohortLabels, ValueGauge>,
    p_value: Family<AnalysisLabels, ValueGauge>,
    /// The (stage, analysis, cluster) made per promotion, so that forgetting it removes them.
    made: Mutex<HashMap<Arc<str>, HashSet<Made>>>,
    /// Every name a label carries, once.
    names: Mutex<HashSet<Arc<str>>>,
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
            names: Mutex::new(HashSet::new()),
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

    /// `name` as the series share it.
    fn shared(&self, name: &str) -> Arc<str> {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = names.get(name) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(name);
        names.insert(shared.clone());
        shared
    }

    fn names(&self, promotion: &str, stage: &str, run: &AnalysisRun) -> Names {
        Names {
            promotion: self.shared(promotion),
            stage: self.shared(stage),
            analysis: self.shared(&run.name),
            cluster: run.cluster.as_deref().map(|c| self.shared(c)),
        }
    }

    fn count_new(&self, promotion: &str, stage: &str, run: &AnalysisRun, seen: Option<u32>) {
        let mut new = run
            .measurements
            .iter()
            .filter(|m| seen.is_none_or(|seen| m.index > seen))
            .peekable();
        if new.peek().is_none() {
            return;
        }
        let names = self.names(promotion, stage, run);
        let mut last = None;
        for record in new {
            self.measurements
                .get_or_create(&names.measurement(record.verdict.as_str()))
                .inc();
            last = Some(record);
        }
        self.made()
            .entry(names.promotion.clone())
            .or_default()
            .insert((
                names.stage.clone(),
                names.analysis.clone(),
                names.cluster.clone(),
            ));
        if let Some(value) = last
            .and_then(|m| m.value.as_deref())
            .and_then(|v| v.parse::<f64>().ok())
        {
            self.last_value.get_or_create(&names.value()).set(value);
        }
        if let Some(record) = last
            .and_then(|m| m.comparison.as_deref())
            .and_then(|c| c.record.as_ref())
        {
            let medians = [record.test_median, record.baseline_median];
            for (cohort, median) in COHORTS.into_iter().zip(medians) {
                self.comparison
                    .get_or_create(&names.cohort(cohort))
                    .set(median);
            }
            self.p_value
                .get_or_create(&names.analysis())
                .set(record.p_value);
        }
    }

    /// Removes every series of the promotion.
    pub fn forget(&self, promotion: &str) {
        let Some((promotion, made)) = self.made().remove_entry(promotion) else {
            return;
        };
        for (stage, analysis, cluster) in made {
            let names = Names {
                promotion: promotion.clone(),
                stage,
                analysis,
                cluster,
            };
            for result in ["Successful", "Failed", "Inconclusive", "Error"] {
                self.measurements.remove(&names.measurement(result));
            }
            for cohort in COHORTS {
                self.comparison.remove(&names.cohort(cohort));
            }
            self.p_value.remove(&names.analysis());
            self.last_value.remove(&names.value());
        }
        // Names no series carries any more (the promotion's own, a stage or cluster only it
        // had) are held by the set alone: without this the set grew with every promotion ever seen.
        drop(promotion);
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|name| Arc::strong_count(name) > 1);
    }

    fn made(&self) -> MutexGuard<'_, HashMap<Arc<str>, HashSet<Made>>> {
        // Plain values: a panic cannot leave the map half-updated in a way that matters.
        self.made.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Names {
    fn measurement(&self, result: &'static str) -> MeasurementLabels {
        MeasurementLabels {
            promotion: self.promotion.clone(),
            stage: self.stage.clone(),
            analysis: self.analysis.clone(),
            result,
        }
    }

    fn value(&self) -> ValueLabels {
        ValueLabels {
            promotion: self.promotion.clone(),
            stage: self.stage.clone(),
            analysis: self.analysis.clone(),
            cluster: self.cluster.clone(),
        }
    }

    fn cohort(&self, cohort: &'static str) -> CohortLabels {
        CohortLabels {
            promotion: self.promotion.clone(),
            stage: self.stage.clone(),
            analysis: self.analysis.clone(),
            cohort,
        }
    }

    fn analysis(&self) -> AnalysisLabels {
        AnalysisLabels {
            promotion: self.promotion.clone(),
            stage: self.stage.clone(),
            analysis: self.analysis.clone(),
        }
    }
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

    fn measured(stage: &str) -> PromotionStatus {
        serde_json::from_value(serde_json::json!({
            "hashScheme": 1, "phase": "Progressing",
            "stages": [{"name": stage, "snapshotIndex": 1, "appliedAt": "2026-12-06T10:00:00Z",
                        "appliedSpecHash": "h",
                        "analyses": [{"name": "errors", "query": "q", "count": 1, "taken": 1,
                                      "startedAt": "2026-12-06T10:00:00Z", "phase": "Running",
                                      "measurements": [{"index": 0, "at": "2026-12-06T10:00:00Z",
                                                        "value": "0", "verdict": "Successful"}]}]}],
        }))
        .expect("a status")
    }

    fn named(series: &AnalysisSeries, name: &str) -> bool {
        series.names.lock().expect("names").contains(name)
    }

    #[test]
    fn forgetting_a_promotion_forgets_the_names_only_it_carried() {
        let series = AnalysisSeries::register(&mut Registry::default());
        series.observe("gone", None, &measured("canary"));
        series.observe("kept", None, &measured("prod"));
        series.observe("gone", None, &measured("prod"));
        assert!(named(&series, "gone") && named(&series, "canary"));
        series.forget("gone");
        assert!(!named(&series, "gone"), "the promotion's name");
        assert!(!named(&series, "canary"), "a stage only it had");
        assert!(named(&series, "kept") && named(&series, "prod") && named(&series, "errors"));
    }
}
