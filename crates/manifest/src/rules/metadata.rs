//! `metadata`: the CRD declares it only as `type: object`; the API server checks it as
//! ObjectMeta. tollgate checks what a file may carry: `name` (required), string→string `labels`
//! and `annotations` with valid keys, and known ObjectMeta fields only.

use serde_json::Value;

use crate::diagnostic::Finding;
use crate::location::child_path;
use crate::rules::k8s_names::{label_value_problem, qualified_name_problem};

const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "labels",
    "annotations",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
    "ownerReferences",
    "managedFields",
    "selfLink",
];

pub fn check(document: &Value, findings: &mut Vec<Finding>) {
    let Some(metadata) = document.get("metadata") else {
        findings.push(Finding::error(
            "required-value",
            "metadata.name",
            "Required value: \"metadata.name\" must be set",
        ));
        return;
    };
    let Some(metadata) = metadata.as_object() else {
        findings.push(Finding::error(
            "wrong-type",
            "metadata",
            "Invalid value: metadata must be an object (with at least \"name\")",
        ));
        return;
    };
    match metadata.get("name") {
        None => findings.push(Finding::error(
            "required-value",
            "metadata.name",
            "Required value: \"metadata.name\" must be set",
        )),
        Some(Value::String(_)) => {}
        Some(_) => findings.push(Finding::error(
            "wrong-type",
            "metadata.name",
            "Invalid value: metadata.name must be a string",
        )),
    }
    for field in metadata.keys() {
        if !OBJECT_META_FIELDS.contains(&field.as_str()) {
            findings.push(
                Finding::error(
                    "unknown-field",
                    child_path("metadata", field),
                    format!("unknown field {field:?}: not a field of ObjectMeta"),
                )
                .at_key(),
            );
        }
    }
    for (field, label_values) in [("labels", true), ("annotations", false)] {
        if let Some(map) = metadata.get(field) {
            check_string_map(field, map, label_values, findings);
        }
    }
}

/// `metadata.labels` (`label_values`: values are label values too) or `metadata.annotations`.
fn check_string_map(field: &str, map: &Value, label_values: bool, findings: &mut Vec<Finding>) {
    let path = child_path("metadata", field);
    let Some(map) = map.as_object() else {
        findings.push(Finding::error(
            "wrong-type",
            path,
            format!("Invalid value: metadata.{field} must be a map of strings to strings"),
        ));
        return;
    };
    for (key, value) in map {
        let entry = || child_path(&path, key);
        if let Some(problem) = qualified_name_problem(key) {
            let code = if label_values {
                "invalid-label-key"
            } else {
                "invalid-annotation-key"
            };
            findings.push(
                Finding::error(code, entry(), format!("Invalid value: {key:?}: {problem}"))
                    .at_key(),
            );
        }
        match value.as_str() {
            None => findings.push(Finding::error(
                "wrong-type",
                entry(),
                format!("Invalid value: metadata.{field} values must be strings (quote them: \"{value}\")"),
            )),
            Some(text) if label_values => {
                if let Some(problem) = label_value_problem(text) {
                    findings.push(Finding::error(
                        "invalid-label-value",
                        entry(),
                        format!("Invalid value: {text:?}: {problem}"),
                    ));
                }
            }
            Some(_) => {}
        }
    }
}
