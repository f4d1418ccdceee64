//! Analysis gates of a stage (`RolloutPolicy.spec.analyses`, named in `stages.<stage>.analyses`):
//! which measurement is due, recording the ones taken, and judging each run by its limits. Pure:
//! the controller's analysis runner performs the queries (with timeouts and bounded concurrency)
//! and feeds each result back as input; nothing here waits or reads a clock.
//!
//! Rules:
//! - the runs start when the stage's clusters are provisioned, their first measurement due
//!   `initialDelay` later, the next ones at exact `interval`s from there (an engine wake-up each);
//! - a waved stage analyses each wave once it is provisioned: `scope: Stage` runs again over the
//!   waves reached, `scope: Cluster` runs for the wave's clusters; only that wave's runs decide
//!   (the next wave starts when they succeeded), failures of earlier waves stay counted;
//! - `count` measurements are needed; an errored one is never a success and does not count, but
//!   more than `consecutiveErrorLimit` errors in a row fail the run;
//! - more failed measurements than `failureLimit` fail the run, more inconclusive ones than
//!   `inconclusiveLimit` make it inconclusive (held until approved through git);
//! - a dry-run analysis is measured and shown, and never decides.
//! - a comparative analysis (`compare:`, issue #48) is measured over two cohorts fixed when its
//!   run starts (`cohorts`), each with its own rendered query; the runner compares them with the
//!   rank test (`comparison`) and the record is kept per measurement;
//! - with `stages.<stage>.score` the wave's runs are judged together once all ended (`score`).

use chrono::{DateTime, Utc};
use tollgate_model::analysis::{Analysis, AnalysisScope, MeasurementVerdict, Provider};
use tollgate_model::analysis_template::{TemplateContext, render};
use tollgate_model::policy::Score;
use tollgate_model::snapshot::Snapshot;

use crate::gates::cohorts::{CohortSources, cohorts, nothing_left_to_compare};
use crate::gates::comparison::ComparisonDue;
use crate::gates::score::{self, ScoreVerdict};

use crate::measurement::{Measurement, MeasurementDue};
use crate::observed::Observed;
use crate::output::{EngineEvent, EventReason};
use crate::status::analysis_run::{
    AnalysisPhase, AnalysisRun, MEASUREMENTS_KEPT, MeasurementRecord,
};

/// What a stage's analyses read.
pub(crate) struct AnalysisInput<'a> {
    pub promotion: &'a str,
    pub stage: &'a str,
    pub snapshot: &'a Snapshot,
    pub analyses: &'a [Analysis],
    pub measurements: &'a [Measurement],
    pub observed: &'a Observed,
    /// The clusters analysed (`namespace/name`): the stage's members, or the waves reached.
    pub members: &'a [String],
    /// The wave analysed (waved stages).
    pub wave: Option<u32>,
    pub now: DateTime<Utc>,
    /// Where comparative analyses find their baseline cohorts.
    pub cohorts: CohortSources<'a>,
    /// `stages.<stage>.score`: the analyses judged together.
    pub score: Option<Score>,
}

/// Where the stage's deciding analyses stand after a step.
#[derive(Debug, Default)]
pub(crate) struct AnalysisOutcome {
    /// A `scope: Stage` analysis failed: why.
    pub stage_failed: Option<String>,
    /// `scope: Cluster` analyses failed on these clusters: cluster, why, and when.
    pub clusters_failed: Vec<(String, String, DateTime<Utc>)>,
    /// An analysis is inconclusive: why.
    pub inconclusive: Option<String>,
    /// Measurements remain (of a deciding analysis): which, in words.
    pub running: Option<String>,
    /// When the next measurement not asked for yet is due (the engine wakes then).
    pub next_due: Option<DateTime<Utc>>,
    pub due: Vec<MeasurementDue>,
    pub events: Vec<EngineEvent>,
}

/// Starts the wave's runs (once, from when it was provisioned), records results, asks for what
/// is due, judges the wave's runs.
pub(crate) fn progress(
    runs: &mut Vec<AnalysisRun>,
    input: &AnalysisInput<'_>,
    provisioned_at: DateTime<Utc>,
) -> AnalysisOutcome {
    if !runs.iter().any(|r| r.wave == input.wave) {
        start(runs, input, provisioned_at);
    }
    let mut outcome = AnalysisOutcome::default();
    for run in runs.iter_mut() {
        let Some(analysis) = input.analyses.iter().find(|a| a.name == run.name) else {
            continue;
        };
        let was = run.phase;
        record(run, analysis, input);
        if run.phase != was {
            outcome.events.extend(told(input.stage, run));
        }
        if run.dry_run {
            ask(run, analysis, input, &mut outcome);
            continue;
        }
        if run.wave != input.wave {
            // An earlier wave's run decided then (its failures stay counted).
            continue;
        }
        decide(run, analysis, input, &mut outcome);
    }
    if let Some(score) = input.score {
        // The runs are judged together: none fails or holds the stage alone.
        (outcome.stage_failed, outcome.inconclusive) =
            match score::judge_together(runs, input.wave, score) {
                ScoreVerdict::Pending | ScoreVerdict::Pass => (None, None),
                ScoreVerdict::Marginal(why) => (None, Some(why)),
                ScoreVerdict::Fail(why) => (Some(why), None),
            };
    }
    outcome
}

/// The wave's runs: one per analysis, or per cluster not analysed yet under `scope: Cluster`.
fn start(runs: &mut Vec<AnalysisRun>, input: &AnalysisInput<'_>, provisioned_at: DateTime<Utc>) {
    for analysis in input.analyses {
        let started_at = provisioned_at + to_chrono(analysis.initial_delay());
        let clusters: Vec<Option<&String>> = match analysis.scope {
            AnalysisScope::Stage => vec![None],
            AnalysisScope::Cluster => {
                let analysed: std::collections::HashSet<&str> = runs
                    .iter()
                    .filter(|r| r.name == analysis.name)
                    .filter_map(|r| r.cluster.as_deref())
                    .collect();
                input
                    .members
                    .iter()
                    .filter(|c| !analysed.contains(c.as_str()))
                    .map(Some)
                    .collect()
            }
        };
        for cluster in clusters {
            let (query, problem) = match resolved_query(analysis, input, cluster, input.members) {
                Ok(query) => (query, None),
                Err(problem) => (String::new(), Some(problem)),
            };
            let comparison = comparison_due(analysis, input, cluster);
            let (phase, message) = match (problem, comparison.as_deref()) {
                (Some(problem), _) => (AnalysisPhase::Failed, Some(problem)),
                (None, Some(due)) => match nothing_left_to_compare(due, input.cohorts.waves) {
                    Some(why) => (AnalysisPhase::Successful, Some(why)),
                    None => (AnalysisPhase::Running, None),
                },
                (None, None) => (AnalysisPhase::Running, None),
            };
            runs.push(AnalysisRun {
                name: analysis.name.clone(),
                cluster: cluster.cloned(),
                wave: input.wave,
                approved_by: None,
                dry_run: analysis.dry_run,
                query,
                comparison,
                started_at,
                count: analysis.count(),
                taken: 0,
                successful: 0,
                failed: 0,
                inconclusive: 0,
                errors: 0,
                consecutive_errors: 0,
                phase,
                message,
                measurements: Vec::new(),
            });
        }
    }
}

/// A comparative analysis's cohorts, with the baseline's query rendered for its cohort.
fn comparison_due(
    analysis: &Analysis,
    input: &AnalysisInput<'_>,
    cluster: Option<&String>,
) -> Option<Box<ComparisonDue>> {
    let compare = analysis.compare.as_ref()?;
    let mut due = cohorts(analysis, compare, &input.cohorts);
    // A template error is the test query's problem already (the same text).
    due.baseline_query =
        resolved_query(analysis, input, cluster, &due.baseline_clusters).unwrap_or_default();
    Some(Box::new(due))
}

/// The query or URL with its templates rendered for this stage (and cluster), `clusters` the
/// clusters `{{ clusters }}` and `{{ clustersRegex }}` name.
fn resolved_query(
    analysis: &Analysis,
    input: &AnalysisInput<'_>,
    cluster: Option<&String>,
    clusters: &[String],
) -> Result<String, String> {
    let text = match analysis.provider() {
        Some(Provider::Prometheus(p)) => p.query.as_str(),
        Some(Provider::Web(w)) => w.url.as_str(),
        Some(Provider::CommitStatus(c)) => return Ok(c.contexts.join(",")),
        None => return Err("no provider (prometheus, web or commitStatus)".into()),
    };
    let labels = cluster
        .and_then(|key| key.split_once('/'))
        .and_then(|(namespace, name)| {
            input
                .observed
                .clusters
                .iter()
                .find(|c| c.namespace == namespace && c.name == name)
        })
        .map(|c| c.labels.clone())
        .unwrap_or_default();
    let context = TemplateContext {
        promotion: input.promotion.to_string(),
        stage: input.stage.to_string(),
        cluster: cluster.cloned(),
        clusters: clusters.to_vec(),
        labels,
        snapshot_index: input.snapshot.index,
        snapshot_commit: input.snapshot.commit.sha.clone(),
    };
    render(text, &context).map_err(|e| e.to_string())
}

/// Records the run's next measurement, if the runner has it.
fn record(run: &mut AnalysisRun, analysis: &Analysis, input: &AnalysisInput<'_>) {
    if run.phase != AnalysisPhase::Running {
        return;
    }
    let attempts = attempts(run);
    let Some(taken) = input.measurements.iter().find(|m| {
        m.key.stage == input.stage
            && m.key.analysis == run.name
            && m.key.cluster == run.cluster
            && m.key.index == attempts
            && m.key.snapshot_index == input.snapshot.index
            && m.key.wave == run.wave
    }) else {
        return;
    };
    match taken.verdict {
        MeasurementVerdict::Successful => run.successful += 1,
        MeasurementVerdict::Failed => run.failed += 1,
        MeasurementVerdict::Inconclusive => run.inconclusive += 1,
        MeasurementVerdict::Error => run.errors += 1,
    }
    run.consecutive_errors = match taken.verdict {
        MeasurementVerdict::Error => run.consecutive_errors + 1,
        _ => 0,
    };
    if taken.verdict != MeasurementVerdict::Error {
        run.taken += 1;
    }
    run.measurements.push(MeasurementRecord {
        index: attempts,
        at: taken.taken_at,
        value: taken.value.clone(),
        verdict: taken.verdict,
        error: taken.error.clone(),
        comparison: taken.comparison.clone(),
    });
    let excess = run.measurements.len().saturating_sub(MEASUREMENTS_KEPT);
    run.measurements.drain(..excess);
    judge(run, analysis, taken);
}

/// Results recorded so far (errors included): the index of the next measurement.
fn attempts(run: &AnalysisRun) -> u32 {
    run.successful + run.failed + run.inconclusive + run.errors
}

/// The run's phase after a measurement, by its limits.
fn judge(run: &mut AnalysisRun, analysis: &Analysis, last: &Measurement) {
    let value = last.value.as_deref().unwrap_or("no value");
    if run.failed > analysis.failure_limit() {
        run.phase = AnalysisPhase::Failed;
        run.message = Some(format!(
            "{} failed measurement(s), over failureLimit {} (last: {value})",
            run.failed,
            analysis.failure_limit()
        ));
    } else if run.consecutive_errors > analysis.consecutive_error_limit() {
        run.phase = AnalysisPhase::Failed;
        let errors = match run.consecutive_errors {
            1 => "1 error".to_string(),
            n => format!("{n} errors"),
        };
        run.message = Some(format!(
            "{errors} in a row, over consecutiveErrorLimit {} (last: {})",
            analysis.consecutive_error_limit(),
            last.error.as_deref().unwrap_or("error")
        ));
    } else if run.inconclusive > analysis.inconclusive_limit() {
        run.phase = AnalysisPhase::Inconclusive;
        run.message = Some(format!(
            "{} inconclusive measurement(s), over inconclusiveLimit {} (last: {value})",
            run.inconclusive,
            analysis.inconclusive_limit()
        ));
    } else if run.taken >= run.count {
        run.phase = AnalysisPhase::Successful;
        run.message = Some(format!(
            "{} of {} measurements successful (last: {value})",
            run.successful, run.count
        ));
    }
}

/// What a deciding run means for the stage.
fn decide(
    run: &AnalysisRun,
    analysis: &Analysis,
    input: &AnalysisInput<'_>,
    outcome: &mut AnalysisOutcome,
) {
    let why = || {
        format!(
            "analysis {}: {}",
            run.name,
            run.message.as_deref().unwrap_or("")
        )
    };
    match (run.phase, &run.cluster) {
        (AnalysisPhase::Failed, Some(cluster)) => {
            let at = run.measurements.last().map_or(input.now, |m| m.at);
            outcome.clusters_failed.push((cluster.clone(), why(), at));
        }
        (AnalysisPhase::Failed, None) => {
            outcome.stage_failed.get_or_insert_with(why);
        }
        (AnalysisPhase::Inconclusive, _) if run.approved_by.is_none() => {
            outcome.inconclusive.get_or_insert_with(why);
        }
        (AnalysisPhase::Running, _) => ask(run, analysis, input, outcome),
        // Cancelled only once its stage ended (`analysis_end`): never in a stage that decides.
        (AnalysisPhase::Successful | AnalysisPhase::Inconclusive | AnalysisPhase::Cancelled, _) => {
        }
    }
}

/// Asks for the run's next measurement when it is due, else notes when it will be.
fn ask(
    run: &AnalysisRun,
    analysis: &Analysis,
    input: &AnalysisInput<'_>,
    outcome: &mut AnalysisOutcome,
) {
    if run.phase != AnalysisPhase::Running {
        return;
    }
    let index = attempts(run);
    let due_at = next_due_at(run, analysis);
    if input.now >= due_at {
        outcome.due.push(MeasurementDue {
            stage: input.stage.to_string(),
            analysis: run.name.clone(),
            cluster: run.cluster.clone(),
            index,
            snapshot_index: input.snapshot.index,
            wave: run.wave,
            due_at,
            query: run.query.clone(),
            comparison: run.comparison.clone(),
        });
    } else {
        outcome.next_due = Some(outcome.next_due.map_or(due_at, |n| n.min(due_at)));
    }
    if run.dry_run || outcome.running.is_some() {
        return;
    }
    let on = run
        .cluster
        .as_deref()
        .map(|c| format!(" on {c}"))
        .unwrap_or_default();
    outcome.running = Some(format!(
        "analysis {}{on}: {} of {} measurements",
        run.name, run.taken, run.count
    ));
}

/// When the run's next measurement is due: the first at its start, each next one `interval`
/// after the last one recorded (as Argo Rollouts does). Never on a fixed grid from the start: a
/// new leader or a restarted process that finds measurements overdue takes them `interval`
/// apart, not in a burst that would end the soak early.
fn next_due_at(run: &AnalysisRun, analysis: &Analysis) -> DateTime<Utc> {
    match run.measurements.last() {
        Some(last) => (last.at + to_chrono(analysis.interval())).max(run.started_at),
        None => run.started_at,
    }
}

/// The Warning a run's end tells: failed, or inconclusive.
fn told(stage: &str, run: &AnalysisRun) -> Option<EngineEvent> {
    let reason = match run.phase {
        AnalysisPhase::Failed => EventReason::AnalysisFailed,
        AnalysisPhase::Inconclusive => EventReason::AnalysisInconclusive,
        AnalysisPhase::Running | AnalysisPhase::Successful | AnalysisPhase::Cancelled => {
            return None;
        }
    };
    let on = run
        .cluster
        .as_deref()
        .map(|c| format!(" on {c}"))
        .unwrap_or_default();
    let dry = if run.dry_run {
        " (dry run: it does not decide)"
    } else {
        ""
    };
    Some(EngineEvent::warning(
        reason,
        format!(
            "Stage {stage}: analysis {}{on} {}{dry}: {}; query: {}",
            run.name,
            run.phase.as_str().to_lowercase(),
            run.message.as_deref().unwrap_or(""),
            run.query
        ),
    ))
}

fn to_chrono(duration: std::time::Duration) -> chrono::Duration {
    chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX)
}

/// `scope: Cluster` runs of a stage that failed and decide: cluster, why, and when.
pub(crate) fn failed_clusters(runs: &[AnalysisRun]) -> Vec<(String, String, DateTime<Utc>)> {
    runs.iter()
        .filter(|r| !r.dry_run && r.phase == AnalysisPhase::Failed)
        .filter_map(|r| {
            let cluster = r.cluster.clone()?;
            let why = format!(
                "analysis {}: {}",
                r.name,
                r.message.as_deref().unwrap_or("")
            );
            let at = r.measurements.last().map_or(r.started_at, |m| m.at);
            Some((cluster, why, at))
        })
        .collect()
}
