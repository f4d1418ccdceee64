//! Invariants of the recovery chaos run (issue #45) that the write log alone does not hold:
//! - no measurement of an analysis run is closer than its `interval` to the previous one (a
//!   leader that takes over mid-analysis does not catch up in a burst), from the statuses in the
//!   write log;
//! - no notice is lost: once the receiver is up and every rollout completed, the final state of
//!   each stage (its `StageCompleted` of the final snapshot; `Completed` for the run) was
//!   accepted;
//! - no notice regressed: for each (promotion, stage), the notices accepted later never describe
//!   an earlier transition than one accepted before.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tollgate_emulator::WriteRecord;

use serde_json::Value;

/// One notice a receiver got (its JSON payload), and whether it accepted it.
#[derive(Clone, Debug)]
pub struct Got {
    pub body: Value,
    pub accepted: bool,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecoveryChaosViolation {
    #[error(
        "{promotion}/{stage}: analysis {analysis} (run started {started}) measured at {previous} then at {at}, closer than its interval {interval:?}"
    )]
    MeasuredTooSoon {
        promotion: String,
        stage: String,
        analysis: String,
        started: String,
        previous: DateTime<Utc>,
        at: DateTime<Utc>,
        interval: Duration,
    },
    #[error("{promotion}: {event} of stage {stage} for snapshot #{snapshot} was never accepted")]
    NoticeLost {
        promotion: String,
        stage: String,
        event: String,
        snapshot: u64,
    },
    #[error(
        "{promotion}/{stage}: {event} of {time} accepted after a notice of {newer} (an older state after a newer one)"
    )]
    NoticeRegressed {
        promotion: String,
        stage: String,
        event: String,
        time: DateTime<Utc>,
        newer: DateTime<Utc>,
    },
}

/// One analysis run: (promotion, stage, analysis and wave, run start).
type RunKey = (String, String, String, String);

/// Every measurement instant the statuses ever recorded, per analysis run, against `interval`.
pub fn check_measurement_spacing(
    log: &[WriteRecord],
    interval: Duration,
) -> Vec<RecoveryChaosViolation> {
    let mut runs: BTreeMap<RunKey, BTreeMap<u64, DateTime<Utc>>> = BTreeMap::new();
    for record in log
        .iter()
        .filter(|r| r.resource.starts_with("gitpromotions."))
    {
        let stages = record.object["status"]["stages"].as_array();
        for stage in stages.into_iter().flatten() {
            for run in stage["analyses"].as_array().into_iter().flatten() {
                let key = (
                    record.name.clone(),
                    stage["name"].as_str().unwrap_or_default().to_string(),
                    format!("{} wave {}", run["name"], run["wave"]),
                    run["startedAt"].as_str().unwrap_or_default().to_string(),
                );
                let taken = runs.entry(key).or_default();
                for measurement in run["measurements"].as_array().into_iter().flatten() {
                    let (Some(index), Some(at)) = (
                        measurement["index"].as_u64(),
                        measurement["at"]
                            .as_str()
                            .and_then(|at| at.parse::<DateTime<Utc>>().ok()),
                    ) else {
                        continue;
                    };
                    taken.entry(index).or_insert(at);
                }
            }
        }
    }
    let interval_chrono = chrono::Duration::from_std(interval).unwrap_or_default();
    let mut violations = Vec::new();
    for ((promotion, stage, analysis, started), taken) in runs {
        let instants: Vec<DateTime<Utc>> = taken.into_values().collect();
        for pair in instants.windows(2) {
            if pair[1] - pair[0] < interval_chrono {
                violations.push(RecoveryChaosViolation::MeasuredTooSoon {
                    promotion: promotion.clone(),
                    stage: stage.clone(),
                    analysis: analysis.clone(),
                    started: started.clone(),
                    previous: pair[0],
                    at: pair[1],
                    interval,
                });
            }
        }
    }
    violations
}

/// What a promotion's final run must have told: its stages, and the snapshot it ends on.
pub struct FinalRun<'a> {
    pub promotion: &'a str,
    pub stages: &'a [&'a str],
    pub snapshot: u64,
}

/// The notices the receiver accepted against the final runs: nothing lost, nothing regressed.
pub fn check_notices(got: &[Got], finals: &[FinalRun<'_>]) -> Vec<RecoveryChaosViolation> {
    let accepted: Vec<&Got> = got.iter().filter(|g| g.accepted).collect();
    let field = |g: &Got, name: &str| g.body[name].as_str().unwrap_or_default().to_string();
    let mut violations = Vec::new();
    let told: BTreeSet<(String, String, String, u64)> = accepted
        .iter()
        .map(|g| {
            (
                field(g, "promotion"),
                field(g, "stage"),
                field(g, "event"),
                g.body["snapshot"]["index"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    for run in finals {
        let last = run.stages.last().copied().unwrap_or_default();
        // The last stage's own completion may be folded into the run's `Completed` (the same
        // subject, a newer state): the run's completion is its final state.
        let mut owed: Vec<(&str, &str)> = run.stages[..run.stages.len().saturating_sub(1)]
            .iter()
            .map(|stage| (*stage, "StageCompleted"))
            .collect();
        owed.push((last, "Completed"));
        for (stage, event) in owed {
            let key = (
                run.promotion.to_string(),
                stage.to_string(),
                event.to_string(),
                run.snapshot,
            );
            if !told.contains(&key) {
                violations.push(RecoveryChaosViolation::NoticeLost {
                    promotion: run.promotion.to_string(),
                    stage: stage.to_string(),
                    event: event.to_string(),
                    snapshot: run.snapshot,
                });
            }
        }
    }
    let mut newest: BTreeMap<(String, String), DateTime<Utc>> = BTreeMap::new();
    for g in accepted {
        let Some(time) = g.body["time"]
            .as_str()
            .and_then(|t| t.parse::<DateTime<Utc>>().ok())
        else {
            continue;
        };
        let subject = (field(g, "promotion"), field(g, "stage"));
        match newest.get(&subject) {
            Some(newer) if time < *newer => {
                violations.push(RecoveryChaosViolation::NoticeRegressed {
                    promotion: subject.0.clone(),
                    stage: subject.1.clone(),
                    event: field(g, "event"),
                    time,
                    newer: *newer,
                });
            }
            _ => {
                newest.insert(subject, time);
            }
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn notice(event: &str, stage: &str, snapshot: u64, time: &str) -> Got {
        Got {
            body: json!({"promotion": "p", "stage": stage, "event": event,
                "snapshot": {"index": snapshot}, "time": time}),
            accepted: true,
        }
    }

    #[test]
    fn a_final_state_never_accepted_is_lost_and_an_older_state_after_a_newer_regressed() {
        let finals = [FinalRun {
            promotion: "p",
            stages: &["a", "b"],
            snapshot: 3,
        }];
        let got = [
            notice("StageCompleted", "a", 3, "2026-01-01T00:00:05Z"),
            notice("StageStarted", "a", 3, "2026-01-01T00:00:04Z"),
        ];
        let violations = check_notices(&got, &finals);
        assert!(
            violations
                .iter()
                .any(|v| matches!(v, RecoveryChaosViolation::NoticeLost { event, .. } if event == "Completed")),
            "{violations:?}"
        );
        assert!(
            violations
                .iter()
                .any(|v| matches!(v, RecoveryChaosViolation::NoticeRegressed { .. })),
            "{violations:?}"
        );
        let complete = [
            notice("StageCompleted", "a", 3, "2026-01-01T00:00:05Z"),
            notice("Completed", "b", 3, "2026-01-01T00:00:06Z"),
        ];
        assert!(check_notices(&complete, &finals).is_empty());
    }
}
