//! Shape checks every part of a RolloutPolicy uses: unknown fields (errors at their key, so a
//! typo never silently drops a setting) and positive durations.

use serde_json::{Map, Value};

use crate::diagnostic::Finding;
use crate::duration::parse_go_duration;
use crate::located::child_path;
use crate::rules::k8s_names::dns1123_label_problem;

/// An error at the key `path` of a per-stage mapping (`spec.stages`, `spec.approvals`) when
/// `stage` cannot be a stage's name.
pub fn stage_name_key(stage: &str, path: &str, findings: &mut Vec<Finding>) {
    if let Some(problem) = dns1123_label_problem(stage) {
        findings.push(
            Finding::error(
                "invalid-stage-name",
                path,
                format!("Invalid value: {stage:?}: no stage can have this name, stage names are DNS-1123 labels: {problem}"),
            )
            .at_key(),
        );
    }
}

/// An error at the key of every field of `fields` not in `known`.
pub fn unknown_fields(
    fields: &Map<String, Value>,
    path: &str,
    known: &[&str],
    what: &str,
    findings: &mut Vec<Finding>,
) {
    for field in fields.keys().filter(|f| !known.contains(&f.as_str())) {
        findings.push(
            Finding::error(
                "unknown-field",
                child_path(path, field),
                format!(
                    "unknown field {field:?}: {what} has only {}",
                    known.join(", ")
                ),
            )
            .at_key(),
        );
    }
}

/// A Go duration greater than zero (`timeout`, `retryFor`, an analysis's `interval`).
pub fn check_positive_duration(
    value: &Value,
    path: &str,
    field: &str,
    example: &str,
    findings: &mut Vec<Finding>,
) {
    match value.as_str().map(parse_go_duration) {
        Some(Ok(d)) if !d.is_zero() => {}
        _ => findings.push(Finding::error(
            "invalid-duration",
            path,
            format!("Invalid value: {value}: {field} must be a Go duration greater than zero, such as \"{example}\""),
        )),
    }
}
