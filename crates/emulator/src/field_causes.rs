//! Schema violations (`tollgate-schema`) worded as the real API server words them: the
//! `details.causes[]` of a 422 `Invalid` answer (`spec.tier in body should be greater than or
//! equal to 1`).

use tollgate_schema::{Expected, PathSegment, SchemaPath, Violation, ViolationKind, quoted};

use crate::api_error::FieldCause;

/// A path as the server's structural-schema errors write it: fields joined by `.` (map keys
/// too), list indices in brackets.
pub fn field_path(path: &SchemaPath) -> String {
    let mut out = String::new();
    for segment in path.segments() {
        match segment {
            PathSegment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            PathSegment::Index(index) => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

fn expected_name(expected: Expected) -> &'static str {
    match expected {
        Expected::Type(ty) => ty.name(),
        Expected::IntOrString => "integer,string",
    }
}

fn cause(reason: &'static str, field: String, message: String) -> FieldCause {
    FieldCause {
        reason,
        field,
        message,
    }
}

fn type_invalid(field: String, found: &str, expected: &str) -> FieldCause {
    let message =
        format!("Invalid value: {found:?}: {field} in body must be of type {expected}: {found:?}");
    cause("FieldValueTypeInvalid", field, message)
}

/// `Invalid value: <shown>: <field> in body <detail>`.
fn value_invalid(field: String, shown: String, detail: String) -> FieldCause {
    let message = format!("Invalid value: {shown}: {field} in body {detail}");
    cause("FieldValueInvalid", field, message)
}

/// One violation as a cause.
pub fn field_cause(violation: &Violation) -> FieldCause {
    let field = field_path(&violation.path);
    match &violation.kind {
        ViolationKind::Null { expected } => type_invalid(field, "null", expected_name(*expected)),
        ViolationKind::WrongType { found, expected } => {
            type_invalid(field, found, expected_name(*expected))
        }
        ViolationKind::NotSupported { value, supported } => {
            let supported: Vec<String> = supported.iter().map(quoted).collect();
            let message = format!(
                "Unsupported value: {}: supported values: {}",
                quoted(value),
                supported.join(", ")
            );
            cause("FieldValueNotSupported", field, message)
        }
        ViolationKind::TooShort { value, min } => {
            let detail = format!("should be at least {min} chars long");
            value_invalid(field, format!("{value:?}"), detail)
        }
        ViolationKind::TooLong { max, .. } => {
            let unit = if *max == 1 { "byte" } else { "bytes" };
            let message = format!("Too long: may not be more than {max} {unit}");
            cause("FieldValueTooLong", field, message)
        }
        ViolationKind::PatternMismatch { value, pattern } => {
            let detail = format!("should match '{pattern}'");
            value_invalid(field, format!("{value:?}"), detail)
        }
        ViolationKind::StringFormat { value, format } => type_invalid(field, value, format.name()),
        ViolationKind::BelowMinimum { value, minimum } => {
            let detail = format!("should be greater than or equal to {minimum}");
            value_invalid(field, value.to_string(), detail)
        }
        ViolationKind::AboveMaximum { value, maximum } => {
            let detail = format!("should be less than or equal to {maximum}");
            value_invalid(field, value.to_string(), detail)
        }
        ViolationKind::NumberFormat { value, format } => {
            let message = format!(
                "Invalid value: {value}: {field} in body must be of type {}",
                format.name()
            );
            cause("FieldValueTypeInvalid", field, message)
        }
        ViolationKind::TooFewItems { count, min } => {
            let detail = format!("should have at least {min} items");
            value_invalid(field, count.to_string(), detail)
        }
        ViolationKind::TooManyItems { count, max } => {
            let message = format!("Too many: {count}: must have at most {max} items");
            cause("FieldValueTooMany", field, message)
        }
        ViolationKind::Required => cause("FieldValueRequired", field, "Required value".into()),
        // Not found with the emulator's checks (unknown fields are pruned, list types and CEL
        // rules are not checked); worded as the real server would, all the same.
        ViolationKind::UnknownField { .. } => {
            let message = format!("unknown field {field:?}");
            cause("FieldValueInvalid", field, message)
        }
        ViolationKind::DuplicateListKey { key } => cause(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {key}"),
        ),
        ViolationKind::DuplicateSetItem { item } => {
            let message = format!("Duplicate value: {}", quoted(item));
            cause("FieldValueDuplicate", field, message)
        }
        ViolationKind::RuleFailed { message, .. } => {
            let message = format!("Invalid value: \"object\": {message}");
            cause("FieldValueInvalid", field, message)
        }
    }
}
