//! Warnings: the promotion is valid but probably does not do what its author expects.

use serde::Deserialize;
use serde_json::Value;

use crate::diagnostic::Finding;
use crate::model::LabelSelector;
use crate::rules::{stage_path, stages, trigger};

pub fn check(document: &Value, findings: &mut Vec<Finding>) {
    for (index, stage) in stages(document) {
        let selector = stage
            .get("clusterSelector")
            .and_then(|s| LabelSelector::deserialize(s).ok())
            .unwrap_or_default();
        if selector.is_empty() {
            let path = if stage.contains_key("clusterSelector") {
                format!("{}.clusterSelector", stage_path(index))
            } else {
                format!("{}.name", stage_path(index))
            };
            findings.push(Finding::warning(
                "empty-cluster-selector",
                path,
                "empty clusterSelector matches no cluster: this stage deploys nothing and completes at once",
            ));
        }
        if let Some(("manual", manual)) = trigger(stage) {
            let approved = manual.get("approved").and_then(Value::as_bool) == Some(true);
            let reset = manual.get("automaticReset").and_then(Value::as_bool) != Some(false);
            if approved && reset {
                findings.push(Finding::warning(
                    "approval-consumed-by-one-run",
                    format!("{}.trigger.manual.approved", stage_path(index)),
                    "`approved: true` with `automaticReset: true` (the default) is consumed by one run: it approves only the run that started at or before the commit that set it to true; a later run (a new snapshot) waits for a fresh approval although the file still says true, because tollgate never writes to git to reset it. Approve a specific snapshot with `tollgate approve`, or set `automaticReset: false` to approve every run",
                ));
            }
        }
    }
}
