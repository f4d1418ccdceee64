//! One step for one promotion, as a named pipeline:
//! `observe → plan (engine) → apply → persist → tell`, each step a function of its own.
//!
//! The engine's contract: its status may be persisted only if every action succeeded. So on the
//! first failed action this returns an error and persists nothing; the next step recomputes the same
//! actions from the same persisted state (docs/architecture.md#the-engine-contract).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tollgate_engine::measurement::{Measurement, MeasurementDue};
use tollgate_engine::{
    Dependency, Desired, EngineEvent, Observed, PromotionStatus, StepInput, StepOutput,
};
use tollgate_render::{preverification_profile_name, stage_profile_name};
use tracing::info;

use super::apply::apply;
use super::desired::{GitPresence, StepGit};
use super::error::ReconcileError;
use super::persist::persist;
use crate::cluster::events::EventPublisher;
use crate::cluster::observe::ObservedCaches;
use crate::cluster::statuses::{PersistedState, StatusCache};
use crate::cluster::watch::WatchHealth;
use crate::cluster::writer::ClusterWriter;
use crate::metrics::Metrics;

/// Where the GitPromotion's spec says the promotion comes from.
#[derive(Debug, Clone)]
pub struct Origin {
    pub repository: String,
    pub branch: String,
    pub path: String,
}

pub struct Context {
    pub caches: Arc<ObservedCaches>,
    pub statuses: Arc<StatusCache>,
    pub writer: ClusterWriter,
    pub events: EventPublisher,
    /// Tells the policy's notify endpoints about each persisted transition (issue #19).
    pub notifier: crate::notify::Notifier,
    pub origin: Origin,
    pub metrics: Arc<Metrics>,
    /// Each run's trace: the spans a step ends, its applies and status writes (issue #49).
    pub traces: crate::traces::Traces,
    pub watch_health: WatchHealth,
    pub progress_writes: super::progress_writes::ProgressWrites,
    /// Steps that only asked for first measurements, waiting for the results (issue #32).
    pub measurement_holds: super::measurement_holds::MeasurementHolds,
    /// Makes the analysis measurements steps ask for, and keeps their results (issue #32).
    pub analysis: crate::analysis::AnalysisRunner,
    /// Every promotion's `tollgate.dev/depends-on` and stages, from git (issue #34).
    pub dependencies: Arc<super::dependencies::DependencyIndex>,
    /// Every promotion's labels in git (the web view's filter under `run --ui`).
    pub git_labels: Arc<super::git_labels::GitLabels>,
}

#[derive(Debug)]
pub enum Outcome {
    /// The step completed; come back at `wake_at` (or on the next change).
    Stepped {
        wake_at: Option<DateTime<Utc>>,
        actions: usize,
        status_written: bool,
        /// The persisted status after the step (the one written, or the one kept).
        status: Option<Arc<PromotionStatus>>,
    },
    /// Removed and fully cleaned up: the controller forgets it.
    Forgotten,
}

/// A promotion this one depends on: its name, its stages in git, its persisted status.
type ObservedDependency = (String, Arc<Vec<String>>, Option<Arc<PromotionStatus>>);

/// What one step starts from: the persisted state, git, and the cluster as the watches show it.
struct Observation<'a> {
    name: &'a str,
    persisted: Option<PersistedState>,
    git: StepGit<'a>,
    observed: Observed,
    watch_problem: Option<String>,
    /// The promotions it depends on, as observed.
    dependencies: Vec<ObservedDependency>,
    dependency_problem: Option<String>,
}

impl Observation<'_> {
    fn status(&self) -> Option<&PromotionStatus> {
        self.persisted.as_ref().and_then(|p| p.status.as_deref())
    }
}

/// How long a step that only asked for first measurements waits for them, so that the same
/// turn steps again with the results (no poke, no second turn through the scheduler). A slower
/// measurement pokes its promotion when it ends.
const FIRST_RESULTS_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

pub async fn reconcile(
    ctx: &Context,
    name: &str,
    presence: &GitPresence,
    now: DateTime<Utc>,
) -> Result<Outcome, ReconcileError> {
    let seen = observe(ctx, name, presence);
    let stepped = step(ctx, &seen, now).await?;
    let Some(given) = stepped.awaits_results else {
        return Ok(stepped.outcome);
    };
    if !ctx
        .analysis
        .wait_for_results(name, &given, FIRST_RESULTS_WAIT)
        .await
    {
        return Ok(stepped.outcome);
    }
    // The results are in: the step that records them runs now, from the same observation (the
    // held step wrote nothing; what changed since touches the promotion for another step). Its
    // `now` is read again, as the results were taken after the first one's.
    let now = now.max(Utc::now());
    Ok(step(ctx, &seen, now).await?.outcome)
}

/// How one pass through the pipeline ended.
struct Stepped {
    outcome: Outcome,
    /// Held for its first measurements (see `measurement_holds`): the results it was given.
    awaits_results: Option<Vec<Measurement>>,
}

impl From<Outcome> for Stepped {
    fn from(outcome: Outcome) -> Self {
        Stepped {
            outcome,
            awaits_results: None,
        }
    }
}

async fn step(
    ctx: &Context,
    seen: &Observation<'_>,
    now: DateTime<Utc>,
) -> Result<Stepped, ReconcileError> {
    let name = seen.name;
    let measured = ctx.analysis.results(name);
    let planned = plan(seen, &measured, now);
    apply(ctx, name, &planned.status, &planned.actions).await?;
    let removed = matches!(seen.git.translation.desired(), Desired::Removed { .. });
    if removed && planned.actions.is_empty() {
        ctx.analysis.forget(name);
        return forget(ctx, seen).await.map(Stepped::from);
    }
    record(ctx, seen, planned, measured, now).await
}

fn observe<'a>(ctx: &Context, name: &'a str, presence: &'a GitPresence) -> Observation<'a> {
    let persisted = ctx.statuses.get(name);
    let status = persisted.as_ref().and_then(|p| p.status.as_deref());
    let git = StepGit::new(name, presence, status);
    let generated = generated_names(name, &git.translation.desired());
    let resolved = ctx.dependencies.resolve(name);
    let dependencies = resolved
        .dependencies
        .into_iter()
        .map(|(dependency, stages)| {
            let status = ctx.statuses.get(&dependency).and_then(|p| p.status);
            (dependency, stages, status)
        })
        .collect();
    Observation {
        name,
        observed: ctx.caches.observe(name, &generated),
        persisted,
        git,
        watch_problem: ctx.watch_health.problem(),
        dependencies,
        dependency_problem: resolved.problem,
    }
}

fn plan(seen: &Observation<'_>, measured: &[Measurement], now: DateTime<Utc>) -> StepOutput {
    let dependencies: Vec<Dependency<'_>> = seen
        .dependencies
        .iter()
        .map(|(promotion, stages, status)| Dependency {
            promotion,
            stages,
            status: status.as_deref(),
        })
        .collect();
    tollgate_engine::step(&StepInput {
        desired: seen.git.translation.desired(),
        approvals: seen.git.approvals,
        observed: &seen.observed,
        status: seen.status(),
        now,
        policy: seen.git.policy.as_deref(),
        history: seen.git.history,
        watch_problem: seen.watch_problem.as_deref(),
        unverified: seen.git.unverified,
        rewound: seen.git.rewound,
        policy_problem: seen.git.policy_problem,
        policy_unapproved: seen.git.policy_unapproved,
        measurements: measured,
        dependencies: &dependencies,
        dependency_problem: seen.dependency_problem.as_deref(),
    })
}

/// Removed from git and nothing left to delete: the state object goes too.
async fn forget(ctx: &Context, seen: &Observation<'_>) -> Result<Outcome, ReconcileError> {
    let name = seen.name;
    if seen.persisted.is_some() {
        ctx.writer
            .delete_state_object(name)
            .await
            .map_err(ReconcileError::DeleteState)?;
        ctx.statuses.forget_own(name);
        ctx.progress_writes.forget(name);
        ctx.measurement_holds.release(name);
    }
    match ctx.writer.dry_run() {
        true => info!(
            promotion = name,
            "dry-run: promotion removed from git, would clean up"
        ),
        false => info!(
            promotion = name,
            "promotion removed from git and cleaned up"
        ),
    }
    Ok(Outcome::Forgotten)
}

/// Persists the step's status (progress-only changes paced, see `progress_writes`; a step that
/// only asked for first measurements waits for them, see `measurement_holds`), then tells.
async fn record(
    ctx: &Context,
    seen: &Observation<'_>,
    planned: StepOutput,
    measured: Vec<Measurement>,
    now: DateTime<Utc>,
) -> Result<Stepped, ReconcileError> {
    let (name, before) = (seen.name, seen.status());
    let awaiting = tollgate_engine::write_hold::awaits_first_measurements(before, &planned);
    let progress_only = planned.actions.is_empty()
        && planned.events.is_empty()
        && tollgate_engine::progress::only_progress_differs(before, &planned.status);
    let held_until = match (awaiting, progress_only) {
        (true, _) => ctx.measurement_holds.held_until(name, now),
        (false, true) => ctx.progress_writes.held_until(name, now),
        (false, false) => None,
    };
    if let Some(until) = held_until {
        let outcome = hold(ctx, seen, &planned, &measured, until);
        return Ok(Stepped {
            outcome,
            awaits_results: awaiting.then_some(measured),
        });
    }
    ctx.measurement_holds.release(name);
    let outcome = write(ctx, seen, planned, &measured, progress_only, now).await?;
    Ok(Stepped::from(outcome))
}

/// The step's write waits until `until` (or an earlier wake-up); what it asks to measure starts.
fn hold(
    ctx: &Context,
    seen: &Observation<'_>,
    planned: &StepOutput,
    measured: &[Measurement],
    until: DateTime<Utc>,
) -> Outcome {
    let (name, policy) = (seen.name, seen.git.policy.as_deref());
    if let Some(before) = seen.status() {
        ctx.notifier.after_step(name, policy, before);
    }
    ctx.analysis.after_step(&step_measurements(
        ctx,
        seen,
        (measured, &planned.measurements),
        &planned.status,
        false,
    ));
    let wake_at = planned.wake_at.map_or(until, |at| at.min(until));
    Outcome::Stepped {
        wake_at: Some(wake_at),
        actions: 0,
        status_written: false,
        status: seen.persisted.as_ref().and_then(|p| p.status.clone()),
    }
}

/// Writes the step's status (with the notices its transition owes), then tells.
async fn write(
    ctx: &Context,
    seen: &Observation<'_>,
    planned: StepOutput,
    measured: &[Measurement],
    progress_only: bool,
    now: DateTime<Utc>,
) -> Result<Outcome, ReconcileError> {
    let (name, before) = (seen.name, seen.status());
    let policy = seen.git.policy.as_deref();
    let StepOutput {
        actions,
        mut status,
        events,
        wake_at,
        measurements: due,
    } = planned;
    // The transition's notices are written with it, before they are sent (issue #29).
    if !progress_only && before != Some(&status) {
        let transition = crate::notify::Transition {
            promotion: name,
            policy,
            previous: before,
            history: seen.git.history,
            uid: seen.persisted.as_ref().and_then(|p| p.uid.as_deref()),
            now,
        };
        ctx.notifier.record(&transition, &mut status);
    }
    status.shrink_to_fit();
    // Shared with the status cache's record of this write (no copy per step).
    let status = Arc::new(status);
    let file = seen.git.translation.file();
    let span = ctx.traces.live("status write", name, &status, None);
    let written = persist(ctx, name, file, seen.persisted.as_ref(), &status).await;
    span.end(&written);
    let written = written?;
    ctx.analysis.after_step(&step_measurements(
        ctx,
        seen,
        (measured, &due),
        &status,
        true,
    ));
    if written.is_some() {
        ctx.progress_writes.written(name, now);
        let told = tollgate_engine::transitions::transitions(before, &status);
        ctx.metrics.observe_step(name, before, &status, &told);
        ctx.traces.after_step(name, before, &status, &told);
        crate::traces::log_transitions(name, &status, &told);
    }
    // The uid of the object written, or of the one that needed no write.
    let uid = written
        .as_ref()
        .or(seen.persisted.as_ref())
        .and_then(|p| p.uid.as_deref());
    tell(ctx, seen, uid, &events, &status);
    Ok(Outcome::Stepped {
        wake_at,
        actions: actions.len(),
        status_written: written.is_some(),
        status: Some(status),
    })
}

/// What the analysis runner needs of a step: the results it was `given`, what it says is `due`.
fn step_measurements<'a>(
    ctx: &'a Context,
    seen: &'a Observation<'_>,
    (given, due): (&'a [Measurement], &'a [MeasurementDue]),
    status: &'a PromotionStatus,
    persisted: bool,
) -> crate::analysis::StepMeasurements<'a> {
    crate::analysis::StepMeasurements {
        traces: &ctx.traces,
        status,
        promotion: seen.name,
        given,
        due,
        persisted,
        policy: seen.git.policy.as_deref(),
        history: seen.git.history,
    }
}

/// Events, and the notices the persisted status still owes: only once the step is durable.
fn tell(
    ctx: &Context,
    seen: &Observation<'_>,
    uid: Option<&str>,
    events: &[EngineEvent],
    status: &PromotionStatus,
) {
    let name = seen.name;
    for event in events {
        if event.reason == tollgate_engine::EventReason::DriftCorrected {
            ctx.metrics.drift_corrected(name);
        }
        ctx.events.publish(name, uid, event);
    }
    ctx.notifier
        .after_step(name, seen.git.policy.as_deref(), status);
}

/// Every profile name the promotion could own: so that a foreign profile holding one is seen.
fn generated_names(promotion: &str, desired: &Desired<'_>) -> Vec<String> {
    let snapshot = match desired {
        Desired::Snapshot { current, .. } => Some(*current),
        Desired::Removed { last, .. } | Desired::RemovalHeld { last, .. } => *last,
        Desired::NeverValid { .. } => None,
    };
    snapshot
        .map(|s| {
            s.promotion
                .spec
                .stages
                .iter()
                .flat_map(|stage| {
                    [
                        stage_profile_name(promotion, &stage.name),
                        preverification_profile_name(promotion, &stage.name),
                    ]
                })
                .collect()
        })
        .unwrap_or_default()
}
