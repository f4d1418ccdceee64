//! Stage `clusterSelector`s: label keys are qualified names, values label values, operators
//! `In|NotIn|Exists|DoesNotExist`, with values exactly when the operator needs them.

use serde_json::{Map, Value};

use crate::diagnostic::Finding;
use crate::field_path::FieldPath;
use crate::rules::k8s_names::{label_value_problem, qualified_name_problem};
use crate::rules::stages;

const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

pub fn check(document: &Value, findings: &mut Vec<Finding>) {
    for (index, stage) in stages(document) {
        let Some(selector) = stage.get("clusterSelector").and_then(Value::as_object) else {
            continue;
        };
        let root = FieldPath::Root;
        let spec = root.key("spec");
        let stages = spec.key("stages");
        let stage = stages.index(index);
        check_selector(selector, &stage.key("clusterSelector"), findings);
    }
}

pub(crate) fn check_selector(
    selector: &Map<String, Value>,
    path: &FieldPath<'_>,
    findings: &mut Vec<Finding>,
) {
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        let labels_path = path.key("matchLabels");
        for (key, value) in labels {
            let entry = labels_path.key(key);
            if let Some(problem) = qualified_name_problem(key) {
                findings.push(
                    Finding::error(
                        "invalid-label-key",
                        entry.render(),
                        format!("Invalid value: {key:?}: {problem}"),
                    )
                    .at_key(),
                );
            }
            if let Some(problem) = value.as_str().and_then(label_value_problem) {
                findings.push(Finding::error(
                    "invalid-label-value",
                    entry.render(),
                    format!("Invalid value: {value}: {problem}"),
                ));
            }
        }
    }
    let expressions_path = path.key("matchExpressions");
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    for (i, expression) in expressions.into_iter().flatten().enumerate() {
        let Some(expression) = expression.as_object() else {
            continue;
        };
        let base = expressions_path.index(i);
        if let Some(key) = expression.get("key").and_then(Value::as_str)
            && let Some(problem) = qualified_name_problem(key)
        {
            findings.push(Finding::error(
                "invalid-label-key",
                base.key("key").render(),
                format!("Invalid value: {key:?}: {problem}"),
            ));
        }
        let values = expression.get("values").and_then(Value::as_array);
        let values_path = base.key("values");
        for (j, value) in values.into_iter().flatten().enumerate() {
            if let Some(problem) = value.as_str().and_then(label_value_problem) {
                findings.push(Finding::error(
                    "invalid-label-value",
                    values_path.index(j).render(),
                    format!("Invalid value: {value}: {problem}"),
                ));
            }
        }
        let Some(operator) = expression.get("operator").and_then(Value::as_str) else {
            continue;
        };
        let count = values.map_or(0, Vec::len);
        match operator {
            "In" | "NotIn" if count == 0 => findings.push(Finding::error(
                "selector-values-required",
                values_path.render(),
                format!("Required value: operator {operator} needs at least one value"),
            )),
            "Exists" | "DoesNotExist" if count > 0 => findings.push(Finding::error(
                "selector-values-forbidden",
                values_path.render(),
                format!("Forbidden: operator {operator} takes no values"),
            )),
            op if !OPERATORS.contains(&op) => findings.push(Finding::error(
                "invalid-selector-operator",
                base.key("operator").render(),
                format!("Unsupported value: {op:?}: supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\""),
            )),
            _ => {}
        }
    }
}
