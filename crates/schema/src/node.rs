//! A compiled `openAPIV3Schema`: the keywords validation reads, with patterns compiled and
//! properties indexed, built once per CRD version.

use regex::Regex;
use rustc_hash::FxHashMap;
use serde_json::{Number, Value};

use crate::rule::{RuleLookup, ValidationRule};

/// A schema's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
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

    pub fn name(self) -> &'static str {
        match self {
            Self::Object => "object",
            Self::Array => "array",
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
        }
    }

    /// Whether `value` is of this type; `integral_floats` lets `5.0` be an integer.
    pub(crate) fn accepts(self, value: &Value, integral_floats: bool) -> bool {
        match (self, value) {
            (Self::Object, Value::Object(_))
            | (Self::Array, Value::Array(_))
            | (Self::String, Value::String(_))
            | (Self::Number, Value::Number(_))
            | (Self::Boolean, Value::Bool(_)) => true,
            (Self::Integer, Value::Number(n)) => is_integer(n, integral_floats),
            _ => false,
        }
    }
}

/// A JSON integer, or with `integral_floats` a float with an integral value (`5.0`).
pub(crate) fn is_integer(n: &Number, integral_floats: bool) -> bool {
    n.is_i64() || n.is_u64() || (integral_floats && n.as_f64().is_some_and(|f| f.fract() == 0.0))
}

/// The `format`s that are checked; others are accepted as any value of the type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    DateTime,
    Byte,
    Int32,
    Int64,
}

impl Format {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "date-time" => Self::DateTime,
            "byte" => Self::Byte,
            "int32" => Self::Int32,
            "int64" => Self::Int64,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::DateTime => "date-time",
            Self::Byte => "byte",
            Self::Int32 => "int32",
            Self::Int64 => "int64",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// `at` is where in the schema, e.g. `properties.spec.properties.name.pattern`.
    #[error("{at} {pattern:?} is not a valid regular expression: {reason}")]
    BadPattern {
        at: String,
        pattern: String,
        reason: String,
    },
}

/// One schema node; only what validation, pruning and defaulting read.
#[derive(Default)]
pub(crate) struct SchemaNode {
    pub ty: Option<JsonType>,
    pub nullable: bool,
    pub int_or_string: bool,
    pub preserve_unknown: bool,
    pub embedded_resource: bool,
    /// In the schema's order (defaults are added in it).
    pub properties: Vec<(String, SchemaNode)>,
    /// Name → index into `properties`.
    property_index: FxHashMap<String, usize>,
    pub additional: Option<Box<SchemaNode>>,
    pub items: Option<Box<SchemaNode>>,
    pub required: Vec<String>,
    pub enum_values: Vec<Value>,
    pub pattern: Option<(String, Regex)>,
    pub format: Option<Format>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub min_length: Option<usize>,
    pub max_length: Option<usize>,
    pub min_items: Option<usize>,
    pub max_items: Option<usize>,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub default: Option<Value>,
    pub rules: Vec<ValidationRule>,
}

impl SchemaNode {
    /// The schema of property `name`, if declared.
    pub fn property(&self, name: &str) -> Option<&SchemaNode> {
        let index = *self.property_index.get(name)?;
        self.properties.get(index).map(|(_, child)| child)
    }

    /// The schema a field `name` of this object is validated against: its property, or
    /// `additionalProperties` (a map).
    pub fn field(&self, name: &str) -> Option<&SchemaNode> {
        self.property(name).or(self.additional.as_deref())
    }

    fn compile(schema: &Value, at: &str, rules: RuleLookup) -> Result<Self, CompileError> {
        let flag = |key: &str| schema.get(key).and_then(Value::as_bool).unwrap_or(false);
        let count = |key: &str| {
            schema
                .get(key)
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
        };
        let text = |key: &str| schema.get(key).and_then(Value::as_str);
        let choices = constant_choices(schema);
        let mut node = Self {
            ty: text("type")
                .and_then(JsonType::parse)
                .or_else(|| choices.as_ref().and_then(|(ty, _)| *ty)),
            nullable: flag("nullable"),
            int_or_string: flag("x-kubernetes-int-or-string"),
            preserve_unknown: flag("x-kubernetes-preserve-unknown-fields"),
            embedded_resource: flag("x-kubernetes-embedded-resource"),
            required: strings(schema.get("required")),
            enum_values: schema
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .or_else(|| choices.map(|(_, values)| values))
                .unwrap_or_default(),
            format: text("format").and_then(Format::parse),
            minimum: schema.get("minimum").and_then(Value::as_f64),
            maximum: schema.get("maximum").and_then(Value::as_f64),
            min_length: count("minLength"),
            max_length: count("maxLength"),
            min_items: count("minItems"),
            max_items: count("maxItems"),
            list_type: text("x-kubernetes-list-type").map(str::to_string),
            list_map_keys: strings(schema.get("x-kubernetes-list-map-keys")),
            default: schema.get("default").cloned(),
            ..Self::default()
        };
        if let Some(pattern) = text("pattern") {
            let regex = Regex::new(pattern).map_err(|e| CompileError::BadPattern {
                at: join(at, "pattern"),
                pattern: pattern.to_string(),
                reason: e.to_string(),
            })?;
            node.pattern = Some((pattern.to_string(), regex));
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, child) in properties.into_iter().flatten() {
            let at = join(at, &format!("properties.{name}"));
            node.properties
                .push((name.clone(), Self::compile(child, &at, rules)?));
        }
        node.property_index = node
            .properties
            .iter()
            .enumerate()
            .map(|(index, (name, _))| (name.clone(), index))
            .collect();
        if let Some(additional) = schema.get("additionalProperties").filter(|v| v.is_object()) {
            let at = join(at, "additionalProperties");
            node.additional = Some(Box::new(Self::compile(additional, &at, rules)?));
        }
        if let Some(items) = schema.get("items").filter(|v| v.is_object()) {
            node.items = Some(Box::new(Self::compile(items, &join(at, "items"), rules)?));
        }
        let validations = schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array);
        for rule in validations.into_iter().flatten() {
            node.rules.push(ValidationRule::compile(rule, rules));
        }
        Ok(node)
    }
}

/// A `oneOf` whose every branch is a `const` or an `enum` (what a JSON Schema generator writes
/// for an enumeration with a description per value) read as one `enum`, with the branches'
/// common `type`.
fn constant_choices(schema: &Value) -> Option<(Option<JsonType>, Vec<Value>)> {
    let branches = schema.get("oneOf")?.as_array()?;
    let mut values = Vec::new();
    let mut types = Vec::new();
    for branch in branches {
        match (
            branch.get("const"),
            branch.get("enum").and_then(Value::as_array),
        ) {
            (Some(value), None) => values.push(value.clone()),
            (None, Some(listed)) => values.extend(listed.iter().cloned()),
            _ => return None,
        }
        types.push(branch.get("type").and_then(Value::as_str));
    }
    let common = types.first().copied().flatten();
    let ty = common
        .filter(|first| types.iter().all(|t| *t == Some(*first)))
        .and_then(JsonType::parse);
    Some((ty, values))
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item.as_str().map(str::to_string))
        .collect()
}

/// A compiled `openAPIV3Schema`.
pub struct StructuralSchema {
    pub(crate) root: SchemaNode,
}

impl StructuralSchema {
    /// Compiles one CRD version's `openAPIV3Schema`. `rules` supplies the Rust implementations
    /// of the CEL rules the caller checks (rules it does not know are kept, unchecked).
    pub fn compile(open_api_v3_schema: &Value, rules: RuleLookup) -> Result<Self, CompileError> {
        Ok(Self {
            root: SchemaNode::compile(open_api_v3_schema, "", rules)?,
        })
    }

    /// Every CEL rule text in the schema (whitespace normalised), with whether it is checked.
    pub fn cel_rules(&self) -> Vec<(String, bool)> {
        fn collect(node: &SchemaNode, out: &mut Vec<(String, bool)>) {
            for rule in &node.rules {
                out.push((rule.text.clone(), rule.implementation.is_some()));
            }
            for (_, child) in &node.properties {
                collect(child, out);
            }
            for child in node.additional.iter().chain(node.items.iter()) {
                collect(child, out);
            }
        }
        let mut out = Vec::new();
        collect(&self.root, &mut out);
        out
    }
}
