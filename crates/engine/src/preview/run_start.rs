//! When a change's run starts, by the rules `step` applies: `onNewSnapshot` (`new_snapshot`), a
//! rollback's precedence, a blackout in force, a policy problem that holds everything new.

use chrono::{DateTime, Utc};
use tollgate_model::blackout::{self, ActiveBlackout};
use tollgate_model::policy::{OnNewSnapshot, RolloutPolicy};
use tollgate_model::snapshot::Snapshot;

use crate::gates::new_snapshot;
use crate::status::{PromotionStatus, runs_content_of};

/// When the run a change starts begins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunStart {
    /// What it waits for before its first stage.
    pub after: StartsAfter,
    /// A blackout in force at the preview's `now`: no stage (nor wave) starts before it ends, so
    /// neither does the run. `None` for a rollback, which no blackout holds.
    pub blackout: Option<ActiveBlackout>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartsAfter {
    /// Nothing: `onNewSnapshot: Restart` (or no policy), or no run in progress. A run in progress
    /// (`supersedes`, known from the live status) is superseded at once.
    Nothing { supersedes: Option<u64> },
    /// Nothing, whatever `onNewSnapshot` says: it restores content that completed here.
    NothingAsARollback,
    /// `FinishCurrent` or `Queue`, and the live status shows run `running` going on: it finishes
    /// first. `between` are the snapshots after it and before this one: `Queue` runs each of them
    /// first, in commit order; `FinishCurrent` supersedes them.
    RunningRun {
        policy: OnNewSnapshot,
        running: u64,
        between: Vec<u64>,
    },
    /// `FinishCurrent` or `Queue` without the live status: a run in progress, if there is one,
    /// finishes first (with `Queue`, every snapshot before this one too).
    RunInProgressIfAny { policy: OnNewSnapshot },
    /// The governing RolloutPolicy cannot be resolved: nothing new starts until it is fixed.
    PolicyProblem { problem: String },
}

/// What the preview knows that decides the start.
pub(super) struct Context<'a> {
    pub after: &'a Snapshot,
    pub rollback: bool,
    pub policy: Option<&'a RolloutPolicy>,
    pub policy_problem: Option<&'a str>,
    pub status: Option<&'a PromotionStatus>,
    pub history: &'a [Snapshot],
    pub now: DateTime<Utc>,
}

pub(super) fn run_start(context: &Context<'_>) -> RunStart {
    let blackout = context
        .policy
        .filter(|_| !context.rollback)
        .and_then(|p| blackout::active_at(&p.spec.blackouts, context.now));
    RunStart {
        after: starts_after(context),
        blackout,
    }
}

fn starts_after(context: &Context<'_>) -> StartsAfter {
    if let Some(problem) = context.policy_problem {
        return StartsAfter::PolicyProblem {
            problem: problem.to_string(),
        };
    }
    if context.rollback {
        return StartsAfter::NothingAsARollback;
    }
    let policy = context
        .policy
        .map(|p| p.spec.on_new_snapshot)
        .unwrap_or_default();
    let Some(status) = context.status else {
        return match policy {
            OnNewSnapshot::Restart => StartsAfter::Nothing { supersedes: None },
            _ => StartsAfter::RunInProgressIfAny { policy },
        };
    };
    let running = new_snapshot::running_snapshot(status, context.history)
        .filter(|running| !new_snapshot::finished(status, running))
        .filter(|_| {
            !runs_content_of(
                status.profile_spec_hash.as_deref(),
                status.stages_hash.as_deref(),
                context.after,
            )
        });
    let Some(running) = running else {
        return StartsAfter::Nothing { supersedes: None };
    };
    if policy == OnNewSnapshot::Restart {
        return StartsAfter::Nothing {
            supersedes: Some(running.index),
        };
    }
    let between = context
        .history
        .iter()
        .map(|s| s.index)
        .filter(|&i| i > running.index && i < context.after.index)
        .collect();
    StartsAfter::RunningRun {
        policy,
        running: running.index,
        between,
    }
}
