//! Names: `metadata.name` must be a DNS-1123 subdomain, stage names DNS-1123 labels, and the
//! generated ClusterProfile names `<promotion>-<stage>` (and `preverification-<promotion>-<stage>`
//! for stages that deploy one) must fit in 63 characters, because Sveltos copies a profile's name
//! into the `projectsveltos.io/cluster-profile-name` label of its ClusterSummaries, and label
//! values are limited to 63 characters.

use serde_json::Value;

use crate::diagnostic::Finding;
use crate::rules::k8s_names::{dns1123_label_problem, dns1123_subdomain_problem};
use crate::rules::{stage_path, stages, trigger};

const LABEL_VALUE_MAX: usize = 63;
const PREVERIFICATION_PREFIX: &str = "preverification-";

pub fn check(document: &Value, findings: &mut Vec<Finding>) {
    let promotion = document
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str);
    let promotion_ok = match promotion {
        Some(name) => match dns1123_subdomain_problem(name) {
            Some(problem) => {
                findings.push(Finding::error(
                    "invalid-name",
                    "metadata.name",
                    format!("Invalid value: {name:?}: a promotion name must be a DNS-1123 subdomain: {problem}"),
                ));
                false
            }
            None => true,
        },
        None => false,
    };
    for (index, stage) in stages(document) {
        let Some(stage_name) = stage.get("name").and_then(Value::as_str) else {
            continue;
        };
        let path = || format!("{}.name", stage_path(index));
        if let Some(problem) = dns1123_label_problem(stage_name) {
            findings.push(Finding::error(
                "invalid-stage-name",
                path(),
                format!("Invalid value: {stage_name:?}: a stage name must be a DNS-1123 label: {problem}"),
            ));
            continue;
        }
        let (true, Some(promotion)) = (promotion_ok, promotion) else {
            continue;
        };
        let has_preverification = trigger(stage)
            .and_then(|(_, body)| body.get("preHealthCheckDeployment"))
            .and_then(Value::as_array)
            .is_some_and(|refs| !refs.is_empty());
        let prefix = if has_preverification {
            PREVERIFICATION_PREFIX
        } else {
            ""
        };
        // `<prefix><promotion>-<stage>`, measured before it is ever formatted.
        if prefix.len() + promotion.len() + 1 + stage_name.len() > LABEL_VALUE_MAX {
            let generated = format!("{prefix}{promotion}-{stage_name}");
            findings.push(Finding::error(
                "generated-name-too-long",
                path(),
                format!(
                    "generated ClusterProfile name {generated:?} is {} characters, more than {LABEL_VALUE_MAX}: Sveltos copies it into the `projectsveltos.io/cluster-profile-name` label, whose values are limited to 63 characters; shorten the promotion or stage name",
                    generated.len()
                ),
            ));
        }
    }
}
