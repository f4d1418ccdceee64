//! tollgate's annotations: `tollgate.dev/paused` is `"true"` or `"false"`;
//! `approve.tollgate.dev/<stage>` names a manual stage and holds a snapshot id prefix (12+ hex
//! characters) or a commit SHA prefix (7+ hex characters), DESIGN D2.

use serde_json::Value;

use crate::diagnostic::Finding;
use crate::located::child_path;
use crate::rules::{stages, trigger};

pub const PAUSED: &str = "tollgate.dev/paused";
pub const APPROVE_PREFIX: &str = "approve.tollgate.dev/";

pub fn check(document: &Value, findings: &mut Vec<Finding>) {
    let Some(annotations) = document
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
    else {
        return;
    };
    for (key, value) in annotations {
        let Some(value) = value.as_str() else {
            continue;
        };
        if key == PAUSED && value != "true" && value != "false" {
            findings.push(Finding::error(
                "invalid-paused-annotation",
                child_path("metadata.annotations", key),
                format!("Unsupported value: {value:?}: supported values: \"true\", \"false\""),
            ));
        } else if let Some(stage_name) = key.strip_prefix(APPROVE_PREFIX) {
            let path = child_path("metadata.annotations", key);
            check_approval(document, stage_name, value, &path, findings);
        }
    }
}

fn check_approval(
    document: &Value,
    stage_name: &str,
    value: &str,
    path: &str,
    findings: &mut Vec<Finding>,
) {
    let stage =
        stages(document).find(|(_, s)| s.get("name").and_then(Value::as_str) == Some(stage_name));
    match stage {
        None => findings.push(
            Finding::warning(
                "approve-unknown-stage",
                path,
                format!("approval for stage {stage_name:?}, which this promotion does not have; it approves nothing"),
            )
            .at_key(),
        ),
        Some((_, stage)) if !matches!(trigger(stage), Some(("manual", _))) => findings.push(
            Finding::warning(
                "approve-not-manual-stage",
                path,
                format!("approval for stage {stage_name:?}, which has no manual trigger; it approves nothing"),
            )
            .at_key(),
        ),
        Some(_) => {}
    }
    let hex = !value.is_empty() && value.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex || value.len() < 7 || value.len() > 64 {
        findings.push(Finding::error(
            "invalid-approve-annotation",
            path,
            format!(
                "Invalid value: {value:?}: must be a snapshot id prefix (at least 12 hex characters, see `tollgate status`) or a commit SHA prefix (at least 7 hex characters)"
            ),
        ));
    }
}
