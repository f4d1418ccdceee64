//! The chaos test's generated world: a fleet sharded by a `group` label, promotions whose stages
//! select one group each, and the plan the invariant checker compares the write log against.
#![allow(dead_code)] // the unit tests of `invariants` use a subset

pub mod blackout_invariants;
pub mod coordination_invariants;
pub mod failure_invariants;
pub mod invariants;
pub mod recovery_chaos_invariants;
pub mod recovery_invariants;
pub mod stand_ins;
pub mod trust_invariants;
pub mod wave_invariants;

use std::time::Duration;

use chrono::{DateTime, Utc};
use tollgate_fixtures::{cluster, fleet, promotion, stage};

/// Number of `group=g<k>` label values in the fleet.
pub const GROUPS: usize = 8;
/// Clusters per group.
pub const CLUSTERS_PER_GROUP: usize = 2;
/// Namespace of every fleet cluster.
pub const FLEET_NAMESPACE: &str = "fleet";

/// A small deterministic PRNG (SplitMix64): a failing seed replays the same fault schedule.
#[derive(Debug, Clone)]
pub struct SeededRng(u64);

/// Days since the epoch: chaos tests derive their seeds of the day from it (a new schedule every
/// day, replayable with `CHAOS_SEED`).
pub fn day() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() / 86_400)
}

/// The seed to run: `CHAOS_SEED` when set (a replay), else the test's own `default`.
pub fn seed_or(default: u64) -> u64 {
    std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Whether a seed is being replayed (`CHAOS_SEED` set): the tests of the day's seeds then skip,
/// and say so, since the fixed-seed tests replay it.
pub fn replaying() -> bool {
    let replaying = std::env::var_os("CHAOS_SEED").is_some();
    if replaying {
        println!("CHAOS_SEED is set: the seed is replayed by the fixed-seed test only");
    }
    replaying
}

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        SeededRng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }

    pub fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(self.between(low, high))
    }
}

/// What the checker knows about one stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StagePlan {
    pub name: String,
    /// `trigger.auto.delay` (zero when none): the wait after this stage is provisioned before the
    /// next stage may start.
    pub delay: Duration,
    pub manual: bool,
    /// The selector is `group: g<group>`.
    pub group: usize,
    /// `<namespace>/<cluster>` of every cluster the selector matches.
    pub clusters: Vec<String>,
}

/// What the checker knows about one promotion.
#[derive(Debug, Clone, PartialEq)]
pub struct PromotionPlan {
    pub name: String,
    pub stages: Vec<StagePlan>,
    /// The snapshot index every rollout must end on.
    pub final_snapshot: u64,
    /// When the approval commit was made (manual gates only): nothing past the gate may be
    /// applied before it.
    pub approved_at: Option<DateTime<Utc>>,
    /// Label `tier` (`rollback` or `halt`): the RolloutPolicy governing it, see [`POLICIES`].
    pub tier: Option<&'static str>,
    /// `tollgate.dev/depends-on`: the promotion whose stages this one's wait for.
    pub depends_on: Option<String>,
}

/// A cluster of group `g2` that Sveltos pauses until the faults stop.
pub const PAUSED_CLUSTER: &str = "fleet/g2-paused";

/// Chart versions the fleet fails on the clusters labelled `fails: "yes"` (odd groups).
pub const FAILING_CHART: &str = "9.9.0";

/// Two RolloutPolicies, chosen by the promotions' `tier` label.
pub const POLICIES: &str = "apiVersion: tollgate.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: rollback}
spec:
  selector: {matchLabels: {tier: rollback}}
  maxFailures: 0
  onFailure: Rollback
  stages:
    s0:
      waves: {size: 1, canary: 1}
---
apiVersion: tollgate.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: halt}
spec:
  selector: {matchLabels: {tier: halt}}
  maxFailures: 0
  onFailure: Halt
  stages:
    s1:
      waves: {size: 1, pause: 1s}
";

/// [`POLICIES`] with a blackout on the `halt` tier from `from` to `to` (UTC, whole seconds).
pub fn policies_with_halt_blackout(from: &str, to: &str) -> String {
    POLICIES.replace(
        "  onFailure: Halt\n",
        &format!(
            "  onFailure: Halt\n  blackouts:\n  - {{from: \"{from}\", to: \"{to}\", timeZone: UTC, reason: chaos freeze}}\n"
        ),
    )
}

impl PromotionPlan {
    /// Generated promotion `index`: 2–4 stages, each selecting one group; some stages wait 1–2 s;
    /// every tenth (from the fourth) has a manual gate on its first stage.
    pub fn generate(index: usize, rng: &mut SeededRng) -> PromotionPlan {
        let stage_count = 2 + (rng.between(0, 2) as usize);
        let manual = index % 10 == 3;
        let stages = (0..stage_count)
            .map(|s| {
                let group = (index + s) % GROUPS;
                let delay = match rng.between(0, 3) {
                    0 => Duration::from_secs(1),
                    1 => Duration::from_secs(2),
                    _ => Duration::ZERO,
                };
                StagePlan {
                    name: format!("s{s}"),
                    delay: if manual && s == 0 {
                        Duration::ZERO
                    } else {
                        delay
                    },
                    manual: manual && s == 0,
                    group,
                    clusters: (0..CLUSTERS_PER_GROUP)
                        .map(|c| format!("{FLEET_NAMESPACE}/g{group}-c{c}"))
                        .collect(),
                }
            })
            .collect();
        PromotionPlan {
            name: format!("chaos-{index:02}"),
            stages,
            final_snapshot: 1,
            approved_at: None,
            tier: match index % 10 {
                2 => Some("rollback"),
                7 => Some("halt"),
                _ => None,
            },
            // Each fifth-of-ten depends on the automatic, ungoverned promotion before it.
            depends_on: (index % 10 == 5).then(|| format!("chaos-{:02}", index - 1)),
        }
    }

    pub fn is_manual(&self) -> bool {
        self.stages.iter().any(|s| s.manual)
    }

    /// The manifest at `chart_version`, with the manual gate `approved` or not.
    pub fn manifest(&self, chart_version: &str, approved: bool) -> String {
        let mut manifest = promotion(&self.name).chart("app", chart_version);
        if let Some(tier) = self.tier {
            manifest = manifest.label("tier", tier);
        }
        if let Some(dependency) = &self.depends_on {
            manifest = manifest.annotation("tollgate.dev/depends-on", dependency);
        }
        for planned in &self.stages {
            let mut built = stage(&planned.name).selector("group", &format!("g{}", planned.group));
            if planned.manual {
                built = built.approved(approved);
            } else if !planned.delay.is_zero() {
                built = built.delay(&format!("{}s", planned.delay.as_secs()));
            }
            manifest = manifest.stage(built);
        }
        manifest.to_yaml()
    }
}

/// The fleet: `GROUPS × CLUSTERS_PER_GROUP` ready clusters labelled `group=g<k>`; those of odd
/// groups, labelled `fails: "yes"`, fail any chart at [`FAILING_CHART`].
pub fn fleet_yaml(latency: &str) -> String {
    let mut fleet = fleet().default_latency(latency).failure(
        FAILING_CHART,
        &[("fails", "yes")],
        "Helm",
        "chaos: the chart's values are broken",
    );
    for group in 0..GROUPS {
        for c in 0..CLUSTERS_PER_GROUP {
            let name = format!("g{group}-c{c}");
            let mut built = cluster(&name)
                .ns(FLEET_NAMESPACE)
                .label("group", &format!("g{group}"));
            if group % 2 == 1 {
                built = built.label("fails", "yes");
            }
            fleet = fleet.cluster(built);
        }
    }
    // In its maintenance window until the faults stop: its stages wait for it (never counting it
    // failed or timed out), then it gets the release.
    let (namespace, name) = PAUSED_CLUSTER.split_once('/').unwrap_or_default();
    fleet = fleet.cluster(cluster(name).ns(namespace).label("group", "g2").paused());
    fleet.to_yaml()
}
