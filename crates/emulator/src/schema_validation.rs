//! Server-side validation of custom resources against their CRD's `openAPIV3Schema`, as the real
//! API server does it: unknown fields pruned, warned about or rejected per `fieldValidation`, nulls
//! of non-nullable fields pruned, then `type`, `required`, `enum`, `pattern`, lengths, item counts,
//! bounds and the `date-time`/`byte` formats checked, with the real server's wording.
//!
//! Which directive applies (the real server's rules, kube-apiserver 1.27+):
//! - no `fieldValidation` parameter means `Warn` for every verb;
//! - `Strict` answers 400 BadRequest with a "strict decoding error" naming every unknown field;
//! - `Warn` prunes each unknown field and sends one `Warning: 299 - "unknown field \"…\""` header;
//! - `Ignore` prunes silently;
//! - server-side apply is different: the apply body is converted to a typed object first, and an
//!   unknown field fails that conversion whatever the directive, as an unclassified HTTP 500
//!   (`failed to create typed patch object (…): .spec.foo: field not declared in schema`;
//!   kubernetes/kubernetes#122480, #139253).
//!
//! Writes made by the emulator itself (the Sveltos stand-in, fleet seeding) happen outside any
//! request and are held to `Strict`: a stand-in that wrote an undeclared field would otherwise
//! lose it silently.
//!
//! Formats: `date-time` and `byte` strings, and the `int32`/`int64` ranges of integers, which
//! kube-apiserver checks since 1.36 (kubernetes/kubernetes#136582; `uint32`/`uint64` are not
//! checked there either). Not done (the real server does): CRD defaulting and CEL rules.
//!
//! The validator is `tollgate-schema`, which tollgate's manifest checks use too; this module picks
//! the server's choices ([`CHECKS`]) and words what it finds as the server does
//! ([`crate::field_causes`]). Schemas come from the CRD objects stored, else from the CRDs served
//! from the start: the Sveltos ones vendored under `crds/`, and those the caller passes in
//! ([`crate::EmulatorConfig::crds`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tollgate_schema::{Checks, CrdRule, StructuralSchema, UnknownFields};

use crate::api_error::{ApiError, FieldCause};
use crate::field_causes::{field_cause, field_path};
use crate::registry::{CRD_QUALIFIED_PLURAL, ResourceType, crd_name};
use crate::store::{ObjectKey, Store};

/// The server's choices: unknown fields pruned (then warned about or refused per the request),
/// `5.0` an integer; no defaulting, list-type or CEL checks (not done by the emulator).
const CHECKS: Checks = Checks {
    unknown_fields: UnknownFields::Prune,
    defaults: false,
    list_types: false,
    integral_floats: true,
};

/// No CEL rule is checked.
fn no_cel_rules(_rule: &str) -> Option<CrdRule> {
    None
}

/// The `fieldValidation` directive of a write request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// The directive a request asks for; absent or empty means `Warn`, the server's default.
    pub fn from_query(value: Option<&str>) -> Result<Self, ApiError> {
        match value.unwrap_or_default() {
            "" | "Warn" => Ok(Self::Warn),
            "Ignore" => Ok(Self::Ignore),
            "Strict" => Ok(Self::Strict),
            other => Err(ApiError::FieldsInvalid {
                kind: "CreateOptions".into(),
                group: "meta.k8s.io".into(),
                name: String::new(),
                causes: vec![FieldCause {
                    reason: "FieldValueNotSupported",
                    field: "fieldValidation".into(),
                    message: format!(
                        "Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
                    ),
                }],
            }),
        }
    }
}

/// The directive and the warnings of the request being served.
#[derive(Debug)]
struct RequestValidation {
    directive: FieldValidation,
    warnings: Vec<String>,
}

/// Compiled schemas per CRD, and the request in progress; kept in [`crate::state::ApiState`].
#[derive(Default)]
pub struct SchemaAdmission {
    request: Option<RequestValidation>,
    /// CRD name → (its resourceVersion when compiled, version name → schema).
    compiled: HashMap<String, (String, CompiledVersions)>,
    /// CRD name → schemas, of the CRDs the caller passed in (served from the start).
    passed_in: HashMap<String, CompiledVersions>,
}

type CompiledVersions = Arc<Vec<(String, Arc<StructuralSchema>)>>;

impl SchemaAdmission {
    /// Admission for the CRDs a caller passes in, compiled now: a CRD that does not compile is
    /// refused at start, not found out at the first write.
    pub fn with_crds(crds: &[Value]) -> Result<Self, String> {
        let mut passed_in = HashMap::new();
        for crd in crds {
            let name = crd_name(crd).ok_or("a CRD without spec.group and spec.names.plural")?;
            let versions = compile_crd(crd).map_err(|e| format!("CRD {name}: {e}"))?;
            passed_in.insert(name, Arc::new(versions));
        }
        Ok(Self {
            passed_in,
            ..Self::default()
        })
    }

    /// Puts a request's directive in force for the writes it makes (the caller holds the state
    /// lock for the whole request, so no other write can see it).
    pub fn begin_request(&mut self, directive: FieldValidation) {
        self.request = Some(RequestValidation {
            directive,
            warnings: Vec::new(),
        });
    }

    /// Ends the request; returns its warnings, each the text of one `Warning` header.
    pub fn end_request(&mut self) -> Vec<String> {
        self.request.take().map(|r| r.warnings).unwrap_or_default()
    }

    fn directive(&self) -> FieldValidation {
        self.request
            .as_ref()
            .map_or(FieldValidation::Strict, |r| r.directive)
    }
}

/// `Value` of one `Warning` response header: code 299, no agent, the text quoted. Everything
/// outside printable ASCII is escaped (`\u00e9`) so that any field name makes a valid header
/// value; the real server sends such text as raw UTF-8, which many clients cannot read.
pub fn warning_header(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 8);
    quoted.push_str("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            ' '..='~' => quoted.push(c),
            c if u32::from(c) <= 0xffff => {
                let _ = write!(quoted, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(quoted, "\\U{:08x}", u32::from(c));
            }
        }
    }
    quoted.push('"');
    quoted
}

impl SchemaAdmission {
    /// Validates (and prunes) the object a write of a custom resource would store. `verb` is the
    /// write's verb as logged (`create`, `update`, `patch`, `apply`). Types without a schema (the
    /// built-in kinds, CRDs without one) pass unchanged.
    pub(crate) fn admit(
        &mut self,
        store: &Store,
        (resource, namespace): (&ResourceType, &str),
        object: &mut Value,
        verb: &str,
    ) -> Result<(), ApiError> {
        let Some(schema) = self.schema_for(store, resource)? else {
            return Ok(());
        };
        let findings = schema.validate(object, &CHECKS);
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        if !findings.pruned.is_empty() {
            // Sorted, as the real server reports them (its maps have no order).
            let mut unknown: Vec<String> = findings.pruned.iter().map(field_path).collect();
            unknown.sort();
            self.answer_unknown_fields((resource, namespace), name, verb, &unknown)?;
        }
        if findings.violations.is_empty() {
            return Ok(());
        }
        let causes: Vec<FieldCause> = findings.violations.iter().map(field_cause).collect();
        Err(ApiError::FieldsInvalid {
            kind: resource.kind.clone(),
            group: resource.group.clone(),
            name: name.to_string(),
            causes,
        })
    }

    fn answer_unknown_fields(
        &mut self,
        (resource, namespace): (&ResourceType, &str),
        name: &str,
        verb: &str,
        unknown: &[String],
    ) -> Result<(), ApiError> {
        if verb == "apply" {
            let fields: Vec<String> = unknown
                .iter()
                .map(|path| format!(".{path}: field not declared in schema"))
                .collect();
            let detail = match fields.as_slice() {
                [one] => one.clone(),
                many => format!("errors:\n  {}", many.join("\n  ")),
            };
            return Err(ApiError::Unclassified(format!(
                "failed to create typed patch object ({}/{name}; {}, Kind={}): {detail}",
                namespace,
                resource.api_version(),
                resource.kind
            )));
        }
        let texts = unknown.iter().map(|path| format!("unknown field {path:?}"));
        match (self.directive(), &mut self.request) {
            (FieldValidation::Warn, Some(request)) => request.warnings.extend(texts),
            (FieldValidation::Ignore, _) => {}
            _ => {
                let errors = texts.collect::<Vec<_>>().join(", ");
                let decoding = format!("strict decoding error: {errors}");
                // Whole-object bodies fail in decoding, patches after being applied.
                return Err(ApiError::BadRequest(if verb == "patch" {
                    decoding
                } else {
                    format!(
                        "{kind} in version {version:?} cannot be handled as a {kind}: {decoding}",
                        kind = resource.kind,
                        version = resource.version
                    )
                }));
            }
        }
        Ok(())
    }

    /// The schema of a type's version: from its CRD object if one is stored (recompiled when the
    /// CRD changes), else from the CRDs of the types served from the start.
    fn schema_for(
        &mut self,
        store: &Store,
        resource: &ResourceType,
    ) -> Result<Option<Arc<StructuralSchema>>, ApiError> {
        if resource.group.is_empty() {
            return Ok(None);
        }
        let crd_name = resource.qualified_plural();
        let key = ObjectKey {
            resource: CRD_QUALIFIED_PLURAL.to_string(),
            namespace: String::new(),
            name: crd_name.clone(),
        };
        let versions = match store.get(&key) {
            Some(crd) => {
                let resource_version = crd["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default();
                match self.compiled.get(&crd_name) {
                    Some((compiled_at, versions)) if compiled_at == resource_version => {
                        Arc::clone(versions)
                    }
                    _ => {
                        let versions = Arc::new(
                            compile_crd(&crd)
                                .map_err(|e| ApiError::Internal(format!("CRD {crd_name}: {e}")))?,
                        );
                        let entry = (resource_version.to_string(), Arc::clone(&versions));
                        self.compiled.insert(crd_name, entry);
                        versions
                    }
                }
            }
            None => match self.passed_in.get(&crd_name) {
                Some(versions) => Arc::clone(versions),
                None => match vendored_schemas(&crd_name) {
                    Some(versions) => versions,
                    None => return Ok(None),
                },
            },
        };
        Ok(versions
            .iter()
            .find(|(name, _)| *name == resource.version)
            .map(|(_, schema)| Arc::clone(schema)))
    }
}

/// The CRDs of the Sveltos types the emulator serves from the start, by CRD name.
const VENDORED_CRDS: [(&str, &str); 4] = [
    (
        "clusterprofiles.config.projectsveltos.io",
        include_str!("../crds/config.projectsveltos.io_clusterprofiles.yaml"),
    ),
    (
        "clustersummaries.config.projectsveltos.io",
        include_str!("../crds/config.projectsveltos.io_clustersummaries.yaml"),
    ),
    (
        "profiles.config.projectsveltos.io",
        include_str!("../crds/config.projectsveltos.io_profiles.yaml"),
    ),
    (
        "sveltosclusters.lib.projectsveltos.io",
        include_str!("../crds/lib.projectsveltos.io_sveltosclusters.yaml"),
    ),
];

/// Compiled once per process, on first use (the YAML is large; most emulators touch few types).
static VENDORED_COMPILED: [OnceLock<Result<CompiledVersions, String>>; 4] =
    [const { OnceLock::new() }; 4];

fn vendored_schemas(crd_name: &str) -> Option<CompiledVersions> {
    let index = VENDORED_CRDS
        .iter()
        .position(|(name, _)| *name == crd_name)?;
    let compiled = VENDORED_COMPILED[index].get_or_init(|| {
        let crd: Value = serde_saphyr::from_str(VENDORED_CRDS[index].1)
            .map_err(|e| format!("vendored CRD {crd_name} is not YAML: {e}"))?;
        compile_crd(&crd).map(Arc::new)
    });
    match compiled {
        Ok(versions) => Some(Arc::clone(versions)),
        Err(error) => {
            // Unit-tested never to happen; a broken vendored CRD must not pass writes silently.
            tracing::error!(%error, "vendored CRD does not compile; its type is not validated");
            None
        }
    }
}

/// Every version of a CRD object that has an `openAPIV3Schema`, compiled.
fn compile_crd(crd: &Value) -> Result<Vec<(String, Arc<StructuralSchema>)>, String> {
    let mut versions = Vec::new();
    for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
        let (Some(name), Some(schema)) = (
            version["name"].as_str(),
            version["schema"].get("openAPIV3Schema"),
        ) else {
            continue;
        };
        let compiled = StructuralSchema::compile(schema, no_cel_rules)
            .map_err(|e| format!("{name}.schema.openAPIV3Schema.{e}"))?;
        versions.push((name.to_string(), Arc::new(compiled)));
    }
    Ok(versions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(openapi: Value) -> StructuralSchema {
        StructuralSchema::compile(&openapi, no_cel_rules).unwrap()
    }

    /// The causes of a validation, and the unknown fields it pruned.
    fn check(node: &StructuralSchema, mut object: Value) -> (Value, Vec<FieldCause>, Vec<String>) {
        let findings = node.validate(&mut object, &CHECKS);
        let causes = findings.violations.iter().map(field_cause).collect();
        let mut unknown: Vec<String> = findings.pruned.iter().map(field_path).collect();
        unknown.sort();
        (object, causes, unknown)
    }

    #[test]
    fn every_vendored_crd_compiles_and_covers_its_builtin_type() {
        let registry = crate::registry::Registry::builtin();
        for (name, _) in VENDORED_CRDS {
            let versions = vendored_schemas(name).unwrap_or_else(|| panic!("{name} compiles"));
            let served = registry
                .find_qualified(name)
                .unwrap_or_else(|| panic!("{name} is served from the start"));
            assert!(
                versions.iter().any(|(v, _)| *v == served.version),
                "{name}: no schema for the served version {}",
                served.version
            );
        }
    }

    #[test]
    fn vendored_crds_equal_the_shared_copies() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let shared = root.join("../../../shared/fixtures/crds");
        if !shared.is_dir() {
            // Outside the project checkout (e.g. a Docker build) there is nothing to compare to.
            return;
        }
        for (name, text) in &VENDORED_CRDS {
            let (plural, group) = name.split_once('.').unwrap_or_default();
            let file = shared.join(format!("{group}_{plural}.yaml"));
            let original = std::fs::read_to_string(&file).unwrap();
            assert!(
                original == *text,
                "crates/emulator/crds: {name} differs from {}",
                file.display()
            );
        }
    }

    #[test]
    fn a_crd_passed_in_that_does_not_compile_is_refused_by_name() {
        let crd = json!({"spec": {"group": "example.com", "names": {"plural": "widgets"},
            "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object",
                "properties": {"size": {"type": "string", "pattern": "(unclosed"}}}}}]}});
        let Err(error) = SchemaAdmission::with_crds(&[crd]) else {
            panic!("a CRD with a broken pattern is accepted");
        };
        assert!(
            error.starts_with(
                "CRD widgets.example.com: v1.schema.openAPIV3Schema.properties.size.pattern"
            ),
            "{error}"
        );
        let Err(error) = SchemaAdmission::with_crds(&[json!({"spec": {}})]) else {
            panic!("a CRD without names is accepted");
        };
        assert!(error.contains("spec.group"), "{error}");
    }

    #[test]
    fn warning_headers_quote_and_escape_like_go() {
        assert_eq!(
            warning_header("unknown field \"spec.é\\x\""),
            r#"299 - "unknown field \"spec.\u00e9\\x\"""#
        );
        assert!(axum::http::HeaderValue::from_str(&warning_header("spec.日本\n")).is_ok());
    }

    #[test]
    fn unknown_fields_are_pruned_with_their_paths_and_object_fields_are_kept() {
        let node = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}));
        let (pruned, causes, unknown) = check(
            &node,
            json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n", "x": 1},
                   "spec": {"foo": 1, "list": [{"a": "x", "b": 2}], "free": {"any": 1}}, "bar": 2}),
        );
        assert_eq!(unknown, ["bar", "spec.foo", "spec.list[0].b"]);
        assert!(causes.is_empty());
        assert_eq!(
            pruned,
            json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n", "x": 1},
                   "spec": {"list": [{"a": "x"}], "free": {"any": 1}}})
        );
    }

    #[test]
    fn nulls_of_non_nullable_fields_are_pruned_and_then_required() {
        let node = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "required": ["a"],
            "properties": {"a": {"type": "string"}, "b": {"type": "string", "nullable": true}}}}}),
        );
        let (pruned, causes, _) = check(&node, json!({"spec": {"a": null, "b": null}}));
        assert_eq!(pruned, json!({"spec": {"b": null}}));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.a");
        assert_eq!(causes[0].message, "Required value");
    }

    #[test]
    fn maps_int_or_string_and_formats() {
        let node = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
            "max": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "at": {"type": "string", "format": "date-time"},
            "hash": {"type": "string", "format": "byte"},
            "count": {"type": "integer", "format": "int32"}}}}}),
        );
        let (_, ok, unknown) = check(
            &node,
            json!({"spec": {"labels": {"k": "v"}, "max": "10%", "at": "2026-01-01T00:00:00Z", "hash": "aGk=", "count": 5}}),
        );
        assert!(ok.is_empty() && unknown.is_empty());
        let (_, bad, _) = check(
            &node,
            json!({"spec": {"labels": {"k": "long"}, "max": true, "at": "soon", "hash": "!", "count": 2_147_483_648_u64}}),
        );
        let fields: Vec<&str> = bad.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.labels.k",
                "spec.max",
                "spec.at",
                "spec.hash",
                "spec.count"
            ]
        );
        assert_eq!(
            bad[4].message,
            "Invalid value: 2147483648: spec.count in body must be of type int32"
        );
        assert_eq!(
            bad[1].message,
            "Invalid value: \"boolean\": spec.max in body must be of type integer,string: \"boolean\""
        );
        assert_eq!(bad[0].message, "Too long: may not be more than 3 bytes");
        assert_eq!(
            bad[2].message,
            "Invalid value: \"soon\": spec.at in body must be of type date-time: \"soon\""
        );
    }
}
