//! The shared validator on small schemas: what each check finds, and how the two callers'
//! choices ([`Checks`]) change pruning, defaulting and the optional checks.

use serde_json::{Value, json};
use tollgate_schema::{
    Checks, CompileError, CrdRule, Expected, Findings, Format, JsonType, PathSegment,
    StructuralSchema, UnknownFields, ViolationKind,
};

/// The emulator's choices (an API server).
const SERVER: Checks = Checks {
    unknown_fields: UnknownFields::Prune,
    defaults: false,
    list_types: false,
    integral_floats: true,
};

/// The manifest linter's choices.
const LINT: Checks = Checks {
    unknown_fields: UnknownFields::Report,
    defaults: true,
    list_types: true,
    integral_floats: false,
};

fn no_rules(_: &str) -> Option<CrdRule> {
    None
}

fn schema(openapi: Value) -> StructuralSchema {
    StructuralSchema::compile(&openapi, no_rules).expect("compiles")
}

/// Paths written `a.b[0].c`, for assertions.
fn dotted(segments: &[PathSegment]) -> String {
    let mut out = String::new();
    for segment in segments {
        match segment {
            PathSegment::Key(key) if out.is_empty() => out.push_str(key),
            PathSegment::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            PathSegment::Index(index) => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

fn paths(findings: &Findings) -> Vec<String> {
    findings
        .violations
        .iter()
        .map(|v| dotted(v.path.segments()))
        .collect()
}

fn with_unknown_fields() -> StructuralSchema {
    schema(json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "auto": {"type": "object"}}}}}))
}

#[test]
fn unknown_fields_are_pruned_with_their_paths_and_object_fields_are_kept() {
    let mut object = json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n", "x": 1},
        "spec": {"foo": 1, "list": [{"a": "x", "b": 2}], "free": {"any": 1}}, "bar": 2});
    let findings = with_unknown_fields().validate(&mut object, &SERVER);
    let mut pruned: Vec<String> = findings
        .pruned
        .iter()
        .map(|p| dotted(p.segments()))
        .collect();
    pruned.sort();
    assert_eq!(pruned, ["bar", "spec.foo", "spec.list[0].b"]);
    assert!(findings.violations.is_empty());
    assert_eq!(
        object,
        json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n", "x": 1},
               "spec": {"list": [{"a": "x"}], "free": {"any": 1}}})
    );
}

#[test]
fn reported_unknown_fields_stay_and_name_the_nearest_declared_field() {
    let mut object = json!({"spec": {"atuo": {}, "free": {"any": 1}}});
    let findings = with_unknown_fields().validate(&mut object, &LINT);
    assert!(findings.pruned.is_empty());
    assert_eq!(paths(&findings), ["spec.atuo"]);
    assert_eq!(
        findings.violations[0].kind,
        ViolationKind::UnknownField {
            suggestion: Some("auto".into())
        }
    );
    assert_eq!(object["spec"]["atuo"], json!({}));
}

#[test]
fn embedded_resources_may_carry_object_fields() {
    let node = schema(
        json!({"type": "object", "properties": {"template": {"type": "object",
        "x-kubernetes-embedded-resource": true, "properties": {"data": {"type": "string"}}}}}),
    );
    let mut object =
        json!({"template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "other": 1}});
    let findings = node.validate(&mut object, &SERVER);
    assert_eq!(
        findings
            .pruned
            .iter()
            .map(|p| dotted(p.segments()))
            .collect::<Vec<_>>(),
        ["template.other"]
    );
}

#[test]
fn nulls_of_non_nullable_fields_are_pruned_and_then_required() {
    let node = schema(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "required": ["a"],
        "properties": {"a": {"type": "string"}, "b": {"type": "string", "nullable": true}}}}}),
    );
    for checks in [SERVER, LINT] {
        let mut object = json!({"spec": {"a": null, "b": null}});
        let findings = node.validate(&mut object, &checks);
        assert_eq!(object, json!({"spec": {"b": null}}));
        assert_eq!(paths(&findings), ["spec.a"]);
        assert_eq!(findings.violations[0].kind, ViolationKind::Required);
    }
}

#[test]
fn a_null_list_item_is_of_the_wrong_type() {
    let node = schema(json!({"type": "array", "items": {"x-kubernetes-int-or-string": true}}));
    let findings = node.validate(&mut json!([1, null]), &SERVER);
    assert_eq!(paths(&findings), ["[1]"]);
    assert_eq!(
        findings.violations[0].kind,
        ViolationKind::Null {
            expected: Expected::IntOrString
        }
    );
}

#[test]
fn maps_int_or_string_and_formats() {
    let node = schema(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
        "max": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "at": {"type": "string", "format": "date-time"},
        "hash": {"type": "string", "format": "byte"},
        "count": {"type": "integer", "format": "int32"},
        "big": {"type": "integer", "format": "int64"}}}}}),
    );
    let mut good = json!({"spec": {"labels": {"k": "v"}, "max": "10%", "at": "2026-01-01T00:00:00Z",
        "hash": "aGk=", "count": 5, "big": -1}});
    assert_eq!(node.validate(&mut good, &SERVER), Findings::default());
    let mut bad = json!({"spec": {"labels": {"k": "long"}, "max": true, "at": "soon", "hash": "!",
        "count": 2_147_483_648_u64, "big": 9_223_372_036_854_775_808_u64}});
    let findings = node.validate(&mut bad, &SERVER);
    assert_eq!(
        paths(&findings),
        [
            "spec.labels.k",
            "spec.max",
            "spec.at",
            "spec.hash",
            "spec.count",
            "spec.big"
        ]
    );
    let kinds: Vec<&ViolationKind> = findings.violations.iter().map(|v| &v.kind).collect();
    assert_eq!(*kinds[0], ViolationKind::TooLong { max: 3, length: 4 });
    assert_eq!(
        *kinds[1],
        ViolationKind::WrongType {
            found: "boolean",
            expected: Expected::IntOrString
        }
    );
    assert!(matches!(
        kinds[2],
        ViolationKind::StringFormat {
            format: Format::DateTime,
            ..
        }
    ));
    assert!(matches!(
        kinds[3],
        ViolationKind::StringFormat {
            format: Format::Byte,
            ..
        }
    ));
    assert!(matches!(
        kinds[4],
        ViolationKind::NumberFormat {
            format: Format::Int32,
            ..
        }
    ));
    assert!(matches!(
        kinds[5],
        ViolationKind::NumberFormat {
            format: Format::Int64,
            ..
        }
    ));
}

#[test]
fn integral_floats_are_integers_only_when_asked() {
    let node = schema(json!({"type": "object", "properties": {"tier": {"type": "integer"}}}));
    assert!(
        node.validate(&mut json!({"tier": 5.0}), &SERVER)
            .violations
            .is_empty()
    );
    let findings = node.validate(&mut json!({"tier": 5.0}), &LINT);
    assert_eq!(
        findings.violations[0].kind,
        ViolationKind::WrongType {
            found: "number",
            expected: Expected::Type(JsonType::Integer)
        }
    );
    assert_eq!(
        node.validate(&mut json!({"tier": 5.5}), &SERVER)
            .violations
            .len(),
        1
    );
}

#[test]
fn bounds_lengths_patterns_items_and_enums() {
    let node = schema(json!({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
        "tier": {"type": "integer", "minimum": 1, "maximum": 10},
        "mode": {"type": "string", "enum": ["A", "B"]},
        "list": {"type": "array", "minItems": 1, "maxItems": 1, "items": {"type": "string"}}}}));
    let mut object = json!({"name": "X", "tier": 11, "mode": "C", "list": []});
    let kinds: Vec<ViolationKind> = node
        .validate(&mut object, &SERVER)
        .violations
        .into_iter()
        .map(|v| v.kind)
        .collect();
    assert_eq!(kinds.len(), 5, "{kinds:?}");
    assert_eq!(
        kinds[0],
        ViolationKind::TooShort {
            value: "X".into(),
            min: 2
        }
    );
    assert!(
        matches!(&kinds[1], ViolationKind::PatternMismatch { pattern, .. } if pattern == "^[a-z]+$")
    );
    assert!(matches!(kinds[2], ViolationKind::AboveMaximum { maximum, .. } if maximum == 10.0));
    assert!(
        matches!(&kinds[3], ViolationKind::NotSupported { supported, .. } if supported.len() == 2)
    );
    assert_eq!(kinds[4], ViolationKind::TooFewItems { count: 0, min: 1 });
}

#[test]
fn defaults_are_applied_in_schema_order_only_when_asked() {
    let node = schema(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "b": {"type": "integer", "default": 2}, "a": {"type": "string", "default": "x"},
        "c": {"type": "string"}}}}}),
    );
    let mut linted = json!({"spec": {"c": "y"}});
    node.validate(&mut linted, &LINT);
    let keys: Vec<&String> = linted["spec"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["c", "b", "a"]);
    let mut admitted = json!({"spec": {"c": "y"}});
    node.validate(&mut admitted, &SERVER);
    assert_eq!(admitted, json!({"spec": {"c": "y"}}));
}

#[test]
fn list_keys_and_set_items_are_unique_only_when_asked() {
    let node = schema(json!({"type": "object", "properties": {
        "stages": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                   "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}));
    let object = json!({"stages": [{"name": "a"}, {"name": "a"}], "tags": ["x", "x"]});
    let findings = node.validate(&mut object.clone(), &LINT);
    assert_eq!(paths(&findings), ["stages[1].name", "tags[1]"]);
    assert_eq!(
        findings.violations[0].kind,
        ViolationKind::DuplicateListKey {
            key: "\"a\"".into()
        }
    );
    assert!(
        node.validate(&mut object.clone(), &SERVER)
            .violations
            .is_empty()
    );
}

fn needs_a_or_b(object: &serde_json::Map<String, Value>) -> bool {
    object.contains_key("a") || object.contains_key("b")
}

fn a_or_b(rule: &str) -> Option<CrdRule> {
    (rule == "has(self.a) || has(self.b)").then_some(CrdRule {
        code: "a-or-b",
        check: needs_a_or_b,
    })
}

#[test]
fn cel_rules_are_checked_when_the_caller_implements_them() {
    let openapi = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "has(self.a)   ||\n has(self.b)", "message": "a or b"},
            {"rule": "self.c > 1"}],
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}}});
    let checked = StructuralSchema::compile(&openapi, a_or_b).unwrap();
    assert_eq!(
        checked.cel_rules(),
        [
            ("has(self.a) || has(self.b)".to_string(), true),
            ("self.c > 1".to_string(), false)
        ]
    );
    let findings = checked.validate(&mut json!({"spec": {}}), &SERVER);
    assert_eq!(paths(&findings), ["spec"]);
    assert_eq!(
        findings.violations[0].kind,
        ViolationKind::RuleFailed {
            code: "a-or-b",
            message: "a or b".into()
        }
    );
    let unchecked = schema(openapi);
    assert!(
        unchecked
            .validate(&mut json!({"spec": {}}), &SERVER)
            .violations
            .is_empty()
    );
}

#[test]
fn a_bad_pattern_is_a_compile_error_naming_where_it_is() {
    let openapi = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "name": {"type": "string", "pattern": "(unclosed"}}}}});
    let Err(CompileError::BadPattern { at, pattern, .. }) =
        StructuralSchema::compile(&openapi, no_rules)
    else {
        panic!("a bad pattern compiles");
    };
    assert_eq!(at, "properties.spec.properties.name.pattern");
    assert_eq!(pattern, "(unclosed");
}

/// A documented enumeration as generators write it (`oneOf` of `const`s and `enum`s) is an enum
/// of the branches' common type.
#[test]
fn a_one_of_of_constants_is_an_enum() {
    let s = schema(json!({"type": "object", "properties": {"mode": {"oneOf": [
        {"type": "string", "enum": ["A", "B"]},
        {"type": "string", "const": "C", "description": "the third"}
    ]}}}));
    for ok in ["A", "C"] {
        let mut object = json!({"mode": ok});
        assert_eq!(s.validate(&mut object, &LINT).violations, vec![]);
    }
    let mut object = json!({"mode": "D"});
    let found = s.validate(&mut object, &LINT).violations;
    assert!(matches!(
        &found[0].kind,
        ViolationKind::NotSupported { supported, .. } if supported.len() == 3
    ));
    let mut object = json!({"mode": 3});
    let found = s.validate(&mut object, &LINT).violations;
    assert!(matches!(
        found[0].kind,
        ViolationKind::WrongType {
            expected: Expected::Type(JsonType::String),
            ..
        }
    ));
}

/// Kept nulls are values: a `null` of a typed field is a violation there instead of pruned.
#[test]
fn kept_nulls_are_violations_of_typed_fields() {
    let s = schema(json!({"type": "object", "properties": {"a": {"type": "string"}}}));
    let mut object = json!({"a": null});
    assert_eq!(s.validate(&mut object, &LINT).violations, vec![]);
    assert_eq!(object, json!({}));
    let mut object = json!({"a": null});
    let found = s.validate_keeping_nulls(&mut object, &LINT).violations;
    assert_eq!(found.len(), 1);
    assert_eq!(dotted(found[0].path.segments()), "a");
    assert!(matches!(found[0].kind, ViolationKind::Null { .. }));
}
