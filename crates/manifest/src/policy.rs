//! Reading `RolloutPolicy` documents (`tollgate.dev/v1alpha1`): the same located YAML as
//! promotions, validated with file/line/column diagnostics, then turned into the model's
//! [`RolloutPolicy`]. The structure (unknown fields, types, required fields, enumerations) is
//! checked against the schema derived from the model ([`crate::policy_schema`]; unknown fields
//! are errors: a typo must never silently drop a deadline); the rules a schema cannot say
//! (durations, names, percentages, references between fields) are written out here.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::diagnostic::locate;
use crate::diagnostic::{Diagnostic, Finding, Severity};
use crate::duration::parse_go_duration;
use crate::field_path::FieldPath;
use crate::loc_tree::DocumentLocations;
use crate::located::{ConversionProblem, child_path};
use crate::policy_analyses::{self, DefinedAnalysis};
use crate::policy_fields::{check_positive_duration, stage_name_key};
use crate::rules;
use crate::rules::k8s_names::{dns1123_label_problem, dns1123_subdomain_problem};
use tollgate_model::blackout::Blackout;
use tollgate_model::policy::{FailureBudget, POLICY_API_VERSION, POLICY_KIND, RolloutPolicy};

/// The API group of tollgate's own kinds.
pub const POLICY_API_GROUP: &str = "tollgate.dev";

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
    crate::policy_schema::check_structure(&document, &mut findings);
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

/// The rules beyond the schema's: the API version, the metadata, the spec's values.
fn check_document(document: &Value, findings: &mut Vec<Finding>) {
    let Some(fields) = document.as_object() else {
        return;
    };
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
    if let Some(Value::Object(spec)) = fields.get("spec") {
        check_spec(spec, findings);
    }
}

/// A field's value when it is an object, a list or a string (a value of another type is the
/// schema's finding).
fn object<'v>(fields: &'v Map<String, Value>, field: &str) -> Option<&'v Map<String, Value>> {
    fields.get(field).and_then(Value::as_object)
}

fn list<'v>(fields: &'v Map<String, Value>, field: &str) -> Option<&'v Vec<Value>> {
    fields.get(field).and_then(Value::as_array)
}

fn text<'v>(fields: &'v Map<String, Value>, field: &str) -> Option<&'v str> {
    fields.get(field).and_then(Value::as_str)
}

fn check_spec(spec: &Map<String, Value>, findings: &mut Vec<Finding>) {
    if let Some(selector) = object(spec, "selector") {
        let root = FieldPath::Root;
        let spec_path = root.key("spec");
        rules::selectors::check_selector(selector, &spec_path.key("selector"), findings);
    }
    check_budget_fields(spec, "spec", findings);
    if let Some(blackouts) = list(spec, "blackouts") {
        check_blackouts(blackouts, findings);
    }
    if let Some(notify) = list(spec, "notify") {
        check_notify(notify, findings);
    }
    if let Some(approvals) = object(spec, "approvals") {
        crate::policy_approvals::check_approvals(approvals, findings);
    }
    if let Some(admins) = list(spec, "admins") {
        crate::policy_approvals::check_principals(admins, "spec.admins", findings);
    }
    let analyses = list(spec, "analyses")
        .map(|a| policy_analyses::check_analyses(a, findings))
        .unwrap_or_default();
    let other_waves = list(spec, "analyses")
        .map(|a| crate::policy_compare::other_waves_analyses(a))
        .unwrap_or_default();
    let used = object(spec, "stages")
        .map(|stages| check_stages(stages, &analyses, &other_waves, findings))
        .unwrap_or_default();
    policy_analyses::unused_analyses(&analyses, &used, findings);
}

/// The stage overrides; the analysis names they use.
fn check_stages(
    stages: &Map<String, Value>,
    analyses: &[DefinedAnalysis],
    other_waves: &[&str],
    findings: &mut Vec<Finding>,
) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (stage, body) in stages {
        let path = child_path("spec.stages", stage);
        stage_name_key(stage, &path, findings);
        let Some(body) = body.as_object() else {
            continue;
        };
        check_budget_fields(body, &path, findings);
        if let Some(waves) = object(body, "waves") {
            check_waves(waves, &child_path(&path, "waves"), findings);
        }
        if let Some(names) = list(body, "analyses") {
            let path = child_path(&path, "analyses");
            used.extend(policy_analyses::check_stage_analyses(
                names, &path, analyses, findings,
            ));
        }
        crate::policy_compare::check_stage_baselines(body, &path, other_waves, findings);
        crate::policy_compare::check_score(body, &path, findings);
    }
    used
}

/// `waves`: the sorting label key is a label key, the size a count or a percentage of at least
/// one, the pause a Go duration.
fn check_waves(fields: &Map<String, Value>, path: &str, findings: &mut Vec<Finding>) {
    if let Some(key) = text(fields, "sortingLabelKey")
        && let Some(problem) = rules::k8s_names::qualified_name_problem(key)
    {
        findings.push(Finding::error(
            "invalid-label-key",
            child_path(path, "sortingLabelKey"),
            format!("Invalid value: {key:?}: {problem}"),
        ));
    }
    if let Some(size) = fields.get("size")
        && let Some(message) = wave_size_problem(size)
    {
        findings.push(Finding::error(
            "invalid-wave-size",
            child_path(path, "size"),
            message,
        ));
    }
    if let Some(pause) = fields.get("pause")
        && let Some(Err(e)) = pause.as_str().map(parse_go_duration)
    {
        findings.push(Finding::error(
            "invalid-duration",
            child_path(path, "pause"),
            format!("Invalid value: {pause}: {e}"),
        ));
    }
}

/// What is wrong with a wave size that is an integer or a string (the schema's types).
fn wave_size_problem(size: &Value) -> Option<String> {
    let other = || {
        Some(format!(
            "Invalid value: {size}: size must be a count of at least 1 or a percentage such as \"10%\""
        ))
    };
    match size {
        Value::Number(n)
            if n.as_u64()
                .is_some_and(|n| n >= 1 && u32::try_from(n).is_ok()) =>
        {
            None
        }
        Value::Number(n) if n.is_f64() => None,
        Value::String(text) if text.trim_end().ends_with('%') => match FailureBudget::parse(text) {
            Ok(FailureBudget::Percent(p)) if p >= 1 => None,
            Ok(_) => Some(format!(
                "Invalid value: {text:?}: a wave size must be at least 1%"
            )),
            Err(e) => Some(format!(
                "Invalid value: {}",
                e.replace("maxFailures", "size")
            )),
        },
        Value::Number(_) | Value::String(_) => other(),
        _ => None,
    }
}

/// Each blackout's interval as the model reads it (dates, zone, `to > from`), when its fields
/// are strings (the schema's finding otherwise).
fn check_blackouts(blackouts: &[Value], findings: &mut Vec<Finding>) {
    for (index, item) in blackouts.iter().enumerate() {
        let path = crate::located::item_path("spec.blackouts", index);
        let Some(fields) = item.as_object() else {
            continue;
        };
        let shaped = ["from", "to"].iter().all(|f| fields.contains_key(*f))
            && ["from", "to", "timeZone", "reason"]
                .iter()
                .all(|f| fields.get(*f).is_none_or(Value::is_string));
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

/// `progressDeadline` and `maxFailures`, policy-wide or in a stage override.
fn check_budget_fields(fields: &Map<String, Value>, path: &str, findings: &mut Vec<Finding>) {
    if let Some(deadline) = text(fields, "progressDeadline") {
        check_deadline(deadline, &child_path(path, "progressDeadline"), findings);
    }
    if let Some(budget) = fields.get("maxFailures")
        && let Some(message) = max_failures_problem(budget)
    {
        findings.push(Finding::error(
            "invalid-max-failures",
            child_path(path, "maxFailures"),
            message,
        ));
    }
}

fn check_deadline(text: &str, path: &str, findings: &mut Vec<Finding>) {
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

/// What is wrong with a `maxFailures` that is an integer or a string (the schema's types).
fn max_failures_problem(budget: &Value) -> Option<String> {
    match budget {
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
        Value::Number(n) if n.is_f64() => None,
        Value::Number(_) | Value::String(_) => Some(format!(
            "Invalid value: {budget}: maxFailures must be a non-negative count such as 2 or a percentage such as \"10%\""
        )),
        _ => None,
    }
}

// ---- spec.notify (issue #19): where to tell people about the rollouts ----

/// `spec.notify`: each endpoint named once with a DNS-1123 label, reading its address from a
/// file, linking to an http(s) URL, with positive durations.
fn check_notify(endpoints: &[Value], findings: &mut Vec<Finding>) {
    let mut names = BTreeSet::new();
    for (index, endpoint) in endpoints.iter().enumerate() {
        let item = crate::located::item_path("spec.notify", index);
        let Some(fields) = endpoint.as_object() else {
            continue;
        };
        if let Some(name) = text(fields, "name") {
            let name_path = child_path(&item, "name");
            if dns1123_label_problem(name).is_some() {
                findings.push(Finding::error(
                    "invalid-name",
                    name_path,
                    format!("Invalid value: {}: an endpoint name must be a DNS-1123 label such as \"platform-chat\"", fields["name"]),
                ));
            } else if !names.insert(name.to_string()) {
                findings.push(Finding::error(
                    "duplicate-name",
                    name_path,
                    format!("Duplicate value: {name:?}: each notify endpoint needs its own name"),
                ));
            }
        }
        check_notify_fields(fields, &item, findings);
    }
}

fn check_notify_fields(fields: &Map<String, Value>, item: &str, findings: &mut Vec<Finding>) {
    if let Some(file) = fields.get("addressSecretFile")
        && file.as_str().is_some_and(|f| f.trim().is_empty())
    {
        findings.push(Finding::error(
            "required-value",
            child_path(item, "addressSecretFile"),
            format!("Invalid value: {file}: addressSecretFile must be the path of a file holding the endpoint's URL (and token or secret)"),
        ));
    }
    if let Some(url) = fields.get("targetURL")
        && url
            .as_str()
            .is_some_and(|u| !(u.starts_with("https://") || u.starts_with("http://")))
    {
        findings.push(Finding::error(
            "invalid-url",
            child_path(item, "targetURL"),
            format!("Invalid value: {url}: targetURL must be an http:// or https:// URL"),
        ));
    }
    for (field, example) in [("timeout", "10s"), ("retryFor", "1h")] {
        if let Some(value) = fields.get(field).filter(|v| v.is_string()) {
            check_positive_duration(value, &child_path(item, field), field, example, findings);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{Limits, parse_file};
    use tollgate_model::policy::{
        NotifyEvent, NotifyType, OnFailure, OnNewSnapshot, RollbackStrategy,
    };

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
