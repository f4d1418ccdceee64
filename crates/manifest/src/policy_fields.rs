//! Rules every part of a RolloutPolicy uses: stage names as keys, and positive durations.

use serde_json::Value;

use crate::diagnostic::Finding;
use crate::duration::parse_go_duration;
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
            positive_duration_message(value, field, example),
        )),
    }
}

/// Why `value` is no positive Go duration.
pub fn positive_duration_message(value: &Value, field: &str, example: &str) -> String {
    format!(
        "Invalid value: {value}: {field} must be a Go duration greater than zero, such as \"{example}\""
    )
}
