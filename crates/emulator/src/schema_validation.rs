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

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use regex::Regex;
use serde_json::{Map, Number, Value};

use crate::api_error::{ApiError, FieldCause};
use crate::registry::{CRD_QUALIFIED_PLURAL, ResourceType};
use crate::state::{ApiState, Target};
use crate::store::ObjectKey;

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

/// Compiled schemas per CRD, and the request in progress; kept in [`ApiState`].
#[derive(Default)]
pub struct SchemaAdmission {
    request: Option<RequestValidation>,
    /// CRD name → (its resourceVersion when compiled, version name → schema).
    compiled: HashMap<String, (String, CompiledVersions)>,
}

type CompiledVersions = Arc<Vec<(String, Arc<SchemaNode>)>>;

impl SchemaAdmission {
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

impl ApiState {
    /// Validates (and prunes) the object a write of a custom resource would store. `verb` is the
    /// write's verb as logged (`create`, `update`, `patch`, `apply`). Types without a schema (the
    /// built-in kinds, CRDs without one) pass unchanged.
    pub(crate) fn admit_custom_resource(
        &mut self,
        target: Target<'_>,
        object: &mut Value,
        verb: &str,
    ) -> Result<(), ApiError> {
        let Some(schema) = self.schema_for(target.resource)? else {
            return Ok(());
        };
        let mut findings = Findings::default();
        walk_root(&schema, object, &mut findings);
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        if !findings.unknown.is_empty() {
            // Sorted, as the real server reports them (its maps have no order).
            findings.unknown.sort();
            self.answer_unknown_fields(target, name, verb, &findings.unknown)?;
        }
        if findings.errors.is_empty() {
            return Ok(());
        }
        Err(ApiError::FieldsInvalid {
            kind: target.resource.kind.clone(),
            group: target.resource.group.clone(),
            name: name.to_string(),
            causes: findings.errors,
        })
    }

    fn answer_unknown_fields(
        &mut self,
        target: Target<'_>,
        name: &str,
        verb: &str,
        unknown: &[String],
    ) -> Result<(), ApiError> {
        let resource = target.resource;
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
                target.namespace,
                resource.api_version(),
                resource.kind
            )));
        }
        let texts = unknown.iter().map(|path| format!("unknown field {path:?}"));
        match (
            self.schema_admission.directive(),
            &mut self.schema_admission.request,
        ) {
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
    /// CRD changes), else from the CRDs embedded for the types served from the start.
    fn schema_for(&mut self, resource: &ResourceType) -> Result<Option<Arc<SchemaNode>>, ApiError> {
        if resource.group.is_empty() {
            return Ok(None);
        }
        let crd_name = resource.qualified_plural();
        let key = ObjectKey {
            resource: CRD_QUALIFIED_PLURAL.to_string(),
            namespace: String::new(),
            name: crd_name.clone(),
        };
        let versions = match self.store.get(&key) {
            Some(crd) => {
                let resource_version = crd["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default();
                match self.schema_admission.compiled.get(&crd_name) {
                    Some((compiled_at, versions)) if compiled_at == resource_version => {
                        Arc::clone(versions)
                    }
                    _ => {
                        let versions = Arc::new(
                            compile_crd(&crd)
                                .map_err(|e| ApiError::Internal(format!("CRD {crd_name}: {e}")))?,
                        );
                        let entry = (resource_version.to_string(), Arc::clone(&versions));
                        self.schema_admission.compiled.insert(crd_name, entry);
                        versions
                    }
                }
            }
            None => match embedded_schemas(&crd_name) {
                Some(versions) => versions,
                None => return Ok(None),
            },
        };
        Ok(versions
            .iter()
            .find(|(name, _)| *name == resource.version)
            .map(|(_, schema)| Arc::clone(schema)))
    }
}

/// The CRDs of the custom types the emulator serves from the start, by CRD name.
const EMBEDDED_CRDS: [(&str, &str); 5] = [
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
    (
        "gitpromotions.tollgate.dev",
        include_str!("../../../deploy/crd.yaml"),
    ),
];

/// Compiled once per process, on first use (the YAML is large; most emulators touch few types).
static EMBEDDED_COMPILED: [OnceLock<Result<CompiledVersions, String>>; 5] =
    [const { OnceLock::new() }; 5];

fn embedded_schemas(crd_name: &str) -> Option<CompiledVersions> {
    let index = EMBEDDED_CRDS
        .iter()
        .position(|(name, _)| *name == crd_name)?;
    let compiled = EMBEDDED_COMPILED[index].get_or_init(|| {
        let crd: Value = serde_saphyr::from_str(EMBEDDED_CRDS[index].1)
            .map_err(|e| format!("embedded CRD {crd_name} is not YAML: {e}"))?;
        compile_crd(&crd).map(Arc::new)
    });
    match compiled {
        Ok(versions) => Some(Arc::clone(versions)),
        Err(error) => {
            // Unit-tested never to happen; a broken embedded CRD must not pass writes silently.
            tracing::error!(%error, "embedded CRD does not compile; its type is not validated");
            None
        }
    }
}

/// Every version of a CRD object that has an `openAPIV3Schema`, compiled.
fn compile_crd(crd: &Value) -> Result<Vec<(String, Arc<SchemaNode>)>, String> {
    let mut versions = Vec::new();
    for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
        let (Some(name), Some(schema)) = (
            version["name"].as_str(),
            version["schema"].get("openAPIV3Schema"),
        ) else {
            continue;
        };
        let node = SchemaNode::compile(schema, &format!("{name}.schema.openAPIV3Schema"))?;
        versions.push((name.to_string(), Arc::new(node)));
    }
    Ok(versions)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonType {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl JsonType {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "object" => Self::Object,
            "array" => Self::Array,
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Object => "object",
            Self::Array => "array",
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
        }
    }

    fn accepts(self, value: &Value) -> bool {
        match (self, value) {
            (Self::Object, Value::Object(_))
            | (Self::Array, Value::Array(_))
            | (Self::String, Value::String(_))
            | (Self::Number, Value::Number(_))
            | (Self::Boolean, Value::Bool(_)) => true,
            (Self::Integer, Value::Number(n)) => is_integral(n),
            _ => false,
        }
    }
}

/// JSON integers, and floats with an integral value (`5.0`), as the real server's decoder reads.
fn is_integral(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// The name the real server gives a value's type in messages.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DateTime,
    Byte,
    Int32,
    Int64,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Self::DateTime => "date-time",
            Self::Byte => "byte",
            Self::Int32 => "int32",
            Self::Int64 => "int64",
        }
    }
}

/// One compiled schema node; only what validation and pruning read.
#[derive(Debug, Default)]
struct SchemaNode {
    ty: Option<JsonType>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    embedded_resource: bool,
    properties: HashMap<String, SchemaNode>,
    additional: Option<Box<SchemaNode>>,
    items: Option<Box<SchemaNode>>,
    required: Vec<String>,
    enum_values: Vec<Value>,
    pattern: Option<(String, Regex)>,
    format: Option<Format>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    min_items: Option<usize>,
    max_items: Option<usize>,
}

impl SchemaNode {
    fn compile(schema: &Value, at: &str) -> Result<Self, String> {
        let flag = |key: &str| schema[key].as_bool().unwrap_or(false);
        let count = |key: &str| schema[key].as_u64().and_then(|n| usize::try_from(n).ok());
        let mut node = Self {
            ty: schema["type"].as_str().and_then(JsonType::parse),
            nullable: flag("nullable"),
            int_or_string: flag("x-kubernetes-int-or-string"),
            preserve_unknown: flag("x-kubernetes-preserve-unknown-fields"),
            embedded_resource: flag("x-kubernetes-embedded-resource"),
            required: schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str().map(str::to_string))
                .collect(),
            enum_values: schema["enum"].as_array().cloned().unwrap_or_default(),
            format: match schema["format"].as_str() {
                Some("date-time") => Some(Format::DateTime),
                Some("byte") => Some(Format::Byte),
                Some("int32") => Some(Format::Int32),
                Some("int64") => Some(Format::Int64),
                _ => None,
            },
            minimum: schema["minimum"].as_f64(),
            maximum: schema["maximum"].as_f64(),
            min_length: count("minLength"),
            max_length: count("maxLength"),
            min_items: count("minItems"),
            max_items: count("maxItems"),
            ..Self::default()
        };
        if let Some(pattern) = schema["pattern"].as_str() {
            let regex = Regex::new(pattern)
                .map_err(|e| format!("{at}.pattern {pattern:?} does not compile: {e}"))?;
            node.pattern = Some((pattern.to_string(), regex));
        }
        for (name, child) in schema["properties"].as_object().into_iter().flatten() {
            let child = Self::compile(child, &format!("{at}.properties.{name}"))?;
            node.properties.insert(name.clone(), child);
        }
        if schema["additionalProperties"].is_object() {
            let child = Self::compile(
                &schema["additionalProperties"],
                &format!("{at}.additionalProperties"),
            )?;
            node.additional = Some(Box::new(child));
        }
        if schema["items"].is_object() {
            node.items = Some(Box::new(Self::compile(
                &schema["items"],
                &format!("{at}.items"),
            )?));
        }
        Ok(node)
    }
}

/// What a walk found: field errors (422) and unknown fields, already pruned.
#[derive(Default)]
struct Findings {
    errors: Vec<FieldCause>,
    unknown: Vec<String>,
}

/// A field path kept as a stack while walking; rendered (`spec.stages[0].name`) only for errors.
struct FieldPath<'a> {
    segments: Vec<Segment<'a>>,
}

enum Segment<'a> {
    Key(&'a str),
    OwnedKey(String),
    Index(usize),
}

impl FieldPath<'_> {
    fn render(&self) -> String {
        let mut out = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Key(key) => push_key(&mut out, key),
                Segment::OwnedKey(key) => push_key(&mut out, key),
                Segment::Index(index) => {
                    let _ = write!(out, "[{index}]");
                }
            }
        }
        out
    }

    fn render_child(&self, key: &str) -> String {
        let mut out = self.render();
        push_key(&mut out, key);
        out
    }
}

fn push_key(out: &mut String, key: &str) {
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(key);
}

/// Fields the real server allows at the root of every object (and of embedded resources) without
/// the schema declaring them; `metadata` is validated as ObjectMeta, not by the schema.
const OBJECT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

fn walk_root(schema: &SchemaNode, object: &mut Value, findings: &mut Findings) {
    let mut path = FieldPath {
        segments: Vec::new(),
    };
    match object {
        Value::Object(map) => walk_object(schema, map, true, &mut path, findings),
        other => walk(schema, other, &mut path, findings),
    }
}

fn walk<'s>(
    node: &'s SchemaNode,
    value: &mut Value,
    path: &mut FieldPath<'s>,
    findings: &mut Findings,
) {
    if value.is_null() {
        // Only reached for nullable fields and list items: non-nullable fields are pruned.
        if !node.nullable && (node.ty.is_some() || node.int_or_string) {
            let expected = node.ty.map_or("integer,string", JsonType::name);
            type_error(path, "null", expected, findings);
        }
        return;
    }
    if node.int_or_string {
        match value {
            // Patterns and lengths constrain the string form only (`maxUpdate: 10%`).
            Value::String(text) => check_string(node, text, path, findings),
            Value::Number(n) if is_integral(n) => {}
            other => type_error(path, type_name(other), "integer,string", findings),
        }
        return;
    }
    if let Some(ty) = node.ty
        && !ty.accepts(value)
    {
        type_error(path, type_name(value), ty.name(), findings);
        return;
    }
    if !node.enum_values.is_empty() && !node.enum_values.contains(value) {
        let supported: Vec<String> = node.enum_values.iter().map(quoted).collect();
        findings.errors.push(FieldCause {
            reason: "FieldValueNotSupported",
            field: path.render(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                quoted(value),
                supported.join(", ")
            ),
        });
    }
    match value {
        Value::String(text) => check_string(node, text, path, findings),
        Value::Number(number) => check_number(node, number, path, findings),
        Value::Array(items) => walk_array(node, items, path, findings),
        Value::Object(map) => walk_object(node, map, node.embedded_resource, path, findings),
        Value::Bool(_) | Value::Null => {}
    }
}

fn type_error(path: &FieldPath<'_>, actual: &str, expected: &str, findings: &mut Findings) {
    let field = path.render();
    findings.errors.push(FieldCause {
        reason: "FieldValueTypeInvalid",
        message: format!(
            "Invalid value: {actual:?}: {field} in body must be of type {expected}: {actual:?}"
        ),
        field,
    });
}

fn invalid(path: &FieldPath<'_>, shown: String, detail: &str, findings: &mut Findings) {
    let field = path.render();
    findings.errors.push(FieldCause {
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {shown}: {field} in body {detail}"),
        field,
    });
}

/// A value as the real server prints it in messages: strings quoted, the rest as JSON.
fn quoted(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn check_string(node: &SchemaNode, text: &str, path: &FieldPath<'_>, findings: &mut Findings) {
    if node.min_length.is_some() || node.max_length.is_some() {
        let length = text.chars().count();
        if let Some(min) = node.min_length.filter(|min| length < *min) {
            let detail = format!("should be at least {min} chars long");
            invalid(path, format!("{text:?}"), &detail, findings);
        }
        if let Some(max) = node.max_length.filter(|max| length > *max) {
            findings.errors.push(FieldCause {
                reason: "FieldValueTooLong",
                field: path.render(),
                message: format!(
                    "Too long: may not be more than {max} {}",
                    if max == 1 { "byte" } else { "bytes" }
                ),
            });
        }
    }
    if let Some((pattern, regex)) = &node.pattern
        && !regex.is_match(text)
    {
        let detail = format!("should match '{pattern}'");
        invalid(path, format!("{text:?}"), &detail, findings);
    }
    let format_ok = match node.format {
        Some(Format::DateTime) => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
        Some(Format::Byte) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .is_ok(),
        _ => true,
    };
    if let Some(format) = node.format.filter(|_| !format_ok) {
        let field = path.render();
        findings.errors.push(FieldCause {
            reason: "FieldValueTypeInvalid",
            message: format!(
                "Invalid value: {text:?}: {field} in body must be of type {}: {text:?}",
                format.name()
            ),
            field,
        });
    }
}

fn check_number(node: &SchemaNode, number: &Number, path: &FieldPath<'_>, findings: &mut Findings) {
    let Some(value) = number.as_f64() else { return };
    if let Some(min) = node.minimum.filter(|min| value < *min) {
        let detail = format!("should be greater than or equal to {min}");
        invalid(path, number.to_string(), &detail, findings);
    }
    if let Some(max) = node.maximum.filter(|max| value > *max) {
        let detail = format!("should be less than or equal to {max}");
        invalid(path, number.to_string(), &detail, findings);
    }
    let fits = match node.format {
        Some(Format::Int32) => number
            .as_f64()
            .is_some_and(|n| (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&n)),
        Some(Format::Int64) => number.is_i64() || number.is_f64(),
        _ => true,
    };
    if let Some(format) = node.format.filter(|_| !fits) {
        let field = path.render();
        findings.errors.push(FieldCause {
            reason: "FieldValueTypeInvalid",
            message: format!(
                "Invalid value: {number}: {field} in body must be of type {}",
                format.name()
            ),
            field,
        });
    }
}

fn walk_array<'s>(
    node: &'s SchemaNode,
    items: &mut [Value],
    path: &mut FieldPath<'s>,
    findings: &mut Findings,
) {
    if let Some(min) = node.min_items.filter(|min| items.len() < *min) {
        let detail = format!("should have at least {min} items");
        invalid(path, items.len().to_string(), &detail, findings);
    }
    if let Some(max) = node.max_items.filter(|max| items.len() > *max) {
        findings.errors.push(FieldCause {
            reason: "FieldValueTooMany",
            field: path.render(),
            message: format!("Too many: {}: must have at most {max} items", items.len()),
        });
    }
    let Some(item_schema) = &node.items else {
        return;
    };
    for (index, item) in items.iter_mut().enumerate() {
        path.segments.push(Segment::Index(index));
        walk(item_schema, item, path, findings);
        path.segments.pop();
    }
}

fn walk_object<'s>(
    node: &'s SchemaNode,
    map: &mut Map<String, Value>,
    object_fields_allowed: bool,
    path: &mut FieldPath<'s>,
    findings: &mut Findings,
) {
    let is_root = path.segments.is_empty();
    let allowed = |name: &str| object_fields_allowed && OBJECT_FIELDS.contains(&name);
    map.retain(|name, value| {
        let declared = node.properties.get(name).or(node.additional.as_deref());
        match declared {
            // The real server drops nulls of fields that are not nullable before validating.
            Some(child) => !value.is_null() || child.nullable,
            None if allowed(name) || node.preserve_unknown => true,
            None => {
                findings.unknown.push(path.render_child(name));
                false
            }
        }
    });
    for (name, value) in map.iter_mut() {
        if is_root && name == "metadata" {
            continue;
        }
        if let Some((key, child)) = node.properties.get_key_value(name.as_str()) {
            path.segments.push(Segment::Key(key));
            walk(child, value, path, findings);
        } else if let Some(additional) = node.additional.as_deref() {
            path.segments.push(Segment::OwnedKey(name.clone()));
            walk(additional, value, path, findings);
        } else {
            continue;
        }
        path.segments.pop();
    }
    for name in &node.required {
        if !map.contains_key(name) {
            findings.errors.push(FieldCause {
                reason: "FieldValueRequired",
                field: path.render_child(name),
                message: "Required value".into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(openapi: Value) -> SchemaNode {
        SchemaNode::compile(&openapi, "test").unwrap()
    }

    fn check(node: &SchemaNode, mut object: Value) -> (Value, Findings) {
        let mut findings = Findings::default();
        walk_root(node, &mut object, &mut findings);
        (object, findings)
    }

    #[test]
    fn every_embedded_crd_compiles_and_covers_its_builtin_type() {
        let registry = crate::registry::Registry::builtin(&[]);
        for (name, _) in EMBEDDED_CRDS {
            let versions = embedded_schemas(name).unwrap_or_else(|| panic!("{name} compiles"));
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
        for (name, text) in &EMBEDDED_CRDS[..4] {
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
        let (pruned, findings) = check(
            &node,
            json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n", "x": 1},
                   "spec": {"foo": 1, "list": [{"a": "x", "b": 2}], "free": {"any": 1}}, "bar": 2}),
        );
        assert_eq!(findings.unknown, ["bar", "spec.foo", "spec.list[0].b"]);
        assert!(findings.errors.is_empty());
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
        let (pruned, findings) = check(&node, json!({"spec": {"a": null, "b": null}}));
        assert_eq!(pruned, json!({"spec": {"b": null}}));
        assert_eq!(findings.errors.len(), 1);
        assert_eq!(findings.errors[0].field, "spec.a");
        assert_eq!(findings.errors[0].message, "Required value");
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
        let (_, ok) = check(
            &node,
            json!({"spec": {"labels": {"k": "v"}, "max": "10%", "at": "2026-01-01T00:00:00Z", "hash": "aGk=", "count": 5}}),
        );
        assert!(ok.errors.is_empty() && ok.unknown.is_empty());
        let (_, bad) = check(
            &node,
            json!({"spec": {"labels": {"k": "long"}, "max": true, "at": "soon", "hash": "!", "count": 2_147_483_648_u64}}),
        );
        let fields: Vec<&str> = bad.errors.iter().map(|e| e.field.as_str()).collect();
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
            bad.errors[4].message,
            "Invalid value: 2147483648: spec.count in body must be of type int32"
        );
        assert_eq!(
            bad.errors[1].message,
            "Invalid value: \"boolean\": spec.max in body must be of type integer,string: \"boolean\""
        );
    }
}
