//! The estimated timeline of the run a change starts: the engine's own `simulate`, run from the
//! snapshot at `to` with the RolloutPolicy, the approvals in git, the fleet and the promotion's
//! live status (when the management cluster was read) and `now`. Blackouts in force, windows,
//! waves and their pauses and `onNewSnapshot` take the time the controller will give them; only
//! how long Sveltos takes is not known. It is taken from the run history the status keeps: the
//! simulation runs three times, with each stage's median provisioning (p50, the typical run) and
//! its 10th and 90th percentiles (p10 and p90, the range meant to hold the real run); a stage
//! with no recorded provisioning is assumed to take [`PROVISIONING_LATENCY`].

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use tollgate_engine::provisioning_history::{
    ProvisioningHistory, StageProvisioning, provisioning_history,
};
use tollgate_engine::simulate::{
    DEFAULT_MAX_STEPS, ProvisioningLatency, Simulation, SimulationInput, simulate,
};
use tollgate_engine::{Preview, PromotionStatus, RunChange};
use tollgate_source::plan::PromotionPlan;

use super::targets::Fleet;

/// How long the estimate assumes Sveltos takes to provision a stage's (or a wave's) clusters
/// when the run history has no provisioning of that stage.
pub const PROVISIONING_LATENCY: Duration = Duration::minutes(1);

/// The run a change starts, simulated with the 10th-percentile, the median and the
/// 90th-percentile provisioning.
pub struct Estimate {
    pub p10: Simulation,
    pub p50: Simulation,
    pub p90: Simulation,
    /// What the provisioning times come from.
    pub history: ProvisioningHistory,
    /// The stages of the run with no recorded provisioning ([`PROVISIONING_LATENCY`] assumed).
    pub assumed_stages: Vec<String>,
}

/// The estimate of the run `plan` starts, if it starts one.
pub fn estimate(
    plan: &PromotionPlan,
    preview: &Preview,
    fleet: &Fleet,
    now: DateTime<Utc>,
) -> Option<Estimate> {
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
    // Without it, the run is estimated as if nothing ran before it.
    let status = fleet.status(&plan.name);
    let provisioning = status.map_or_else(ProvisioningHistory::default, |s: &PromotionStatus| {
        provisioning_history(&s.runs)
    });
    let run = |pick: fn(&StageProvisioning) -> Duration| {
        let by_stage: BTreeMap<String, Duration> = provisioning.latencies(pick);
        simulate(&SimulationInput {
            snapshot,
            approvals: &plan.approvals,
            history: &history,
            policy: plan.policy.as_deref(),
            policy_problem: plan.policy_error.as_deref(),
            status,
            fleet: fleet.clusters(),
            now,
            provisioning_latency: ProvisioningLatency {
                default: PROVISIONING_LATENCY,
                by_stage: &by_stage,
            },
            max_steps: DEFAULT_MAX_STEPS,
        })
    };
    let (p10, p50, p90) = (run(|s| s.p10), run(|s| s.p50), run(|s| s.p90));
    let assumed_stages = (snapshot.promotion.spec.stages.iter())
        .filter(|stage| !provisioning.by_stage.contains_key(&stage.name))
        .map(|stage| stage.name.clone())
        .collect();
    Some(Estimate {
        p10,
        p50,
        p90,
        history: provisioning,
        assumed_stages,
    })
}
