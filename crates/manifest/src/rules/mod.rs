//! tollgate's own rules, beyond the CRD schema: one file per concern. Every rule reads the
//! defaulted document as JSON and tolerates wrong shapes (the schema already reported them).

use serde_json::{Map, Value};

use crate::context::ValidationContext;
use crate::diagnostic::Finding;

pub mod advisories;
pub mod annotations;
pub mod cel;
pub mod durations;
pub mod health_scripts;
pub mod json_path;
pub mod k8s_names;
pub mod lua;
pub mod metadata;
pub mod names;
pub mod promql;
pub mod promql_labels;
pub mod selectors;
pub mod windows;

pub fn check_all(document: &Value, context: &ValidationContext<'_>, findings: &mut Vec<Finding>) {
    metadata::check(document, findings);
    names::check(document, findings);
    durations::check(document, findings);
    windows::check(document, findings);
    selectors::check(document, findings);
    health_scripts::check(document, context, findings);
    annotations::check(document, findings);
    advisories::check(document, findings);
}

/// `(index, stage)` for every stage that is an object.
pub(crate) fn stages(document: &Value) -> impl Iterator<Item = (usize, &Map<String, Value>)> {
    document
        .get("spec")
        .and_then(|s| s.get("stages"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, s)| s.as_object().map(|s| (i, s)))
}

/// The stage's trigger kind (`auto`/`manual`) and body, when it has exactly one.
pub(crate) fn trigger(stage: &Map<String, Value>) -> Option<(&'static str, &Map<String, Value>)> {
    let trigger = stage.get("trigger")?.as_object()?;
    match (trigger.get("auto"), trigger.get("manual")) {
        (Some(auto), None) => Some(("auto", auto.as_object()?)),
        (None, Some(manual)) => Some(("manual", manual.as_object()?)),
        _ => None,
    }
}

pub(crate) fn stage_path(index: usize) -> String {
    format!("spec.stages[{index}]")
}
