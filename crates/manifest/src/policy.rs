//! Reading `RolloutPolicy` documents (`tollgate.dev/v1alpha1`): the same located YAML as
//! promotions, validated field by field with file/line/column diagnostics, then turned into the
//! model's [`RolloutPolicy`]. There is no CRD schema for this kind: the rules are written out here,
//! and unknown fields are errors (a typo must never silently drop a deadline).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::diagnostic::locate;
use crate::diagnostic::{Diagnostic, Finding, Severity};
use crate::duration::parse_go_duration;
use crate::field_path::FieldPath;
use crate::loc_tree::DocumentLocations;
use crate::located::{ConversionProblem, child_path};
use crate::policy_analyses::{self, DefinedAnalysis};
use crate::policy_fields::{check_positive_duration, stage_name_key, unknown_fields};
use crate::rules;
use crate::rules::k8s_names::{dns1123_label_problem, dns1123_subdomain_problem};
use tollgate_model::blackout::Blackout;
use tollgate_model::policy::{
    FailureBudget, OnNewSnapshot, OnRewind, POLICY_API_VERSION, POLICY_KIND, RollbackStrategy,
    RolloutPolicy,
};
use tollgate_model::policy::{NotifyEvent, NotifyType};

/// The API group of tollgate's own kinds.
pub const POLICY_API_GROUP: &str = "tollgate.dev";

const TOP_LEVEL_FIELDS: &[&str] = &["apiVersion", "kind", "metadata", "spec"];
const SPEC_FIELDS: &[&str] = &[
    "selector",
    "progressDeadline",
    "maxFailures",
    "onFailure",
    "stages",
    "onNewSnapshot",
    "blackouts",
    "notify",
    "analyses",
    "approvals",
    "rollback",
    "admins",
    "onRewind",
];
const BLACKOUT_FIELDS: &[&str] = &["from", "to", "timeZone", "reason"];
const OVERRIDE_FIELDS: &[&str] = &[
    "progressDeadline",
    "maxFailures",
    "onFailure",
    "waves",
    "analyses",
    "pausedClusters",
];
const WAVES_FIELDS: &[&str] = &["sortingLabelKey", "size", "canary", "pause"];
const SELECTOR_FIELDS: &[&str] = &["matchLabels", "matchExpressions"];
const EXPRESSION_FIELDS: &[&str] = &["key", "operator", "values"];
const ON_FAILURE_VALUES: &[&str] = &["Halt", "Rollback"];
const PAUSED_CLUSTERS_VALUES: &[&str] = &["Wait", "Skip"];

/// One `RolloutPolicy` document of a file.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedPolicy {
    pub name: Option<String>,
    /// Line of the document's first node.
    pub line: u32,
    /// Line of its `spec.selector` key, when it has one: where a message about the promotions
    /// it selects points (issue #45: not at the document's first line).
    pub selector_line: Option<u32>,
    /// `None` iff there is an error diagnostic.
    pub policy: Option<RolloutPolicy>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Whether a document is read as a policy: kind `RolloutPolicy` in group `tollgate.dev`, whatever
/// the version (an unsupported version is an error on the policy, not a silently ignored file).
pub fn is_policy_document(api_version: Option<&str>, kind: Option<&str>) -> bool {
    let group = api_version.and_then(|v| v.split_once('/')).map(|(g, _)| g);
    kind == Some(POLICY_KIND) && group == Some(POLICY_API_GROUP)
}

/// Validates one policy document and, when it has no error, builds the policy.
pub fn read_policy(
    file: &str,
    mut document: Value,
    line: u32,
    locations: &DocumentLocations<'_>,
    problems: Vec<ConversionProblem>,
) -> ParsedPolicy {
    let name = document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut findings: Vec<Finding> = problems
        .into_iter()
        .map(|p| Finding::error("yaml-value", p.path, p.message).at(p.loc.line, p.loc.column))
        .collect();
    prune_nulls(&mut document);
    check_document(&document, &mut findings);
    let has_errors = findings.iter().any(|f| f.severity == Severity::Error);
    let policy = if has_errors {
        None
    } else {
        match serde_json::from_value::<RolloutPolicy>(document) {
            Ok(policy) => Some(policy),
            Err(e) => {
                // The checks accept only documents the model can hold; reaching this is a bug,
                // reported rather than hidden.
                findings.push(Finding::error(
                    "model-mismatch",
                    "",
                    format!("internal error: validated RolloutPolicy does not fit the model: {e}"),
                ));
                None
            }
        }
    };
    let mut diagnostics: Vec<Diagnostic> = findings
        .iter()
        .map(|f| locate(file, f, locations.map()))
        .collect();
    diagnostics.sort_by_key(|d| (d.line, d.column, d.severity));
    let selector_line = locations
        .get("spec.selector")
        .and_then(|at| at.key)
        .map(|key| key.line);
    ParsedPolicy {
        name,
        line,
        selector_line,
        policy,
        diagnostics,
    }
}

/// An empty value (`selector:` with nothing after it) means the field is not set, as the API
/// server's null pruning does for CRDs.
fn prune_nulls(document: &mut Value) {
    let Some(spec) = document.get_mut("spec") else {
        return;
    };
    if spec.is_null() {
        *spec = Value::Object(Map::new());
    }
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    spec.retain(|_, value| !value.is_null());
    if let Some(analyses) = spec.get_mut("analyses") {
        policy_analyses::prune_nulls(analyses);
    }
    if let Some(stages) = spec.get_mut("stages").and_then(Value::as_object_mut) {
        for stage in stages.values_mut() {
            if let Some(stage) = stage.as_object_mut() {
                stage.retain(|_, value| !value.is_null());
            }
        }
    }
}

fn check_document(document: &Value, findings: &mut Vec<Finding>) {
    let Some(fields) = document.as_object() else {
        findings.push(Finding::error(
            "wrong-type",
            "",
            "Invalid value: a RolloutPolicy document must be a mapping",
        ));
        return;
    };
    unknown_fields(fields, "", TOP_LEVEL_FIELDS, "a RolloutPolicy", findings);
    let api_version = fields.get("apiVersion").and_then(Value::as_str);
    if api_version != Some(POLICY_API_VERSION) {
        findings.push(Finding::error(
            "unsupported-api-version",
            "apiVersion",
            format!(
                "Unsupported value: {:?}: supported values: {POLICY_API_VERSION:?}",
                api_version.unwrap_or_default()
            ),
        ));
    }
    rules::metadata::check(document, findings);
    if let Some(name) = document.pointer("/metadata/name").and_then(Value::as_str)
        && let Some(problem) = dns1123_subdomain_problem(name)
    {
        findings.push(Finding::error(
            "invalid-name",
            "metadata.name",
            format!(
                "Invalid value: {name:?}: a RolloutPolicy name must be a DNS-1123 subdomain: {problem}"
            ),
        ));
    }
    match fields.get("spec") {
        None => {}
        Some(Value::Object(spec)) => check_spec(spec, findings),
        Some(_) => findings.push(Finding::error(
            "wrong-type",
            "spec",
            "Invalid value: spec must be a mapping",
        )),
    }
}

fn check_spec(spec: &Map<String, Value>, findings: &mut Vec<Finding>) {
    unknown_fields(spec, "spec", SPEC_FIELDS, "a RolloutPolicy spec", findings);
    if let Some(selector) = spec.get("selector") {
        check_selector(selector, "spec.selector", findings);
    }
    check_budget_fields(spec, "spec", findings);
    if let Some(policy) = spec.get("onNewSnapshot") {
        check_on_new_snapshot(policy, findings);
    }
    if let Some(blackouts) = spec.get("blackouts") {
        check_blackouts(blackouts, findings);
    }
    if let Some(rollback) = spec.get("rollback") {
        check_rollback(rollback, findings);
    }
    if let Some(notify) = spec.get("notify") {
        check_notify(notify, findings);
    }
    if let Some(approvals) = spec.get("approvals") {
        crate::policy_approvals::check_approvals(approvals, findings);
    }
    if let Some(admins) = spec.get("admins") {
        crate::policy_approvals::check_principals(admins, "spec.admins", "admins", findings);
    }
    if let Some(on_rewind) = spec.get("onRewind") {
        check_enum(on_rewind, "spec.onRewind", &OnRewind::VALUES, findings);
    }
    let analyses = spec
        .get("analyses")
        .map(|a| policy_analyses::check_analyses(a, findings))
        .unwrap_or_default();
    let used = spec
        .get("stages")
        .map(|stages| check_stages(stages, &analyses, findings))
        .unwrap_or_default();
    policy_analyses::unused_analyses(&analyses, &used, findings);
}

/// The stage overrides; the analysis names they use.
fn check_stages(
    stages: &Value,
    analyses: &[DefinedAnalysis],
    findings: &mut Vec<Finding>,
) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let Some(stages) = stages.as_object() else {
        findings.push(Finding::error(
            "wrong-type",
            "spec.stages",
            "Invalid value: stages must be a mapping from stage name to overrides, e.g. `production: {maxFailures: 0}`",
        ));
        return used;
    };
    for (stage, body) in stages {
        let path = child_path("spec.stages", stage);
        stage_name_key(stage, &path, findings);
        let Some(body) = body.as_object() else {
            findings.push(Finding::error(
                "wrong-type",
                path,
                "Invalid value: a stage override must be a mapping of progressDeadline, maxFailures, onFailure, waves, analyses and pausedClusters",
            ));
            continue;
        };
        unknown_fields(body, &path, OVERRIDE_FIELDS, "a stage override", findings);
        check_budget_fields(body, &path, findings);
        if let Some(paused) = body.get("pausedClusters") {
            check_paused_clusters(paused, &child_path(&path, "pausedClusters"), findings);
        }
        if let Some(waves) = body.get("waves") {
            check_waves(waves, &child_path(&path, "waves"), findings);
        }
        if let Some(names) = body.get("analyses") {
            let path = child_path(&path, "analyses");
            used.extend(policy_analyses::check_stage_analyses(
                names, &path, analyses, findings,
            ));
        }
    }
    used
}

/// `pausedClusters`: `Wait` (the default) or `Skip`.
fn check_paused_clusters(value: &Value, path: &str, findings: &mut Vec<Finding>) {
    if value
        .as_str()
        .is_some_and(|v| PAUSED_CLUSTERS_VALUES.contains(&v))
    {
        return;
    }
    findings.push(Finding::error(
        "unsupported-value",
        path,
        format!("Unsupported value: {value}: supported values: \"Wait\", \"Skip\""),
    ));
}

/// `waves`: a sorting label key, a size (count or percentage), an optional canary and pause.
fn check_waves(waves: &Value, path: &str, findings: &mut Vec<Finding>) {
    let Some(fields) = waves.as_object() else {
        findings.push(Finding::error(
            "wrong-type",
            path,
            "Invalid value: waves must be a mapping of sortingLabelKey, size, canary and pause",
        ));
        return;
    };
    unknown_fields(fields, path, WAVES_FIELDS, "waves", findings);
    match fields.get("sortingLabelKey") {
        None => {}
        Some(Value::String(key)) => {
            if let Some(problem) = rules::k8s_names::qualified_name_problem(key) {
                findings.push(Finding::error(
                    "invalid-label-key",
                    child_path(path, "sortingLabelKey"),
                    format!("Invalid value: {key:?}: {problem}"),
                ));
            }
        }
        Some(other) => findings.push(Finding::error(
            "wrong-type",
            child_path(path, "sortingLabelKey"),
            format!(
                "Invalid value: {other}: sortingLabelKey must be a label key such as \"order\""
            ),
        )),
    }
    let size_path = child_path(path, "size");
    let size_problem = match fields.get("size") {
        None => Some((
            "required",
            "Required value: waves need a size: a count such as 10 or a percentage such as \"10%\""
                .to_string(),
        )),
        Some(Value::Number(n))
            if n.as_u64()
                .is_some_and(|n| n >= 1 && u32::try_from(n).is_ok()) =>
        {
            None
        }
        Some(Value::String(text)) if text.trim_end().ends_with('%') => {
            match FailureBudget::parse(text) {
                Ok(FailureBudget::Percent(p)) if p >= 1 => None,
                Ok(_) => Some((
                    "invalid-wave-size",
                    format!("Invalid value: {text:?}: a wave size must be at least 1%"),
                )),
                Err(e) => Some((
                    "invalid-wave-size",
                    format!("Invalid value: {}", e.replace("maxFailures", "size")),
                )),
            }
        }
        Some(other) => Some((
            "invalid-wave-size",
            format!(
                "Invalid value: {other}: size must be a count of at least 1 or a percentage such as \"10%\""
            ),
        )),
    };
    if let Some((rule, message)) = size_problem {
        findings.push(Finding::error(rule, size_path, message));
    }
    if let Some(canary) = fields.get("canary")
        && canary.as_u64().is_none_or(|n| u32::try_from(n).is_err())
    {
        findings.push(Finding::error(
            "wrong-type",
            child_path(path, "canary"),
            format!("Invalid value: {canary}: canary must be a count of clusters such as 1"),
        ));
    }
    if let Some(pause) = fields.get("pause") {
        let pause_path = child_path(path, "pause");
        match pause.as_str().map(parse_go_duration) {
            Some(Ok(_)) => {}
            Some(Err(e)) => findings.push(Finding::error(
                "invalid-duration",
                pause_path,
                format!("Invalid value: {pause}: {e}"),
            )),
            None => findings.push(Finding::error(
                "wrong-type",
                pause_path,
                format!("Invalid value: {pause}: pause must be a Go duration such as \"2m\""),
            )),
        }
    }
}

/// `rollback: {strategy: Fast | Staged}`.
fn check_rollback(value: &Value, findings: &mut Vec<Finding>) {
    let Some(fields) = value.as_object() else {
        findings.push(Finding::error(
            "wrong-type",
            "spec.rollback",
            format!(
                "Invalid value: {value}: rollback must be a mapping such as `{{strategy: Fast}}`"
            ),
        ));
        return;
    };
    unknown_fields(fields, "spec.rollback", &["strategy"], "rollback", findings);
    let Some(strategy) = fields.get("strategy") else {
        return;
    };
    if strategy
        .as_str()
        .is_some_and(|v| RollbackStrategy::VALUES.contains(&v))
    {
        return;
    }
    let supported = RollbackStrategy::VALUES
        .map(|v| format!("{v:?}"))
        .join(", ");
    findings.push(Finding::error(
        "unsupported-value",
        "spec.rollback.strategy",
        format!("Unsupported value: {strategy}: supported values: {supported}"),
    ));
}

fn check_on_new_snapshot(value: &Value, findings: &mut Vec<Finding>) {
    check_enum(
        value,
        "spec.onNewSnapshot",
        &OnNewSnapshot::VALUES,
        findings,
    );
}

/// A string that must be one of `values`.
fn check_enum(value: &Value, path: &str, values: &[&str], findings: &mut Vec<Finding>) {
    if value.as_str().is_some_and(|v| values.contains(&v)) {
        return;
    }
    let supported = values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    findings.push(Finding::error(
        "unsupported-value",
        path,
        format!("Unsupported value: {value}: supported values: {supported}"),
    ));
}

/// Each blackout's shape, then its interval as the model reads it (dates, zone, `to > from`).
fn check_blackouts(blackouts: &Value, findings: &mut Vec<Finding>) {
    let Some(items) = blackouts.as_array() else {
        findings.push(Finding::error(
            "wrong-type",
            "spec.blackouts",
            "Invalid value: blackouts must be a list of {from, to, timeZone, reason}",
        ));
        return;
    };
    for (index, item) in items.iter().enumerate() {
        let path = crate::located::item_path("spec.blackouts", index);
        let Some(fields) = item.as_object() else {
            findings.push(Finding::error(
                "wrong-type",
                path,
                "Invalid value: a blackout must be a mapping of from, to, timeZone and reason",
            ));
            continue;
        };
        unknown_fields(fields, &path, BLACKOUT_FIELDS, "a blackout", findings);
        let mut shaped = true;
        for field in BLACKOUT_FIELDS {
            let value = fields.get(*field);
            let required = matches!(*field, "from" | "to");
            let problem = match value {
                None if required => Some(format!("Required value: a blackout needs {field}")),
                Some(v) if !v.is_string() => Some(format!(
                    "Invalid value: {v}: {field} must be a string (quote dates: \"2026-12-20\")"
                )),
                _ => None,
            };
            if let Some(message) = problem {
                shaped = false;
                let rule = if value.is_none() {
                    "required"
                } else {
                    "wrong-type"
                };
                findings.push(Finding::error(rule, child_path(&path, field), message));
            }
        }
        if !shaped {
            continue;
        }
        if let Ok(blackout) = serde_json::from_value::<Blackout>(item.clone())
            && let Err(error) = blackout.interval()
        {
            findings.push(Finding::error(
                "invalid-blackout",
                child_path(&path, error.field),
                format!("Invalid value: {error}"),
            ));
        }
    }
}

/// `progressDeadline`, `maxFailures` and `onFailure`, policy-wide or in a stage override.
fn check_budget_fields(fields: &Map<String, Value>, path: &str, findings: &mut Vec<Finding>) {
    if let Some(deadline) = fields.get("progressDeadline") {
        check_deadline(deadline, &child_path(path, "progressDeadline"), findings);
    }
    if let Some(budget) = fields.get("maxFailures") {
        check_max_failures(budget, &child_path(path, "maxFailures"), findings);
    }
    if let Some(on_failure) = fields.get("onFailure") {
        let path = child_path(path, "onFailure");
        match on_failure.as_str() {
            Some(value) if ON_FAILURE_VALUES.contains(&value) => {}
            _ => findings.push(Finding::error(
                "unsupported-value",
                path,
                format!(
                    "Unsupported value: {on_failure}: supported values: \"Halt\", \"Rollback\""
                ),
            )),
        }
    }
}

fn check_deadline(deadline: &Value, path: &str, findings: &mut Vec<Finding>) {
    let Some(text) = deadline.as_str() else {
        findings.push(Finding::error(
            "wrong-type",
            path,
            format!("Invalid value: {deadline}: progressDeadline must be a Go duration such as \"10m\" or \"1h30m\""),
        ));
        return;
    };
    match parse_go_duration(text) {
        Err(e) => findings.push(Finding::error(
            "invalid-duration",
            path,
            format!("Invalid value: {text:?}: {e}"),
        )),
        Ok(duration) if duration.is_zero() => findings.push(Finding::error(
            "invalid-duration",
            path,
            format!("Invalid value: {text:?}: progressDeadline must be greater than zero (leave it out to wait without a deadline)"),
        )),
        Ok(_) => {}
    }
}

fn check_max_failures(budget: &Value, path: &str, findings: &mut Vec<Finding>) {
    let problem = match budget {
        Value::Number(n) if n.as_u64().is_some_and(|n| u32::try_from(n).is_ok()) => None,
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => Some(format!(
            "Invalid value: {n}: maxFailures must not be negative"
        )),
        Value::String(text) if text.trim().parse::<u32>().is_ok() => Some(format!(
            "Invalid value: {text:?}: a percentage needs a trailing '%' (\"{text}%\"); a count is written without quotes"
        )),
        Value::String(text) if text.trim_end().ends_with('%') => FailureBudget::parse(text)
            .err()
            .map(|e| format!("Invalid value: {e}")),
        other => Some(format!(
            "Invalid value: {other}: maxFailures must be a non-negative count such as 2 or a percentage such as \"10%\""
        )),
    };
    if let Some(message) = problem {
        findings.push(Finding::error("invalid-max-failures", path, message));
    }
}

/// The shape of `spec.selector`; its label keys, values and operators are checked by the same
/// rule as stage `clusterSelector`s.
fn check_selector(selector: &Value, path: &str, findings: &mut Vec<Finding>) {
    let Some(fields) = selector.as_object() else {
        findings.push(Finding::error(
            "wrong-type",
            path,
            "Invalid value: selector must be a label selector mapping ({} selects every promotion)",
        ));
        return;
    };
    unknown_fields(fields, path, SELECTOR_FIELDS, "a label selector", findings);
    if let Some(labels) = fields.get("matchLabels") {
        let labels_path = child_path(path, "matchLabels");
        match labels.as_object() {
            Some(labels) => {
                for (key, value) in labels.iter().filter(|(_, v)| !v.is_string()) {
                    findings.push(Finding::error(
                        "wrong-type",
                        child_path(&labels_path, key),
                        format!("Invalid value: {value}: label values must be strings (quote them: \"{value}\")"),
                    ));
                }
            }
            None => findings.push(Finding::error(
                "wrong-type",
                labels_path,
                "Invalid value: matchLabels must be a mapping of label keys to values",
            )),
        }
    }
    if let Some(expressions) = fields.get("matchExpressions") {
        check_expressions_shape(expressions, &child_path(path, "matchExpressions"), findings);
    }
    let root = FieldPath::Root;
    let spec = root.key("spec");
    rules::selectors::check_selector(fields, &spec.key("selector"), findings);
}

fn check_expressions_shape(expressions: &Value, path: &str, findings: &mut Vec<Finding>) {
    let Some(expressions) = expressions.as_array() else {
        findings.push(Finding::error(
            "wrong-type",
            path,
            "Invalid value: matchExpressions must be a list of {key, operator, values}",
        ));
        return;
    };
    for (index, expression) in expressions.iter().enumerate() {
        let item = crate::located::item_path(path, index);
        let Some(expression) = expression.as_object() else {
            findings.push(Finding::error(
                "wrong-type",
                item,
                "Invalid value: a match expression must be a mapping of key, operator and values",
            ));
            continue;
        };
        unknown_fields(
            expression,
            &item,
            EXPRESSION_FIELDS,
            "a match expression",
            findings,
        );
        for field in ["key", "operator"] {
            match expression.get(field) {
                Some(Value::String(_)) => {}
                None => findings.push(Finding::error(
                    "required-value",
                    child_path(&item, field),
                    format!("Required value: {field} must be set"),
                )),
                Some(other) => findings.push(Finding::error(
                    "wrong-type",
                    child_path(&item, field),
                    format!("Invalid value: {other}: {field} must be a string"),
                )),
            }
        }
        let values = expression.get("values");
        let all_strings = values
            .and_then(Value::as_array)
            .is_some_and(|values| values.iter().all(Value::is_string));
        if values.is_some() && !all_strings {
            findings.push(Finding::error(
                "wrong-type",
                child_path(&item, "values"),
                "Invalid value: values must be a list of strings",
            ));
        }
    }
}

// ---- spec.notify (issue #19): where to tell people about the rollouts ----

const NOTIFY_FIELDS: &[&str] = &[
    "name",
    "type",
    "addressSecretFile",
    "events",
    "targetURL",
    "timeout",
    "retryFor",
];

/// `spec.notify`: a list of endpoints, each named once, of a known type, reading its address
/// from a file, listening to at least one known event.
fn check_notify(notify: &Value, findings: &mut Vec<Finding>) {
    let path = "spec.notify";
    let Some(endpoints) = notify.as_array() else {
        findings.push(Finding::error(
            "wrong-type",
            path,
            "Invalid value: notify must be a list of endpoints ({name, type, addressSecretFile, events})",
        ));
        return;
    };
    let mut names = std::collections::BTreeSet::new();
    for (index, endpoint) in endpoints.iter().enumerate() {
        let item = crate::located::item_path(path, index);
        let Some(fields) = endpoint.as_object() else {
            findings.push(Finding::error(
                "wrong-type",
                item,
                "Invalid value: a notify endpoint must be a mapping of name, type, addressSecretFile and events",
            ));
            continue;
        };
        unknown_fields(fields, &item, NOTIFY_FIELDS, "a notify endpoint", findings);
        for field in ["name", "type", "addressSecretFile", "events"] {
            if !fields.contains_key(field) {
                findings.push(Finding::error(
                    "required-value",
                    item.clone(),
                    format!("Required value: {field} must be set"),
                ));
            }
        }
        if let Some(name) = fields.get("name") {
            let name_path = child_path(&item, "name");
            match name.as_str() {
                Some(text) if dns1123_label_problem(text).is_none() => {
                    if !names.insert(text.to_string()) {
                        findings.push(Finding::error(
                            "duplicate-name",
                            name_path,
                            format!("Duplicate value: {text:?}: each notify endpoint needs its own name"),
                        ));
                    }
                }
                _ => findings.push(Finding::error(
                    "invalid-name",
                    name_path,
                    format!("Invalid value: {name}: an endpoint name must be a DNS-1123 label such as \"platform-chat\""),
                )),
            }
        }
        check_notify_fields(fields, &item, findings);
    }
}

fn check_notify_fields(fields: &Map<String, Value>, item: &str, findings: &mut Vec<Finding>) {
    if let Some(kind) = fields.get("type") {
        let known = NotifyType::ALL
            .iter()
            .any(|t| kind.as_str() == Some(t.as_str()));
        if !known {
            let supported: Vec<String> = NotifyType::ALL
                .iter()
                .map(|t| format!("{:?}", t.as_str()))
                .collect();
            findings.push(Finding::error(
                "unsupported-value",
                child_path(item, "type"),
                format!(
                    "Unsupported value: {kind}: supported values: {}",
                    supported.join(", ")
                ),
            ));
        }
    }
    if let Some(file) = fields.get("addressSecretFile")
        && file.as_str().is_none_or(|f| f.trim().is_empty())
    {
        findings.push(Finding::error(
            "required-value",
            child_path(item, "addressSecretFile"),
            format!("Invalid value: {file}: addressSecretFile must be the path of a file holding the endpoint's URL (and token or secret)"),
        ));
    }
    if let Some(events) = fields.get("events") {
        check_notify_events(events, &child_path(item, "events"), findings);
    }
    if let Some(url) = fields.get("targetURL") {
        let ok = url
            .as_str()
            .is_some_and(|u| u.starts_with("https://") || u.starts_with("http://"));
        if !ok {
            findings.push(Finding::error(
                "invalid-url",
                child_path(item, "targetURL"),
                format!("Invalid value: {url}: targetURL must be an http:// or https:// URL"),
            ));
        }
    }
    for (field, example) in [("timeout", "10s"), ("retryFor", "1h")] {
        if let Some(value) = fields.get(field) {
            check_positive_duration(value, &child_path(item, field), field, example, findings);
        }
    }
}

fn check_notify_events(events: &Value, path: &str, findings: &mut Vec<Finding>) {
    let supported = || {
        NotifyEvent::ALL
            .iter()
            .map(|e| e.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(list) = events.as_array() else {
        findings.push(Finding::error(
            "wrong-type",
            path,
            format!(
                "Invalid value: {events}: events must be a list of: {}",
                supported()
            ),
        ));
        return;
    };
    if list.is_empty() {
        findings.push(Finding::error(
            "required-value",
            path,
            format!(
                "Required value: events must name at least one of: {}",
                supported()
            ),
        ));
    }
    for (index, event) in list.iter().enumerate() {
        let known = NotifyEvent::ALL
            .iter()
            .any(|e| event.as_str() == Some(e.as_str()));
        if !known {
            findings.push(Finding::error(
                "unsupported-value",
                crate::located::item_path(path, index),
                format!(
                    "Unsupported value: {event}: supported values: {}",
                    supported()
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{Limits, parse_file};
    use tollgate_model::policy::OnFailure;

    const HEAD: &str = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: fleet-defaults\n";

    fn read(spec: &str) -> ParsedPolicy {
        let text = format!("{HEAD}spec:\n{spec}");
        let mut parsed = parse_file("p.yaml", text.as_bytes(), &Limits::default());
        assert!(parsed.promotions.is_empty() && parsed.ignored.is_empty());
        assert_eq!(parsed.policies.len(), 1, "{parsed:?}");
        parsed.policies.remove(0)
    }

    /// `(line, column, path, code)` of every diagnostic.
    fn places(policy: &ParsedPolicy) -> Vec<(u32, u32, String, &'static str)> {
        policy
            .diagnostics
            .iter()
            .map(|d| (d.line, d.column, d.path.clone(), d.code))
            .collect()
    }

    #[test]
    fn the_documented_example_is_read_into_the_model() {
        let parsed = read(
            "  selector: {}\n  progressDeadline: 10m\n  maxFailures: 0\n  onFailure: Halt\n  stages:\n    production: {maxFailures: 0, progressDeadline: 30m}\n",
        );
        assert_eq!(parsed.diagnostics, Vec::new());
        assert_eq!(parsed.name.as_deref(), Some("fleet-defaults"));
        assert_eq!(parsed.line, 1);
        let policy = parsed.policy.expect("valid");
        assert_eq!(
            policy
                .for_stage("production")
                .progress_deadline
                .map(|d| d.as_secs()),
            Some(1800)
        );
        assert_eq!(policy.for_stage("dev").on_failure, OnFailure::Halt);
    }

    #[test]
    fn a_bad_duration_is_an_error_at_its_value() {
        let parsed = read("  progressDeadline: 10 minutes\n");
        assert_eq!(
            places(&parsed),
            [(6, 21, "spec.progressDeadline".into(), "invalid-duration")]
        );
        assert!(parsed.policy.is_none());
        let parsed = read("  stages:\n    prod:\n      progressDeadline: 0s\n");
        assert_eq!(
            places(&parsed),
            [(
                8,
                25,
                "spec.stages.prod.progressDeadline".into(),
                "invalid-duration"
            )]
        );
        assert!(parsed.diagnostics[0].message.contains("greater than zero"));
    }

    #[test]
    fn max_failures_is_a_count_or_a_percentage_up_to_100() {
        for ok in ["3", "\"10%\"", "\"100%\""] {
            let parsed = read(&format!("  maxFailures: {ok}\n"));
            assert_eq!(parsed.diagnostics, Vec::new(), "{ok}");
        }
        for bad in ["-1", "\"101%\"", "\"3\"", "1.5", "ten", "true"] {
            let parsed = read(&format!("  maxFailures: {bad}\n"));
            assert_eq!(
                places(&parsed),
                [(6, 16, "spec.maxFailures".into(), "invalid-max-failures")],
                "{bad}"
            );
        }
    }

    #[test]
    fn unknown_fields_are_errors_at_their_key() {
        let parsed = read("  progresDeadline: 10m\n  stages:\n    prod: {maxFailure: 1}\n");
        assert_eq!(
            places(&parsed),
            [
                (6, 3, "spec.progresDeadline".into(), "unknown-field"),
                (8, 12, "spec.stages.prod.maxFailure".into(), "unknown-field"),
            ]
        );
        assert!(parsed.diagnostics[0].message.contains("progressDeadline"));
    }

    #[test]
    fn paused_clusters_is_wait_or_skip_and_defaults_to_wait() {
        let parsed =
            read("  stages:\n    prod: {pausedClusters: skip}\n    dev: {pausedClusters: Skip}\n");
        assert_eq!(
            places(&parsed),
            [(
                7,
                28,
                "spec.stages.prod.pausedClusters".into(),
                "unsupported-value"
            )]
        );
        assert!(parsed.diagnostics[0].message.contains("\"Wait\", \"Skip\""));
        let parsed = read("  stages:\n    dev: {pausedClusters: Skip}\n");
        assert_eq!(parsed.diagnostics, Vec::new());
        let policy = parsed.policy.expect("valid");
        use tollgate_model::policy::PausedClusters;
        assert_eq!(
            policy.for_stage("dev").paused_clusters,
            PausedClusters::Skip
        );
        assert_eq!(
            policy.for_stage("prod").paused_clusters,
            PausedClusters::Wait
        );
    }

    #[test]
    fn on_failure_is_halt_or_rollback() {
        let parsed = read("  onFailure: halt\n  stages:\n    prod: {onFailure: Rollback}\n");
        assert_eq!(
            places(&parsed),
            [(6, 14, "spec.onFailure".into(), "unsupported-value")]
        );
    }

    #[test]
    fn rollback_strategy_is_fast_by_default_staged_on_request_and_strict() {
        let parsed = read("  maxFailures: 0\n");
        let policy = parsed.policy.expect("policy");
        assert_eq!(policy.spec.rollback.strategy, RollbackStrategy::Fast);
        let parsed = read("  rollback: {strategy: Staged}\n");
        assert_eq!(places(&parsed), []);
        let policy = parsed.policy.expect("policy");
        assert_eq!(policy.spec.rollback.strategy, RollbackStrategy::Staged);
        let parsed = read("  rollback: {strategy: fast}\n");
        assert_eq!(
            places(&parsed),
            [(6, 24, "spec.rollback.strategy".into(), "unsupported-value")]
        );
        let parsed = read("  rollback:\n    stratgy: Fast\n");
        assert_eq!(
            places(&parsed),
            [(7, 5, "spec.rollback.stratgy".into(), "unknown-field")]
        );
        let parsed = read("  rollback: Fast\n");
        assert_eq!(
            places(&parsed),
            [(6, 13, "spec.rollback".into(), "wrong-type")]
        );
    }

    #[test]
    fn the_issue_example_of_on_new_snapshot_and_blackouts_is_read() {
        let parsed = read(
            "  onNewSnapshot: FinishCurrent\n  blackouts:\n  - from: \"2026-12-20T00:00:00\"\n    to: \"2027-01-03T00:00:00\"\n    timeZone: Europe/Berlin\n    reason: year-end freeze\n",
        );
        assert_eq!(places(&parsed), []);
        let policy = parsed.policy.expect("policy");
        assert_eq!(policy.spec.on_new_snapshot, OnNewSnapshot::FinishCurrent);
        assert_eq!(policy.spec.blackouts.len(), 1);
    }

    #[test]
    fn blackouts_refuse_to_before_from_unknown_zones_and_unknown_policies() {
        let parsed = read(
            "  onNewSnapshot: Later\n  blackouts:\n  - from: \"2026-12-20\"\n    to: \"2026-12-19\"\n  - from: \"2026-12-20\"\n    to: \"2026-12-21\"\n    timeZone: Mars/Olympus\n  - {to: \"2026-12-21\", when: x}\n",
        );
        assert_eq!(
            places(&parsed),
            [
                (6, 18, "spec.onNewSnapshot".into(), "unsupported-value"),
                (9, 9, "spec.blackouts[0].to".into(), "invalid-blackout"),
                (
                    12,
                    15,
                    "spec.blackouts[1].timeZone".into(),
                    "invalid-blackout"
                ),
                (13, 5, "spec.blackouts[2].from".into(), "required"),
                (13, 24, "spec.blackouts[2].when".into(), "unknown-field"),
            ]
        );
    }

    #[test]
    fn the_issue_example_of_waves_is_read_and_bad_waves_are_refused() {
        let parsed = read(
            "  stages:\n    production:\n      waves:\n        sortingLabelKey: order\n        size: 10%\n        canary: 1\n        pause: 2m\n",
        );
        assert_eq!(places(&parsed), []);
        let policy = parsed.policy.expect("policy");
        let waves = policy.for_stage("production").waves.expect("waves");
        assert_eq!(waves.wave_size(25), 3);
        assert_eq!(waves.canary, Some(1));
        let parsed = read(
            "  stages:\n    production:\n      waves:\n        sortingLabelKey: \"no way\"\n        size: 0\n        canary: -1\n        pause: soon\n        order: 1\n",
        );
        let codes: Vec<(String, &str)> = places(&parsed)
            .into_iter()
            .map(|(_, _, path, code)| (path, code))
            .collect();
        assert_eq!(
            codes,
            [
                (
                    "spec.stages.production.waves.sortingLabelKey".into(),
                    "invalid-label-key"
                ),
                (
                    "spec.stages.production.waves.size".into(),
                    "invalid-wave-size"
                ),
                ("spec.stages.production.waves.canary".into(), "wrong-type"),
                (
                    "spec.stages.production.waves.pause".into(),
                    "invalid-duration"
                ),
                ("spec.stages.production.waves.order".into(), "unknown-field"),
            ]
        );
        let parsed = read("  stages:\n    production:\n      waves: {canary: 1}\n");
        assert_eq!(
            places(&parsed).into_iter().map(|p| p.3).collect::<Vec<_>>(),
            ["required"]
        );
    }

    #[test]
    fn selectors_follow_the_stage_selector_rules() {
        let parsed = read(
            "  selector:\n    matchLabels: {\"bad key!\": x, tier: 3}\n    matchExpressions:\n    - {key: env, operator: Is, values: [prod]}\n    - {key: env, operator: In}\n",
        );
        let codes: Vec<&str> = parsed.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(
            codes,
            [
                "invalid-label-key",
                "wrong-type",
                "invalid-selector-operator",
                "selector-values-required"
            ],
            "{:?}",
            parsed.diagnostics
        );
    }

    #[test]
    fn name_and_api_version_are_checked() {
        let text =
            "apiVersion: tollgate.dev/v1\nkind: RolloutPolicy\nmetadata:\n  name: Fleet_Defaults\n";
        let parsed = parse_file("p.yaml", text.as_bytes(), &Limits::default());
        let policy = &parsed.policies[0];
        let codes: Vec<(&str, &str)> = policy
            .diagnostics
            .iter()
            .map(|d| (d.code, d.path.as_str()))
            .collect();
        assert_eq!(
            codes,
            [
                ("unsupported-api-version", "apiVersion"),
                ("invalid-name", "metadata.name")
            ]
        );
        assert!(parsed.has_errors());
        assert_eq!(parsed.all_diagnostics().len(), 2);
    }

    #[test]
    fn an_empty_spec_is_a_policy_with_defaults() {
        let parsed = parse_file("p.yaml", HEAD.as_bytes(), &Limits::default());
        let policy = parsed.policies[0].policy.as_ref().expect("valid");
        assert!(policy.selects(&Default::default()));
        let parsed = read("  selector:\n");
        assert!(parsed.policy.is_some(), "{:?}", parsed.diagnostics);
    }

    #[test]
    fn other_kinds_and_groups_are_not_policies() {
        assert!(is_policy_document(
            Some(POLICY_API_VERSION),
            Some(POLICY_KIND)
        ));
        assert!(is_policy_document(
            Some("tollgate.dev/v2"),
            Some(POLICY_KIND)
        ));
        assert!(!is_policy_document(
            Some("example.com/v1"),
            Some(POLICY_KIND)
        ));
        assert!(!is_policy_document(
            Some(POLICY_API_VERSION),
            Some("Policy")
        ));
        assert!(!is_policy_document(None, Some(POLICY_KIND)));
    }
    #[test]
    fn a_notify_endpoint_is_read_into_the_model() {
        let parsed = read(
            "  notify:\n  - name: platform-chat\n    type: slack\n    addressSecretFile: /var/run/secrets/tollgate/slack-url\n    events: [StageStarted, StageCompleted, StageFailed, RolledBack, ApprovalNeeded, Completed]\n    targetURL: https://dash.example.com\n    timeout: 5s\n    retryFor: 90m\n  - name: waves\n    type: webhook\n    addressSecretFile: /s\n    events: [WaveStarted, WaveCompleted, BlackoutHeld]\n",
        );
        assert_eq!(parsed.diagnostics, Vec::new());
        let policy = parsed.policy.expect("valid");
        let endpoint = &policy.spec.notify[0];
        assert_eq!(endpoint.kind, NotifyType::Slack);
        assert_eq!(endpoint.events.len(), 6);
        assert_eq!(endpoint.retry_for().as_secs(), 90 * 60);
        let waves = &policy.spec.notify[1];
        assert_eq!(
            waves.events,
            [
                NotifyEvent::WaveStarted,
                NotifyEvent::WaveCompleted,
                NotifyEvent::BlackoutHeld
            ]
        );
        assert_eq!(
            waves.retry_for(),
            tollgate_model::policy::DEFAULT_RETRY_FOR,
            "an hour unless set"
        );
        assert_eq!(
            endpoint.target_url.as_deref(),
            Some("https://dash.example.com")
        );
        assert_eq!(
            endpoint.timeout.as_ref().map(|t| t.value.as_secs()),
            Some(5)
        );
    }

    #[test]
    fn notify_errors_name_line_and_field() {
        let parsed = read(
            "  notify:\n  - name: chat\n    type: teams\n    addressSecretFile: /s\n    events: [StageStarted, Deployed]\n  - name: chat\n    type: github\n    events: []\n",
        );
        assert_eq!(
            places(&parsed),
            [
                (8, 11, "spec.notify[0].type".into(), "unsupported-value"),
                (
                    10,
                    28,
                    "spec.notify[0].events[1]".into(),
                    "unsupported-value"
                ),
                (11, 5, "spec.notify[1]".into(), "required-value"),
                (11, 11, "spec.notify[1].name".into(), "duplicate-name"),
                (13, 5, "spec.notify[1].events".into(), "required-value"),
            ],
            "{:?}",
            parsed.diagnostics
        );
        assert!(parsed.diagnostics[2].message.contains("addressSecretFile"));
        assert!(parsed.policy.is_none());
    }

    #[test]
    fn a_retry_for_that_is_no_positive_go_duration_is_an_error_at_its_value() {
        let parsed = read(
            "  notify:\n  - name: chat\n    type: slack\n    addressSecretFile: /s\n    events: [Completed]\n    retryFor: forever\n  - name: hook\n    type: webhook\n    addressSecretFile: /h\n    events: [Completed]\n    retryFor: 0s\n",
        );
        assert_eq!(
            places(&parsed),
            [
                (11, 15, "spec.notify[0].retryFor".into(), "invalid-duration"),
                (16, 15, "spec.notify[1].retryFor".into(), "invalid-duration"),
            ],
            "{:?}",
            parsed.diagnostics
        );
        assert!(
            parsed.diagnostics[0]
                .message
                .contains("retryFor must be a Go duration greater than zero"),
            "{}",
            parsed.diagnostics[0].message
        );
        assert!(parsed.policy.is_none());
    }
}
