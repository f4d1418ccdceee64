//! A spec as the watches saw it: canonical JSON text, not a `serde_json::Value` tree.
//!
//! A fleet whose promotions differ (each its own chart version) holds one distinct spec per
//! generated profile: 40,000 at 10,000 promotions of four stages. As trees they were 147 MB of the
//! controller's heap (an object entry with `preserve_order` costs ~110 bytes before its strings).
//! As text, one field per piece, they share what they have in common: the four stages of a
//! promotion differ only in their selector, and most fields are the same everywhere. Nearly
//! every comparison is with the spec tollgate applied, which is the same text; only a spec that
//! differs is parsed (see [`InSyncCheck`]).

use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, LazyLock, OnceLock, Weak};

use serde_json::Value;
use tollgate_model::hash::{canonical_field, canonical_json, hash_canonical_text};

use crate::subset::first_field_out_of_sync;

/// Canonical JSON (keys sorted, no whitespace) of a spec. Cheap to clone; the controller
/// interns it, so a profile and all its summaries share one copy, and its fields, so specs that
/// differ in one field share the others.
#[derive(Clone)]
pub struct ObservedSpec(Arc<Spec>);

struct Spec {
    text: SpecText,
    /// [`tollgate_model::hash::hash_value`] of the spec, computed when first asked: drift is
    /// checked on every applied stage every step, by comparing it with the hash tollgate applied.
    hash: OnceLock<Box<str>>,
}

impl Spec {
    fn new(text: SpecText) -> Arc<Spec> {
        Arc::new(Spec {
            text,
            hash: OnceLock::new(),
        })
    }
}

enum SpecText {
    /// An object: its fields' text in key order, `{` + fields joined by `,` + `}`.
    Object(Box<[SpecField]>),
    /// Anything else (`null` when there is no spec).
    Other(Box<str>),
}

/// One top-level field of a spec as canonical text: `"key":value`.
#[derive(Clone, PartialEq, Eq)]
// `Arc<Box<str>>`, not `Arc<str>`: a spec holds one pointer per field, and a thin one halves them.
pub struct SpecField(Arc<Box<str>>);

static NULL: LazyLock<ObservedSpec> =
    LazyLock::new(|| ObservedSpec(Spec::new(SpecText::Other(Box::from("null")))));

impl ObservedSpec {
    /// The spec of `value`, canonicalised, sharing nothing.
    pub fn of(value: &Value) -> ObservedSpec {
        ObservedSpec::with_fields(value, SpecField::new)
    }

    /// The spec of `value`, each field's text passed through `field` (an interner may return a
    /// shared copy of an equal field).
    pub fn with_fields(value: &Value, mut field: impl FnMut(String) -> SpecField) -> ObservedSpec {
        let text = match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_unstable();
                SpecText::Object(
                    keys.into_iter()
                        .map(|key| field(canonical_field(key, &map[key.as_str()])))
                        .collect(),
                )
            }
            other => SpecText::Other(canonical_json(other).into_boxed_str()),
        };
        ObservedSpec(Spec::new(text))
    }

    /// No spec (`null`): an object without one.
    pub fn null() -> ObservedSpec {
        NULL.clone()
    }

    pub fn is_null(&self) -> bool {
        matches!(&self.0.text, SpecText::Other(text) if &**text == "null")
    }

    /// The canonical JSON text ([`canonical_json`]).
    pub fn text(&self) -> String {
        match &self.0.text {
            SpecText::Object(fields) => {
                let mut text = String::from("{");
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        text.push(',');
                    }
                    text.push_str(field.text());
                }
                text.push('}');
                text
            }
            SpecText::Other(text) => text.to_string(),
        }
    }

    /// Whether [`Self::text`] is `canonical`, without building it.
    pub fn has_text(&self, canonical: &str) -> bool {
        let fields = match &self.0.text {
            SpecText::Object(fields) => fields,
            SpecText::Other(text) => return **text == *canonical,
        };
        let Some(mut rest) = canonical.strip_prefix('{') else {
            return false;
        };
        for (i, field) in fields.iter().enumerate() {
            let after_comma = if i == 0 {
                Some(rest)
            } else {
                rest.strip_prefix(',')
            };
            match after_comma.and_then(|r| r.strip_prefix(field.text())) {
                Some(after) => rest = after,
                None => return false,
            }
        }
        rest == "}"
    }

    /// The spec as a tree: parsed on each call, for the rare comparison that needs one.
    pub fn value(&self) -> Value {
        // The text is canonical JSON, so it parses; `Null` only guards the type.
        serde_json::from_str(&self.text()).unwrap_or(Value::Null)
    }

    /// Its [`tollgate_model::hash::hash_value`] (what `tollgate.dev/spec-hash` records for the
    /// spec tollgate applies), computed once.
    pub fn hash(&self) -> &str {
        self.0
            .hash
            .get_or_init(|| hash_canonical_text(&self.text()).into_boxed_str())
    }

    /// Exactly `value` (so it carries all of it), without parsing.
    pub fn is(&self, value: &Value) -> bool {
        self.has_text(&canonical_json(value))
    }

    /// The same shared copy (not merely equal text).
    pub fn shares(&self, other: &ObservedSpec) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A handle that does not keep the spec alive, for an interner.
    pub fn downgrade(&self) -> WeakSpec {
        WeakSpec(Arc::downgrade(&self.0))
    }
}

impl SpecField {
    pub fn new(text: String) -> SpecField {
        SpecField(Arc::new(text.into_boxed_str()))
    }

    pub fn text(&self) -> &str {
        &self.0
    }

    /// A handle that does not keep the field alive, for an interner.
    pub fn downgrade(&self) -> WeakField {
        WeakField(Arc::downgrade(&self.0))
    }
}

/// An [`ObservedSpec`] held without keeping it alive.
pub struct WeakSpec(Weak<Spec>);

impl WeakSpec {
    /// The spec, while anything still holds it.
    pub fn upgrade(&self) -> Option<ObservedSpec> {
        self.0.upgrade().map(ObservedSpec)
    }

    /// Nothing holds the spec any more.
    pub fn is_dropped(&self) -> bool {
        self.0.strong_count() == 0
    }
}

/// A [`SpecField`] held without keeping it alive.
pub struct WeakField(Weak<Box<str>>);

impl WeakField {
    /// The field, while any spec still holds it.
    pub fn upgrade(&self) -> Option<SpecField> {
        self.0.upgrade().map(SpecField)
    }

    /// No spec holds the field any more.
    pub fn is_dropped(&self) -> bool {
        self.0.strong_count() == 0
    }
}

/// Equal text.
impl PartialEq for ObservedSpec {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0.text, &other.0.text) {
            (SpecText::Object(mine), SpecText::Object(theirs)) => mine == theirs,
            (SpecText::Other(mine), SpecText::Other(theirs)) => mine == theirs,
            // An object's text is never that of anything else.
            _ => false,
        }
    }
}

impl Eq for ObservedSpec {}

impl Default for ObservedSpec {
    fn default() -> Self {
        ObservedSpec::null()
    }
}

impl fmt::Debug for ObservedSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

/// Compares many observed specs (a profile's summaries) with one expected spec: equal text
/// needs no parse, and summaries that share a differing spec share one parse.
pub(crate) struct InSyncCheck<'e> {
    expected: &'e Value,
    canonical: String,
    last: RefCell<Option<(ObservedSpec, Option<&'e str>)>>,
}

impl<'e> InSyncCheck<'e> {
    pub(crate) fn new(expected: &'e Value) -> Self {
        InSyncCheck {
            expected,
            canonical: canonical_json(expected),
            last: RefCell::new(None),
        }
    }

    /// The first field of the expected spec that `observed` does not carry, in upstream's order.
    pub(crate) fn first_field_out_of_sync(&self, observed: &ObservedSpec) -> Option<&'e str> {
        if observed.has_text(&self.canonical) {
            return None;
        }
        if let Some((seen, field)) = self.last.borrow().as_ref()
            && seen.shares(observed)
        {
            return *field;
        }
        let field = first_field_out_of_sync(self.expected, &observed.value());
        *self.last.borrow_mut() = Some((observed.clone(), field));
        field
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_hash_is_the_hash_of_the_spec_tollgate_would_record() {
        let spec = json!({"tier": 100, "helmCharts": [{"b": 1, "a": "é"}]});
        let observed = ObservedSpec::of(&spec);
        assert_eq!(observed.hash(), tollgate_model::hash::hash_value(&spec));
        assert_eq!(observed.hash(), observed.hash(), "computed once, kept");
        let edited = ObservedSpec::of(&json!({"tier": 101, "helmCharts": [{"b": 1, "a": "é"}]}));
        assert_ne!(edited.hash(), observed.hash());
        assert_eq!(
            ObservedSpec::null().hash(),
            tollgate_model::hash::hash_value(&serde_json::Value::Null)
        );
    }

    #[test]
    fn equal_specs_in_any_key_order_have_the_same_text() {
        let a = ObservedSpec::of(&json!({"tier": 100, "helmCharts": [{"b": 1, "a": 2}]}));
        let b = ObservedSpec::of(&json!({"helmCharts": [{"a": 2, "b": 1}], "tier": 100}));
        assert_eq!(a, b);
        assert_eq!(
            a.value(),
            json!({"helmCharts": [{"a": 2, "b": 1}], "tier": 100})
        );
    }

    #[test]
    fn a_spec_with_server_defaults_carries_what_was_applied_and_a_changed_one_does_not() {
        let applied = json!({"tier": 100, "helmCharts": [{"chartVersion": "2"}]});
        let defaulted = ObservedSpec::of(
            &json!({"tier": 100, "helmCharts": [{"chartVersion": "2", "helmChartAction": "Install"}]}),
        );
        assert!(!defaulted.is(&applied));
        assert!(ObservedSpec::of(&applied).is(&applied));
        let check = InSyncCheck::new(&applied);
        assert_eq!(check.first_field_out_of_sync(&defaulted), None);
        let older = ObservedSpec::of(&json!({"tier": 100, "helmCharts": [{"chartVersion": "1"}]}));
        assert_eq!(check.first_field_out_of_sync(&older), Some("helmCharts"));
        // A second summary sharing that spec gets the remembered answer.
        assert_eq!(
            check.first_field_out_of_sync(&older.clone()),
            Some("helmCharts")
        );
        assert_eq!(
            check.first_field_out_of_sync(&ObservedSpec::of(&applied)),
            None
        );
    }

    #[test]
    fn the_text_is_canonical_json_and_is_matched_without_building_it() {
        let values = [
            json!({}),
            json!({"b": [1, {"d": 2, "c": "é\\\""}], "a": "x"}),
            json!(null),
            json!([1, 2]),
        ];
        for value in values {
            let spec = ObservedSpec::of(&value);
            assert_eq!(spec.text(), canonical_json(&value));
            assert!(spec.is(&value), "{value}");
            assert_eq!(spec.value(), value);
        }
        let spec = ObservedSpec::of(&json!({"a": 1, "b": 2}));
        assert!(!spec.is(&json!({"a": 1})));
        assert!(!spec.is(&json!({"a": 1, "b": 2, "c": 3})));
        assert!(!spec.is(&json!({"a": 1, "b": 23})));
        assert!(!spec.is(&json!({"a": 12, "b": 2})));
        assert!(!spec.is(&json!(null)));
        assert!(!ObservedSpec::of(&json!({"a": 1})).is(&json!({"a": 12})));
    }

    #[test]
    fn specs_built_through_one_interner_share_their_equal_fields() {
        let mut seen: Vec<SpecField> = Vec::new();
        let mut intern = |text: String| {
            if let Some(field) = seen.iter().find(|f| f.text() == text) {
                return field.clone();
            }
            let field = SpecField::new(text);
            seen.push(field.clone());
            field
        };
        let s1 =
            ObservedSpec::with_fields(&json!({"tier": 100, "clusterSelector": "s1"}), &mut intern);
        let s2 =
            ObservedSpec::with_fields(&json!({"tier": 100, "clusterSelector": "s2"}), &mut intern);
        assert_ne!(s1, s2);
        assert_eq!(seen.len(), 3, "tier is held once");
        assert_eq!(s1.text(), r#"{"clusterSelector":"s1","tier":100}"#);
    }

    #[test]
    fn no_spec_is_null_and_carries_only_zero_values() {
        assert!(ObservedSpec::default().is_null());
        let zero = json!({"reloader": false});
        assert_eq!(
            InSyncCheck::new(&zero).first_field_out_of_sync(&ObservedSpec::null()),
            None
        );
        let tier = json!({"tier": 100});
        let check = InSyncCheck::new(&tier);
        assert_eq!(
            check.first_field_out_of_sync(&ObservedSpec::null()),
            Some("tier")
        );
    }
}
