//! Structural validation and defaulting against a real CRD `openAPIV3Schema`, the way the API
//! server does it: null pruning, defaults, then `type`, `enum`, `pattern`, lengths, bounds,
//! `format`, list types and CEL rules. Unknown fields are rejected (like
//! `kubectl apply --validate=strict`) unless `x-kubernetes-preserve-unknown-fields` allows them,
//! so typos such as `trigger.atuo` are caught.
//!
//! `anyOf` appears in the Sveltos CRDs only beside `x-kubernetes-int-or-string`, which is handled
//! directly; other combinators are not used and not interpreted. Root `metadata` is `type: object`
//! in every CRD: the API server checks it as ObjectMeta, which [`crate::rules::metadata`] does.

use std::collections::HashSet;
use std::sync::OnceLock;

use regex::Regex;
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

use crate::crd_rules::{self, CrdRule};
use crate::diagnostic::Anchor;
use crate::field_path::FieldPath;
use crate::location::child_path;

const CLUSTER_PROMOTION_CRD: &str =
    include_str!("../crds/config.projectsveltos.io_clusterpromotions.yaml");
const CLUSTER_PROFILE_CRD: &str =
    include_str!("../crds/config.projectsveltos.io_clusterprofiles.yaml");

/// A field error, worded like the API server's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    pub code: &'static str,
    pub path: String,
    pub message: String,
    pub anchor: Anchor,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaLoadError {
    #[error("CRD is not valid YAML: {0}")]
    Yaml(String),
    #[error("CRD has no spec.versions[0].schema.openAPIV3Schema")]
    MissingSchema,
    #[error("schema at {path:?} has an invalid pattern {pattern:?}: {reason}")]
    BadPattern {
        path: String,
        pattern: String,
        reason: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JsonType {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl JsonType {
    fn parse(text: &str) -> Option<JsonType> {
        Some(match text {
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "string" => JsonType::String,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "boolean" => JsonType::Boolean,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            JsonType::Object => "object",
            JsonType::Array => "array",
            JsonType::String => "string",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::Boolean => "boolean",
        }
    }

    fn accepts(self, value: &Value) -> bool {
        match self {
            JsonType::Object => value.is_object(),
            JsonType::Array => value.is_array(),
            JsonType::String => value.is_string(),
            JsonType::Integer => value.is_i64() || value.is_u64(),
            JsonType::Number => value.is_number(),
            JsonType::Boolean => value.is_boolean(),
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

struct ValidationRule {
    text: String,
    message: String,
    implementation: Option<CrdRule>,
}

#[derive(Default)]
struct SchemaNode {
    ty: Option<JsonType>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    properties: Vec<(String, SchemaNode)>,
    /// Name → index into `properties` (a fast hasher: the keys are the CRD's own names).
    property_index: FxHashMap<String, usize>,
    additional: Option<Box<SchemaNode>>,
    items: Option<Box<SchemaNode>>,
    required: Vec<String>,
    enum_values: Vec<Value>,
    pattern: Option<(String, Regex)>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    format: Option<String>,
    list_type: Option<String>,
    list_map_keys: Vec<String>,
    default: Option<Value>,
    rules: Vec<ValidationRule>,
}

/// A compiled `openAPIV3Schema`.
pub struct StructuralSchema {
    root: SchemaNode,
}

fn compile(schema: &Value, path: &str) -> Result<SchemaNode, SchemaLoadError> {
    let get = |k: &str| schema.get(k);
    let usize_of = |k: &str| get(k).and_then(Value::as_u64).map(|v| v as usize);
    let mut node = SchemaNode {
        ty: get("type")
            .and_then(Value::as_str)
            .and_then(JsonType::parse),
        nullable: get("nullable").and_then(Value::as_bool).unwrap_or(false),
        int_or_string: get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        preserve_unknown: get("x-kubernetes-preserve-unknown-fields")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        required: string_list(get("required")),
        enum_values: get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        minimum: get("minimum").and_then(Value::as_f64),
        maximum: get("maximum").and_then(Value::as_f64),
        min_length: usize_of("minLength"),
        max_length: usize_of("maxLength"),
        min_items: usize_of("minItems"),
        max_items: usize_of("maxItems"),
        format: get("format").and_then(Value::as_str).map(str::to_string),
        list_type: get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .map(str::to_string),
        list_map_keys: string_list(get("x-kubernetes-list-map-keys")),
        default: get("default").cloned(),
        ..SchemaNode::default()
    };
    if let Some(pattern) = get("pattern").and_then(Value::as_str) {
        let regex = Regex::new(pattern).map_err(|e| SchemaLoadError::BadPattern {
            path: path.to_string(),
            pattern: pattern.to_string(),
            reason: e.to_string(),
        })?;
        node.pattern = Some((pattern.to_string(), regex));
    }
    if let Some(properties) = get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            node.properties
                .push((name.clone(), compile(child, &child_path(path, name))?));
        }
    }
    node.property_index = node
        .properties
        .iter()
        .enumerate()
        .map(|(index, (name, _))| (name.clone(), index))
        .collect();
    if let Some(additional) = get("additionalProperties").filter(|v| v.is_object()) {
        node.additional = Some(Box::new(compile(additional, &format!("{path}[*]"))?));
    }
    if let Some(items) = get("items").filter(|v| v.is_object()) {
        node.items = Some(Box::new(compile(items, &format!("{path}[*]"))?));
    }
    for rule in get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
        node.rules.push(ValidationRule {
            text: crd_rules::normalize_rule(text),
            message: rule
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("failed rule: {text}")),
            implementation: crd_rules::implementation(text),
        });
    }
    Ok(node)
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn quoted(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

impl StructuralSchema {
    /// Loads the first version's `openAPIV3Schema` of a CRD manifest.
    pub fn from_crd_yaml(yaml: &str) -> Result<StructuralSchema, SchemaLoadError> {
        let crd: Value =
            serde_saphyr::from_str(yaml).map_err(|e| SchemaLoadError::Yaml(e.to_string()))?;
        let schema = crd
            .pointer("/spec/versions/0/schema/openAPIV3Schema")
            .ok_or(SchemaLoadError::MissingSchema)?;
        Ok(StructuralSchema {
            root: compile(schema, "")?,
        })
    }

    /// Validates without changing `value` (defaults are applied to a copy first, as the API
    /// server validates the defaulted object).
    pub fn validate(&self, value: &Value) -> Vec<SchemaError> {
        let mut copy = value.clone();
        self.validate_and_default(&mut copy)
    }

    /// Applies CRD defaults to `value` in place and returns every field error.
    pub fn validate_and_default(&self, value: &mut Value) -> Vec<SchemaError> {
        let mut errors = Vec::new();
        walk(&self.root, value, &FieldPath::Root, &mut errors);
        errors
    }

    /// Every CEL rule text in the schema, with whether it is implemented.
    pub fn cel_rules(&self) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        collect_rules(&self.root, &mut out);
        out
    }
}

fn collect_rules(node: &SchemaNode, out: &mut Vec<(String, bool)>) {
    for rule in &node.rules {
        out.push((rule.text.clone(), rule.implementation.is_some()));
    }
    for (_, child) in &node.properties {
        collect_rules(child, out);
    }
    for child in node.additional.iter().chain(node.items.iter()) {
        collect_rules(child, out);
    }
}

static PROMOTION_SCHEMA: OnceLock<StructuralSchema> = OnceLock::new();
static PROFILE_SCHEMA: OnceLock<StructuralSchema> = OnceLock::new();

/// The embedded ClusterPromotion CRD schema, compiled once.
pub fn cluster_promotion_schema() -> &'static StructuralSchema {
    PROMOTION_SCHEMA.get_or_init(|| {
        StructuralSchema::from_crd_yaml(CLUSTER_PROMOTION_CRD)
            .expect("the embedded ClusterPromotion CRD compiles (unit-tested)")
    })
}

/// The embedded ClusterProfile CRD schema, compiled once (for generated profiles).
pub fn cluster_profile_schema() -> &'static StructuralSchema {
    PROFILE_SCHEMA.get_or_init(|| {
        StructuralSchema::from_crd_yaml(CLUSTER_PROFILE_CRD)
            .expect("the embedded ClusterProfile CRD compiles (unit-tested)")
    })
}

fn error(code: &'static str, path: &FieldPath<'_>, message: String) -> SchemaError {
    SchemaError {
        code,
        path: path.render(),
        message,
        anchor: Anchor::Value,
    }
}

fn walk(node: &SchemaNode, value: &mut Value, path: &FieldPath<'_>, errors: &mut Vec<SchemaError>) {
    if value.is_null() {
        if !node.nullable && (node.ty.is_some() || node.int_or_string) {
            let expected = node.ty.map_or("int-or-string", JsonType::name);
            errors.push(error(
                "wrong-type",
                path,
                format!("Invalid value: \"null\": must be of type {expected}"),
            ));
        }
        return;
    }
    if node.int_or_string {
        match value {
            Value::String(s) => check_string(node, s, path, errors),
            v if v.is_i64() || v.is_u64() => {}
            other => errors.push(error(
                "wrong-type",
                path,
                format!(
                    "Invalid value: \"{}\": must be an integer or a string",
                    type_name(other)
                ),
            )),
        }
        return;
    }
    if let Some(ty) = node.ty
        && !ty.accepts(value)
    {
        errors.push(error(
            "wrong-type",
            path,
            format!(
                "Invalid value: \"{}\": must be of type {}",
                type_name(value),
                ty.name()
            ),
        ));
        return;
    }
    if !node.enum_values.is_empty() && !node.enum_values.contains(value) {
        let supported: Vec<String> = node.enum_values.iter().map(quoted).collect();
        errors.push(error(
            "unsupported-value",
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                quoted(value),
                supported.join(", ")
            ),
        ));
    }
    match value {
        Value::String(s) => check_string(node, s, path, errors),
        Value::Number(n) => check_number(node, n, path, errors),
        Value::Object(object) => walk_object(node, object, path, errors),
        Value::Array(items) => walk_array(node, items, path, errors),
        Value::Bool(_) | Value::Null => {}
    }
}

fn check_string(node: &SchemaNode, s: &str, path: &FieldPath<'_>, errors: &mut Vec<SchemaError>) {
    // Counting characters walks the whole string: only for fields with length bounds.
    let chars = if node.min_length.is_some() || node.max_length.is_some() {
        s.chars().count()
    } else {
        0
    };
    if let Some(min) = node.min_length
        && chars < min
    {
        errors.push(error(
            "too-short",
            path,
            format!("Invalid value: {s:?}: should be at least {min} chars long"),
        ));
    }
    if let Some(max) = node.max_length
        && chars > max
    {
        errors.push(error(
            "too-long",
            path,
            format!("Too long: may not be more than {max} characters ({chars} given)"),
        ));
    }
    if let Some((pattern, regex)) = &node.pattern
        && !regex.is_match(s)
    {
        errors.push(error(
            "pattern-mismatch",
            path,
            format!("Invalid value: {s:?}: should match '{pattern}'"),
        ));
    }
    if node.format.as_deref() == Some("date-time")
        && chrono::DateTime::parse_from_rfc3339(s).is_err()
    {
        errors.push(error(
            "invalid-date-time",
            path,
            format!("Invalid value: {s:?}: must be an RFC 3339 date-time such as \"2025-10-07T10:00:00Z\""),
        ));
    }
}

fn check_number(
    node: &SchemaNode,
    n: &serde_json::Number,
    path: &FieldPath<'_>,
    errors: &mut Vec<SchemaError>,
) {
    let Some(v) = n.as_f64() else { return };
    if let Some(min) = node.minimum
        && v < min
    {
        errors.push(error(
            "out-of-range",
            path,
            format!("Invalid value: {n}: should be greater than or equal to {min}"),
        ));
    }
    if let Some(max) = node.maximum
        && v > max
    {
        errors.push(error(
            "out-of-range",
            path,
            format!("Invalid value: {n}: should be less than or equal to {max}"),
        ));
    }
    let out_of_int32 = v < f64::from(i32::MIN) || v > f64::from(i32::MAX);
    if node.format.as_deref() == Some("int32") && out_of_int32 {
        errors.push(error(
            "out-of-range",
            path,
            format!("Invalid value: {n}: does not fit in a 32-bit integer"),
        ));
    }
}

fn property<'a>(node: &'a SchemaNode, name: &str) -> Option<&'a SchemaNode> {
    let index = *node.property_index.get(name)?;
    node.properties.get(index).map(|(_, child)| child)
}

fn walk_object(
    node: &SchemaNode,
    object: &mut Map<String, Value>,
    path: &FieldPath<'_>,
    errors: &mut Vec<SchemaError>,
) {
    // The API server prunes explicit nulls of fields that are not nullable, then applies
    // defaults to absent fields of objects that exist.
    object.retain(|name, value| {
        !(value.is_null()
            && property(node, name)
                .or(node.additional.as_deref())
                .is_some_and(|s| !s.nullable))
    });
    let defaults: Vec<(&String, &Value)> = node
        .properties
        .iter()
        .filter(|(name, _)| !object.contains_key(name))
        .filter_map(|(name, child)| Some((name, child.default.as_ref()?)))
        .collect();
    if !defaults.is_empty() {
        // Sized once: inserting one by one doubles the map's storage, and the defaulted
        // profileSpec of every promotion is kept for as long as its snapshot.
        let mut defaulted = Map::with_capacity(object.len() + defaults.len());
        defaulted.extend(std::mem::take(object));
        for (name, default) in defaults {
            defaulted.insert(name.clone(), default.clone());
        }
        *object = defaulted;
    }
    for (name, value) in object.iter_mut() {
        if path.is_root() && name == "metadata" {
            // ObjectMeta: checked by the metadata rule, not by the CRD's bare `type: object`.
            continue;
        }
        let field = path.key(name);
        if let Some(child) = property(node, name) {
            walk(child, value, &field, errors);
        } else if let Some(additional) = &node.additional {
            walk(additional, value, &field, errors);
        } else if !node.preserve_unknown {
            errors.push(unknown_field(node, name, &field));
        }
    }
    for name in &node.required {
        if !object.contains_key(name) {
            errors.push(error(
                "required-value",
                &path.key(name),
                format!("Required value: {name:?} must be set"),
            ));
        }
    }
    for rule in &node.rules {
        if let Some(implementation) = &rule.implementation
            && !(implementation.check)(object)
        {
            errors.push(error(implementation.code, path, rule.message.clone()));
        }
    }
}

fn unknown_field(node: &SchemaNode, name: &str, field: &FieldPath<'_>) -> SchemaError {
    let suggestion = node
        .properties
        .iter()
        .map(|(known, _)| (edit_distance(known, name), known))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, known)| format!(" (did you mean {known:?}?)"))
        .unwrap_or_default();
    SchemaError {
        code: "unknown-field",
        path: field.render(),
        message: format!("unknown field {name:?}: not declared in the schema{suggestion}"),
        anchor: Anchor::Key,
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

fn walk_array(
    node: &SchemaNode,
    items: &mut [Value],
    path: &FieldPath<'_>,
    errors: &mut Vec<SchemaError>,
) {
    if let Some(min) = node.min_items
        && items.len() < min
    {
        errors.push(error(
            "too-few-items",
            path,
            format!(
                "Invalid value: {}: should have at least {min} items",
                items.len()
            ),
        ));
    }
    if let Some(max) = node.max_items
        && items.len() > max
    {
        errors.push(error(
            "too-many-items",
            path,
            format!(
                "Invalid value: {}: should have at most {max} items",
                items.len()
            ),
        ));
    }
    if let Some(item_schema) = &node.items {
        for (index, item) in items.iter_mut().enumerate() {
            walk(item_schema, item, &path.index(index), errors);
        }
    }
    match node.list_type.as_deref() {
        Some("map") if !node.list_map_keys.is_empty() => {
            let mut seen = HashSet::new();
            for (index, item) in items.iter().enumerate() {
                let key: Vec<String> = node
                    .list_map_keys
                    .iter()
                    .map(|k| item.get(k).map(quoted).unwrap_or_default())
                    .collect();
                if !seen.insert(key.clone()) {
                    let code = if path.render() == "spec.stages" {
                        "duplicate-stage-name"
                    } else {
                        "duplicate-list-key"
                    };
                    let item = path.index(index);
                    let field = match node.list_map_keys.as_slice() {
                        [single] => item.key(single),
                        _ => item,
                    };
                    errors.push(error(
                        code,
                        &field,
                        format!("Duplicate value: {}", key.join(", ")),
                    ));
                }
            }
        }
        Some("set") => {
            let mut seen = HashSet::new();
            for (index, item) in items.iter().enumerate() {
                if !seen.insert(item.to_string()) {
                    errors.push(error(
                        "duplicate-value",
                        &path.index(index),
                        format!("Duplicate value: {}", quoted(item)),
                    ));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal() -> Value {
        json!({
            "apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {"stages": [{"name": "a", "clusterSelector": {"matchLabels": {"env": "a"}}}]}
        })
    }

    #[test]
    fn embedded_crds_compile_and_every_cel_rule_is_implemented() {
        for schema in [cluster_promotion_schema(), cluster_profile_schema()] {
            let rules = schema.cel_rules();
            assert!(!rules.is_empty());
            for (rule, implemented) in rules {
                assert!(
                    implemented,
                    "CEL rule without a Rust implementation: {rule}"
                );
            }
        }
    }

    #[test]
    fn defaults_are_applied() {
        let mut doc = minimal();
        let errors = cluster_promotion_schema().validate_and_default(&mut doc);
        assert_eq!(errors, vec![]);
        assert_eq!(
            doc,
            minimal(),
            "nothing to default without profileSpec or triggers"
        );
        let mut doc = minimal();
        doc["spec"]["profileSpec"] = json!({"syncMode": null});
        doc["spec"]["stages"][0]["trigger"] = json!({"manual": {}});
        let errors = cluster_promotion_schema().validate_and_default(&mut doc);
        assert_eq!(errors, vec![]);
        assert_eq!(doc["spec"]["profileSpec"]["syncMode"], json!("Continuous"));
        assert_eq!(doc["spec"]["profileSpec"]["tier"], json!(100));
        assert_eq!(
            doc["spec"]["stages"][0]["trigger"]["manual"]["automaticReset"],
            json!(true)
        );
    }

    #[test]
    fn nulls_of_non_nullable_fields_are_pruned() {
        let mut doc = minimal();
        doc["spec"]["stages"][0]["trigger"] =
            json!({"auto": {"delay": null, "preHealthCheckDeployment": null}});
        let errors = cluster_promotion_schema().validate_and_default(&mut doc);
        assert_eq!(errors, vec![]);
        assert_eq!(doc["spec"]["stages"][0]["trigger"], json!({"auto": {}}));
        // A null where a value is required is then a missing value.
        let mut doc = minimal();
        doc["spec"]["stages"][0]["name"] = Value::Null;
        let errors = cluster_promotion_schema().validate_and_default(&mut doc);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].code, "required-value");
        assert_eq!(errors[0].path, "spec.stages[0].name");
    }

    #[test]
    fn field_errors() {
        let mut doc = minimal();
        doc["spec"]["stages"][0]["trigger"] = json!({"atuo": {}});
        doc["spec"]["profileSpec"] =
            json!({"syncMode": "Sometimes", "maxUpdate": "150%", "tier": 0});
        doc["spec"]["stages"]
            .as_array_mut()
            .expect("array")
            .push(json!({"name": "a"}));
        let errors = cluster_promotion_schema().validate(&doc);
        let summary: Vec<(&str, &str)> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
        assert_eq!(
            summary,
            vec![
                ("unknown-field", "spec.stages[0].trigger.atuo"),
                ("trigger-needs-auto-xor-manual", "spec.stages[0].trigger"),
                ("duplicate-stage-name", "spec.stages[1].name"),
                ("unsupported-value", "spec.profileSpec.syncMode"),
                ("pattern-mismatch", "spec.profileSpec.maxUpdate"),
                ("out-of-range", "spec.profileSpec.tier"),
            ]
        );
        assert!(
            errors[3]
                .message
                .starts_with("Unsupported value: \"Sometimes\": supported values: \"OneTime\"")
        );
        assert!(errors[0].message.contains("did you mean \"auto\"?"));
        assert_eq!(errors[2].message, "Duplicate value: \"a\"");
    }

    #[test]
    fn wrong_types_and_required() {
        let doc = json!({"apiVersion": "x", "kind": "ClusterPromotion", "metadata": {}, "spec": {"stages": "a"}});
        let errors = cluster_promotion_schema().validate(&doc);
        assert_eq!(errors.len(), 1);
        assert_eq!(
            errors[0].message,
            "Invalid value: \"string\": must be of type array"
        );
        let errors = cluster_promotion_schema().validate(&json!({"kind": "ClusterPromotion"}));
        assert_eq!(errors[0].code, "required-value");
        assert_eq!(errors[0].path, "spec");
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("auto", "atuo"), 2);
        assert_eq!(edit_distance("manual", "manual"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
