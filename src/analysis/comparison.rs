//! A comparative analysis's measurement (issue #48): the test cohort's and the baseline
//! cohort's samples from Prometheus, compared by the engine's rank test
//! (`tollgate_engine::comparison`, pure), and judged by the analysis's CEL conditions over the
//! record (`result.pValue`, `result.effect`, …) when it has some, else by the comparison's
//! default verdict. Too few clusters answering is no data, judged by `onNoData`.

use chrono::Utc;
use tollgate_engine::comparison::{
    ComparisonDue, ComparisonSummary, ComparisonVerdict, compare_samples,
};
use tollgate_engine::measurement::Measurement;
use tollgate_model::analysis::{MeasurementVerdict, Provider};
use tollgate_model::compare::Compare;

use super::conditions::Conditions;
use super::observation::{MeasureError, ResultValue, show_number};
use super::prometheus_cohorts::{Window, cohort_samples};
use super::{Inner, Job, no_data_verdict};

impl Inner {
    /// One measurement of a comparison.
    pub(super) async fn measure_comparison(
        &self,
        job: &Job,
        due: &ComparisonDue,
        compare: &Compare,
    ) -> Measurement {
        let analysis = &job.analysis;
        let (value, verdict, error, comparison) = match self.compared(job, due, compare).await {
            Err(e) => (None, MeasurementVerdict::Error, Some(e.to_string()), None),
            Ok((summary, ComparisonVerdict::NoData(why))) => (
                None,
                no_data_verdict(analysis.on_no_data),
                Some(format!("no data: {why}")),
                Some(summary),
            ),
            Ok((summary, default)) => {
                let shown = shown(&summary);
                match self.judged(job, &summary, &default).await {
                    Ok(verdict) => (shown, verdict, None, Some(summary)),
                    Err(e) => (shown, MeasurementVerdict::Error, Some(e), Some(summary)),
                }
            }
        };
        Measurement {
            key: job.due.key(),
            taken_at: Utc::now(),
            value,
            verdict,
            error,
            comparison: comparison.map(Box::new),
        }
    }

    /// Both cohorts' samples, at once, and their comparison.
    async fn compared(
        &self,
        job: &Job,
        due: &ComparisonDue,
        compare: &Compare,
    ) -> Result<(ComparisonSummary, ComparisonVerdict), MeasureError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| MeasureError::Config(format!("no HTTP client: {e}")))?;
        let Some(Provider::Prometheus(check)) = job.analysis.provider() else {
            return Err(MeasureError::Config(
                "a comparison measures a prometheus query".to_string(),
            ));
        };
        let now = Window {
            at: None,
            range_seconds: due.range_seconds,
        };
        let before = Window {
            at: due.baseline_until,
            range_seconds: due.range_seconds,
        };
        let (test, baseline) = tokio::join!(
            cohort_samples(
                client,
                check,
                &job.due.query,
                &due.test_clusters,
                now,
                self.timeout
            ),
            cohort_samples(
                client,
                check,
                &due.baseline_query,
                &due.baseline_clusters,
                before,
                self.timeout
            ),
        );
        Ok(compare_samples(&test?, &baseline?, compare))
    }

    /// The conditions over the record, or the default verdict without conditions.
    async fn judged(
        &self,
        job: &Job,
        summary: &ComparisonSummary,
        default: &ComparisonVerdict,
    ) -> Result<MeasurementVerdict, String> {
        let analysis = &job.analysis;
        if analysis.success_condition.is_none() && analysis.failure_condition.is_none() {
            return Ok(match default {
                ComparisonVerdict::Regression => MeasurementVerdict::Failed,
                _ => MeasurementVerdict::Successful,
            });
        }
        let record = serde_json::to_value(&summary.record).map_err(|e| e.to_string())?;
        let conditions = Conditions {
            success: analysis.success_condition.clone(),
            failure: analysis.failure_condition.clone(),
        };
        match &self.judge {
            Ok(judge) => judge.judge(conditions, ResultValue::Json(record)).await,
            Err(e) => Err(e.to_string()),
        }
    }
}

/// `p=0.0012 effect=+32.5% median 0.264 vs 0.2 (4 vs 6 clusters)`, as status shows the value.
fn shown(summary: &ComparisonSummary) -> Option<String> {
    let record = summary.record.as_ref()?;
    let sign = if record.effect >= 0.0 { "+" } else { "" };
    Some(format!(
        "p={} effect={sign}{}% median {} vs {} ({} vs {} clusters)",
        show_number(record.p_value),
        show_number(record.effect * 100.0),
        show_number(record.test_median),
        show_number(record.baseline_median),
        summary.test_cohort.len(),
        summary.baseline_cohort.len(),
    ))
}
