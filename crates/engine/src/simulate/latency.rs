//! How long the simulated Sveltos takes to provision: one latency for every stage, or one per
//! stage (from the run history, `status::provisioning_history`) with a default for the others.

use std::collections::{BTreeMap, HashMap};

use chrono::Duration;
use tollgate_render::stage_profile_name;

/// No per-stage latencies: every stage takes the default.
static NO_STAGE_LATENCIES: BTreeMap<String, Duration> = BTreeMap::new();

/// The provisioning latency of each stage (a wave's provisioning takes its stage's).
#[derive(Clone, Copy, Debug)]
pub struct ProvisioningLatency<'a> {
    /// The latency of a stage not in `by_stage`.
    pub default: Duration,
    /// Per stage name.
    pub by_stage: &'a BTreeMap<String, Duration>,
}

impl ProvisioningLatency<'static> {
    /// The same latency for every stage.
    pub fn constant(latency: Duration) -> Self {
        ProvisioningLatency {
            default: latency,
            by_stage: &NO_STAGE_LATENCIES,
        }
    }
}

impl From<Duration> for ProvisioningLatency<'static> {
    fn from(latency: Duration) -> Self {
        ProvisioningLatency::constant(latency)
    }
}

impl ProvisioningLatency<'_> {
    pub fn of_stage(&self, stage: &str) -> Duration {
        self.by_stage
            .get(stage)
            .copied()
            .unwrap_or(self.default)
            .max(Duration::zero())
    }

    /// Per profile name of `promotion`'s stages (what the simulated Sveltos sees), the latency.
    pub(crate) fn by_profile<'s>(
        &self,
        promotion: &str,
        stages: impl IntoIterator<Item = &'s str>,
    ) -> HashMap<String, Duration> {
        stages
            .into_iter()
            .map(|stage| (stage_profile_name(promotion, stage), self.of_stage(stage)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_without_its_own_latency_takes_the_default() {
        let by_stage = BTreeMap::from([("prod".to_string(), Duration::seconds(20))]);
        let latency = ProvisioningLatency {
            default: Duration::minutes(1),
            by_stage: &by_stage,
        };
        assert_eq!(latency.of_stage("prod"), Duration::seconds(20));
        assert_eq!(latency.of_stage("dev"), Duration::minutes(1));
        let profiles = latency.by_profile("app", ["dev", "prod"]);
        assert_eq!(profiles["app-prod"], Duration::seconds(20));
        assert_eq!(profiles["app-dev"], Duration::minutes(1));
    }
}
