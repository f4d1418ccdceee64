//! How a violation of the RolloutPolicy schema is told to a policy author: a stable code and a
//! message at the field (or at the object or list holding it), in the policy's own words: an
//! unknown field lists the fields its object has, a value of the wrong type says what it should
//! look like, with an example. Which field a violation is at is its *shape*: the path with list
//! indexes as `[]` and the names of stages (and label keys) as `*`, e.g.
//! `spec.stages.*.waves.size`.

use serde_json::Value;
use tollgate_model::analysis::{AnalysisScope, CommitStatusProvider, OnNoData};
use tollgate_model::policy::{NotifyEvent, NotifyType, OnNewSnapshot, OnRewind, RollbackStrategy};
use tollgate_schema::{PathSegment, SchemaPath, Violation, ViolationKind};

use crate::diagnostic::Finding;
use crate::location::{child_path, item_path};

/// The objects whose keys are names (of stages, of labels), not fields.
const NAMED_MAPS: [&str; 3] = ["spec.stages", "spec.approvals", "spec.selector.matchLabels"];

/// What each object is called in an unknown field's message, which lists the fields the schema
/// declares for it.
const OBJECT_NAMES: [(&str, &str); 14] = [
    ("", "a RolloutPolicy"),
    ("spec", "a RolloutPolicy spec"),
    ("spec.selector", "a label selector"),
    ("spec.selector.matchExpressions[]", "a match expression"),
    ("spec.blackouts[]", "a blackout"),
    ("spec.rollback", "rollback"),
    ("spec.stages.*", "a stage override"),
    ("spec.stages.*.waves", "waves"),
    ("spec.notify[]", "a notify endpoint"),
    ("spec.approvals.*", "an approval policy"),
    ("spec.analyses[]", "an analysis"),
    ("spec.analyses[].prometheus", "prometheus"),
    ("spec.analyses[].web", "web"),
    ("spec.analyses[].commitStatus", "commitStatus"),
];

/// The spec's fields in the order its messages have always listed them (the model declares
/// `rollback` last).
const SPEC_FIELDS: [&str; 13] = [
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

/// What a provider's required text field must be, for its messages.
const PROVIDER_TEXTS: [(&str, &str); 4] = [
    (
        "address",
        "the Prometheus base URL, such as http://prometheus.monitoring:9090",
    ),
    (
        "query",
        "a PromQL query, such as sum(rate(http_requests_total{code=~\"5..\"}[2m]))",
    ),
    ("url", "an http:// or https:// URL whose answer is JSON"),
    (
        "addressSecretFile",
        "the path of a file whose first line is the repository's API URL and the second a token",
    ),
];

/// How one violation is told: a code, a message, and whether at the violating field or at
/// the object (or list) holding it.
struct Told {
    code: &'static str,
    message: String,
    at_parent: bool,
}

fn here(code: &'static str, message: String) -> Option<Told> {
    Some(Told {
        code,
        message,
        at_parent: false,
    })
}

fn at_parent(code: &'static str, message: String) -> Option<Told> {
    Some(Told {
        code,
        message,
        at_parent: true,
    })
}

/// The finding a violation of `schema` is told as; `None` when a rule of the reader tells it
/// (the root's `apiVersion` and `metadata`).
pub(crate) fn tell(violation: &Violation, document: &Value, schema: &Value) -> Option<Finding> {
    let segments = violation.path.segments();
    let parent_segments = &segments[..segments.len().saturating_sub(1)];
    let shape = shape(segments);
    let parent_shape = self::shape(parent_segments);
    let value = value_at(document, segments).unwrap_or(&Value::Null);
    let parent = value_at(document, parent_segments);
    let told = match &violation.kind {
        ViolationKind::UnknownField { .. } => {
            let (_, what) = OBJECT_NAMES
                .iter()
                .find(|(object, _)| *object == parent_shape)?;
            let fields = if parent_shape == "spec" {
                SPEC_FIELDS.to_vec()
            } else {
                declared_fields(schema, parent_segments)
            };
            let name = last_key(&violation.path);
            let message = format!(
                "unknown field {name:?}: {what} has only {}",
                fields.join(", ")
            );
            let path = render(segments);
            return Some(Finding::error("unknown-field", path, message).at_key());
        }
        ViolationKind::Required => tell_required(&parent_shape, last_key(&violation.path))?,
        ViolationKind::TooFewItems { .. } if shape == "spec.notify[].events" => here(
            "required-value",
            format!(
                "Required value: events must name at least one of: {}",
                event_names()
            ),
        )?,
        _ => {
            let fields = declared_fields(schema, segments);
            tell_value(&shape, value, parent.unwrap_or(&Value::Null), &fields)?
        }
    };
    let path = if told.at_parent {
        render(parent_segments)
    } else {
        render(segments)
    };
    Some(Finding::error(told.code, path, told.message))
}

/// The value at `segments` of `document`.
fn value_at<'v>(document: &'v Value, segments: &[PathSegment]) -> Option<&'v Value> {
    segments
        .iter()
        .try_fold(document, |value, segment| match segment {
            PathSegment::Key(key) => value.get(key),
            PathSegment::Index(index) => value.get(index),
        })
}

/// The fields `schema` declares for the object at `segments`, in its order.
fn declared_fields<'s>(schema: &'s Value, segments: &[PathSegment]) -> Vec<&'s str> {
    let object = segments
        .iter()
        .try_fold(schema, |node, segment| match segment {
            PathSegment::Key(key) => node
                .pointer(&format!(
                    "/properties/{}",
                    key.replace('~', "~0").replace('/', "~1")
                ))
                .or_else(|| node.get("additionalProperties").filter(|a| a.is_object())),
            PathSegment::Index(_) => node.get("items"),
        });
    object
        .and_then(|node| node.get("properties"))
        .and_then(Value::as_object)
        .map(|properties| properties.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// The path with list indexes as `[]` and names of stages and labels as `*`.
fn shape(segments: &[PathSegment]) -> String {
    let mut shape = String::new();
    for segment in segments {
        match segment {
            PathSegment::Index(_) => shape.push_str("[]"),
            PathSegment::Key(key) => {
                let name = if NAMED_MAPS.contains(&shape.as_str()) {
                    "*"
                } else {
                    key
                };
                if !shape.is_empty() {
                    shape.push('.');
                }
                shape.push_str(name);
            }
        }
    }
    shape
}

/// A path in the spelling every diagnostic uses (`spec.stages.prod`, `spec.notify[0].name`).
fn render(segments: &[PathSegment]) -> String {
    segments
        .iter()
        .fold(String::new(), |parent, segment| match segment {
            PathSegment::Key(key) => child_path(&parent, key),
            PathSegment::Index(index) => item_path(&parent, *index),
        })
}

fn last_key(path: &SchemaPath) -> &str {
    match path.segments().last() {
        Some(PathSegment::Key(name)) => name,
        _ => "",
    }
}

/// A missing field of the object at `object`.
fn tell_required(object: &str, field: &str) -> Option<Told> {
    match object {
        "spec.selector.matchExpressions[]" => here(
            "required-value",
            format!("Required value: {field} must be set"),
        ),
        "spec.stages.*.waves" => here(
            "required",
            "Required value: waves need a size: a count such as 10 or a percentage such as \"10%\""
                .to_string(),
        ),
        "spec.blackouts[]" => here("required", format!("Required value: a blackout needs {field}")),
        "spec.notify[]" => at_parent(
            "required-value",
            format!("Required value: {field} must be set"),
        ),
        "spec.analyses[]" => at_parent(
            "required-value",
            "Required value: an analysis needs a name, which stages list in stages.<stage>.analyses"
                .to_string(),
        ),
        "spec.analyses[].commitStatus" if field == "provider" => at_parent(
            "required-value",
            format!(
                "Required value: commitStatus needs provider: one of {}",
                quoted(&CommitStatusProvider::VALUES)
            ),
        ),
        _ => {
            let provider = object.strip_prefix("spec.analyses[].")?;
            at_parent(
                "required-value",
                format!("Required value: {provider} needs {field}: {}", provider_text(field)),
            )
        }
    }
}

fn provider_text(field: &str) -> &'static str {
    PROVIDER_TEXTS
        .iter()
        .find(|(name, _)| *name == field)
        .map_or("", |(_, text)| text)
}

/// `values` as `"a", "b"`.
fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn event_names() -> String {
    NotifyEvent::ALL
        .iter()
        .map(|e| e.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn unsupported(value: &Value, supported: &str) -> Option<Told> {
    here(
        "unsupported-value",
        format!("Unsupported value: {value}: supported values: {supported}"),
    )
}

/// A value of the wrong type or outside its enumeration or range, at `shape`; `fields` are the
/// fields its schema declares, when it is an object.
fn tell_value(shape: &str, value: &Value, parent: &Value, fields: &[&str]) -> Option<Told> {
    if let Some(field) = shape.strip_prefix("spec.analyses[].") {
        return tell_analysis_value(field, value, parent, fields);
    }
    if let Some(field) = shape.strip_prefix("spec.notify[].") {
        return tell_notify_value(field, value);
    }
    if let Some(field) = shape.strip_prefix("spec.stages.*.") {
        return tell_stage_value(field, value);
    }
    if let Some(field) = shape.strip_prefix("spec.selector.") {
        return tell_selector_value(field, value);
    }
    if let Some(field) = shape.strip_prefix("spec.approvals.*.") {
        return tell_approval_value(field, value);
    }
    if let Some(field) = shape.strip_prefix("spec.blackouts[].") {
        return here(
            "wrong-type",
            format!(
                "Invalid value: {value}: {field} must be a string (quote dates: \"2026-12-20\")"
            ),
        );
    }
    if let Some(field) = shape.strip_prefix("spec.")
        && let Some(told) = tell_budget_value(field, value)
    {
        return Some(told);
    }
    tell_spec_value(shape, value)
}

fn tell_spec_value(shape: &str, value: &Value) -> Option<Told> {
    let wrong_type = |message: &str| here("wrong-type", format!("Invalid value: {message}"));
    match shape {
        "" => wrong_type("a RolloutPolicy document must be a mapping"),
        "spec" => wrong_type("spec must be a mapping"),
        "spec.selector" => {
            wrong_type("selector must be a label selector mapping ({} selects every promotion)")
        }
        "spec.stages" => wrong_type(
            "stages must be a mapping from stage name to overrides, e.g. `production: {maxFailures: 0}`",
        ),
        "spec.stages.*" => wrong_type(
            "a stage override must be a mapping of progressDeadline, maxFailures, onFailure, waves, analyses and pausedClusters",
        ),
        "spec.onNewSnapshot" => unsupported(value, &quoted(&OnNewSnapshot::VALUES)),
        "spec.onRewind" => unsupported(value, &quoted(&OnRewind::VALUES)),
        "spec.rollback" => wrong_type(&format!(
            "{value}: rollback must be a mapping such as `{{strategy: Fast}}`"
        )),
        "spec.rollback.strategy" => unsupported(value, &quoted(&RollbackStrategy::VALUES)),
        "spec.blackouts" => wrong_type("blackouts must be a list of {from, to, timeZone, reason}"),
        "spec.blackouts[]" => {
            wrong_type("a blackout must be a mapping of from, to, timeZone and reason")
        }
        "spec.notify" => wrong_type(
            "notify must be a list of endpoints ({name, type, addressSecretFile, events})",
        ),
        "spec.notify[]" => wrong_type(
            "a notify endpoint must be a mapping of name, type, addressSecretFile and events",
        ),
        "spec.approvals" => wrong_type(
            "approvals must be a mapping from stage name to an approval policy, e.g. `production: {approvers: [alice@example.com], minApprovals: 1}`",
        ),
        "spec.approvals.*" => wrong_type(
            "an approval policy must be a mapping of approvers, minApprovals, forbidSelfApproval and requireSignature",
        ),
        "spec.admins" => tell_principals("admins"),
        "spec.admins[]" => tell_principal("admins", value),
        "spec.analyses" => wrong_type(
            "analyses must be a list of named checks ({name, prometheus | web | commitStatus, …})",
        ),
        "spec.analyses[]" => wrong_type(
            "an analysis must be a mapping of name, one of prometheus, web or commitStatus, and its settings",
        ),
        _ => None,
    }
}

/// `progressDeadline`, `maxFailures` and `onFailure`, policy-wide or in a stage override.
fn tell_budget_value(field: &str, value: &Value) -> Option<Told> {
    match field {
        "progressDeadline" => here(
            "wrong-type",
            format!(
                "Invalid value: {value}: progressDeadline must be a Go duration such as \"10m\" or \"1h30m\""
            ),
        ),
        "maxFailures" => here(
            "invalid-max-failures",
            format!(
                "Invalid value: {value}: maxFailures must be a non-negative count such as 2 or a percentage such as \"10%\""
            ),
        ),
        "onFailure" => unsupported(value, "\"Halt\", \"Rollback\""),
        _ => None,
    }
}

fn tell_stage_value(field: &str, value: &Value) -> Option<Told> {
    if let Some(told) = tell_budget_value(field, value) {
        return Some(told);
    }
    let wrong_type = |message: String| here("wrong-type", format!("Invalid value: {message}"));
    match field {
        "pausedClusters" => unsupported(value, "\"Wait\", \"Skip\""),
        "analyses" => wrong_type(format!(
            "{value}: analyses must be a list of names from spec.analyses, such as [error-rate]"
        )),
        "analyses[]" => wrong_type(format!(
            "{value}: an entry of analyses is the name of an analysis of spec.analyses"
        )),
        "waves" => wrong_type(
            "waves must be a mapping of sortingLabelKey, size, canary and pause".to_string(),
        ),
        "waves.sortingLabelKey" => wrong_type(format!(
            "{value}: sortingLabelKey must be a label key such as \"order\""
        )),
        "waves.size" => here(
            "invalid-wave-size",
            format!(
                "Invalid value: {value}: size must be a count of at least 1 or a percentage such as \"10%\""
            ),
        ),
        "waves.canary" => wrong_type(format!(
            "{value}: canary must be a count of clusters such as 1"
        )),
        "waves.pause" => wrong_type(format!(
            "{value}: pause must be a Go duration such as \"2m\""
        )),
        _ => None,
    }
}

fn tell_selector_value(field: &str, value: &Value) -> Option<Told> {
    let wrong_type = |message: String| here("wrong-type", format!("Invalid value: {message}"));
    match field {
        "matchLabels" => wrong_type("matchLabels must be a mapping of label keys to values".into()),
        "matchLabels.*" => wrong_type(format!(
            "{value}: label values must be strings (quote them: \"{value}\")"
        )),
        "matchExpressions" => {
            wrong_type("matchExpressions must be a list of {key, operator, values}".into())
        }
        "matchExpressions[]" => {
            wrong_type("a match expression must be a mapping of key, operator and values".into())
        }
        "matchExpressions[].key" => wrong_type(format!("{value}: key must be a string")),
        "matchExpressions[].operator" => wrong_type(format!("{value}: operator must be a string")),
        "matchExpressions[].values" => wrong_type("values must be a list of strings".into()),
        "matchExpressions[].values[]" => at_parent(
            "wrong-type",
            "Invalid value: values must be a list of strings".into(),
        ),
        _ => None,
    }
}

fn tell_notify_value(field: &str, value: &Value) -> Option<Told> {
    match field {
        "name" => here(
            "invalid-name",
            format!(
                "Invalid value: {value}: an endpoint name must be a DNS-1123 label such as \"platform-chat\""
            ),
        ),
        "type" => {
            let types: Vec<&str> = NotifyType::ALL.iter().map(|t| t.as_str()).collect();
            unsupported(value, &quoted(&types))
        }
        "addressSecretFile" => here(
            "required-value",
            format!(
                "Invalid value: {value}: addressSecretFile must be the path of a file holding the endpoint's URL (and token or secret)"
            ),
        ),
        "events" => here(
            "wrong-type",
            format!(
                "Invalid value: {value}: events must be a list of: {}",
                event_names()
            ),
        ),
        "events[]" => unsupported(value, &event_names()),
        "targetURL" => here(
            "invalid-url",
            format!("Invalid value: {value}: targetURL must be an http:// or https:// URL"),
        ),
        "timeout" => tell_positive_duration(value, "timeout", "10s"),
        "retryFor" => tell_positive_duration(value, "retryFor", "1h"),
        _ => None,
    }
}

/// The message of [`crate::policy_fields::check_positive_duration`], for a value that is no
/// string.
fn tell_positive_duration(value: &Value, field: &str, example: &str) -> Option<Told> {
    here(
        "invalid-duration",
        crate::policy_fields::positive_duration_message(value, field, example),
    )
}

fn tell_approval_value(field: &str, value: &Value) -> Option<Told> {
    match field {
        "approvers" => tell_principals("approvers"),
        "approvers[]" => tell_principal("approvers", value),
        "minApprovals" => here(
            "invalid-value",
            format!("Invalid value: {value}: minApprovals must be a whole number of at least 1"),
        ),
        "forbidSelfApproval" | "requireSignature" => here(
            "wrong-type",
            format!("Invalid value: {field} must be true or false"),
        ),
        _ => None,
    }
}

fn tell_principals(field: &str) -> Option<Told> {
    here(
        "wrong-type",
        format!(
            "Invalid value: {field} must be a list of principals from the trusted keys, e.g. [\"sre-lead\", \"alice@example.com\"]"
        ),
    )
}

/// One of `approvers` or `admins` that is no principal.
pub(crate) fn principal_message(field: &str, value: &Value) -> String {
    format!(
        "Invalid value: {value}: each of {field} is a non-empty principal (an allowed-signers principal or an OpenPGP user-ID e-mail)"
    )
}

fn tell_principal(field: &str, value: &Value) -> Option<Told> {
    here("invalid-value", principal_message(field, value))
}

fn tell_analysis_value(
    field: &str,
    value: &Value,
    parent: &Value,
    fields: &[&str],
) -> Option<Told> {
    let wrong_type = |message: String| here("wrong-type", format!("Invalid value: {message}"));
    match field {
        "name" => here(
            "invalid-name",
            format!(
                "Invalid value: {value}: an analysis name must be a non-empty string such as \"error-rate\""
            ),
        ),
        "scope" => unsupported(value, &quoted(&AnalysisScope::VALUES)),
        "onNoData" => unsupported(value, &quoted(&OnNoData::VALUES)),
        "initialDelay" => here(
            "invalid-duration",
            format!("Invalid value: {value}: initialDelay must be a Go duration such as \"30s\""),
        ),
        "interval" => tell_positive_duration(value, "interval", "30s"),
        "count" => tell_count(value, field, 1),
        "failureLimit" | "inconclusiveLimit" | "consecutiveErrorLimit" => {
            tell_count(value, field, 0)
        }
        "successCondition" | "failureCondition" => wrong_type(format!(
            "{value}: {field} must be a CEL expression over `result` in quotes, such as \"result < 0.01\""
        )),
        "dryRun" => wrong_type(format!("{value}: dryRun must be true or false")),
        "prometheus" | "web" | "commitStatus" => wrong_type(format!(
            "{value}: {field} must be a mapping of {}",
            fields.join(", ")
        )),
        _ => tell_provider_value(field, value, parent),
    }
}

/// A count of at least `minimum` (and at most u32's maximum).
pub(crate) fn count_message(value: &Value, field: &str, minimum: u64) -> String {
    let wanted = if minimum == 0 {
        "a count of 0 or more, such as 1"
    } else {
        "a count of at least 1, such as 6"
    };
    format!("Invalid value: {value}: {field} must be {wanted} (an integer, unquoted)")
}

fn tell_count(value: &Value, field: &str, minimum: u64) -> Option<Told> {
    here("invalid-count", count_message(value, field, minimum))
}

fn tell_provider_value(field: &str, value: &Value, parent: &Value) -> Option<Told> {
    let (_, field) = field.split_once('.')?;
    match field {
        "address" | "query" | "url" | "addressSecretFile" => here(
            "wrong-type",
            format!(
                "Invalid value: {value}: {field} must be {}",
                provider_text(field)
            ),
        ),
        "credentialsSecretFile" | "headersSecretFile" => {
            here("wrong-type", file_message(value, field))
        }
        "jsonPath" => here(
            "invalid-json-path",
            format!("Invalid value: {value}: jsonPath must be a string such as \"{{.ok}}\""),
        ),
        "provider" => unsupported(value, &quoted(&CommitStatusProvider::VALUES)),
        "contexts" => here("wrong-type", contexts_message(value)),
        "contexts[]" => at_parent("wrong-type", contexts_message(parent)),
        _ => None,
    }
}

/// Why `value` of a `…SecretFile` is no path of a file.
pub(crate) fn file_message(value: &Value, field: &str) -> String {
    format!(
        "Invalid value: {value}: {field} must be the path of a file (leave it out when there is none)"
    )
}

/// `contexts` that is not a list of status context names.
pub(crate) fn contexts_message(contexts: &Value) -> String {
    format!(
        "Invalid value: {contexts}: contexts must be a list of status context names, such as [\"e2e/canary\"]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_name_fields_whatever_the_stage_or_item() {
        let segments = [
            PathSegment::Key("spec".into()),
            PathSegment::Key("stages".into()),
            PathSegment::Key("prod".into()),
            PathSegment::Key("waves".into()),
        ];
        assert_eq!(shape(&segments), "spec.stages.*.waves");
        let segments = [
            PathSegment::Key("spec".into()),
            PathSegment::Key("notify".into()),
            PathSegment::Index(2),
            PathSegment::Key("events".into()),
            PathSegment::Index(0),
        ];
        assert_eq!(shape(&segments), "spec.notify[].events[]");
        assert_eq!(render(&segments), "spec.notify[2].events[0]");
    }
}
