//! What a validation finds: each violation is a path and what is wrong with the value there, as
//! data; callers word it (a manifest diagnostic, a Kubernetes `Invalid` cause).

use serde_json::{Number, Value};

use crate::node::{Format, JsonType};
use crate::path::SchemaPath;

/// The type a value should have had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    Type(JsonType),
    /// `x-kubernetes-int-or-string`.
    IntOrString,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ViolationKind {
    /// `null` where the field is not `nullable` (only list items and nullable-less typed
    /// values: nulls of object fields are pruned first).
    Null {
        expected: Expected,
    },
    /// `found` is the value's type name ([`json_type_name`]).
    WrongType {
        found: &'static str,
        expected: Expected,
    },
    NotSupported {
        value: Value,
        supported: Vec<Value>,
    },
    TooShort {
        value: String,
        min: usize,
    },
    /// `length` in characters.
    TooLong {
        max: usize,
        length: usize,
    },
    PatternMismatch {
        value: String,
        pattern: String,
    },
    /// A string that is not a valid `date-time` or `byte`.
    StringFormat {
        value: String,
        format: Format,
    },
    BelowMinimum {
        value: Number,
        minimum: f64,
    },
    AboveMaximum {
        value: Number,
        maximum: f64,
    },
    /// A number outside the `int32` or `int64` range.
    NumberFormat {
        value: Number,
        format: Format,
    },
    TooFewItems {
        count: usize,
        min: usize,
    },
    TooManyItems {
        count: usize,
        max: usize,
    },
    /// The path names the missing field.
    Required,
    /// The path names the field; `suggestion` is a declared name within two edits of it.
    UnknownField {
        suggestion: Option<String>,
    },
    /// A `listType: map` item whose key repeats an earlier item's. The path names the item, or
    /// with a single key field its key field; `key` is the key's values, quoted, `, `-joined.
    DuplicateListKey {
        key: String,
    },
    /// A `listType: set` item equal to an earlier one; the path names the item.
    DuplicateSetItem {
        item: Value,
    },
    /// A CEL rule with a Rust implementation failed; the path names the object it is declared on.
    RuleFailed {
        code: &'static str,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub path: SchemaPath,
    pub kind: ViolationKind,
}

/// Everything a validation found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    /// In the order the object was walked.
    pub violations: Vec<Violation>,
    /// Unknown fields removed ([`crate::UnknownFields::Prune`]), in the order they were met.
    pub pruned: Vec<SchemaPath>,
}

/// The name the API server gives a value's type in messages.
pub fn json_type_name(value: &Value) -> &'static str {
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

/// A value as the API server prints it in messages: strings quoted, the rest as JSON.
pub fn quoted(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}
