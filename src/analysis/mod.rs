//! The analysis runner (issue #32): the I/O edge that takes the measurements the engine says are
//! due, makes each once (Prometheus, a web endpoint, a commit's checks), judges it by the
//! analysis's conditions, and feeds the result back to the promotion's next step, which records
//! it in status. The rules (when a measurement is due, what the results mean for the stage) are
//! the engine's (`tollgate_engine::analysis`); nothing here decides a rollout.
//!
//! - each due measurement is made once: one in flight per key, and a result is kept (and offered
//!   to every step) until a persisted status shows it recorded or its run moved on;
//! - at most `concurrency` measurements at a time, each within `timeout`;
//! - only the leader measures: the steps that ask are the leader's, and a measurement checks the
//!   lease again before it starts and before its result is kept;
//! - a result pokes its promotion, so it steps at once rather than at its next wake-up, unless
//!   a step waits for it (`wait_for_results`) and goes on with it.
//!
//! Files: `prometheus`, `web`, `commit_status` (providers), `secrets`, `http`, `conditions`
//! (CEL), `observation` (what a provider saw), `store`.

pub mod commit_status;
mod comparison;
pub mod conditions;
pub mod http;
pub mod observation;
pub mod prometheus;
pub mod prometheus_cohorts;
pub mod secrets;
pub mod store;
pub mod web;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::Utc;
use opentelemetry::KeyValue;
use tokio::sync::{Semaphore, mpsc};
use tollgate_engine::measurement::{Measurement, MeasurementDue};
use tollgate_model::analysis::{Analysis, MeasurementVerdict, OnNoData, Provider};
use tollgate_model::policy::RolloutPolicy;
use tollgate_model::snapshot::Snapshot;
use tracing::{debug, warn};

use crate::cluster::leader::LeaderGate;
use crate::cluster::watch::Touch;
use crate::outbound::https::{HttpsClient, https_client};
use conditions::{Conditions, Judge};
use observation::{MeasureError, Observation};
use store::{Store, Wait};

/// Measurements at a time when not configured (`--analysis-concurrency`).
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Per-measurement timeout when not configured (`--analysis-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How the runner measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnalysisConfig {
    pub concurrency: usize,
    pub timeout: Duration,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            concurrency: DEFAULT_CONCURRENCY,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Makes due measurements and keeps their results for the steps. Cheap to clone.
#[derive(Clone)]
pub struct AnalysisRunner {
    inner: Arc<Inner>,
}

struct Inner {
    client: Result<HttpsClient, Arc<str>>,
    judge: Result<Judge, Arc<str>>,
    permits: Semaphore,
    timeout: Duration,
    leader: LeaderGate,
    /// The controller loop's touch channel: a result makes its promotion dirty.
    poke: mpsc::UnboundedSender<Touch>,
    store: Mutex<Store>,
}

/// What a step of one promotion asks of the runner.
pub struct StepMeasurements<'a> {
    pub promotion: &'a str,
    /// The results the step was given (`StepInput.measurements`).
    pub given: &'a [Measurement],
    /// What the step says is due (`StepOutput.measurements`).
    pub due: &'a [MeasurementDue],
    /// Whether the step's status is persisted (written, or equal to what was): only then are
    /// the results it recorded dropped.
    pub persisted: bool,
    pub policy: Option<&'a RolloutPolicy>,
    /// The promotion's snapshots: the commit a `commitStatus` check reads.
    pub history: &'a [Snapshot],
    /// Where each due measurement's span goes (under its stage's span), if traced.
    pub traces: &'a crate::traces::Traces,
    /// The status the step asked for the measurements in (its run and stages).
    pub status: &'a tollgate_engine::status::PromotionStatus,
}

/// One measurement to make.
struct Job {
    promotion: String,
    analysis: Analysis,
    due: MeasurementDue,
    commit: Option<String>,
    /// The measurement's span goes under its stage's (issue #49).
    span_site: Option<crate::traces::SpanSite>,
}

impl AnalysisRunner {
    pub fn new(
        config: AnalysisConfig,
        leader: LeaderGate,
        poke: mpsc::UnboundedSender<Touch>,
    ) -> Self {
        let client = https_client().map_err(|e| {
            warn!(error = %e, "no system TLS roots: analyses cannot be measured");
            Arc::from(format!("no system TLS roots could be loaded ({e})"))
        });
        let judge = Judge::start().map_err(|e| {
            warn!(error = %e, "cannot start the CEL thread: analyses cannot be judged");
            Arc::from(format!("cannot start the condition evaluator ({e})"))
        });
        AnalysisRunner {
            inner: Arc::new(Inner {
                client,
                judge,
                permits: Semaphore::new(config.concurrency.max(1)),
                timeout: config.timeout,
                leader,
                poke,
                store: Mutex::new(Store::default()),
            }),
        }
    }

    /// The results to give the promotion's next step.
    pub fn results(&self, promotion: &str) -> Vec<Measurement> {
        self.inner.store().results(promotion)
    }

    /// After a step: drops what it recorded (once persisted) and starts what it says is due.
    pub fn after_step(&self, step: &StepMeasurements<'_>) {
        if step.given.is_empty() && step.due.is_empty() {
            return;
        }
        let mut store = self.inner.store();
        if step.persisted {
            store.settle(step.promotion, step.given, step.due);
        }
        for due in step.due {
            let key = due.key();
            if store.has(step.promotion, &key) {
                continue;
            }
            let analysis = step
                .policy
                .and_then(|p| p.spec.analyses.iter().find(|a| a.name == due.analysis));
            let Some(analysis) = analysis else {
                debug!(promotion = step.promotion, analysis = %due.analysis, "due analysis not in the policy any more");
                continue;
            };
            let commit = step
                .history
                .iter()
                .find(|s| s.index == due.snapshot_index)
                .map(|s| s.commit.sha.clone());
            let job = Job {
                promotion: step.promotion.to_string(),
                analysis: analysis.clone(),
                due: due.clone(),
                commit,
                span_site: step
                    .traces
                    .site(step.promotion, step.status, Some(&due.stage)),
            };
            // Spawned under the store's lock, so the task cannot finish before it is recorded
            // as in flight.
            let task = tokio::spawn(self.inner.clone().run(Box::new(job)));
            store.start(step.promotion, key, task.abort_handle());
        }
    }

    /// Waits up to `bound` for the promotion's measurements in flight, for a step that was
    /// `given` these results. Whether new results are there to step with (else nothing was in
    /// flight, or the bound passed: the results that come later poke the promotion).
    pub async fn wait_for_results(
        &self,
        promotion: &str,
        given: &[Measurement],
        bound: Duration,
    ) -> bool {
        let wait = self.inner.store().wait(promotion, given);
        let mut told = match wait {
            Wait::Nothing => return false,
            Wait::Ready => return true,
            Wait::Pending(told) => told,
        };
        if let Ok(ended) = tokio::time::timeout(bound, &mut told).await {
            // An error: the runner closed, nothing new to step with.
            return ended.is_ok();
        }
        // Closed first: a result either reached us before (we step with it) or pokes.
        told.close();
        told.try_recv().is_ok()
    }

    /// No measurement in flight: none ended without its promotion being told (see
    /// [`crate::controller::quiescence`]).
    pub fn is_idle(&self) -> bool {
        self.inner.store().is_idle()
    }

    /// The promotion is gone: its results with it.
    pub fn forget(&self, promotion: &str) {
        self.inner.store().forget(promotion);
    }

    /// Stops the measurements in flight (the controller stops).
    pub fn close(&self) {
        self.inner.store().abort_all();
    }
}

impl Inner {
    fn store(&self) -> MutexGuard<'_, Store> {
        // Plain maps: a panic cannot leave them half-updated in a way that matters.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn run(self: Arc<Self>, job: Box<Job>) {
        // At fleet scale thousands of jobs wait here (a wave of stages starts at once, and
        // `concurrency` measure): the measurement's own state, ~4.5 KB with its HTTP exchange,
        // is boxed only once a permit is held, so a waiting task holds little beyond its job.
        let taken = match self.permits.acquire().await {
            Ok(_permit) if self.leader.is_leader() => Box::pin(self.take(&job)).await,
            _ => None,
        };
        let key = job.due.key();
        let measured = taken.is_some();
        if let Some(m) = &taken {
            debug!(promotion = %job.promotion, stage = %key.stage, analysis = %key.analysis, index = key.index, verdict = m.verdict.as_str(), value = m.value.as_deref().unwrap_or(""), "measured");
        }
        let mut store = self.store();
        let taken_by_a_step = store.finish(&job.promotion, &key, taken);
        if measured && !taken_by_a_step {
            // Under the store's lock: whoever sees nothing in flight sees the poke queued.
            let _ = self.poke.send(Touch::Promotions(vec![job.promotion]));
        }
    }

    /// The measurement, under its span; kept only if this replica still leads once it is made.
    async fn take(&self, job: &Job) -> Option<Measurement> {
        let mut span = job.span_site.as_ref().map(|site| {
            site.start(
                "analysis measurement",
                vec![
                    KeyValue::new("tollgate.analysis", job.due.analysis.clone()),
                    KeyValue::new("tollgate.measurement", i64::from(job.due.index)),
                ],
            )
        });
        let measurement = self.measure(job).await;
        if let Some(span) = &mut span {
            let verdict = measurement.verdict.as_str().to_string();
            span.set_attribute(KeyValue::new("tollgate.verdict", verdict));
        }
        self.leader.is_leader().then_some(measurement)
    }

    /// One measurement: the provider's observation judged by onNoData or the conditions (a
    /// comparison's: see `comparison`).
    async fn measure(&self, job: &Job) -> Measurement {
        if let (Some(due), Some(compare)) = (&job.due.comparison, &job.analysis.compare) {
            return self.measure_comparison(job, due, compare).await;
        }
        let observed = self.observe(job).await;
        let analysis = &job.analysis;
        let (value, verdict, error) = match observed {
            Err(error) => (None, MeasurementVerdict::Error, Some(error.to_string())),
            Ok(Observation::NoData(why)) => (
                None,
                no_data_verdict(analysis.on_no_data),
                Some(format!("no data: {why}")),
            ),
            Ok(Observation::Pending(shown)) => {
                (Some(shown), MeasurementVerdict::Inconclusive, None)
            }
            Ok(Observation::Value { result, shown }) => {
                let conditions = Conditions {
                    success: analysis.success_condition.clone(),
                    failure: analysis.failure_condition.clone(),
                };
                let judged = match &self.judge {
                    Ok(judge) => judge.judge(conditions, result).await,
                    Err(e) => Err(e.to_string()),
                };
                match judged {
                    Ok(verdict) => (Some(shown), verdict, None),
                    Err(error) => (Some(shown), MeasurementVerdict::Error, Some(error)),
                }
            }
        };
        Measurement {
            key: job.due.key(),
            taken_at: Utc::now(),
            value,
            verdict,
            error,
            comparison: None,
        }
    }

    async fn observe(&self, job: &Job) -> Result<Observation, MeasureError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| MeasureError::Config(format!("no HTTP client: {e}")))?;
        let query = job.due.query.as_str();
        match job.analysis.provider() {
            Some(Provider::Prometheus(check)) => {
                prometheus::measure(client, check, query, self.timeout).await
            }
            Some(Provider::Web(check)) => web::measure(client, check, query, self.timeout).await,
            Some(Provider::CommitStatus(check)) => {
                commit_status::measure(client, check, job.commit.as_deref(), self.timeout).await
            }
            None => Err(MeasureError::Config(
                "no provider: set one of prometheus, web, commitStatus".to_string(),
            )),
        }
    }
}

/// What a measurement without data is, by `onNoData`.
fn no_data_verdict(on_no_data: OnNoData) -> MeasurementVerdict {
    match on_no_data {
        OnNoData::Fail => MeasurementVerdict::Failed,
        OnNoData::Pass => MeasurementVerdict::Successful,
        OnNoData::Inconclusive => MeasurementVerdict::Inconclusive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At fleet scale thousands of measurements wait for a permit at once: each waiting task must
    /// hold its boxed job, not the measurement's HTTP exchange (4.5 KB when `run` held it).
    #[tokio::test]
    async fn a_measurement_waiting_for_a_permit_holds_little_beyond_its_job() {
        let (poke, _) = mpsc::unbounded_channel();
        let runner = AnalysisRunner::new(AnalysisConfig::default(), LeaderGate::always(), poke);
        let analysis = serde_json::from_value(serde_json::json!({
            "name": "errors", "prometheus": {"address": "http://prometheus", "query": "q"},
            "successCondition": "result < 1",
        }))
        .expect("an analysis");
        let due = MeasurementDue {
            stage: "canary".into(),
            analysis: "errors".into(),
            cluster: None,
            index: 0,
            snapshot_index: 1,
            wave: None,
            due_at: Utc::now(),
            query: "q".into(),
            comparison: None,
        };
        let job = Job {
            promotion: "web".into(),
            analysis,
            due,
            commit: None,
            span_site: None,
        };
        let waiting = runner.inner.clone().run(Box::new(job));
        assert!(
            std::mem::size_of_val(&waiting) <= 256,
            "{} B",
            std::mem::size_of_val(&waiting)
        );
    }
}
