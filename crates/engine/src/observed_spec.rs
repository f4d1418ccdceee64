//! A spec as the watches saw it: canonical JSON text, not a `serde_json::Value` tree.
//!
//! A fleet whose promotions differ (each its own chart version) holds one distinct spec per
//! generated profile: 40,000 at 10,000 promotions of four stages. As trees they were 147 MB of the
//! controller's heap (an object entry with `preserve_order` costs ~110 bytes before its strings);
//! as text they weigh about a tenth. Nearly every comparison is with the spec tollgate applied,
//! which is the same text; only a spec that differs is parsed (see [`InSyncCheck`]).

use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, LazyLock, Weak};

use serde_json::Value;
use tollgate_model::hash::canonical_json;

use crate::completion::first_field_out_of_sync;

/// Canonical JSON (keys sorted, no whitespace) of a spec. Cheap to clone; the controller
/// interns it, so a profile and all its summaries share one copy.
#[derive(Clone, PartialEq, Eq)]
// `Arc<Box<str>>`, not `Arc<str>`: a thin pointer keeps the summary cache's entries at 32 bytes;
// the extra allocation is per distinct spec, not per summary.
pub struct ObservedSpec(Arc<Box<str>>);

static NULL: LazyLock<ObservedSpec> = LazyLock::new(|| ObservedSpec::from_canonical("null"));

impl ObservedSpec {
    /// The spec of `value`, canonicalised.
    pub fn of(value: &Value) -> ObservedSpec {
        ObservedSpec::from_canonical(&canonical_json(value))
    }

    /// A spec from text already canonical ([`canonical_json`]).
    pub fn from_canonical(text: &str) -> ObservedSpec {
        ObservedSpec(Arc::new(Box::from(text)))
    }

    /// No spec (`null`): an object without one.
    pub fn null() -> ObservedSpec {
        NULL.clone()
    }

    pub fn is_null(&self) -> bool {
        self.text() == "null"
    }

    /// The canonical JSON text.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// The spec as a tree: parsed on each call, for the rare comparison that needs one.
    pub fn value(&self) -> Value {
        // The text was written by `canonical_json`, so it parses; `Null` only guards the type.
        serde_json::from_str(self.text()).unwrap_or(Value::Null)
    }

    /// The same shared copy (not merely equal text).
    pub fn shares(&self, other: &ObservedSpec) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A handle that does not keep the spec alive, for an interner.
    pub fn downgrade(&self) -> WeakSpec {
        WeakSpec(Arc::downgrade(&self.0))
    }

    /// Exactly `value` (so it carries all of it), without parsing.
    pub fn is(&self, value: &Value) -> bool {
        self.text() == canonical_json(value)
    }
}

/// An [`ObservedSpec`] held without keeping it alive.
pub struct WeakSpec(Weak<Box<str>>);

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

impl Default for ObservedSpec {
    fn default() -> Self {
        ObservedSpec::null()
    }
}

impl fmt::Debug for ObservedSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
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
        if observed.text() == self.canonical {
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
