//! Each promotion's plan beside the engine's preview of what it does to the rollout: what the
//! report's facts and words are read from.

use chrono::{DateTime, Utc};
use tollgate_engine::{Preview, PreviewInput, PromotionStatus, RunChange, preview};
use tollgate_manifest::Snapshot;
use tollgate_source::plan::{PlanStatus, PromotionPlan, RangePlan};

use super::targets::Fleet;
use crate::controller::desired::{InGit, Translation};

/// The engine's preview of one promotion's change at `now`, with its live status when the cluster
/// was read: what it does to the rollout.
fn preview_of(
    plan: &PromotionPlan,
    now: DateTime<Utc>,
    status: Option<&PromotionStatus>,
) -> Preview {
    // Read as the controller reads git (one translation for both).
    let after = Translation::new(&plan.name, InGit::of_plan(plan));
    let history: Vec<Snapshot> = plan
        .before
        .iter()
        .chain(&plan.after)
        .map(|s| (**s).clone())
        .collect();
    preview(&PreviewInput {
        before: plan.before.as_deref(),
        after: after.desired(),
        approvals: &plan.approvals,
        status,
        history: &history,
        policy: plan.policy.as_deref(),
        policy_problem: plan.policy_error.as_deref(),
        now,
    })
}

/// A promotion's plan beside the engine's preview of it.
pub struct Planned<'p> {
    pub plan: &'p PromotionPlan,
    pub preview: Preview,
}

/// Each promotion's plan and preview; `fleet` (Markdown only) gives the live statuses.
pub fn planned<'p>(
    plan: &'p RangePlan,
    now: DateTime<Utc>,
    fleet: Option<&Fleet>,
) -> Vec<Planned<'p>> {
    plan.promotions
        .iter()
        .map(|p| Planned {
            plan: p,
            preview: preview_of(p, now, fleet.and_then(|f| f.status(&p.name))),
        })
        .collect()
}

/// The one-word outcome, as the JSON `status` and the summary counts name it.
pub fn outcome(planned: &Planned<'_>) -> &'static str {
    match (&planned.preview.run, planned.plan.status) {
        (_, PlanStatus::Recovered) => "recovered",
        (RunChange::Starts, _) => "added",
        (RunChange::Restarts { .. }, _) => "restart",
        (RunChange::Continues, PlanStatus::Unchanged) => "unchanged",
        (RunChange::Continues, _) => "trigger-only",
        (RunChange::Invalid { .. }, _) => "invalid",
        (RunChange::Removed, _) => "removed",
    }
}

/// Whether the change touches the run at all (an unchanged promotion lists no gates).
pub fn touched(planned: &Planned<'_>) -> bool {
    planned.plan.status != PlanStatus::Unchanged
}

/// The snapshot a new run would run, when the change starts one (the timeline is that run's).
pub fn new_run_snapshot<'p>(planned: &Planned<'p>) -> Option<&'p tollgate_manifest::Snapshot> {
    match planned.plan.status {
        PlanStatus::Removed | PlanStatus::Invalid => None,
        _ => planned.plan.after.as_deref(),
    }
}
