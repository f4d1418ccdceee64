//! The estimated timeline of the run a change starts: the engine's own `simulate`, run from the
//! snapshot at `to` with the RolloutPolicy, the approvals in git, the fleet and the promotion's
//! live status (when the management cluster was read) and `now`. Blackouts in force, windows,
//! waves and their pauses and `onNewSnapshot` take the time the controller will give them; only
//! how long Sveltos takes is assumed.

use chrono::{DateTime, Duration, Utc};
use tollgate_engine::simulate::{DEFAULT_MAX_STEPS, Simulation, SimulationInput, simulate};
use tollgate_engine::{Preview, RunChange};
use tollgate_source::plan::PromotionPlan;

use super::targets::Fleet;

/// How long the estimate assumes Sveltos takes to provision a stage's (or a wave's) clusters.
pub const PROVISIONING_LATENCY: Duration = Duration::minutes(1);

/// The simulation of the run `plan` starts, if it starts one.
pub fn estimate(
    plan: &PromotionPlan,
    preview: &Preview,
    fleet: &Fleet,
    now: DateTime<Utc>,
) -> Option<Simulation> {
    if !matches!(preview.run, RunChange::Starts | RunChange::Restarts { .. }) {
        return None;
    }
    let snapshot = plan.after.as_deref()?;
    // The run going on: `from`'s snapshot (`onNewSnapshot` may let it finish first).
    let history: Vec<_> = plan
        .before
        .as_deref()
        .filter(|before| before.index < snapshot.index)
        .into_iter()
        .chain(std::iter::once(snapshot))
        .cloned()
        .collect();
    Some(simulate(&SimulationInput {
        snapshot,
        approvals: &plan.approvals,
        history: &history,
        policy: plan.policy.as_deref(),
        policy_problem: plan.policy_error.as_deref(),
        // Without it, the run is estimated as if nothing ran before it.
        status: fleet.status(&plan.name),
        fleet: fleet.clusters(),
        now,
        provisioning_latency: PROVISIONING_LATENCY,
        max_steps: DEFAULT_MAX_STEPS,
    }))
}
