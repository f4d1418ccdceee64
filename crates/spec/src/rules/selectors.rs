//! Stage `clusterSelector`s: label keys are qualified names, values label values, operators
//! `In|NotIn|Exists|DoesNotExist`, with values exactly when the operator needs them.

use serde_json::{Map, Value};

use crate::diagnostic::Finding;
use crate::located::child_path;
use crate::rules::k8s_names::{label_value_problem, qualified_name_problem};
use crate::rules::{stage_path, stages};

const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

pub fn check(document: &Value, findings: &mut Vec<Finding>) {
    for (index, stage) in stages(document) {
        let Some(selector) = stage.get("clusterSelector").and_then(Value::as_object) else {
            continue;
        };
        check_selector(
            selector,
            &format!("{}.clusterSelector", stage_path(index)),
            findings,
        );
    }
}

fn check_selector(selector: &Map<String, Value>, path: &str, findings: &mut Vec<Finding>) {
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        let labels_path = child_path(path, "matchLabels");
        for (key, value) in labels {
            let entry = child_path(&labels_path, key);
            if let Some(problem) = qualified_name_problem(key) {
                findings.push(
                    Finding::error(
                        "invalid-label-key",
                        &entry,
                        format!("Invalid value: {key:?}: {problem}"),
                    )
                    .at_key(),
                );
            }
            if let Some(problem) = value.as_str().and_then(label_value_problem) {
                findings.push(Finding::error(
                    "invalid-label-value",
                    &entry,
                    format!("Invalid value: {value}: {problem}"),
                ));
            }
        }
    }
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    for (i, expression) in expressions.into_iter().flatten().enumerate() {
        let Some(expression) = expression.as_object() else {
            continue;
        };
        let base = format!("{path}.matchExpressions[{i}]");
        if let Some(key) = expression.get("key").and_then(Value::as_str)
            && let Some(problem) = qualified_name_problem(key)
        {
            findings.push(Finding::error(
                "invalid-label-key",
                format!("{base}.key"),
                format!("Invalid value: {key:?}: {problem}"),
            ));
        }
        let values = expression.get("values").and_then(Value::as_array);
        for (j, value) in values.into_iter().flatten().enumerate() {
            if let Some(problem) = value.as_str().and_then(label_value_problem) {
                findings.push(Finding::error(
                    "invalid-label-value",
                    format!("{base}.values[{j}]"),
                    format!("Invalid value: {value}: {problem}"),
                ));
            }
        }
        let Some(operator) = expression.get("operator").and_then(Value::as_str) else {
            continue;
        };
        let count = values.map_or(0, Vec::len);
        let operator_path = format!("{base}.operator");
        match operator {
            "In" | "NotIn" if count == 0 => findings.push(Finding::error(
                "selector-values-required",
                format!("{base}.values"),
                format!("Required value: operator {operator} needs at least one value"),
            )),
            "Exists" | "DoesNotExist" if count > 0 => findings.push(Finding::error(
                "selector-values-forbidden",
                format!("{base}.values"),
                format!("Forbidden: operator {operator} takes no values"),
            )),
            op if !OPERATORS.contains(&op) => findings.push(Finding::error(
                "invalid-selector-operator",
                operator_path,
                format!("Unsupported value: {op:?}: supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\""),
            )),
            _ => {}
        }
    }
}
