//! Validation of one ClusterPromotion document: the CRD schema (with defaults), then tollgate's
//! own rules, then conversion to the typed model.

use serde_json::Value;

use crate::diagnostic::{Finding, Severity};
use crate::located::Locations;
use crate::model::ClusterPromotion;
use crate::parse::Limits;
use crate::rules;
use crate::schema::cluster_promotion_schema;

/// What rules may consult besides the document: the source text (to map Lua lines), field
/// locations and limits.
pub struct ValidationContext<'a> {
    pub source: &'a str,
    pub locations: &'a Locations,
    pub limits: &'a Limits,
}

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
    match serde_json::from_value::<ClusterPromotion>(document) {
        Ok(promotion) => (Some(promotion), findings),
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
