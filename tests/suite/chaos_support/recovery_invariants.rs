//! Recovery invariants (issue #34), checked over the emulator's write log (see `invariants.rs`):
//! - a retry never re-applies a rejected snapshot: no status records a retry in progress for a
//!   run whose snapshot was rolled back (`onFailure: Rollback`), and no profile carries a
//!   rolled-back snapshot afterwards (`failure_invariants` checks the latter);
//! - a fast rollback only targets snapshots that completed in that stage: every stage a status
//!   marks `fastRollback` belongs to a run restoring a snapshot an earlier status showed
//!   succeeding in that stage (or completing its run).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_emulator::WriteRecord;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecoveryViolation {
    #[error(
        "{promotion}: at {at} stage {stage} retries snapshot {snapshot}, which was rolled back"
    )]
    RetriedRejected {
        promotion: String,
        stage: String,
        at: DateTime<Utc>,
        snapshot: u64,
    },
    #[error(
        "{promotion}: at {at} stage {stage} rolls back fast to snapshot {to}, which never completed there"
    )]
    FastToUncompleted {
        promotion: String,
        stage: String,
        at: DateTime<Utc>,
        to: u64,
    },
}

pub fn check_recovery(log: &[WriteRecord]) -> Vec<RecoveryViolation> {
    // (promotion, snapshot) → stages seen succeeding with it ("*": its whole run completed).
    let mut completed: HashMap<(String, u64), HashSet<String>> = HashMap::new();
    let mut rolled_back: HashSet<(String, u64)> = HashSet::new();
    let mut violations = Vec::new();
    for record in log
        .iter()
        .filter(|r| r.resource.starts_with("gitpromotions."))
    {
        let status = &record.object["status"];
        let promotion = record.name.clone();
        let failure = status.get("failure").filter(|f| f.is_object());
        if let Some(failure) = failure
            && failure["onFailure"] == "Rollback"
            && let Some(snapshot) = failure["snapshotIndex"].as_u64()
        {
            rolled_back.insert((promotion.clone(), snapshot));
        }
        let Some(snapshot) = status["snapshotIndex"].as_u64() else {
            continue;
        };
        let stages = status["stages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for stage in stages {
            let name = stage["name"].as_str().unwrap_or_default();
            if stage.get("retry").is_some_and(Value::is_object)
                && rolled_back.contains(&(promotion.clone(), snapshot))
            {
                violations.push(RecoveryViolation::RetriedRejected {
                    promotion: promotion.clone(),
                    stage: name.to_string(),
                    at: record.time,
                    snapshot,
                });
            }
            if stage["fastRollback"] == true
                && let Some(to) = status["rollbackOf"].as_u64()
            {
                let known = completed.get(&(promotion.clone(), to));
                let ok = known.is_some_and(|s| s.contains(name) || s.contains("*"));
                if !ok {
                    violations.push(RecoveryViolation::FastToUncompleted {
                        promotion: promotion.clone(),
                        stage: name.to_string(),
                        at: record.time,
                        to,
                    });
                }
            }
        }
        let seen = completed.entry((promotion, snapshot)).or_default();
        for stage in stages {
            if stage.get("succeededAt").is_some_and(|t| !t.is_null())
                && let Some(name) = stage["name"].as_str()
            {
                seen.insert(name.to_string());
            }
        }
        if status["phase"] == "Completed" {
            seen.insert("*".to_string());
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(at: i64, status: Value) -> WriteRecord {
        WriteRecord {
            time: DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(1_700_000_000 + at),
            verb: "apply".into(),
            resource: "gitpromotions.tollgate.dev".into(),
            status_subresource: true,
            namespace: String::new(),
            name: "p".into(),
            field_manager: "tollgate".into(),
            user_agent: String::new(),
            resource_version: 0,
            object: json!({"status": status}),
        }
    }

    #[test]
    fn a_retry_never_reapplies_a_rejected_snapshot() {
        let log = [
            record(
                0,
                json!({"snapshotIndex": 2, "stages": [{"name": "s0"}],
                "failure": {"stage": "s0", "snapshotIndex": 2, "onFailure": "Rollback"}}),
            ),
            record(
                1,
                json!({"snapshotIndex": 2, "stages": [{"name": "s0", "retry": {"n": 1}}]}),
            ),
        ];
        let violations = check_recovery(&log);
        assert!(
            matches!(
                violations.as_slice(),
                [RecoveryViolation::RetriedRejected { snapshot: 2, .. }]
            ),
            "{violations:?}"
        );
        // A halted run may be retried.
        let log = [
            record(
                0,
                json!({"snapshotIndex": 2, "stages": [{"name": "s0"}],
                "failure": {"stage": "s0", "snapshotIndex": 2, "onFailure": "Halt"}}),
            ),
            record(
                1,
                json!({"snapshotIndex": 2, "stages": [{"name": "s0", "retry": {"n": 1}}]}),
            ),
        ];
        assert_eq!(check_recovery(&log), []);
    }

    #[test]
    fn a_fast_rollback_only_targets_snapshots_that_completed_in_that_stage() {
        let log = [
            record(
                0,
                json!({"snapshotIndex": 1, "phase": "Progressing",
                "stages": [{"name": "s0", "succeededAt": "x"}, {"name": "s1"}]}),
            ),
            record(
                1,
                json!({"snapshotIndex": 3, "rollbackOf": 1, "rollback": "Fast",
                "stages": [{"name": "s0", "fastRollback": true}, {"name": "s1", "fastRollback": true}]}),
            ),
        ];
        let violations = check_recovery(&log);
        assert!(
            matches!(violations.as_slice(), [RecoveryViolation::FastToUncompleted { to: 1, stage, .. }] if stage == "s1"),
            "{violations:?}"
        );
        let log = [
            record(
                0,
                json!({"snapshotIndex": 1, "phase": "Completed", "stages": [{"name": "s0"}]}),
            ),
            record(
                1,
                json!({"snapshotIndex": 3, "rollbackOf": 1,
                "stages": [{"name": "s0", "fastRollback": true}, {"name": "s1", "fastRollback": true}]}),
            ),
        ];
        assert_eq!(check_recovery(&log), []);
    }
}
