//! Failure-model invariants, checked over the emulator's write log (see `invariants.rs`):
//! - a rejected snapshot is never applied after its run failed (halt or rollback);
//! - a halted run applies nothing further: no profile of the promotion carrying the halted
//!   snapshot or an older one (a new commit's snapshot is newer), unless a retry re-drives it
//!   (`retry.tollgate.dev`, issue #34: a status shows the retry in progress);
//! - no stage fails with fewer failures than its budget allows, nor on timed-out clusters before
//!   its deadline;
//! - a stage the status calls restored carries, as last applied, the snapshot it was restored to;
//! - a rollback never restores a stage to the rejected snapshot itself.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_emulator::WriteRecord;
use tollgate_render::{PROMOTION_LABEL, SNAPSHOT_INDEX_ANNOTATION};

use super::invariants::CLOCK_GRANULARITY;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FailureViolation {
    #[error(
        "{promotion}: {profile} applied at {at} with snapshot {snapshot}, after snapshot {failed} failed ({on_failure}) at {failed_at}"
    )]
    AppliedAfterFailure {
        promotion: String,
        profile: String,
        at: DateTime<Utc>,
        snapshot: u64,
        failed: u64,
        on_failure: String,
        failed_at: DateTime<Utc>,
    },
    #[error(
        "{promotion}: stage {stage} reported restored to snapshot {to} at {at}, but its profile last got {last:?}"
    )]
    RestoredWrongly {
        promotion: String,
        stage: String,
        at: DateTime<Utc>,
        to: u64,
        last: Option<u64>,
    },
    #[error(
        "{promotion}: at {at} the rollback of snapshot {rejected} restores stage {stage} to that same snapshot"
    )]
    RollbackToRejected {
        promotion: String,
        stage: String,
        at: DateTime<Utc>,
        rejected: u64,
    },
    #[error(
        "{promotion}: stage {stage} failed at {at} with {failures} failed/timed-out clusters, within its budget of {allowed}"
    )]
    FailedWithinBudget {
        promotion: String,
        stage: String,
        at: DateTime<Utc>,
        failures: u64,
        allowed: u64,
    },
    #[error(
        "{promotion}: stage {stage} failed at {at} on timed-out clusters before its deadline {deadline:?}"
    )]
    FailedBeforeDeadline {
        promotion: String,
        stage: String,
        at: DateTime<Utc>,
        deadline: Option<DateTime<Utc>>,
    },
}

/// A run's failure as first persisted.
struct Failed {
    snapshot: u64,
    halted: bool,
    on_failure: String,
    at: DateTime<Utc>,
}

pub fn check_failures(log: &[WriteRecord]) -> Vec<FailureViolation> {
    // promotion → every failure persisted so far.
    let mut failed: HashMap<String, Vec<Failed>> = HashMap::new();
    // profile name → the snapshot its last apply carried.
    let mut last_applied: HashMap<String, u64> = HashMap::new();
    let mut violations = Vec::new();
    let retried = retried_runs(log);
    for record in log {
        if record.resource.starts_with("gitpromotions.") {
            let Some(failure) = record.object["status"]
                .get("failure")
                .filter(|f| f.is_object())
            else {
                continue;
            };
            violations.extend(check_restored(
                &record.name,
                record.time,
                failure,
                &last_applied,
            ));
            let Some(snapshot) = failure["snapshotIndex"].as_u64() else {
                continue;
            };
            violations.extend(check_rollback_targets(
                &record.name,
                record.time,
                snapshot,
                failure,
            ));
            let known = failed.entry(record.name.clone()).or_default();
            if known.iter().any(|f| f.snapshot == snapshot) {
                continue;
            }
            let on_failure = failure["onFailure"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            known.push(Failed {
                snapshot,
                halted: on_failure == "Halt",
                on_failure,
                at: record.time,
            });
            violations.extend(judge_failure(
                &record.name,
                record.time,
                &record.object["status"],
                failure,
            ));
        } else if record.resource.starts_with("clusterprofiles.")
            && record.verb != "delete"
            && record.field_manager == "tollgate"
        {
            let object = &record.object;
            let (Some(promotion), Some(snapshot)) = (
                object["metadata"]["labels"][PROMOTION_LABEL].as_str(),
                object["metadata"]["annotations"][SNAPSHOT_INDEX_ANNOTATION]
                    .as_str()
                    .and_then(|s| s.parse::<u64>().ok()),
            ) else {
                continue;
            };
            last_applied.insert(record.name.clone(), snapshot);
            for f in failed.get(promotion).into_iter().flatten() {
                let redriven = f.halted && retried.contains(&(promotion.to_string(), f.snapshot));
                let broken =
                    (snapshot == f.snapshot && !redriven) || (f.halted && snapshot < f.snapshot);
                if broken {
                    violations.push(FailureViolation::AppliedAfterFailure {
                        promotion: promotion.to_string(),
                        profile: record.name.clone(),
                        at: record.time,
                        snapshot,
                        failed: f.snapshot,
                        on_failure: f.on_failure.clone(),
                        failed_at: f.at,
                    });
                }
            }
        }
    }
    violations
}

/// (promotion, snapshot) of the halted runs a retry re-drove: a status of that run shows a stage
/// with a retry in progress and no failure.
fn retried_runs(log: &[WriteRecord]) -> std::collections::HashSet<(String, u64)> {
    log.iter()
        .filter(|r| r.resource.starts_with("gitpromotions."))
        .filter_map(|r| {
            let status = &r.object["status"];
            let retrying = status["stages"]
                .as_array()?
                .iter()
                .any(|s| s.get("retry").is_some_and(Value::is_object));
            let halted = status.get("failure").is_some_and(Value::is_object);
            (retrying && !halted)
                .then(|| Some((r.name.clone(), status["snapshotIndex"].as_u64()?)))?
        })
        .collect()
}

/// Every stage the rollback calls restored last got the snapshot it was restored to.
fn check_restored(
    promotion: &str,
    at: DateTime<Utc>,
    failure: &Value,
    last_applied: &HashMap<String, u64>,
) -> Vec<FailureViolation> {
    let restored = failure["rollback"].as_array().into_iter().flatten();
    restored
        .filter(|r| r.get("restoredAt").is_some_and(|t| !t.is_null()))
        .filter_map(|r| Some((r["name"].as_str()?, r["toSnapshot"].as_u64()?)))
        .filter_map(|(stage, to)| {
            let last = last_applied.get(&format!("{promotion}-{stage}")).copied();
            (last != Some(to)).then(|| FailureViolation::RestoredWrongly {
                promotion: promotion.to_string(),
                stage: stage.to_string(),
                at,
                to,
                last,
            })
        })
        .collect()
}

/// No stage is to be restored to the snapshot being rolled back.
fn check_rollback_targets(
    promotion: &str,
    at: DateTime<Utc>,
    rejected: u64,
    failure: &Value,
) -> Vec<FailureViolation> {
    let plan = failure["rollback"].as_array().into_iter().flatten();
    plan.filter(|r| r["toSnapshot"].as_u64() == Some(rejected))
        .map(|r| FailureViolation::RollbackToRejected {
            promotion: promotion.to_string(),
            stage: r["name"].as_str().unwrap_or_default().to_string(),
            at,
            rejected,
        })
        .collect()
}

/// The failing stage spent its budget, and did not time clusters out early.
fn judge_failure(
    promotion: &str,
    at: DateTime<Utc>,
    status: &Value,
    failure: &Value,
) -> Option<FailureViolation> {
    let stage_name = failure["stage"].as_str()?;
    let stage = status["stages"]
        .as_array()?
        .iter()
        .find(|s| s["name"].as_str() == Some(stage_name))?;
    let counts = &stage["counts"];
    let failed = counts["failed"].as_u64().unwrap_or(0);
    let timed_out = counts["timedOut"].as_u64().unwrap_or(0);
    let allowed = stage["allowedFailures"].as_u64().unwrap_or(0);
    if failed + timed_out <= allowed {
        return Some(FailureViolation::FailedWithinBudget {
            promotion: promotion.to_string(),
            stage: stage_name.to_string(),
            at,
            failures: failed + timed_out,
            allowed,
        });
    }
    if failed <= allowed {
        // The budget was spent by timeouts: only at or after the deadline.
        let deadline = stage["deadline"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc));
        let granularity = chrono::Duration::from_std(CLOCK_GRANULARITY).unwrap_or_default();
        if deadline.is_none_or(|d| at + granularity < d) {
            return Some(FailureViolation::FailedBeforeDeadline {
                promotion: promotion.to_string(),
                stage: stage_name.to_string(),
                at,
                deadline,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn t(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(1_700_000_000 + seconds)
    }

    fn record(at: i64, resource: &str, name: &str, object: Value) -> WriteRecord {
        WriteRecord {
            time: t(at),
            verb: "apply".into(),
            resource: resource.into(),
            status_subresource: resource.starts_with("gitpromotions"),
            namespace: String::new(),
            name: name.into(),
            field_manager: "tollgate".into(),
            user_agent: String::new(),
            resource_version: 0,
            object,
        }
    }

    fn apply(at: i64, snapshot: u64) -> WriteRecord {
        record(
            at,
            "clusterprofiles.config.projectsveltos.io",
            "p-s0",
            json!({"metadata": {"labels": {PROMOTION_LABEL: "p"},
                "annotations": {SNAPSHOT_INDEX_ANNOTATION: snapshot.to_string()}}}),
        )
    }

    fn failed(
        at: i64,
        on_failure: &str,
        failed: u64,
        timed_out: u64,
        deadline: i64,
    ) -> WriteRecord {
        record(
            at,
            "gitpromotions.tollgate.dev",
            "p",
            json!({"status": {"snapshotIndex": 2,
                "stages": [{"name": "s0", "allowedFailures": 0, "deadline": t(deadline).to_rfc3339(),
                    "counts": {"failed": failed, "timedOut": timed_out}}],
                "failure": {"stage": "s0", "snapshotIndex": 2, "onFailure": on_failure}}}),
        )
    }

    #[test]
    fn nothing_applied_after_a_halt() {
        let log = [
            apply(0, 2),
            failed(1, "Halt", 1, 0, 100),
            apply(2, 1),
            apply(3, 3),
        ];
        let violations = check_failures(&log);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(matches!(
            &violations[0],
            FailureViolation::AppliedAfterFailure { snapshot: 1, .. }
        ));
    }

    #[test]
    fn a_rejected_snapshot_is_never_applied_after_its_rollback() {
        let log = [
            apply(0, 2),
            failed(1, "Rollback", 1, 0, 100),
            apply(2, 1),
            apply(3, 2),
        ];
        let violations = check_failures(&log);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(matches!(
            &violations[0],
            FailureViolation::AppliedAfterFailure { snapshot: 2, .. }
        ));
    }

    #[test]
    fn a_stage_restored_with_the_wrong_snapshot_is_caught() {
        let restored = |at| {
            record(
                at,
                "gitpromotions.tollgate.dev",
                "p",
                json!({"status": {"snapshotIndex": 2, "stages": [],
                    "failure": {"stage": "s0", "snapshotIndex": 2, "onFailure": "Rollback",
                        "rollback": [{"name": "s0", "toSnapshot": 1, "restoredAt": t(at).to_rfc3339()}]}}}),
            )
        };
        let wrong = [apply(0, 2), restored(1)];
        assert!(matches!(
            check_failures(&wrong)[..],
            [FailureViolation::RestoredWrongly { last: Some(2), .. }]
        ));
        let right = [apply(0, 2), apply(1, 1), restored(2)];
        assert_eq!(check_failures(&right), vec![]);
    }

    #[test]
    fn a_rollback_to_the_rejected_snapshot_is_caught() {
        let rolling_back = |to: u64| {
            record(
                1,
                "gitpromotions.tollgate.dev",
                "p",
                json!({"status": {"snapshotIndex": 2, "stages": [],
                    "failure": {"stage": "s1", "snapshotIndex": 2, "onFailure": "Rollback",
                        "rollback": [{"name": "s1", "toSnapshot": to}]}}}),
            )
        };
        assert!(matches!(
            check_failures(&[apply(0, 2), rolling_back(2)])[..],
            [FailureViolation::RollbackToRejected { rejected: 2, .. }]
        ));
        assert_eq!(check_failures(&[apply(0, 2), rolling_back(1)]), vec![]);
    }

    #[test]
    fn no_stage_fails_within_its_budget_or_before_its_deadline() {
        assert!(matches!(
            check_failures(&[failed(1, "Halt", 0, 0, 0)])[..],
            [FailureViolation::FailedWithinBudget { .. }]
        ));
        assert!(matches!(
            check_failures(&[failed(1, "Halt", 0, 1, 100)])[..],
            [FailureViolation::FailedBeforeDeadline { .. }]
        ));
        assert_eq!(check_failures(&[failed(100, "Halt", 0, 1, 100)]), vec![]);
        assert_eq!(check_failures(&[failed(1, "Halt", 1, 0, 100)]), vec![]);
    }
}
