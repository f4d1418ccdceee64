//! The fleet a simulation assumes when the management cluster was not read: per stage, ready
//! clusters labelled to match its selector. One for a plain stage; for a waved stage enough that
//! every wave its policy describes has a cluster (its canary, then two waves of a fixed size, or
//! one cluster per wave of a percentage), so that waves and their pauses take their time.

use std::collections::BTreeMap;

use tollgate_model::model::{ClusterPromotion, LabelSelector};
use tollgate_model::policy::{FailureBudget, RolloutPolicy, Waves};

use crate::observed::ObservedCluster;

/// The namespace of assumed clusters (named `<stage>-<n>`).
pub const ASSUMED_NAMESPACE: &str = "assumed";

/// Labels that a cluster needs to be selected by `selector`, as far as labels can make it so (an
/// empty selector selects nothing, whatever the labels).
fn labels_for(selector: &LabelSelector) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = selector
        .match_labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for requirement in &selector.match_expressions {
        match requirement.operator.as_str() {
            "In" => {
                if let Some(value) = requirement.values.first() {
                    labels.insert(requirement.key.clone(), value.clone());
                }
            }
            "Exists" => {
                labels.insert(requirement.key.clone(), "assumed".to_string());
            }
            // NotIn and DoesNotExist hold for a cluster without the label.
            _ => {}
        }
    }
    labels
}

/// How many clusters a stage with `waves` is assumed to have.
fn clusters_for_waves(waves: &Waves) -> usize {
    let canary = waves
        .canary
        .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let rest = match waves.size {
        FailureBudget::Count(n) => usize::try_from(n).unwrap_or(usize::MAX).saturating_mul(2),
        // Waves of p % of the members hold one cluster each when there are 100 / p members.
        FailureBudget::Percent(p) => (100 / p.clamp(1, 100) as usize).saturating_sub(canary),
    };
    canary.saturating_add(rest).clamp(1, 1000)
}

/// The assumed fleet of `promotion` under `policy`.
pub fn assumed(
    promotion: &ClusterPromotion,
    policy: Option<&RolloutPolicy>,
) -> Vec<ObservedCluster> {
    let mut clusters = Vec::new();
    for stage in &promotion.spec.stages {
        if stage.cluster_selector.is_empty() {
            continue;
        }
        let waves = policy.and_then(|p| p.for_stage(&stage.name).waves);
        let count = waves.as_ref().map_or(1, clusters_for_waves);
        let labels = labels_for(&stage.cluster_selector);
        for n in 1..=count {
            let mut labels = labels.clone();
            if let Some(key) = waves.as_ref().and_then(|w| w.sorting_label_key.as_ref()) {
                labels.insert(key.clone(), n.to_string());
            }
            clusters.push(ObservedCluster {
                namespace: ASSUMED_NAMESPACE.to_string(),
                name: format!("{}-{n}", stage.name),
                labels,
                ready: true,
                paused: false,
                capi: false,
                active_window: None,
            });
        }
    }
    clusters
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waves(spec: serde_json::Value) -> Waves {
        serde_json::from_value(spec).expect("waves")
    }

    #[test]
    fn every_wave_a_policy_describes_gets_a_cluster() {
        assert_eq!(
            clusters_for_waves(&waves(serde_json::json!({"size": 2, "canary": 1}))),
            5
        );
        assert_eq!(
            clusters_for_waves(&waves(serde_json::json!({"size": "25%"}))),
            4
        );
        assert_eq!(
            clusters_for_waves(&waves(serde_json::json!({"size": "10%", "canary": 1}))),
            10
        );
    }

    #[test]
    fn an_assumed_cluster_matches_its_stage_selector() {
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"env": "prod"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "NotIn", "values": ["x"]}
            ]
        }))
        .expect("selector");
        assert!(selector.matches(&labels_for(&selector)));
    }
}
