//! The validation walk: one pass over the object, pruning and defaulting in place, collecting
//! violations in the order the object is written.

use std::collections::HashSet;

use base64::Engine as _;
use serde_json::{Map, Number, Value};

use crate::checks::{Checks, UnknownFields};
use crate::node::{Format, SchemaNode, StructuralSchema, is_integer};
use crate::path::FieldPath;
use crate::suggest;
use crate::violation::{Expected, Findings, Violation, ViolationKind, json_type_name, quoted};

/// Fields the API server allows at the root of every object (and of embedded resources) without
/// the schema declaring them.
const OBJECT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

impl StructuralSchema {
    /// Validates `object`, pruning (and with [`Checks::defaults`] defaulting) it in place.
    /// The root `metadata` is not validated: the API server checks it as ObjectMeta, not by
    /// the CRD's bare `type: object`.
    pub fn validate(&self, object: &mut Value, checks: &Checks) -> Findings {
        self.walk_with(object, checks, false)
    }

    /// Like [`Self::validate`], but a `null` of a field is a value like any other (a
    /// [`ViolationKind::Null`] where the field is not `nullable`) rather than pruned: for a
    /// reader whose format treats `field: null` as a mistake, not as an absent field.
    pub fn validate_keeping_nulls(&self, object: &mut Value, checks: &Checks) -> Findings {
        self.walk_with(object, checks, true)
    }

    fn walk_with(&self, object: &mut Value, checks: &Checks, keep_nulls: bool) -> Findings {
        let mut walker = Walker {
            checks,
            keep_nulls,
            findings: Findings::default(),
        };
        walker.walk(&self.root, object, &FieldPath::Root);
        walker.findings
    }
}

struct Walker<'c> {
    checks: &'c Checks,
    keep_nulls: bool,
    findings: Findings,
}

fn expected(node: &SchemaNode) -> Expected {
    node.ty.map_or(Expected::IntOrString, Expected::Type)
}

impl Walker<'_> {
    fn push(&mut self, path: &FieldPath<'_>, kind: ViolationKind) {
        self.findings.violations.push(Violation {
            path: path.to_path(),
            kind,
        });
    }

    fn walk(&mut self, node: &SchemaNode, value: &mut Value, path: &FieldPath<'_>) {
        if value.is_null() {
            // Only reached for list items, nullable fields and kept nulls: others are pruned.
            if !node.nullable && (node.ty.is_some() || node.int_or_string) {
                let expected = expected(node);
                self.push(path, ViolationKind::Null { expected });
            }
            return;
        }
        let integral_floats = self.checks.integral_floats;
        if node.int_or_string {
            match value {
                // Patterns and lengths constrain the string form only (`maxUpdate: 10%`).
                Value::String(text) => self.check_string(node, text, path),
                Value::Number(n) if is_integer(n, integral_floats) => {}
                other => {
                    let found = json_type_name(other);
                    let expected = Expected::IntOrString;
                    self.push(path, ViolationKind::WrongType { found, expected });
                }
            }
            return;
        }
        if let Some(ty) = node.ty
            && !ty.accepts(value, integral_floats)
        {
            let found = json_type_name(value);
            let expected = Expected::Type(ty);
            self.push(path, ViolationKind::WrongType { found, expected });
            return;
        }
        if !node.enum_values.is_empty() && !node.enum_values.contains(value) {
            let kind = ViolationKind::NotSupported {
                value: value.clone(),
                supported: node.enum_values.clone(),
            };
            self.push(path, kind);
        }
        match value {
            Value::String(text) => self.check_string(node, text, path),
            Value::Number(number) => self.check_number(node, number, path),
            Value::Array(items) => self.walk_array(node, items, path),
            Value::Object(map) => self.walk_object(node, map, path),
            Value::Bool(_) | Value::Null => {}
        }
    }

    fn check_string(&mut self, node: &SchemaNode, text: &str, path: &FieldPath<'_>) {
        // Counting characters walks the whole string: only for fields with length bounds.
        if node.min_length.is_some() || node.max_length.is_some() {
            let length = text.chars().count();
            if let Some(min) = node.min_length.filter(|min| length < *min) {
                let value = text.to_string();
                self.push(path, ViolationKind::TooShort { value, min });
            }
            if let Some(max) = node.max_length.filter(|max| length > *max) {
                self.push(path, ViolationKind::TooLong { max, length });
            }
        }
        if let Some((pattern, regex)) = &node.pattern
            && !regex.is_match(text)
        {
            let kind = ViolationKind::PatternMismatch {
                value: text.to_string(),
                pattern: pattern.clone(),
            };
            self.push(path, kind);
        }
        let valid = match node.format {
            Some(Format::DateTime) => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
            Some(Format::Byte) => base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_ok(),
            _ => true,
        };
        if let Some(format) = node.format.filter(|_| !valid) {
            let value = text.to_string();
            self.push(path, ViolationKind::StringFormat { value, format });
        }
    }

    fn check_number(&mut self, node: &SchemaNode, number: &Number, path: &FieldPath<'_>) {
        let Some(value) = number.as_f64() else { return };
        if let Some(minimum) = node.minimum.filter(|min| value < *min) {
            let value = number.clone();
            self.push(path, ViolationKind::BelowMinimum { value, minimum });
        }
        if let Some(maximum) = node.maximum.filter(|max| value > *max) {
            let value = number.clone();
            self.push(path, ViolationKind::AboveMaximum { value, maximum });
        }
        let fits = match node.format {
            Some(Format::Int32) => (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&value),
            Some(Format::Int64) => number.is_i64() || number.is_f64(),
            _ => true,
        };
        if let Some(format) = node.format.filter(|_| !fits) {
            let value = number.clone();
            self.push(path, ViolationKind::NumberFormat { value, format });
        }
    }

    fn walk_array(&mut self, node: &SchemaNode, items: &mut [Value], path: &FieldPath<'_>) {
        let count = items.len();
        if let Some(min) = node.min_items.filter(|min| count < *min) {
            self.push(path, ViolationKind::TooFewItems { count, min });
        }
        if let Some(max) = node.max_items.filter(|max| count > *max) {
            self.push(path, ViolationKind::TooManyItems { count, max });
        }
        if let Some(item_schema) = &node.items {
            for (index, item) in items.iter_mut().enumerate() {
                self.walk(item_schema, item, &path.index(index));
            }
        }
        if self.checks.list_types {
            self.check_list_type(node, items, path);
        }
    }

    fn check_list_type(&mut self, node: &SchemaNode, items: &[Value], path: &FieldPath<'_>) {
        match node.list_type.as_deref() {
            Some("map") if !node.list_map_keys.is_empty() => {
                let mut seen = HashSet::new();
                for (index, item) in items.iter().enumerate() {
                    let key: Vec<String> = node
                        .list_map_keys
                        .iter()
                        .map(|k| item.get(k).map(quoted).unwrap_or_default())
                        .collect();
                    if seen.contains(&key) {
                        let item = path.index(index);
                        let field = match node.list_map_keys.as_slice() {
                            [single] => item.key(single),
                            _ => item,
                        };
                        let key = key.join(", ");
                        self.push(&field, ViolationKind::DuplicateListKey { key });
                    } else {
                        seen.insert(key);
                    }
                }
            }
            Some("set") => {
                let mut seen = HashSet::new();
                for (index, item) in items.iter().enumerate() {
                    if !seen.insert(item.to_string()) {
                        let kind = ViolationKind::DuplicateSetItem { item: item.clone() };
                        self.push(&path.index(index), kind);
                    }
                }
            }
            _ => {}
        }
    }

    fn walk_object(
        &mut self,
        node: &SchemaNode,
        map: &mut Map<String, Value>,
        path: &FieldPath<'_>,
    ) {
        let object_fields_allowed = path.is_root() || node.embedded_resource;
        let allowed = |name: &str| {
            (object_fields_allowed && OBJECT_FIELDS.contains(&name)) || node.preserve_unknown
        };
        let prune = self.checks.unknown_fields == UnknownFields::Prune;
        let keep_nulls = self.keep_nulls;
        let pruned = &mut self.findings.pruned;
        // The API server drops nulls of fields that are not nullable before validating.
        map.retain(|name, value| match node.field(name) {
            Some(child) => keep_nulls || !value.is_null() || child.nullable,
            None if !prune || allowed(name) => true,
            None => {
                pruned.push(path.to_path().child(name));
                false
            }
        });
        if self.checks.defaults {
            apply_defaults(node, map);
        }
        for (name, value) in map.iter_mut() {
            if path.is_root() && name == "metadata" {
                continue;
            }
            let field = path.key(name);
            match node.field(name) {
                Some(child) => self.walk(child, value, &field),
                None if allowed(name) => {}
                None => {
                    let declared = node.properties.iter().map(|(known, _)| known.as_str());
                    let suggestion = suggest::nearest(name, declared);
                    self.push(&field, ViolationKind::UnknownField { suggestion });
                }
            }
        }
        for name in &node.required {
            if !map.contains_key(name) {
                self.push(&path.key(name), ViolationKind::Required);
            }
        }
        for rule in &node.rules {
            if let Some(implementation) = &rule.implementation
                && !(implementation.check)(map)
            {
                let kind = ViolationKind::RuleFailed {
                    code: implementation.code,
                    message: rule.message.clone(),
                };
                self.push(path, kind);
            }
        }
    }
}

/// Gives absent properties with a `default` their default, in the schema's order.
fn apply_defaults(node: &SchemaNode, map: &mut Map<String, Value>) {
    let defaults: Vec<(&String, &Value)> = node
        .properties
        .iter()
        .filter(|(name, _)| !map.contains_key(name))
        .filter_map(|(name, child)| Some((name, child.default.as_ref()?)))
        .collect();
    if defaults.is_empty() {
        return;
    }
    // Sized once: inserting one by one doubles the map's storage, and a defaulted object may be
    // kept for long (a promotion's profileSpec lives as long as its snapshot).
    let mut defaulted = Map::with_capacity(map.len() + defaults.len());
    defaulted.extend(std::mem::take(map));
    for (name, default) in defaults {
        defaulted.insert(name.clone(), default.clone());
    }
    *map = defaulted;
}
