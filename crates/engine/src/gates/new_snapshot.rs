//! `onNewSnapshot`: which snapshot the step runs when a commit lands mid-rollout.
//!
//! - `Restart` (upstream, and without a policy): the newest snapshot, always.
//! - `FinishCurrent`: the running run goes on with its snapshot until it finished (completed, or
//!   failed under its policy); then the newest starts, and the snapshots in between are superseded.
//! - `Queue`: the running run finishes; then the next snapshot in commit order runs, and so on.
//!
//! A rollback (content equal to an earlier snapshot that completed here: `lineage`) always takes
//! effect at once, and so does `onFailure: Rollback` (it is part of the running run).
//!
//! While the policy governing the promotion cannot be resolved (a conflict, a missing or broken
//! policy), nothing new starts: the running run goes on under its last valid policy and the newest
//! snapshot waits (fail closed).

use tollgate_model::policy::OnNewSnapshot;
use tollgate_model::snapshot::Snapshot;

use crate::gates::start_gate;
use crate::input::StepInput;
use crate::status::{Phase, PromotionStatus, runs_content_of};

/// The snapshot this step runs, and the newest one when it waits for that run to finish.
pub(crate) struct Choice<'a> {
    /// `None`: nothing may run (a policy problem, and no run of an earlier snapshot to go on).
    pub run: Option<&'a Snapshot>,
    pub waiting: Option<&'a Snapshot>,
    pub policy: OnNewSnapshot,
}

/// `newest_is_rollback`: the newest snapshot restores known-good content (see `lineage`).
pub(crate) fn choose<'a>(
    input: &StepInput<'a>,
    newest: &'a Snapshot,
    newest_is_rollback: bool,
) -> Choice<'a> {
    let policy = input
        .policy
        .map(|p| p.spec.on_new_snapshot)
        .unwrap_or_default();
    if start_gate::new_runs_held(input).is_some() {
        return held_by_policy(input, newest, policy);
    }
    let newest_now = Choice {
        run: Some(newest),
        waiting: None,
        policy,
    };
    if policy == OnNewSnapshot::Restart || newest_is_rollback {
        return newest_now;
    }
    let Some(status) = input.status else {
        return newest_now;
    };
    let running_newest = runs_content_of(
        status.profile_spec_hash.as_deref(),
        status.stages_hash.as_deref(),
        newest,
    );
    let Some(running) = running_snapshot(status, input.history) else {
        return newest_now;
    };
    if running_newest || running.index >= newest.index {
        return newest_now;
    }
    if !finished(status, running) {
        return Choice {
            run: Some(running),
            waiting: Some(newest),
            policy,
        };
    }
    let next = match policy {
        OnNewSnapshot::Queue => input
            .history
            .iter()
            .filter(|s| s.index > running.index)
            .min_by_key(|s| s.index)
            .unwrap_or(newest),
        _ => newest,
    };
    Choice {
        run: Some(next),
        waiting: (next.index != newest.index).then_some(newest),
        policy,
    }
}

/// With a policy problem: the run the status describes goes on (finished or not), and the newest
/// snapshot waits unless it is that run's content.
fn held_by_policy<'a>(
    input: &StepInput<'a>,
    newest: &'a Snapshot,
    policy: OnNewSnapshot,
) -> Choice<'a> {
    let running = input
        .status
        .and_then(|status| running_snapshot(status, input.history));
    let runs_newest = input.status.is_some_and(|status| {
        runs_content_of(
            status.profile_spec_hash.as_deref(),
            status.stages_hash.as_deref(),
            newest,
        )
    });
    if runs_newest {
        return Choice {
            run: Some(newest),
            waiting: None,
            policy,
        };
    }
    Choice {
        run: running,
        waiting: Some(newest),
        policy,
    }
}

/// The snapshot the status says is running, from git history (its content must match).
pub(crate) fn running_snapshot<'a>(
    status: &PromotionStatus,
    history: &'a [Snapshot],
) -> Option<&'a Snapshot> {
    let index = status.snapshot_index?;
    history.iter().find(|s| {
        s.index == index
            && runs_content_of(
                status.profile_spec_hash.as_deref(),
                status.stages_hash.as_deref(),
                s,
            )
    })
}

/// A run is finished when its last stage succeeded or it failed under its policy (halted or
/// rolled back). A stage held for a fix (a foreign profile) is not finished.
pub(crate) fn finished(status: &PromotionStatus, running: &Snapshot) -> bool {
    if status.failure.is_some() || status.phase == Phase::Completed {
        return true;
    }
    let Some(last) = running.promotion.spec.stages.last() else {
        return true;
    };
    status
        .stage(&last.name)
        .is_some_and(|s| s.snapshot_index == running.index && s.succeeded_at.is_some())
}

/// The snapshots a new run skips over (FinishCurrent): after the one that ran, before `next`.
pub(crate) fn superseded(history: &[Snapshot], ran: Option<u64>, next: &Snapshot) -> Vec<u64> {
    let Some(ran) = ran else {
        return Vec::new();
    };
    history
        .iter()
        .map(|s| s.index)
        .filter(|&i| i > ran && i < next.index)
        .collect()
}
