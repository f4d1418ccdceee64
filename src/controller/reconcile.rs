//! One step for one promotion, as a named pipeline:
//! `observe → plan (engine) → apply actions → update status → events`.
//!
//! The engine's contract: its status may be persisted only if every action succeeded. So on the
//! first failed action this returns an error and persists nothing; the next step recomputes the same
//! actions from the same persisted state (DESIGN D1, D2).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tollgate_engine::{Action, Desired, StepInput, StepOutput};

use crate::cluster::watch::WatchHealth;
use tollgate_manifest::Snapshot;
use tollgate_model::RolloutPolicy;
use tollgate_render::{preverification_profile_name, stage_profile_name};
use tollgate_source::PromotionView;
use tracing::{debug, info};

use super::error::ReconcileError;
use super::git_task::PromotionGit;
use crate::cluster::crd::GitPromotionSpec;
use crate::cluster::events::EventPublisher;
use crate::cluster::observe::{ObservedCaches, convert_profile};
use crate::cluster::statuses::{PersistedState, StatusCache};
use crate::cluster::writer::ClusterWriter;
use crate::metrics::Metrics;

/// What the controller knows about a promotion's presence in git.
#[derive(Debug, Clone)]
pub enum GitPresence {
    Present(Arc<PromotionGit>),
    /// Removed from git, but the blast-radius guard holds the removal: `git` is the promotion as
    /// it was, `reason` says why and how to confirm.
    RemovalHeld {
        git: Arc<PromotionGit>,
        reason: String,
    },
    /// Removed from git, past the blast-radius guard.
    Removed {
        last: Option<Arc<Snapshot>>,
    },
}

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
    pub watch_health: WatchHealth,
    pub progress_writes: super::progress_writes::ProgressWrites,
}

#[derive(Debug)]
pub enum Outcome {
    /// The step completed; come back at `wake_at` (or on the next change).
    Stepped {
        wake_at: Option<DateTime<Utc>>,
        actions: usize,
        status_written: bool,
    },
    /// Removed and fully cleaned up: the controller forgets it.
    Forgotten,
}

pub async fn reconcile(
    ctx: &Context,
    name: &str,
    presence: &GitPresence,
    now: DateTime<Utc>,
) -> Result<Outcome, ReconcileError> {
    // observe
    let persisted = ctx.statuses.get(name);
    let invalid_text;
    let (desired, file) = match presence {
        GitPresence::RemovalHeld { git, reason } => {
            let last = git.view.effective_snapshot();
            (
                Desired::RemovalHeld {
                    last: last.map(|s| &**s),
                    reason,
                },
                last.map(|s| s.file.clone()).unwrap_or_default(),
            )
        }
        GitPresence::Present(git) => match &git.view {
            PromotionView::Valid { snapshot } => (
                Desired::Snapshot {
                    current: snapshot,
                    invalid: None,
                },
                snapshot.file.clone(),
            ),
            PromotionView::Invalid { errors, last_good } => {
                invalid_text = errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ");
                match last_good {
                    // The last good snapshot keeps running; status shows the error.
                    Some(snapshot) => (
                        Desired::Snapshot {
                            current: snapshot,
                            invalid: Some(&invalid_text),
                        },
                        snapshot.file.clone(),
                    ),
                    None => (
                        Desired::NeverValid {
                            promotion: name,
                            error: &invalid_text,
                        },
                        errors.first().map(|d| d.file.clone()).unwrap_or_default(),
                    ),
                }
            }
        },
        GitPresence::Removed { last } => (
            Desired::Removed {
                promotion: name,
                last: last.as_deref(),
            },
            String::new(),
        ),
    };
    let generated = generated_names(name, &desired);
    let observed = ctx.caches.observe(name, &generated);
    let approvals: &[tollgate_manifest::ApprovalEvent] = match presence {
        GitPresence::Present(git) => &git.approvals,
        GitPresence::RemovalHeld { .. } | GitPresence::Removed { .. } => &[],
    };
    let watch_problem = ctx.watch_health.problem();
    let status_before = persisted.as_ref().and_then(|p| p.status.as_deref());
    let (history, (policy, policy_problem)): (&[tollgate_manifest::Snapshot], _) = match presence {
        GitPresence::Present(git) => (&git.history, governing_policy(git, status_before)),
        GitPresence::RemovalHeld { .. } | GitPresence::Removed { .. } => (&[], (None, None)),
    };

    // plan
    let StepOutput {
        actions,
        mut status,
        events,
        wake_at,
        ..
    } = tollgate_engine::step(&StepInput {
        desired,
        approvals,
        observed: &observed,
        status: status_before,
        now,
        policy: policy.as_deref(),
        history,
        watch_problem: watch_problem.as_deref(),
        policy_problem: policy_problem.as_deref(),
        measurements: &[],
    });

    // apply
    for action in &actions {
        execute(ctx, action).await?;
    }

    // update status
    let removed_and_clean = matches!(desired, Desired::Removed { .. }) && actions.is_empty();
    if removed_and_clean {
        if persisted.is_some() {
            ctx.writer
                .delete_state_object(name)
                .await
                .map_err(ReconcileError::DeleteState)?;
            ctx.statuses.forget_own(name);
            ctx.progress_writes.forget(name);
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
        return Ok(Outcome::Forgotten);
    }
    let before = persisted.as_ref().and_then(|p| p.status.as_deref());
    let progress_only = actions.is_empty()
        && events.is_empty()
        && tollgate_engine::progress::only_progress_differs(before, &status);
    // The transition's notices are written with it, before they are sent (issue #29).
    if !progress_only && before != Some(&status) {
        let transition = crate::notify::Transition {
            promotion: name,
            policy: policy.as_deref(),
            previous: before,
            history,
            now,
        };
        ctx.notifier.record(&transition, &mut status);
    }
    status.shrink_to_fit();
    // Shared with the status cache's record of this write (no copy per step).
    let status = Arc::new(status);
    if progress_only && let Some(until) = ctx.progress_writes.held_until(name, now) {
        if let Some(before) = before {
            ctx.notifier.after_step(name, policy.as_deref(), before);
        }
        return Ok(Outcome::Stepped {
            wake_at: Some(wake_at.map_or(until, |at| at.min(until))),
            actions: 0,
            status_written: false,
        });
    }
    let status_written = persist(ctx, name, &file, persisted.as_ref(), &status).await?;
    if status_written {
        ctx.progress_writes.written(name, now);
        ctx.metrics.observe_step(name, before, &status);
    }
    // A stage transition: another current stage, or the same one started by a new run.
    let started = before.is_none_or(|p| {
        p.current_stage_name != status.current_stage_name
            || p.snapshot_index != status.snapshot_index
    });
    if let Some(stage) = status.current_stage_name.as_deref()
        && status_written
        && started
    {
        ctx.metrics.stage_transition(name, stage);
    }

    // events (only once the step is durable)
    let uid = ctx.statuses.get(name).and_then(|p| p.uid);
    for event in &events {
        if event.reason == tollgate_engine::EventReason::DriftCorrected {
            ctx.metrics.drift_corrected(name);
        }
        ctx.events.publish(name, uid.as_deref(), event);
    }
    ctx.notifier.after_step(name, policy.as_deref(), &status);
    Ok(Outcome::Stepped {
        wake_at,
        actions: actions.len(),
        status_written,
    })
}

/// The policy the engine steps under, and why it cannot be resolved if it cannot: then the last
/// valid version of the policy that governed the run (fail closed: nothing new starts).
fn governing_policy(
    git: &PromotionGit,
    status: Option<&tollgate_engine::PromotionStatus>,
) -> (Option<Arc<RolloutPolicy>>, Option<String>) {
    match &git.policy {
        Ok(policy) => (policy.clone(), None),
        Err(problem) => {
            let governed = status
                .and_then(|s| s.policy.as_ref())
                .map(|p| p.name.as_str());
            (problem.last_valid(governed), Some(problem.message.clone()))
        }
    }
}

async fn execute(ctx: &Context, action: &Action) -> Result<(), ReconcileError> {
    match action {
        Action::ApplyProfile { name, object } => {
            let applied = ctx
                .writer
                .apply_profile(name, object)
                .await
                .map_err(|source| ReconcileError::Apply {
                    name: name.clone(),
                    source,
                })?;
            // Write-through: the next step must see this apply even if the watch lags.
            if let Some((index, profile)) = convert_profile(&applied) {
                ctx.caches
                    .profiles
                    .upsert((String::new(), name.clone()), index, profile);
            }
        }
        Action::DeleteProfile { name } => {
            let remaining =
                ctx.writer
                    .delete_profile(name)
                    .await
                    .map_err(|source| ReconcileError::Delete {
                        name: name.clone(),
                        source,
                    })?;
            let key = (String::new(), name.clone());
            match remaining.as_ref().and_then(convert_profile) {
                Some((index, profile)) => {
                    ctx.caches.profiles.upsert(key, index, profile);
                }
                None => {
                    ctx.caches.profiles.remove(&key);
                }
            }
        }
    }
    Ok(())
}

/// Writes the status if it changed; creates the GitPromotion first if needed.
async fn persist(
    ctx: &Context,
    name: &str,
    file: &str,
    persisted: Option<&PersistedState>,
    status: &Arc<tollgate_engine::PromotionStatus>,
) -> Result<bool, ReconcileError> {
    if persisted.and_then(|p| p.status.as_ref()) == Some(status) {
        return Ok(false);
    }
    let (resource_version, uid, annotations) = match persisted {
        Some(p) if p.resource_version.is_some() || ctx.writer.dry_run() => (
            p.resource_version.clone(),
            p.uid.clone(),
            p.annotations.clone(),
        ),
        _ => {
            let spec = GitPromotionSpec {
                repository: Some(ctx.origin.repository.clone()),
                branch: Some(ctx.origin.branch.clone()),
                path: Some(ctx.origin.path.clone()),
                file: Some(file.to_string()),
            };
            let created = ctx
                .writer
                .ensure_state_object(name, spec)
                .await
                .map_err(ReconcileError::EnsureState)?;
            (
                created.metadata.resource_version.clone(),
                created.metadata.uid.clone(),
                created
                    .metadata
                    .annotations
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
            )
        }
    };
    let value = serde_json::to_value(status).map_err(|e| {
        ReconcileError::PersistStatus(crate::cluster::errors::ClusterError::Decode {
            what: format!("status of {name}"),
            message: e.to_string(),
        })
    })?;
    match ctx.writer.write_status(name, resource_version, value).await {
        Ok(new_version) => {
            debug!(promotion = name, "status persisted");
            ctx.statuses.record_own(
                name,
                PersistedState {
                    resource_version: new_version,
                    uid,
                    annotations,
                    status: Some(status.clone()),
                },
            );
            Ok(true)
        }
        Err(error) => {
            // On a conflict someone else wrote: let the watched object be authoritative again.
            ctx.statuses.forget_own(name);
            Err(ReconcileError::PersistStatus(error))
        }
    }
}

/// The author of the commit that introduced the run's snapshot.
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
