//! Issue #34's invariants, checked over the emulator's write log (see `invariants.rs`):
//! - no stage of a dependant (`tollgate.dev/depends-on`) starts before the same stage of its
//!   dependency completed a run (a status write of the dependency showing that stage Completed or
//!   Skipped for its current run, earlier than the start);
//! - a paused cluster is never counted failed or timed out: no status lists it Failed or
//!   TimedOut, nor a run failure names it, while the log shows it paused.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_emulator::WriteRecord;
use tollgate_render::{
    PROMOTION_LABEL, SNAPSHOT_INDEX_ANNOTATION, STAGE_LABEL, VERIFICATION_LABEL,
};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoordinationViolation {
    #[error(
        "{dependant}/{stage} started snapshot {snapshot} at {at} before {dependency}/{stage} ever completed a run"
    )]
    StartedBeforeDependency {
        dependant: String,
        dependency: String,
        stage: String,
        snapshot: u64,
        at: DateTime<Utc>,
    },
    #[error("{promotion} counted the paused cluster {cluster} {state} at {at}")]
    PausedCountedFailed {
        promotion: String,
        cluster: String,
        state: String,
        at: DateTime<Utc>,
    },
}

/// `dependencies`: dependant → dependency. `stages`: each promotion's stage names.
pub fn check_dependencies(
    log: &[WriteRecord],
    dependencies: &BTreeMap<String, String>,
    stages: &HashMap<String, Vec<String>>,
) -> Vec<CoordinationViolation> {
    let mut completed: BTreeSet<(String, String)> = BTreeSet::new();
    let mut started: HashMap<(String, String), u64> = HashMap::new();
    let mut violations = Vec::new();
    for record in log {
        if record.resource.starts_with("gitpromotions.") && record.verb != "delete" {
            let status = &record.object["status"];
            let current = status["snapshotIndex"].as_u64();
            for stage in status["stages"].as_array().into_iter().flatten() {
                let kind = stage["activity"]["kind"].as_str();
                if matches!(kind, Some("Completed" | "Skipped"))
                    && stage["snapshotIndex"].as_u64() == current
                    && let Some(name) = stage["name"].as_str()
                {
                    completed.insert((record.name.clone(), name.to_string()));
                }
            }
            continue;
        }
        if !record.resource.starts_with("clusterprofiles.") || record.verb == "delete" {
            continue;
        }
        let labels = &record.object["metadata"]["labels"];
        if labels[VERIFICATION_LABEL] == "true" {
            continue;
        }
        let (Some(promotion), Some(stage)) = (
            labels[PROMOTION_LABEL].as_str(),
            labels[STAGE_LABEL].as_str(),
        ) else {
            continue;
        };
        let Some(dependency) = dependencies.get(promotion) else {
            continue;
        };
        let snapshot = index_of(&record.object);
        let key = (promotion.to_string(), stage.to_string());
        if started.get(&key) == Some(&snapshot) {
            continue; // the same stage run applied again
        }
        started.insert(key, snapshot);
        let has_stage = stages
            .get(dependency)
            .is_some_and(|s| s.iter().any(|n| n == stage));
        if has_stage && !completed.contains(&(dependency.clone(), stage.to_string())) {
            violations.push(CoordinationViolation::StartedBeforeDependency {
                dependant: promotion.to_string(),
                dependency: dependency.clone(),
                stage: stage.to_string(),
                snapshot,
                at: record.time,
            });
        }
    }
    violations
}

fn index_of(profile: &Value) -> u64 {
    profile["metadata"]["annotations"][SNAPSHOT_INDEX_ANNOTATION]
        .as_str()
        .and_then(|i| i.parse().ok())
        .unwrap_or_default()
}

/// `paused`: `namespace/name` of clusters that may be paused; the log's SveltosCluster writes
/// say when they are (the fleet starts them paused).
pub fn check_paused(
    log: &[WriteRecord],
    initially_paused: &BTreeSet<String>,
) -> Vec<CoordinationViolation> {
    let mut paused = initially_paused.clone();
    let mut violations = Vec::new();
    for record in log {
        if record.resource.starts_with("sveltosclusters.") {
            let key = format!("{}/{}", record.namespace, record.name);
            match record.object["spec"]["paused"].as_bool() == Some(true) && record.verb != "delete"
            {
                true => paused.insert(key),
                false => paused.remove(&key),
            };
            continue;
        }
        if !record.resource.starts_with("gitpromotions.") || paused.is_empty() {
            continue;
        }
        let status = &record.object["status"];
        let listed = status["stages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["notProvisioned"].as_array().into_iter().flatten());
        let failing = status["failure"]["clusters"]
            .as_array()
            .into_iter()
            .flatten();
        for cluster in listed.chain(failing) {
            let (Some(name), Some(state)) =
                (cluster["cluster"].as_str(), cluster["state"].as_str())
            else {
                continue;
            };
            if paused.contains(name) && matches!(state, "Failed" | "TimedOut") {
                violations.push(CoordinationViolation::PausedCountedFailed {
                    promotion: record.name.clone(),
                    cluster: name.to_string(),
                    state: state.to_string(),
                    at: record.time,
                });
            }
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(resource: &str, name: &str, at: i64, object: Value) -> WriteRecord {
        WriteRecord {
            time: DateTime::<Utc>::from_timestamp(at, 0).expect("time"),
            verb: "apply".into(),
            resource: resource.into(),
            status_subresource: false,
            namespace: "fleet".into(),
            name: name.into(),
            field_manager: "tollgate".into(),
            user_agent: String::new(),
            resource_version: 1,
            object,
        }
    }

    fn profile(promotion: &str, stage: &str, at: i64) -> WriteRecord {
        record(
            "clusterprofiles.config.projectsveltos.io",
            &format!("{promotion}-{stage}"),
            at,
            json!({"metadata": {"labels": {PROMOTION_LABEL: promotion, STAGE_LABEL: stage},
                "annotations": {SNAPSHOT_INDEX_ANNOTATION: "1"}}}),
        )
    }

    fn status(promotion: &str, at: i64, stage: &str, kind: &str) -> WriteRecord {
        record(
            "gitpromotions.tollgate.dev",
            promotion,
            at,
            json!({"status": {"snapshotIndex": 1, "stages": [
                {"name": stage, "snapshotIndex": 1, "activity": {"kind": kind},
                 "notProvisioned": [{"cluster": "fleet/p", "state": "TimedOut"}]}]}}),
        )
    }

    #[test]
    fn a_dependant_stage_started_before_its_dependency_completed_is_a_violation() {
        let deps = BTreeMap::from([("apps".to_string(), "cert".to_string())]);
        let stages = HashMap::from([("cert".to_string(), vec!["s0".to_string()])]);
        let early = [
            profile("apps", "s0", 1),
            status("cert", 2, "s0", "Completed"),
        ];
        assert_eq!(check_dependencies(&early, &deps, &stages).len(), 1);
        let ordered = [
            status("cert", 1, "s0", "Completed"),
            profile("apps", "s0", 2),
        ];
        assert!(check_dependencies(&ordered, &deps, &stages).is_empty());
        // A stage the dependency does not have never waits.
        let other = [profile("apps", "s9", 1)];
        assert!(check_dependencies(&other, &deps, &stages).is_empty());
    }

    #[test]
    fn a_paused_cluster_listed_timed_out_is_a_violation_and_an_unpaused_one_is_not() {
        let paused = BTreeSet::from(["fleet/p".to_string()]);
        assert_eq!(
            check_paused(&[status("x", 1, "s0", "Provisioning")], &paused).len(),
            1
        );
        let unpause = record(
            "sveltosclusters.lib.projectsveltos.io",
            "p",
            1,
            json!({"spec": {"paused": false}}),
        );
        assert!(check_paused(&[unpause, status("x", 2, "s0", "Provisioning")], &paused).is_empty());
    }
}
