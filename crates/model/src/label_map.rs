//! [`LabelMap`]: a small string-to-string map kept as one sorted slice.
//!
//! A `matchLabels` usually holds one or two labels, and every stage of every promotion has one. A
//! `BTreeMap` allocates a whole B-tree leaf (eleven key and value slots, over 500 bytes) for even
//! one label; a boxed sorted slice allocates exactly the entries. Lookups are binary searches, so
//! large maps stay fast, and iteration is in key (byte) order, as a `BTreeMap`'s: serialized
//! forms and the canonical hashes built from them are the same.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// String keys to string values, sorted by key, each key once.
///
/// Built like a `BTreeMap` is: from an iterator or a serialized map, where a repeated key keeps
/// its last value.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelMap {
    /// Sorted by key, keys unique; boxed so that no spare capacity is kept.
    entries: Box<[(String, String)]>,
}

impl LabelMap {
    pub fn new() -> Self {
        LabelMap::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.entries[i].1.as_str())
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + DoubleEndedIterator {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + DoubleEndedIterator {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// Sorts `entries` by key and keeps the last value of a repeated key (a `BTreeMap` built
    /// from the same entries holds the same).
    fn from_entries(mut entries: Vec<(String, String)>) -> Self {
        // Stable: entries with equal keys stay in input order, so the last one is the newest.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        // `dedup_by` keeps the first of a run and hands it in as `kept`: give it the later value.
        entries.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            same
        });
        LabelMap {
            entries: entries.into_boxed_slice(),
        }
    }
}

impl FromIterator<(String, String)> for LabelMap {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        LabelMap::from_entries(iter.into_iter().collect())
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for LabelMap {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(iter: I) -> Self {
        iter.into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

impl<'a> IntoIterator for &'a LabelMap {
    type Item = (&'a str, &'a str);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, String)>,
        fn(&'a (String, String)) -> (&'a str, &'a str),
    >;

    fn into_iter(self) -> Self::IntoIter {
        fn as_strs((k, v): &(String, String)) -> (&str, &str) {
            (k.as_str(), v.as_str())
        }
        self.entries.iter().map(as_strs)
    }
}

/// As a map's: `{"key": "value", …}`.
impl fmt::Debug for LabelMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for LabelMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (key, value) in self.iter() {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// A mapping of label keys to string values.
impl schemars::JsonSchema for LabelMap {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LabelMap".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "additionalProperties": {"type": "string"}
        })
    }
}

impl<'de> Deserialize<'de> for LabelMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(LabelMapVisitor)
    }
}

struct LabelMapVisitor;

/// A size hint from the input is not trusted beyond this many entries up front.
const MAX_PREALLOCATED_ENTRIES: usize = 1024;

impl<'de> Visitor<'de> for LabelMapVisitor {
    type Value = LabelMap;

    // The same wording as `BTreeMap`'s, so error messages do not change.
    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<LabelMap, A::Error> {
        let mut entries = Vec::with_capacity(
            access
                .size_hint()
                .unwrap_or(0)
                .min(MAX_PREALLOCATED_ENTRIES),
        );
        while let Some(entry) = access.next_entry::<String, String>()? {
            entries.push(entry);
        }
        Ok(LabelMap::from_entries(entries))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn owned(entries: &[(&str, &str)]) -> Vec<(String, String)> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn iterates_in_byte_order_of_keys() {
        let map: LabelMap = [("tier", "1"), ("Env", "x"), ("env", "prod"), ("a.b/c", "")]
            .into_iter()
            .collect();
        let keys: Vec<&str> = map.keys().collect();
        assert_eq!(keys, ["Env", "a.b/c", "env", "tier"]);
        assert_eq!(map.len(), 4);
        assert!(!map.is_empty());
    }

    #[test]
    fn looks_up_present_and_absent_keys() {
        let map: LabelMap = [("env", "prod"), ("tier", "1"), ("zone", "")]
            .into_iter()
            .collect();
        assert_eq!(map.get("env"), Some("prod"));
        assert_eq!(map.get("tier"), Some("1"));
        assert_eq!(map.get("zone"), Some(""));
        assert_eq!(map.get("missing"), None);
        assert_eq!(map.get(""), None);
        assert!(map.contains_key("tier"));
        assert!(!LabelMap::new().contains_key("env"));
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_as_a_btree_map_does() {
        let entries = owned(&[("env", "dev"), ("a", "1"), ("env", "prod"), ("a", "2")]);
        let map: LabelMap = entries.iter().cloned().collect();
        let reference: BTreeMap<String, String> = entries.into_iter().collect();
        assert_eq!(map.get("env"), Some("prod"));
        assert_eq!(map.get("a"), Some("2"));
        assert_eq!(map.len(), 2);
        assert!(
            map.iter()
                .eq(reference.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        );
    }

    #[test]
    fn serializes_as_a_map_with_sorted_keys() {
        let map: LabelMap = [("z", "1"), ("a", "2")].into_iter().collect();
        assert_eq!(serde_json::to_string(&map).unwrap(), r#"{"a":"2","z":"1"}"#);
        assert_eq!(serde_json::to_string(&LabelMap::new()).unwrap(), "{}");
        assert_eq!(format!("{map:?}"), r#"{"a": "2", "z": "1"}"#);
    }

    #[test]
    fn deserializes_from_a_map_and_round_trips() {
        let map: LabelMap = serde_json::from_value(json!({"z": "1", "a": "2"})).unwrap();
        assert_eq!(map.get("a"), Some("2"));
        let again: LabelMap = serde_json::from_str(&serde_json::to_string(&map).unwrap()).unwrap();
        assert_eq!(again, map);
    }

    #[test]
    fn a_repeated_key_in_serialized_input_keeps_its_last_value() {
        // serde_json's string reader hands both entries to the visitor, as a BTreeMap sees them.
        let text = r#"{"env": "dev", "env": "prod"}"#;
        let map: LabelMap = serde_json::from_str(text).unwrap();
        let reference: BTreeMap<String, String> = serde_json::from_str(text).unwrap();
        assert_eq!(map.get("env"), Some("prod"));
        assert_eq!(map.len(), reference.len());
    }

    #[test]
    fn rejects_what_a_btree_map_rejects_with_the_same_message() {
        for bad in [
            json!(["env"]),
            json!("env=prod"),
            json!({"env": 1}),
            json!({"env": null}),
        ] {
            let ours = serde_json::from_value::<LabelMap>(bad.clone()).unwrap_err();
            let reference =
                serde_json::from_value::<BTreeMap<String, String>>(bad.clone()).unwrap_err();
            assert_eq!(ours.to_string(), reference.to_string(), "{bad}");
        }
    }

    #[test]
    fn allocates_only_its_entries() {
        // The point of the type: one label is one boxed entry, not a B-tree leaf.
        let map: LabelMap = [("env", "prod")].into_iter().collect();
        assert_eq!(map.entries.len(), 1);
        assert_eq!(
            std::mem::size_of::<LabelMap>(),
            2 * std::mem::size_of::<usize>()
        );
    }

    proptest! {
        #[test]
        fn behaves_as_a_btree_map(
            entries in proptest::collection::vec(("[a-c]{0,2}", "[x-z]{0,2}"), 0..12),
            probe in "[a-c]{0,2}",
        ) {
            let map: LabelMap = entries.iter().cloned().collect();
            let reference: BTreeMap<String, String> = entries.into_iter().collect();
            prop_assert_eq!(map.len(), reference.len());
            prop_assert_eq!(map.get(&probe), reference.get(&probe).map(String::as_str));
            prop_assert!(map.iter().eq(reference.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
            prop_assert_eq!(
                serde_json::to_string(&map).unwrap(),
                serde_json::to_string(&reference).unwrap()
            );
            let back: LabelMap = serde_json::from_value(serde_json::to_value(&reference).unwrap()).unwrap();
            prop_assert_eq!(back, map);
        }
    }
}
