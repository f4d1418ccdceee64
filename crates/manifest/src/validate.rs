//! Validation of one ClusterPromotion document: the CRD schema (with defaults), then tollgate's
//! own rules, then conversion to the typed model.

use serde_json::Value;

use crate::diagnostic::{Finding, Severity};
use crate::model::{ClusterPromotion, ProfileSpec, Trigger};
use crate::rules;
use crate::schema::cluster_promotion_schema;

pub use crate::context::ValidationContext;

/// An absent (or null) `profileSpec` deploys exactly what `profileSpec: {}` deploys, so it becomes
/// `{}` before defaulting and both get the same hash (D5: spelling out a default changes nothing).
/// Found by the fuzz target's round-trip check.
fn normalise_absent_profile_spec(document: &mut Value) {
    if let Some(spec) = document.get_mut("spec").and_then(Value::as_object_mut) {
        let profile_spec = spec
            .entry("profileSpec")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if profile_spec.is_null() {
            *profile_spec = Value::Object(serde_json::Map::new());
        }
    }
}

/// Validates and defaults `document`. The promotion is `Some` iff no finding is an error.
pub fn validate_document(
    mut document: Value,
    context: &ValidationContext<'_>,
) -> (Option<ClusterPromotion>, Vec<Finding>) {
    normalise_absent_profile_spec(&mut document);
    let mut findings: Vec<Finding> = cluster_promotion_schema()
        .validate_and_default(&mut document)
        .into_iter()
        .map(|e| Finding {
            severity: Severity::Error,
            code: e.code,
            path: e.path,
            message: e.message,
            anchor: e.anchor,
        })
        .collect();
    rules::check_all(&document, context, &mut findings);
    if findings.iter().any(|f| f.severity == Severity::Error) {
        return (None, findings);
    }
    // The model keeps the profileSpec and the triggers' lists as the JSON they are: they are moved
    // into it, not deserialized into new JSON values again.
    let profile_spec = document
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .and_then(|spec| spec.remove("profileSpec"));
    let trigger_lists = take_trigger_lists(&mut document);
    let promotion = serde_json::from_value::<ClusterPromotion>(document)
        .map_err(|e| e.to_string())
        .and_then(|mut promotion| {
            match profile_spec {
                Some(Value::Object(map)) => promotion.spec.profile_spec = ProfileSpec::from(map),
                None => {}
                Some(other) => return Err(format!("profileSpec is {other}, not an object")),
            }
            restore_trigger_lists(&mut promotion, trigger_lists)?;
            Ok(promotion)
        });
    match promotion {
        Ok(promotion) => {
            if has_approval_annotation(&promotion) {
                let hashes = crate::hash::SpecHashes::of(&promotion);
                rules::annotations::check_snapshot_names(
                    &promotion,
                    &hashes.snapshot_id,
                    &mut findings,
                );
            }
            (Some(promotion), findings)
        }
        Err(e) => {
            // Schema and rules accept only documents the model can hold; reaching this is a bug,
            // reported rather than hidden.
            findings.push(Finding::error(
                "model-mismatch",
                "",
                format!("internal error: validated document does not fit the model: {e}"),
            ));
            (None, findings)
        }
    }
}

/// Whether any annotation is an approval (hashing the promotion to check them is not free).
fn has_approval_annotation(promotion: &ClusterPromotion) -> bool {
    promotion
        .metadata
        .annotations
        .keys()
        .any(|key| key.starts_with(rules::annotations::APPROVE_PREFIX))
}

/// A trigger's `preHealthCheckDeployment` and `postDelayHealthChecks`, taken out of the JSON.
#[derive(Default)]
struct TriggerLists {
    pre_health_check_deployment: Option<Value>,
    post_delay_health_checks: Option<Value>,
}

fn take_trigger_lists(document: &mut Value) -> Vec<TriggerLists> {
    let Some(stages) = document
        .get_mut("spec")
        .and_then(|spec| spec.get_mut("stages"))
        .and_then(Value::as_array_mut)
    else {
        return Vec::new();
    };
    stages
        .iter_mut()
        .map(|stage| {
            let body = stage
                .get_mut("trigger")
                .and_then(Value::as_object_mut)
                .and_then(|trigger| trigger.values_mut().next())
                .and_then(Value::as_object_mut);
            match body {
                Some(body) => TriggerLists {
                    pre_health_check_deployment: body.remove("preHealthCheckDeployment"),
                    post_delay_health_checks: body.remove("postDelayHealthChecks"),
                },
                None => TriggerLists::default(),
            }
        })
        .collect()
}

fn restore_trigger_lists(
    promotion: &mut ClusterPromotion,
    lists: Vec<TriggerLists>,
) -> Result<(), String> {
    let list = |value: Option<Value>, field: &str| match value {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(format!("{field} is {other}, not a list")),
    };
    for (stage, lists) in promotion.spec.stages.iter_mut().zip(lists) {
        let (pre, post) = match &mut stage.trigger {
            Some(Trigger::Auto(auto)) => (
                &mut auto.pre_health_check_deployment,
                &mut auto.post_delay_health_checks,
            ),
            Some(Trigger::Manual(manual)) => (
                &mut manual.pre_health_check_deployment,
                &mut manual.post_delay_health_checks,
            ),
            None => continue,
        };
        *pre = list(
            lists.pre_health_check_deployment,
            "preHealthCheckDeployment",
        )?;
        *post = list(lists.post_delay_health_checks, "postDelayHealthChecks")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::limits::Limits;
    use crate::loc_tree::DocumentLocations;
    use crate::location::Locations;

    /// Moving the profileSpec and the trigger lists into the model builds the same promotion as
    /// deserializing the whole defaulted document.
    #[test]
    fn model_matches_plain_deserialization() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut checked = 0;
        for dir in ["../../fixtures/valid", "../../../shared/fixtures/seeds"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(text) = std::fs::read_to_string(entry.path()) else {
                    continue;
                };
                let Ok(documents) = serde_saphyr::from_multiple::<Value>(&text) else {
                    continue;
                };
                for document in documents {
                    if document.get("kind").and_then(Value::as_str) != Some("ClusterPromotion") {
                        continue;
                    }
                    let locations = DocumentLocations::Map(Locations::default());
                    let limits = Limits {
                        compile_lua: false,
                        ..Limits::default()
                    };
                    let context = ValidationContext {
                        source: &text,
                        locations: &locations,
                        limits: &limits,
                    };
                    let (Some(promotion), _) = validate_document(document.clone(), &context) else {
                        continue;
                    };
                    let mut reference = document;
                    normalise_absent_profile_spec(&mut reference);
                    let _ = cluster_promotion_schema().validate_and_default(&mut reference);
                    let expected: ClusterPromotion =
                        serde_json::from_value(reference).expect("defaulted document fits");
                    assert_eq!(promotion, expected, "{}", entry.path().display());
                    checked += 1;
                }
            }
        }
        assert!(checked >= 5, "only {checked} promotions compared");
    }
}
