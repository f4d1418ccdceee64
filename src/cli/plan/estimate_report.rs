//! The estimate as the report carries it, the same in text, JSON and Markdown: how long the run
//! a change starts takes from the plan's `now`, as a range (each stage's median provisioning in
//! the run history, then its 90th percentile), when it ends, and what that rests on.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tollgate_engine::simulate::{Simulation, SimulationEnd};
use tollgate_model::duration::format_go_duration;

use super::estimate::{Estimate, PROVISIONING_LATENCY};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EstimateReport {
    /// From the plan's `now` to the run's end, with each stage's median provisioning.
    pub p50_seconds: i64,
    /// The same with each stage's 90th-percentile provisioning.
    pub p90_seconds: i64,
    pub end_p50: DateTime<Utc>,
    pub end_p90: DateTime<Utc>,
    /// How the simulated run ends: `completed`, `failed`, `stuck` (it does not go on by itself)
    /// or `stepLimit`.
    pub ends: &'static str,
    /// The recorded runs the provisioning times come from (0: none).
    pub runs: usize,
    /// Stages with no recorded provisioning: each provisioning assumed to take
    /// `assumedProvisioningSeconds`.
    pub assumed_stages: Vec<String>,
    pub assumed_provisioning_seconds: i64,
    /// The management cluster was not read: the clusters, so the waves, are assumed.
    pub fleet_assumed: bool,
    /// With `fleetAssumed`: the waves each waved stage was assumed to have.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub assumed_waves: BTreeMap<String, u32>,
    /// What the range rests on, in words (as text and Markdown print it).
    pub basis: String,
}

fn end_kind(end: &SimulationEnd) -> &'static str {
    match end {
        SimulationEnd::Completed { .. } => "completed",
        SimulationEnd::Failed { .. } => "failed",
        SimulationEnd::Stuck { .. } => "stuck",
        SimulationEnd::StepLimit { .. } => "stepLimit",
    }
}

/// The waves each waved stage has in the simulated run of `snapshot`.
fn waves(simulation: &Simulation, snapshot: u64) -> BTreeMap<String, u32> {
    let Some(run) = simulation.run_of(snapshot) else {
        return BTreeMap::new();
    };
    run.stages
        .iter()
        .filter_map(|stage| {
            let of = (stage.activities.iter())
                .filter_map(|span| span.activity.wave())
                .map(|wave| wave.of)
                .max()?;
            Some((stage.name.clone(), of))
        })
        .collect()
}

/// To the nearest second.
fn rounded_seconds(duration: chrono::Duration) -> i64 {
    (duration.num_milliseconds() + 500).div_euclid(1000)
}

/// `2m`, `1m30s`: whole seconds, as a policy writes durations.
pub fn seconds(seconds: i64) -> String {
    format_go_duration(std::time::Duration::from_secs(seconds.max(0) as u64))
}

impl EstimateReport {
    pub fn of(estimate: &Estimate, snapshot: u64, now: DateTime<Utc>) -> Self {
        let (end_p50, end_p90) = (estimate.p50.end.at(), estimate.p90.end.at());
        let fleet_assumed = estimate.p50.fleet_assumed;
        let mut report = EstimateReport {
            p50_seconds: rounded_seconds(end_p50 - now),
            p90_seconds: rounded_seconds(end_p90 - now),
            end_p50,
            end_p90,
            ends: end_kind(&estimate.p90.end),
            runs: estimate.history.runs,
            assumed_stages: estimate.assumed_stages.clone(),
            assumed_provisioning_seconds: PROVISIONING_LATENCY.num_seconds(),
            fleet_assumed,
            assumed_waves: match fleet_assumed {
                true => waves(&estimate.p50, snapshot),
                false => BTreeMap::new(),
            },
            basis: String::new(),
        };
        report.basis = report.basis_words();
        report
    }

    fn basis_words(&self) -> String {
        let assumed = seconds(self.assumed_provisioning_seconds);
        let mut parts = vec![match (self.runs, self.assumed_stages.is_empty()) {
            (0, _) if self.fleet_assumed => format!(
                "assumed {assumed} per provisioning: no run history, the management cluster was not read"
            ),
            (0, _) => format!("assumed {assumed} per provisioning: no run history"),
            (runs, true) => format!("p50–p90 of provisioning in {runs} recorded runs"),
            (runs, false) => format!(
                "p50–p90 of provisioning in {runs} recorded runs; assumed {assumed} per provisioning of {} (none recorded)",
                self.assumed_stages.join(", ")
            ),
        }];
        if self.fleet_assumed {
            let waves: Vec<String> = (self.assumed_waves.iter())
                .map(|(stage, of)| format!("{stage} {of} waves"))
                .collect();
            parts.push(match waves.is_empty() {
                true => "one cluster per stage assumed".to_string(),
                false => format!(
                    "one cluster per stage assumed, one per wave: {}",
                    waves.join(", ")
                ),
            });
        }
        parts.join("; ")
    }

    /// The estimate in a line: `59s–1m10s, ends 12:01:00–12:01:11 UTC (p50–p90 of …)`.
    pub fn line(&self) -> String {
        let range = match self.p50_seconds == self.p90_seconds {
            true => seconds(self.p50_seconds),
            false => format!(
                "{}–{}",
                seconds(self.p50_seconds),
                seconds(self.p90_seconds)
            ),
        };
        let ends = match self.end_p50 == self.end_p90 {
            true => self.end_p50.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            false => format!(
                "{}–{}",
                self.end_p50.format("%Y-%m-%d %H:%M:%S"),
                self.end_p90.format("%H:%M:%S UTC")
            ),
        };
        let what = match self.ends {
            "completed" => format!("{range}, ends {ends}"),
            "failed" => format!("fails after {range}, at {ends}"),
            "stuck" => format!("does not go on by itself after {range}, from {ends}"),
            _ => format!("more than {range} (too many steps to simulate)"),
        };
        format!("{what} ({})", self.basis)
    }
}
