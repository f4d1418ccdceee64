//! One shared copy per distinct observed spec, and per distinct field of one.
//!
//! A profile and all its summaries carry the same spec once in sync: at 400,000 summaries
//! per-summary copies were most of the controller's memory. A new spec shares the fields it has
//! in common with the specs already held (the four stages of a promotion differ only in their
//! selector).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{LazyLock, Mutex};

use serde_json::Value;
use tollgate_engine::ObservedSpec;
use tollgate_engine::observed::{SpecField, WeakField, WeakSpec};
use tollgate_model::hash::canonical_json;

/// Specs and fields by a 64-bit hash of their canonical text. A hit is checked against the text,
/// so a collision only costs sharing.
struct SpecInterner {
    specs: WeakTable<WeakSpec>,
    fields: WeakTable<WeakField>,
}

/// Weak handles by key; dropped ones are pruned when the map outgrows `prune_at`.
struct WeakTable<W> {
    handles: HashMap<u64, W>,
    prune_at: usize,
}

impl<W> WeakTable<W> {
    fn new() -> Self {
        WeakTable {
            handles: HashMap::new(),
            prune_at: 1024,
        }
    }

    fn insert(&mut self, key: u64, handle: W, is_dropped: impl Fn(&W) -> bool) {
        self.handles.insert(key, handle);
        if self.handles.len() > self.prune_at {
            self.handles.retain(|_, handle| !is_dropped(handle));
            self.prune_at = (self.handles.len() * 2).max(1024);
        }
    }
}

static SPECS: LazyLock<Mutex<SpecInterner>> = LazyLock::new(|| {
    Mutex::new(SpecInterner {
        specs: WeakTable::new(),
        fields: WeakTable::new(),
    })
});

fn text_key(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// The shared copy of `spec`.
pub fn intern_spec(spec: &Value) -> ObservedSpec {
    let canonical = canonical_json(spec);
    let key = text_key(&canonical);
    let mut interner = SPECS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(shared) = interner.specs.handles.get(&key).and_then(WeakSpec::upgrade)
        && shared.has_text(&canonical)
    {
        return shared;
    }
    let fields = &mut interner.fields;
    let shared = ObservedSpec::with_fields(spec, |text| {
        let key = text_key(&text);
        if let Some(field) = fields.handles.get(&key).and_then(WeakField::upgrade)
            && field.text() == text
        {
            return field;
        }
        let field = SpecField::new(text);
        fields.insert(key, field.downgrade(), WeakField::is_dropped);
        field
    });
    interner
        .specs
        .insert(key, shared.downgrade(), WeakSpec::is_dropped);
    shared
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn equal_specs_share_one_copy_and_a_dropped_one_is_made_again() {
        let spec = json!({"tier": 100, "clusterSelector": {"matchLabels": {"shard": "7"}}});
        let first = intern_spec(&spec);
        let reordered = json!({"clusterSelector": {"matchLabels": {"shard": "7"}}, "tier": 100});
        assert!(intern_spec(&reordered).shares(&first));
        assert!(!intern_spec(&json!({"tier": 90})).shares(&first));
        drop(first);
        let again = intern_spec(&spec);
        assert_eq!(again.value(), spec);
    }
}
