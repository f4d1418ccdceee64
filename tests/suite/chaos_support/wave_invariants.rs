//! Wave invariant, checked over the emulator's write log: **no cluster of a later wave is targeted
//! early**. Every apply of a stage profile that names clusters (`clusterRefs`) names exactly the
//! clusters of the first k waves of a wave plan the promotion's status recorded for that stage
//! (members and order fixed at stage start), for some k below the number of waves (the last wave
//! restores the selector).

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_emulator::WriteRecord;
use tollgate_render::{PROMOTION_LABEL, STAGE_LABEL};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{promotion}: stage {stage}'s profile named {named:?} at {at}, which is no prefix of the waves its status recorded"
)]
pub struct WaveViolation {
    pub promotion: String,
    pub stage: String,
    pub at: DateTime<Utc>,
    pub named: BTreeSet<String>,
}

/// Every wave plan each (promotion, stage) ever had in a status write.
fn recorded_plans(log: &[WriteRecord]) -> HashMap<(String, String), Vec<Vec<Vec<String>>>> {
    let mut plans: HashMap<(String, String), Vec<Vec<Vec<String>>>> = HashMap::new();
    for write in log
        .iter()
        .filter(|w| w.resource.starts_with("gitpromotions."))
    {
        let stages = write.object["status"]["stages"].as_array();
        for stage in stages.into_iter().flatten() {
            let Some(waves) = stage["waves"]["clusters"].as_array() else {
                continue;
            };
            let plan: Vec<Vec<String>> = waves
                .iter()
                .map(|wave| {
                    wave.as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .collect();
            let key = (
                write.name.clone(),
                stage["name"].as_str().unwrap_or_default().to_string(),
            );
            let known = plans.entry(key).or_default();
            if !known.contains(&plan) {
                known.push(plan);
            }
        }
    }
    plans
}

pub fn check_waves(log: &[WriteRecord]) -> Vec<WaveViolation> {
    let plans = recorded_plans(log);
    let mut violations = Vec::new();
    for write in log
        .iter()
        .filter(|w| w.resource.starts_with("clusterprofiles.") && w.verb != "delete")
    {
        let Some(refs) = write.object["spec"]["clusterRefs"].as_array() else {
            continue;
        };
        let labels = &write.object["metadata"]["labels"];
        let promotion = labels[PROMOTION_LABEL].as_str().unwrap_or_default();
        let stage = labels[STAGE_LABEL].as_str().unwrap_or_default();
        let named: BTreeSet<String> = refs
            .iter()
            .filter_map(|r| {
                Some(format!(
                    "{}/{}",
                    r["namespace"].as_str()?,
                    r["name"].as_str()?
                ))
            })
            .collect();
        let key = (promotion.to_string(), stage.to_string());
        let is_prefix = plans.get(&key).into_iter().flatten().any(|plan| {
            (1..plan.len()).any(|k| {
                let prefix: BTreeSet<String> = plan[..k].iter().flatten().cloned().collect();
                prefix == named
            })
        });
        if !is_prefix {
            violations.push(WaveViolation {
                promotion: promotion.to_string(),
                stage: stage.to_string(),
                at: write.time,
                named,
            });
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(resource: &str, name: &str, object: Value) -> WriteRecord {
        WriteRecord {
            time: DateTime::UNIX_EPOCH,
            verb: "apply".into(),
            resource: resource.into(),
            status_subresource: false,
            namespace: String::new(),
            name: name.into(),
            field_manager: "tollgate".into(),
            user_agent: String::new(),
            resource_version: 0,
            object,
        }
    }

    fn profile(refs: &[&str]) -> WriteRecord {
        let refs: Vec<Value> = refs
            .iter()
            .map(|n| json!({"namespace": "fleet", "name": n}))
            .collect();
        record(
            "clusterprofiles.config.projectsveltos.io",
            "p-s0",
            json!({"metadata": {"labels": {PROMOTION_LABEL: "p", STAGE_LABEL: "s0"}},
                "spec": {"clusterRefs": refs}}),
        )
    }

    fn status() -> WriteRecord {
        record(
            "gitpromotions.tollgate.dev",
            "p",
            json!({"status": {"stages": [{"name": "s0", "waves": {"clusters":
                [["fleet/b"], ["fleet/a", "fleet/c"], ["fleet/d"]]}}]}}),
        )
    }

    #[test]
    fn no_cluster_of_a_later_wave_is_targeted_early() {
        let right = [profile(&["b"]), profile(&["a", "b", "c"]), status()];
        assert_eq!(check_waves(&right), vec![]);
        let early = [profile(&["b", "d"]), status()];
        assert_eq!(check_waves(&early).len(), 1);
        let unrecorded = [profile(&["b"])];
        assert_eq!(check_waves(&unrecorded).len(), 1);
    }
}
