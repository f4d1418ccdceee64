//! The blackout invariant, checked over the emulator's write log (see `invariants.rs`): nothing
//! passes a blackout except a rollback to a completed snapshot. Inside a blackout no stage starts
//! a new snapshot and no stage starts its next wave; a run already in a stage goes on (re-applies
//! of the same snapshot and clusters), a failure rollback restores what a stage ran before, and a
//! rollback run restores content that completed a run of the promotion.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_emulator::WriteRecord;
use tollgate_render::{
    PROMOTION_LABEL, SNAPSHOT_INDEX_ANNOTATION, STAGE_LABEL, VERIFICATION_LABEL,
};

/// A decision made just before a blackout begins may land a little after it: a write's latency,
/// and up to three 429 retries after the server's `Retry-After` within the same step.
pub const LANDING_GRACE: Duration = Duration::from_secs(5);

/// A blackout in force for some promotions (by name), `from` ≤ t < `to`.
#[derive(Clone, Debug)]
pub struct BlackoutWindow {
    pub promotions: BTreeSet<String>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BlackoutViolation {
    #[error(
        "{promotion}/{stage} started {what} (snapshot {snapshot}) at {at}, inside a blackout from {from} to {to}, and it is no rollback to a completed snapshot"
    )]
    StartedInBlackout {
        promotion: String,
        stage: String,
        snapshot: u64,
        what: &'static str,
        at: DateTime<Utc>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    },
}

/// What the log showed last of a promotion's status.
#[derive(Default)]
struct Known {
    status: Value,
    /// Snapshots whose run completed (a `Completed` phase or a `Completed` verdict).
    completed: BTreeSet<u64>,
}

/// What a stage profile carried at its last apply.
struct Applied {
    snapshot: u64,
    targets: Option<BTreeSet<String>>,
}

pub fn check_blackouts(log: &[WriteRecord], windows: &[BlackoutWindow]) -> Vec<BlackoutViolation> {
    let mut known: HashMap<String, Known> = HashMap::new();
    let mut applied: HashMap<String, Applied> = HashMap::new();
    let mut violations = Vec::new();
    for record in log {
        if record.resource.starts_with("gitpromotions.") && record.status_subresource {
            note_status(
                known.entry(record.name.clone()).or_default(),
                &record.object,
            );
            continue;
        }
        let profile = record.resource.starts_with("clusterprofiles.")
            && record.verb != "delete"
            && record.field_manager == "tollgate";
        let labels = &record.object["metadata"]["labels"];
        if !profile || labels[VERIFICATION_LABEL].is_string() {
            continue;
        }
        let (Some(promotion), Some(stage), Some(snapshot)) = (
            labels[PROMOTION_LABEL].as_str(),
            labels[STAGE_LABEL].as_str(),
            record.object["metadata"]["annotations"][SNAPSHOT_INDEX_ANNOTATION]
                .as_str()
                .and_then(|s| s.parse::<u64>().ok()),
        ) else {
            continue;
        };
        let now = Applied {
            snapshot,
            targets: targets(&record.object["spec"]),
        };
        let what = started(applied.get(&record.name), &now);
        applied.insert(record.name.clone(), now);
        let (Some(what), Some(window)) = (what, in_force(windows, promotion, record.time)) else {
            continue;
        };
        let status = known.get(promotion);
        if status.is_some_and(|k| allowed(k, stage, snapshot)) {
            continue;
        }
        violations.push(BlackoutViolation::StartedInBlackout {
            promotion: promotion.to_string(),
            stage: stage.to_string(),
            snapshot,
            what,
            at: record.time,
            from: window.from,
            to: window.to,
        });
    }
    violations
}

fn note_status(known: &mut Known, object: &Value) {
    let status = &object["status"];
    if status["phase"] == "Completed"
        && let Some(index) = status["snapshotIndex"].as_u64()
    {
        known.completed.insert(index);
    }
    for verdict in status["verdicts"].as_array().into_iter().flatten() {
        if verdict["verdict"] == "Completed"
            && let Some(index) = verdict["snapshotIndex"].as_u64()
        {
            known.completed.insert(index);
        }
    }
    known.status = status.clone();
}

/// The clusters a profile names (`None`: its selector, every matching cluster).
fn targets(spec: &Value) -> Option<BTreeSet<String>> {
    let refs = spec.get("clusterRefs")?.as_array()?;
    Some(
        refs.iter()
            .filter_map(|r| {
                Some(format!(
                    "{}/{}",
                    r["namespace"].as_str()?,
                    r["name"].as_str()?
                ))
            })
            .collect(),
    )
}

/// Whether an apply starts something: a new snapshot in the stage, or a further wave.
fn started(before: Option<&Applied>, now: &Applied) -> Option<&'static str> {
    let Some(before) = before else {
        return Some("the stage");
    };
    if before.snapshot != now.snapshot {
        return Some("the stage");
    }
    match (&before.targets, &now.targets) {
        (Some(_), None) => Some("its last wave"),
        (Some(old), Some(new)) if !new.is_subset(old) => Some("a wave"),
        _ => None,
    }
}

/// The window holding `promotion` at `at`, past the landing grace.
fn in_force<'w>(
    windows: &'w [BlackoutWindow],
    promotion: &str,
    at: DateTime<Utc>,
) -> Option<&'w BlackoutWindow> {
    let grace = chrono::Duration::from_std(LANDING_GRACE).unwrap_or_default();
    windows
        .iter()
        .find(|w| w.promotions.contains(promotion) && at >= w.from + grace && at < w.to)
}

/// A failure rollback restoring the stage to `snapshot`, or a rollback run restoring content that
/// completed a run.
fn allowed(known: &Known, stage: &str, snapshot: u64) -> bool {
    let status = &known.status;
    let restoring = status["failure"]["rollback"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["name"] == stage && r["toSnapshot"].as_u64() == Some(snapshot));
    let rollback_run = status["snapshotIndex"].as_u64() == Some(snapshot)
        && status["rollbackOf"]
            .as_u64()
            .is_some_and(|to| known.completed.contains(&to));
    restoring || rollback_run
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(1_000 + seconds)
    }

    fn apply(at: i64, stage: &str, snapshot: u64, refs: Option<&[&str]>) -> WriteRecord {
        let mut spec = json!({});
        if let Some(refs) = refs {
            spec["clusterRefs"] = json!(
                refs.iter()
                    .map(|n| json!({"namespace": "default", "name": n}))
                    .collect::<Vec<_>>()
            );
        }
        record(
            at,
            "clusterprofiles.config.projectsveltos.io",
            &format!("p-{stage}"),
            false,
            json!({"metadata": {
                "labels": {PROMOTION_LABEL: "p", STAGE_LABEL: stage},
                "annotations": {SNAPSHOT_INDEX_ANNOTATION: snapshot.to_string()},
            }, "spec": spec}),
        )
    }

    fn status(at: i64, status: Value) -> WriteRecord {
        record(
            at,
            "gitpromotions.tollgate.dev",
            "p",
            true,
            json!({"status": status}),
        )
    }

    fn record(at: i64, resource: &str, name: &str, sub: bool, object: Value) -> WriteRecord {
        WriteRecord {
            time: t(at),
            verb: "apply".into(),
            resource: resource.into(),
            status_subresource: sub,
            namespace: String::new(),
            name: name.into(),
            field_manager: "tollgate".into(),
            user_agent: String::new(),
            resource_version: 0,
            object,
        }
    }

    fn window() -> Vec<BlackoutWindow> {
        vec![BlackoutWindow {
            promotions: BTreeSet::from(["p".to_string()]),
            from: t(100),
            to: t(200),
        }]
    }

    #[test]
    fn a_stage_or_a_wave_started_inside_a_blackout_is_caught() {
        let log = [
            apply(0, "s0", 1, None),
            apply(1, "s1", 1, Some(&["a"])),
            apply(150, "s0", 2, None),
            apply(160, "s1", 1, Some(&["a", "b"])),
        ];
        let violations = check_blackouts(&log, &window());
        assert_eq!(violations.len(), 2, "{violations:?}");
        // Re-applies of what runs, and starts after the blackout, are fine.
        let log = [
            apply(0, "s0", 1, None),
            apply(150, "s0", 1, None),
            apply(200, "s0", 2, None),
        ];
        assert!(check_blackouts(&log, &window()).is_empty());
    }

    #[test]
    fn only_a_rollback_to_a_completed_snapshot_passes_a_blackout() {
        let completed = status(10, json!({"phase": "Completed", "snapshotIndex": 1}));
        let rollback = status(140, json!({"snapshotIndex": 3, "rollbackOf": 1}));
        let log = [
            apply(0, "s0", 1, None),
            completed,
            rollback.clone(),
            apply(150, "s0", 3, None),
        ];
        assert!(check_blackouts(&log, &window()).is_empty());
        // The same revert of content that never completed is caught.
        let log = [apply(0, "s0", 1, None), rollback, apply(150, "s0", 3, None)];
        assert_eq!(check_blackouts(&log, &window()).len(), 1);
    }

    #[test]
    fn a_failure_rollback_restores_a_stage_inside_a_blackout() {
        let failing = status(
            140,
            json!({"snapshotIndex": 2, "failure": {"rollback": [{"name": "s0", "toSnapshot": 1}]}}),
        );
        let log = [apply(0, "s0", 2, None), failing, apply(150, "s0", 1, None)];
        assert!(check_blackouts(&log, &window()).is_empty());
    }
}
