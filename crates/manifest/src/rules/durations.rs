//! `trigger.{auto,manual}.delay`: a Go duration (`metav1.Duration`), such as `5m` or `1h30m`.

use serde_json::Value;

use crate::diagnostic::Finding;
use crate::duration::parse_go_duration;
use crate::rules::{stage_path, stages, trigger};

pub fn check(document: &Value, findings: &mut Vec<Finding>) {
    for (index, stage) in stages(document) {
        let Some((kind, body)) = trigger(stage) else {
            continue;
        };
        let Some(delay) = body.get("delay").and_then(Value::as_str) else {
            continue;
        };
        if let Err(e) = parse_go_duration(delay) {
            findings.push(Finding::error(
                "invalid-duration",
                format!("{}.trigger.{kind}.delay", stage_path(index)),
                format!("Invalid value: {delay:?}: {e}"),
            ));
        }
    }
}
