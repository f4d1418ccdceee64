//! The shared add-on configuration of a promotion, copied into every generated ClusterProfile.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A JSON object (CRD defaults applied) rather than typed: tollgate copies it verbatim and reads
/// only a few fields through the accessors below.
///
/// Held as its compact JSON text, keys in the order written, which parses back to the same
/// object. Every promotion of every snapshot holds one for as long as it runs: as a `Value` tree
/// with `preserve_order` a small spec weighed ~2.5 KB (each entry ~110 bytes before its strings),
/// as text ~400 bytes. It is parsed where it is rendered, once per generated profile.
#[derive(Clone)]
pub struct ProfileSpec(Box<str>);

impl ProfileSpec {
    /// The object, parsed from its text.
    pub fn to_map(&self) -> Map<String, Value> {
        // The text was written from a `Map`, so it parses; an empty object only guards the type.
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    /// One field's value.
    pub fn get(&self, field: &str) -> Option<Value> {
        self.to_map().remove(field)
    }

    /// Sets one field (tests and tools that derive a spec from another).
    pub fn insert(&mut self, field: &str, value: Value) {
        let mut map = self.to_map();
        map.insert(field.to_string(), value);
        *self = ProfileSpec::from(map);
    }

    fn list(&self, field: &str) -> Vec<Value> {
        match self.get(field) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        }
    }
    pub fn helm_charts(&self) -> Vec<Value> {
        self.list("helmCharts")
    }
    pub fn policy_refs(&self) -> Vec<Value> {
        self.list("policyRefs")
    }
    pub fn kustomization_refs(&self) -> Vec<Value> {
        self.list("kustomizationRefs")
    }
    pub fn validate_healths(&self) -> Vec<Value> {
        self.list("validateHealths")
    }
    pub fn sync_mode(&self) -> String {
        self.get("syncMode")
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "Continuous".to_string())
    }
    pub fn tier(&self) -> i64 {
        self.get("tier").and_then(|v| v.as_i64()).unwrap_or(100)
    }
}

impl From<Map<String, Value>> for ProfileSpec {
    fn from(map: Map<String, Value>) -> Self {
        ProfileSpec(Value::Object(map).to_string().into_boxed_str())
    }
}

impl Default for ProfileSpec {
    fn default() -> Self {
        ProfileSpec::from(Map::new())
    }
}

/// Equal as objects: the same fields and values, in any order (as `Map` compares).
impl PartialEq for ProfileSpec {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 || self.to_map() == other.to_map()
    }
}

impl fmt::Debug for ProfileSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProfileSpec").field(&self.to_map()).finish()
    }
}

impl Serialize for ProfileSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ProfileSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(ProfileSpec::from)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: Value) -> ProfileSpec {
        serde_json::from_value(value).expect("an object")
    }

    #[test]
    fn the_text_parses_back_to_the_object_in_the_order_written() {
        let written =
            json!({"tier": 100, "helmCharts": [{"chartName": "a", "b": 1.5}], "reloader": false});
        let profile = spec(written.clone());
        assert_eq!(Value::Object(profile.to_map()), written);
        let keys: Vec<String> = profile.to_map().keys().cloned().collect();
        assert_eq!(keys, ["tier", "helmCharts", "reloader"]);
        assert_eq!(serde_json::to_value(&profile).unwrap(), written);
    }

    #[test]
    fn specs_with_the_same_fields_in_another_order_are_equal() {
        let a = spec(json!({"tier": 100, "syncMode": "Continuous"}));
        let b = spec(json!({"syncMode": "Continuous", "tier": 100}));
        assert_eq!(a, b);
        assert_ne!(a, spec(json!({"syncMode": "OneTime", "tier": 100})));
    }

    #[test]
    fn accessors_fall_back_to_the_crd_defaults() {
        let empty = ProfileSpec::default();
        assert_eq!(empty.tier(), 100);
        assert_eq!(empty.sync_mode(), "Continuous");
        assert!(empty.helm_charts().is_empty());
        let mut changed = empty.clone();
        changed.insert("tier", json!(90));
        assert_eq!(changed.tier(), 90);
        assert_eq!(changed.get("tier"), Some(json!(90)));
    }
}
