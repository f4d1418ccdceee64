//! `trigger.auto.promotionWindow`: both bounds must be cron expressions that fire.

use serde_json::Value;

use crate::diagnostic::Finding;
use crate::model::TimeWindow;
use crate::rules::{stage_path, stages, trigger};
use crate::window::{Window, WindowError};

pub fn check(document: &Value, findings: &mut Vec<Finding>) {
    for (index, stage) in stages(document) {
        let Some(("auto", body)) = trigger(stage) else {
            continue;
        };
        let Some(window) = body.get("promotionWindow").and_then(Value::as_object) else {
            continue;
        };
        let bound = |name: &str| window.get(name).and_then(Value::as_str).unwrap_or_default();
        let (from, to) = (bound("from"), bound("to"));
        // Empty or missing bounds are reported by the schema (required, minLength 1).
        if from.is_empty() || to.is_empty() {
            continue;
        }
        let parsed = Window::parse(&TimeWindow {
            from: from.to_string(),
            to: to.to_string(),
        });
        if let Err(error) = parsed {
            let code = match error {
                WindowError::NeverFires { .. } => "window-never-fires",
                WindowError::Empty { .. } | WindowError::Invalid { .. } => "invalid-window",
            };
            findings.push(Finding::error(
                code,
                format!(
                    "{}.trigger.auto.promotionWindow.{}",
                    stage_path(index),
                    error.bound()
                ),
                error.to_string(),
            ));
        }
    }
}
