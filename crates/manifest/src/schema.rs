//! ClusterPromotion and ClusterProfile manifests checked against their real CRD schemas, the way
//! the API server checks them (null pruning, defaults, types, enums, patterns, lengths, bounds,
//! formats, list types and the CEL rules [`crate::crd_rules`] implements), by the structural
//! schema validator tollgate shares with its emulator (`tollgate-schema`). Unknown fields are
//! errors (like `kubectl apply --validate=strict`) unless `x-kubernetes-preserve-unknown-fields`
//! allows them, so typos such as `trigger.atuo` are caught. What is found is worded here, as
//! diagnostics with stable codes. Root `metadata` is checked as ObjectMeta by
//! [`crate::rules::metadata`], not by the schema.

use std::sync::OnceLock;

use serde_json::Value;
use tollgate_schema::{
    Checks, CompileError, Expected, Format, PathSegment, SchemaPath, StructuralSchema,
    UnknownFields, Violation, ViolationKind, quoted,
};

use crate::crd_rules;
use crate::diagnostic::Anchor;
use crate::location::{child_path, item_path};

const CLUSTER_PROMOTION_CRD: &str =
    include_str!("../crds/config.projectsveltos.io_clusterpromotions.yaml");
const CLUSTER_PROFILE_CRD: &str =
    include_str!("../crds/config.projectsveltos.io_clusterprofiles.yaml");

/// What a manifest is checked for: unknown fields are errors, defaults are applied, list keys
/// are unique, and an integer is written as one (the model reads it into an integer type).
const CHECKS: Checks = Checks {
    unknown_fields: UnknownFields::Report,
    defaults: true,
    list_types: true,
    integral_floats: false,
};

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
    #[error("CRD schema: {0}")]
    Compile(#[from] CompileError),
}

/// A CRD's compiled `openAPIV3Schema`, checking manifests.
pub struct CrdSchema {
    schema: StructuralSchema,
}

impl CrdSchema {
    /// Loads the first version's `openAPIV3Schema` of a CRD manifest.
    pub fn from_crd_yaml(yaml: &str) -> Result<CrdSchema, SchemaLoadError> {
        let crd: Value =
            serde_saphyr::from_str(yaml).map_err(|e| SchemaLoadError::Yaml(e.to_string()))?;
        let schema = crd
            .pointer("/spec/versions/0/schema/openAPIV3Schema")
            .ok_or(SchemaLoadError::MissingSchema)?;
        Ok(CrdSchema {
            schema: StructuralSchema::compile(schema, crd_rules::implementation)?,
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
        let findings = self.schema.validate(value, &CHECKS);
        findings.violations.into_iter().map(schema_error).collect()
    }

    /// Every CEL rule text in the schema, with whether it is implemented.
    pub fn cel_rules(&self) -> Vec<(String, bool)> {
        self.schema.cel_rules()
    }
}

static PROMOTION_SCHEMA: OnceLock<CrdSchema> = OnceLock::new();
static PROFILE_SCHEMA: OnceLock<CrdSchema> = OnceLock::new();

/// The embedded ClusterPromotion CRD schema, compiled once.
pub fn cluster_promotion_schema() -> &'static CrdSchema {
    PROMOTION_SCHEMA.get_or_init(|| {
        CrdSchema::from_crd_yaml(CLUSTER_PROMOTION_CRD)
            .expect("the embedded ClusterPromotion CRD compiles (unit-tested)")
    })
}

/// The embedded ClusterProfile CRD schema, compiled once (for generated profiles).
pub fn cluster_profile_schema() -> &'static CrdSchema {
    PROFILE_SCHEMA.get_or_init(|| {
        CrdSchema::from_crd_yaml(CLUSTER_PROFILE_CRD)
            .expect("the embedded ClusterProfile CRD compiles (unit-tested)")
    })
}

/// A path in the spelling every diagnostic uses ([`child_path`], [`item_path`]).
fn render(path: &SchemaPath) -> String {
    path.segments()
        .iter()
        .fold(String::new(), |parent, segment| match segment {
            PathSegment::Key(key) => child_path(&parent, key),
            PathSegment::Index(index) => item_path(&parent, *index),
        })
}

fn expected_name(expected: Expected) -> &'static str {
    match expected {
        Expected::Type(ty) => ty.name(),
        Expected::IntOrString => "int-or-string",
    }
}

/// A violation as a manifest diagnostic: a stable code and the message.
fn schema_error(violation: Violation) -> SchemaError {
    let Violation { path, kind } = violation;
    let anchor = match kind {
        ViolationKind::UnknownField { .. } => Anchor::Key,
        _ => Anchor::Value,
    };
    let (code, message) = describe_type(&path, kind);
    SchemaError {
        code,
        path: render(&path),
        message,
        anchor,
    }
}

fn last_key(path: &SchemaPath) -> &str {
    match path.segments().last() {
        Some(PathSegment::Key(name)) => name,
        _ => "",
    }
}

// Each `describe_*` words its kinds of violation and hands the others to the next.

fn describe_type(path: &SchemaPath, kind: ViolationKind) -> (&'static str, String) {
    match kind {
        ViolationKind::Null { expected } => (
            "wrong-type",
            format!(
                "Invalid value: \"null\": must be of type {}",
                expected_name(expected)
            ),
        ),
        ViolationKind::WrongType {
            found,
            expected: Expected::IntOrString,
        } => (
            "wrong-type",
            format!("Invalid value: \"{found}\": must be an integer or a string"),
        ),
        ViolationKind::WrongType { found, expected } => (
            "wrong-type",
            format!(
                "Invalid value: \"{found}\": must be of type {}",
                expected_name(expected)
            ),
        ),
        ViolationKind::NotSupported { value, supported } => {
            let supported: Vec<String> = supported.iter().map(quoted).collect();
            let value = quoted(&value);
            let supported = supported.join(", ");
            (
                "unsupported-value",
                format!("Unsupported value: {value}: supported values: {supported}"),
            )
        }
        other => describe_string(path, other),
    }
}

fn describe_string(path: &SchemaPath, kind: ViolationKind) -> (&'static str, String) {
    match kind {
        ViolationKind::TooShort { value, min } => (
            "too-short",
            format!("Invalid value: {value:?}: should be at least {min} chars long"),
        ),
        ViolationKind::TooLong { max, length } => (
            "too-long",
            format!("Too long: may not be more than {max} characters ({length} given)"),
        ),
        ViolationKind::PatternMismatch { value, pattern } => (
            "pattern-mismatch",
            format!("Invalid value: {value:?}: should match '{pattern}'"),
        ),
        ViolationKind::StringFormat {
            value,
            format: Format::Byte,
        } => (
            "invalid-base64",
            format!("Invalid value: {value:?}: must be base64 (format byte)"),
        ),
        ViolationKind::StringFormat { value, .. } => (
            "invalid-date-time",
            format!(
                "Invalid value: {value:?}: must be an RFC 3339 date-time such as \"2025-10-07T10:00:00Z\""
            ),
        ),
        other => describe_number(path, other),
    }
}

fn describe_number(path: &SchemaPath, kind: ViolationKind) -> (&'static str, String) {
    match kind {
        ViolationKind::BelowMinimum { value, minimum } => (
            "out-of-range",
            format!("Invalid value: {value}: should be greater than or equal to {minimum}"),
        ),
        ViolationKind::AboveMaximum { value, maximum } => (
            "out-of-range",
            format!("Invalid value: {value}: should be less than or equal to {maximum}"),
        ),
        ViolationKind::NumberFormat { value, format } => {
            let bits = if format == Format::Int32 { 32 } else { 64 };
            (
                "out-of-range",
                format!("Invalid value: {value}: does not fit in a {bits}-bit integer"),
            )
        }
        ViolationKind::TooFewItems { count, min } => (
            "too-few-items",
            format!("Invalid value: {count}: should have at least {min} items"),
        ),
        ViolationKind::TooManyItems { count, max } => (
            "too-many-items",
            format!("Invalid value: {count}: should have at most {max} items"),
        ),
        other => describe_structure(path, other),
    }
}

fn describe_structure(path: &SchemaPath, kind: ViolationKind) -> (&'static str, String) {
    match kind {
        ViolationKind::Required => (
            "required-value",
            format!("Required value: {:?} must be set", last_key(path)),
        ),
        ViolationKind::UnknownField { suggestion } => {
            let suggestion = suggestion
                .map(|known| format!(" (did you mean {known:?}?)"))
                .unwrap_or_default();
            let name = last_key(path);
            (
                "unknown-field",
                format!("unknown field {name:?}: not declared in the schema{suggestion}"),
            )
        }
        ViolationKind::DuplicateListKey { key } => {
            // The path names the item, or the single key field of the item.
            let list = match path.segments().last() {
                Some(PathSegment::Index(_)) => path.parent(),
                _ => path.parent().parent(),
            };
            let code = if list.is_fields(&["spec", "stages"]) {
                "duplicate-stage-name"
            } else {
                "duplicate-list-key"
            };
            (code, format!("Duplicate value: {key}"))
        }
        ViolationKind::DuplicateSetItem { item } => (
            "duplicate-value",
            format!("Duplicate value: {}", quoted(&item)),
        ),
        ViolationKind::RuleFailed { code, message } => (code, message),
        // Every kind is worded above; a kind the validator gains later still reports, plainly.
        other => ("schema", format!("{other:?}")),
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
    fn formats_are_checked() {
        let mut doc = minimal();
        doc["status"] = json!({"profileSpecHash": "not base64!", "lastPromotionTime": "soon"});
        let errors = cluster_promotion_schema().validate(&doc);
        let summary: Vec<(&str, &str)> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
        assert_eq!(
            summary,
            vec![
                ("invalid-base64", "status.profileSpecHash"),
                ("invalid-date-time", "status.lastPromotionTime"),
            ]
        );
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
}
