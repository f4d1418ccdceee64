//! The estimate as the report carries it, the same in text, JSON and Markdown: how long the run
//! a change starts takes from the plan's `now`, typically (each stage's median provisioning in the
//! run history) and as a range meant to hold the real run (each stage's 10th, then 90th
//! percentile), when it ends, and what that rests on. The median is no bound: about half of all
//! runs end before it, so the p50–p90 range holds about half of them (docs/cli.md, `plan`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tollgate_engine::simulate::{Simulation, SimulationEnd};
use tollgate_model::duration::format_go_duration;

use super::estimate::{Estimate, PROVISIONING_LATENCY};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EstimateReport {
    /// From the plan's `now` to the run's end, with each stage's 10th-percentile provisioning:
    /// the fast end of the range.
    pub p10_seconds: i64,
    /// The same with each stage's median provisioning: the typical duration.
    pub p50_seconds: i64,
    /// The same with each stage's 90th-percentile provisioning: the slow end of the range.
    pub p90_seconds: i64,
    pub end_p10: DateTime<Utc>,
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
    /// Every recorded stage has one provisioning: p10, p50 and p90 are that one.
    #[serde(skip)]
    one_sample_each: bool,
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

/// `s` with `run` or `runs` after it.
fn recorded_runs(runs: usize) -> String {
    match runs {
        1 => "1 recorded run".to_string(),
        runs => format!("{runs} recorded runs"),
    }
}

/// `2026-01-02 03:05:04`, or only the time when `instant` is on `day`'s date.
fn time_on(instant: DateTime<Utc>, day: DateTime<Utc>) -> String {
    match instant.date_naive() == day.date_naive() {
        true => instant.format("%H:%M:%S").to_string(),
        false => instant.format("%Y-%m-%d %H:%M:%S").to_string(),
    }
}

impl EstimateReport {
    pub fn of(estimate: &Estimate, snapshot: u64, now: DateTime<Utc>) -> Self {
        let end_p10 = estimate.p10.end.at();
        let (end_p50, end_p90) = (estimate.p50.end.at(), estimate.p90.end.at());
        let fleet_assumed = estimate.p50.fleet_assumed;
        let by_stage = &estimate.history.by_stage;
        let mut report = EstimateReport {
            p10_seconds: rounded_seconds(end_p10 - now),
            p50_seconds: rounded_seconds(end_p50 - now),
            p90_seconds: rounded_seconds(end_p90 - now),
            end_p10,
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
            one_sample_each: by_stage.values().all(|stage| stage.samples.len() == 1),
        };
        report.basis = report.basis_words();
        report
    }

    fn basis_words(&self) -> String {
        let assumed = seconds(self.assumed_provisioning_seconds);
        let recorded = match self.one_sample_each {
            true => format!(
                "each stage's one provisioning in {}: no range",
                recorded_runs(self.runs)
            ),
            false => format!(
                "p10, p50 and p90 of each stage's provisioning in {}",
                recorded_runs(self.runs)
            ),
        };
        let mut parts = vec![match (self.runs, self.assumed_stages.is_empty()) {
            (0, _) if self.fleet_assumed => format!(
                "assumed {assumed} per provisioning: no run history, the management cluster was not read"
            ),
            (0, _) => format!("assumed {assumed} per provisioning: no run history"),
            (_, true) => recorded,
            (_, false) => format!(
                "{recorded}; assumed {assumed} per provisioning of {} (none recorded)",
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

    /// The three differ to the second shown: the estimate is a range, not one value.
    fn is_range(&self) -> bool {
        self.p10_seconds != self.p90_seconds
    }

    /// How long: `1m2s typical, 55s–1m10s (p10–p90)`, or one value when the three agree.
    fn durations(&self) -> String {
        let typical = seconds(self.p50_seconds);
        match self.is_range() {
            false => typical,
            true => format!(
                "{typical} typical, {}–{} (p10–p90)",
                seconds(self.p10_seconds),
                seconds(self.p90_seconds)
            ),
        }
    }

    /// When: `2026-01-02 03:05:04 UTC, 03:04:57–03:05:15` (typical, then the range), or one
    /// instant when the three agree.
    fn ends_at(&self) -> String {
        let typical = self.end_p50.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        match self.is_range() {
            false => typical,
            true => format!(
                "{typical}, {}–{}",
                time_on(self.end_p10, self.end_p50),
                time_on(self.end_p90, self.end_p50)
            ),
        }
    }

    /// The estimate in a line: `1m2s typical, 55s–1m10s (p10–p90); ends 2026-01-02 03:05:04
    /// UTC, 03:04:57–03:05:15 (p10, p50 and p90 of …)`, or `59s, ends 2026-01-02 03:05:01 UTC
    /// (…)` when the three agree.
    pub fn line(&self) -> String {
        let (durations, ends) = (self.durations(), self.ends_at());
        let then = match self.is_range() {
            false => ",",
            true => ";",
        };
        let what = match self.ends {
            "completed" => format!("{durations}{then} ends {ends}"),
            "failed" => format!("fails after {durations}{then} at {ends}"),
            "stuck" => format!("does not go on by itself after {durations}{then} from {ends}"),
            _ => format!("more than {durations} (too many steps to simulate)"),
        };
        format!("{what} ({})", self.basis)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(hour: u32, minute: u32, second: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 2, hour, minute, second)
            .unwrap()
    }

    /// From 03:04:02, ends at `ends` (p10, p50, p90), 5 recorded runs, nothing assumed.
    fn report(ends: [DateTime<Utc>; 3], one_sample_each: bool) -> EstimateReport {
        let now = at(3, 4, 2);
        let mut report = EstimateReport {
            p10_seconds: (ends[0] - now).num_seconds(),
            p50_seconds: (ends[1] - now).num_seconds(),
            p90_seconds: (ends[2] - now).num_seconds(),
            end_p10: ends[0],
            end_p50: ends[1],
            end_p90: ends[2],
            ends: "completed",
            runs: if one_sample_each { 1 } else { 5 },
            assumed_stages: Vec::new(),
            assumed_provisioning_seconds: 60,
            fleet_assumed: false,
            assumed_waves: BTreeMap::new(),
            basis: String::new(),
            one_sample_each,
        };
        report.basis = report.basis_words();
        report
    }

    #[test]
    fn the_typical_duration_then_the_range_meant_to_hold() {
        let report = report([at(3, 4, 57), at(3, 5, 4), at(3, 5, 12)], false);
        assert_eq!(
            report.line(),
            "1m2s typical, 55s–1m10s (p10–p90); ends 2026-01-02 03:05:04 UTC, 03:04:57–03:05:12 \
             (p10, p50 and p90 of each stage's provisioning in 5 recorded runs)"
        );
    }

    #[test]
    fn one_recorded_provisioning_per_stage_is_one_value_and_says_so() {
        let end = at(3, 5, 4);
        let report = report([end; 3], true);
        assert_eq!(
            report.line(),
            "1m2s, ends 2026-01-02 03:05:04 UTC (each stage's one provisioning in 1 recorded run: \
             no range)"
        );
    }

    /// Ends apart by less than the second the durations show are one instant too.
    #[test]
    fn ends_apart_by_milliseconds_are_one_instant() {
        let end = at(3, 5, 4);
        let mut report = report([end; 3], false);
        report.end_p90 = end + chrono::Duration::milliseconds(400);
        assert_eq!(
            report.line(),
            "1m2s, ends 2026-01-02 03:05:04 UTC (p10, p50 and p90 of each stage's provisioning \
             in 5 recorded runs)"
        );
    }

    /// A range across midnight names the other day; a failing run says when it fails.
    #[test]
    fn an_end_on_another_day_carries_its_date() {
        let next_day = Utc.with_ymd_and_hms(2026, 1, 3, 0, 0, 30).unwrap();
        let mut report = report([at(23, 59, 50), at(23, 59, 59), next_day], false);
        assert!(
            report
                .line()
                .contains("; ends 2026-01-02 23:59:59 UTC, 23:59:50–2026-01-03 00:00:30 ("),
            "{}",
            report.line()
        );
        report.ends = "failed";
        assert!(
            report.line().starts_with("fails after 20h55m57s typical, "),
            "{}",
            report.line()
        );
    }
}
