//! A RolloutPolicy's analysis gates (issue #32): `spec.analyses` (named checks, each with exactly
//! one provider, its timing, limits and CEL conditions over `result`) and the names each
//! `stages.<stage>.analyses` lists. Their structure is the schema's ([`crate::policy_schema`]);
//! the rules here are the names, one provider each, durations and CEL conditions, each a
//! finding at the field that has it; the providers' own values (PromQL, URL templates,
//! jsonPath) are `policy_analysis_providers`'.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::diagnostic::Finding;
use crate::duration::parse_go_duration;
use crate::located::{child_path, item_path};
use crate::policy_analysis_providers::check_provider;
use crate::policy_fields::check_positive_duration;
use crate::rules::cel::{CelError, check_condition_over};
use crate::suggest::nearest;
use tollgate_model::analysis::AnalysisScope;

/// The providers, of which an analysis has exactly one.
const PROVIDERS: [&str; 3] = ["prometheus", "web", "commitStatus"];
const CONDITIONS: [&str; 2] = ["successCondition", "failureCondition"];
/// The one variable an analysis condition names: the measured value.
const RESULT: &str = "result";

/// An analysis name defined in `spec.analyses`, with the index of its entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefinedAnalysis {
    pub index: usize,
    pub name: String,
}

/// An empty value (`scope:` with nothing after it) means the field is not set, in an analysis
/// and in its provider, as elsewhere in the policy.
pub fn prune_nulls(analyses: &mut Value) {
    let Some(items) = analyses.as_array_mut() else {
        return;
    };
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        item.retain(|_, value| !value.is_null());
        for provider in PROVIDERS.into_iter().chain(["compare"]) {
            if let Some(fields) = item.get_mut(provider).and_then(Value::as_object_mut) {
                fields.retain(|_, value| !value.is_null());
            }
        }
    }
}

/// Checks `spec.analyses`; the names it defines (each once, whatever else is wrong with its
/// entry, so that a stage naming it is not also reported).
pub fn check_analyses(items: &[Value], findings: &mut Vec<Finding>) -> Vec<DefinedAnalysis> {
    let path = "spec.analyses";
    let mut defined: Vec<DefinedAnalysis> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let item_path = item_path(path, index);
        let Some(fields) = item.as_object() else {
            continue;
        };
        if let Some(name) = check_name(fields, &item_path, findings) {
            if defined.iter().any(|d| d.name == name) {
                findings.push(Finding::error(
                    "duplicate-name",
                    child_path(&item_path, "name"),
                    format!("Duplicate value: {name:?}: each analysis needs its own name (stages name it in stages.<stage>.analyses)"),
                ));
            } else {
                defined.push(DefinedAnalysis { index, name });
            }
        }
        let scope = check_settings(fields, &item_path, findings);
        let compares = crate::policy_compare::check_compare(fields, &item_path, findings);
        check_providers(fields, &item_path, scope, compares, findings);
    }
    defined
}

fn check_name(
    fields: &Map<String, Value>,
    item_path: &str,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    match fields.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => Some(name.clone()),
        Some(other @ Value::String(_)) => {
            findings.push(Finding::error(
                "invalid-name",
                child_path(item_path, "name"),
                format!("Invalid value: {other}: an analysis name must be a non-empty string such as \"error-rate\""),
            ));
            None
        }
        _ => None,
    }
}

/// Exactly one provider, each present one checked; a query-based one needs a condition, unless
/// it compares cohorts (the comparison's default verdict judges).
fn check_providers(
    fields: &Map<String, Value>,
    item_path: &str,
    scope: AnalysisScope,
    compares: bool,
    findings: &mut Vec<Finding>,
) {
    let present: Vec<&str> = PROVIDERS
        .into_iter()
        .filter(|p| fields.contains_key(*p))
        .collect();
    match present.as_slice() {
        [] => findings.push(Finding::error(
            "required-value",
            item_path,
            "Required value: an analysis needs exactly one of prometheus, web or commitStatus",
        )),
        [first, more @ ..] => {
            for extra in more {
                findings.push(
                    Finding::error(
                        "analysis-provider",
                        child_path(item_path, extra),
                        format!("Invalid value: an analysis has exactly one of prometheus, web or commitStatus, and this one already has {first}: move {extra} into an analysis of its own"),
                    )
                    .at_key(),
                );
            }
        }
    }
    for provider in &present {
        if let Some(value) = fields.get(*provider).and_then(Value::as_object) {
            check_provider(
                provider,
                value,
                &child_path(item_path, provider),
                scope,
                findings,
            );
        }
    }
    let measures_a_value = present.iter().any(|p| *p != "commitStatus") && !compares;
    if measures_a_value && !CONDITIONS.iter().any(|c| fields.contains_key(*c)) {
        findings.push(Finding::error(
            "required-value",
            item_path,
            format!(
                "Required value: a {} analysis needs successCondition or failureCondition (CEL over `result`, e.g. \"result < 0.01\"): without one no measurement can succeed or fail",
                present.join("/")
            ),
        ));
    }
}

/// Timing and conditions; the scope the templates are rendered for.
fn check_settings(
    fields: &Map<String, Value>,
    item_path: &str,
    findings: &mut Vec<Finding>,
) -> AnalysisScope {
    if let Some(delay) = fields.get("initialDelay").filter(|d| d.is_string()) {
        check_initial_delay(delay, &child_path(item_path, "initialDelay"), findings);
    }
    if let Some(interval) = fields.get("interval").filter(|i| i.is_string()) {
        let path = child_path(item_path, "interval");
        check_positive_duration(interval, &path, "interval", "30s", findings);
    }
    for condition in CONDITIONS {
        if let Some(value) = fields.get(condition).and_then(Value::as_str) {
            check_condition(value, &child_path(item_path, condition), findings);
        }
    }
    match fields.get("scope").and_then(Value::as_str) {
        Some("Cluster") => AnalysisScope::Cluster,
        _ => AnalysisScope::Stage,
    }
}

/// A Go duration, zero allowed (the first measurement at once).
fn check_initial_delay(delay: &Value, path: &str, findings: &mut Vec<Finding>) {
    let Some(Err(problem)) = delay.as_str().map(parse_go_duration) else {
        return;
    };
    findings.push(Finding::error(
        "invalid-duration",
        path,
        format!("Invalid value: {delay}: {problem}"),
    ));
}

/// A CEL expression whose one variable is `result`.
fn check_condition(text: &str, path: &str, findings: &mut Vec<Finding>) {
    match check_condition_over(text, RESULT, condition_hint) {
        Err(e @ CelError::NotBoolean { .. }) => findings.push(Finding::error(
            "condition-not-boolean",
            path,
            format!("Invalid value: {text:?}: {e}"),
        )),
        Err(e) => findings.push(Finding::error("invalid-cel", path, e.to_string())),
        Ok(()) => {}
    }
}

fn condition_hint(name: &str) -> Option<String> {
    Some(format!(
        "an analysis condition names only `{RESULT}`, the measured value (a number, a list for a vector, or the JSON at jsonPath), not `{name}`"
    ))
}

/// Checks a stage's `analyses`: a list of names `spec.analyses` defines, each once. Returns the
/// names that resolve.
pub fn check_stage_analyses(
    items: &[Value],
    path: &str,
    defined: &[DefinedAnalysis],
    findings: &mut Vec<Finding>,
) -> Vec<String> {
    let mut named: Vec<String> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let item_path = item_path(path, index);
        let Some(name) = item.as_str() else {
            continue;
        };
        if named.iter().any(|n| n == name) {
            findings.push(Finding::error(
                "duplicate-name",
                item_path,
                format!("Duplicate value: {name:?}: a stage runs each analysis once"),
            ));
        } else if defined.iter().any(|d| d.name == name) {
            named.push(name.to_string());
        } else {
            findings.push(Finding::error(
                "unknown-analysis",
                item_path,
                unknown_analysis_message(name, defined),
            ));
        }
    }
    named
}

fn unknown_analysis_message(name: &str, defined: &[DefinedAnalysis]) -> String {
    if defined.is_empty() {
        return format!(
            "Invalid value: {name:?}: spec.analyses defines no analysis; add one named {name:?} there"
        );
    }
    let names: Vec<&str> = defined.iter().map(|d| d.name.as_str()).collect();
    let suggestion = nearest(name, names.iter().copied())
        .map_or(String::new(), |n| format!("; did you mean {n:?}?"));
    format!(
        "Invalid value: {name:?}: no analysis of that name in spec.analyses{suggestion} (defined: {})",
        names.join(", ")
    )
}

/// A warning at each analysis no stage names: it would never run.
pub fn unused_analyses(
    defined: &[DefinedAnalysis],
    used: &BTreeSet<String>,
    findings: &mut Vec<Finding>,
) {
    for analysis in defined.iter().filter(|d| !used.contains(&d.name)) {
        findings.push(Finding::warning(
            "analysis-unused",
            child_path(&item_path("spec.analyses", analysis.index), "name"),
            format!(
                "analysis {:?} is named by no stage, so it never runs: list it in spec.stages.<stage>.analyses",
                analysis.name
            ),
        ));
    }
}

#[cfg(test)]
#[path = "policy_analyses_tests.rs"]
mod tests;
