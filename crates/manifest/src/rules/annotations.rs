//! tollgate's annotations: `tollgate.dev/paused` is `"true"` or `"false"`;
//! `approve.tollgate.dev/<stage>` names a manual stage and holds a snapshot id prefix (12+ hex
//! characters) or a commit SHA prefix (7+ hex characters), docs/architecture.md#d2-approvals-are-consumed-never-lost. An approval that cannot
//! name anything is a warning: it approves nothing, which the user must hear about.

use serde_json::Value;

use crate::diagnostic::Finding;
use crate::location::child_path;
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
    // A warning, not an error: an approval that names nothing approves nothing, and must not
    // make the whole promotion invalid (its rollout goes on; only this gate stays closed).
    if !hex || value.len() < 7 || value.len() > 64 {
        findings.push(Finding::warning(
            "invalid-approve-annotation",
            path,
            format!(
                "Invalid value: {value:?}: must be a snapshot id prefix (at least 12 hex characters, see `tollgate status`) or a commit SHA prefix (at least 7 hex characters); it approves nothing"
            ),
        ));
    }
}

/// Approvals of manual stages whose value is long enough to be a snapshot id prefix (12+ hex)
/// but is not a prefix of `snapshot_id`, the id of the document's own content: unless the value
/// is (a prefix of) the SHA of the commit that introduced this content, it approves nothing.
/// Only a caller with the git history can tell; `tollgate validate` drops these warnings for
/// values that are commits on HEAD's first-parent history.
pub fn check_snapshot_names(
    promotion: &crate::model::ClusterPromotion,
    snapshot_id: &str,
    findings: &mut Vec<Finding>,
) {
    for (key, value) in &promotion.metadata.annotations {
        let Some(stage) = key.strip_prefix(APPROVE_PREFIX) else {
            continue;
        };
        let manual = promotion
            .stage(stage)
            .is_some_and(|s| matches!(s.trigger, Some(crate::model::Trigger::Manual(_))));
        let hex = value.bytes().all(|b| b.is_ascii_hexdigit());
        if !manual || !hex || value.len() < 12 || value.len() > 64 {
            continue;
        }
        if !snapshot_id.starts_with(&value.to_ascii_lowercase()) {
            findings.push(Finding::warning(
                APPROVE_NAMES_NO_SNAPSHOT,
                child_path("metadata.annotations", key),
                format!(
                    "{value:?} is not a prefix of this content's snapshot id ({}…): unless it is the SHA of the commit that introduced this content, it approves nothing",
                    &snapshot_id[..12.min(snapshot_id.len())]
                ),
            ));
        }
    }
}

/// The code of [`check_snapshot_names`]' warning.
pub const APPROVE_NAMES_NO_SNAPSHOT: &str = "approve-names-no-snapshot";
