//! Sveltos features (Helm, Resources, Kustomize): which a spec needs, and what their inputs are.

use serde_json::{Map, Value};

use crate::subset::carries;

pub const HELM: &str = "Helm";
pub const RESOURCES: &str = "Resources";
pub const KUSTOMIZE: &str = "Kustomize";

/// Each feature with the profile field that lists its content.
const FEATURES: [(&str, &str); 3] = [
    (HELM, "helmCharts"),
    (RESOURCES, "policyRefs"),
    (KUSTOMIZE, "kustomizationRefs"),
];

/// Profile fields that reach every feature's deploy (conservatively: any change to one of them
/// may make Sveltos redeploy every feature).
const GLOBAL_INPUTS: [&str; 8] = [
    "syncMode",
    "tier",
    "patches",
    "patchesFrom",
    "templateResourceRefs",
    "driftExclusions",
    "continueOnConflict",
    "continueOnError",
];

/// `Feature:hash` of each of `fresh` as `profile`'s summaries report it before an apply: the
/// distinct values (a stage's clusters run one content, or a few while it changes), so that a
/// status still carrying one is known to be from before the apply.
pub(crate) fn hashes_before_apply(
    observed: &crate::observed::Observed,
    profile: &str,
    fresh: &[String],
) -> crate::status::HashesBeforeApply {
    let mut hashes: Vec<String> = observed
        .summaries
        .iter()
        .filter(|s| &*s.profile_name == profile)
        .flat_map(|s| s.features.iter())
        .filter(|f| fresh.iter().any(|id| **id == *f.feature_id))
        .filter_map(|f| Some(hash_key(&f.feature_id, f.hash.as_deref()?)))
        .collect();
    hashes.sort();
    hashes.dedup();
    (!hashes.is_empty()).then(|| Box::new(hashes))
}

/// How [`hashes_before_apply`] names one feature's hash.
pub(crate) fn hash_key(feature: &str, hash: &str) -> String {
    format!("{feature}:{hash}")
}

/// Whether `key` (as [`hash_key`] writes it) names `feature`'s `hash`. Read for every feature of
/// every summary a completion check reads, so it compares in place rather than writing a key.
pub(crate) fn is_hash_key(key: &str, feature: &str, hash: &str) -> bool {
    key.split_once(':') == Some((feature, hash))
}

fn non_empty_list(spec: &Value, field: &str) -> bool {
    spec.get(field)
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty())
}

/// Features whose ClusterSummary status must be newer than an apply of `spec` (hash `hash`) over
/// `previous`, the live profile tollgate owns (none: every feature is new).
pub(crate) fn fresh_after_apply(
    previous: Option<&crate::observed::ObservedProfile>,
    spec: &Value,
    hash: &str,
) -> Vec<String> {
    match previous {
        Some(p) if p.applied_spec_hash() == Some(hash) => Vec::new(),
        Some(p) => changed_features(Some(&p.spec.value()), spec),
        None => changed_features(None, spec),
    }
}

/// Features a ClusterSummary of this spec must report: one per non-empty content list.
pub fn required_features(spec: &Value) -> Vec<&'static str> {
    FEATURES
        .iter()
        .filter(|(_, field)| non_empty_list(spec, field))
        .map(|(feature, _)| *feature)
        .collect()
}

/// Everything in `spec` that decides whether Sveltos redeploys `feature`.
fn feature_inputs(spec: &Value, feature: &str, list_field: &str) -> Value {
    let mut inputs = Map::new();
    let mut copy = |field: &str| {
        if let Some(value) = spec.get(field) {
            inputs.insert(field.to_string(), value.clone());
        }
    };
    copy(list_field);
    for field in GLOBAL_INPUTS {
        copy(field);
    }
    for checks in ["validateHealths", "preDeployChecks"] {
        let of_feature: Vec<Value> = spec
            .get(checks)
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter(|check| check.get("featureID").and_then(Value::as_str) == Some(feature))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        inputs.insert(checks.to_string(), Value::Array(of_feature));
    }
    Value::Object(inputs)
}

/// The features required by `new` whose inputs `previous` does not already carry (all of them
/// when there is no previous spec). `previous` may be an object read back from the API server,
/// so defaults it added are tolerated rather than mistaken for a change that Sveltos would never
/// redeploy (which would wait forever): their ClusterSummary status must be written after the apply to count.
pub fn changed_features(previous: Option<&Value>, new: &Value) -> Vec<String> {
    FEATURES
        .iter()
        .filter(|(_, field)| non_empty_list(new, field))
        .filter(|(feature, field)| {
            previous.is_none_or(|old| {
                let old_inputs = feature_inputs(old, feature, field);
                !carries(&feature_inputs(new, feature, field), Some(&old_inputs))
            })
        })
        .map(|(feature, _)| (*feature).to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_features_follow_non_empty_lists() {
        let spec = json!({"helmCharts": [{"releaseName": "a"}], "policyRefs": [], "kustomizationRefs": [{}]});
        assert_eq!(required_features(&spec), vec![HELM, KUSTOMIZE]);
    }

    #[test]
    fn only_features_whose_inputs_changed_need_fresh_status() {
        let old = json!({"helmCharts": [{"chartVersion": "1"}], "policyRefs": [{"name": "cm"}], "tier": 100});
        let chart_bump = json!({"helmCharts": [{"chartVersion": "2"}], "policyRefs": [{"name": "cm"}], "tier": 100});
        assert_eq!(changed_features(Some(&old), &chart_bump), vec![HELM]);

        let resources_check = json!({"helmCharts": [{"chartVersion": "1"}], "policyRefs": [{"name": "cm"}], "tier": 100,
            "validateHealths": [{"name": "c", "featureID": "Resources"}]});
        assert_eq!(
            changed_features(Some(&old), &resources_check),
            vec![RESOURCES]
        );

        let tier = json!({"helmCharts": [{"chartVersion": "1"}], "policyRefs": [{"name": "cm"}], "tier": 90});
        assert_eq!(changed_features(Some(&old), &tier), vec![HELM, RESOURCES]);

        let selector_only = json!({"helmCharts": [{"chartVersion": "1"}], "policyRefs": [{"name": "cm"}], "tier": 100,
            "clusterSelector": {"matchLabels": {"env": "x"}}});
        assert!(changed_features(Some(&old), &selector_only).is_empty());
        assert_eq!(changed_features(None, &old), vec![HELM, RESOURCES]);
    }
}
