//! The RolloutPolicy's JSON Schema, derived from its types ([`RolloutPolicy`] and the types of
//! its fields derive `schemars::JsonSchema`): what `tollgate schema rolloutpolicy` prints for
//! editors (`deploy/rolloutpolicy.schema.json` is that output), and what the manifest reader
//! checks a policy's structure with (`tollgate-manifest`'s `policy_schema`), so the two cannot
//! drift apart.
//!
//! The generated schema is made structural, the form Kubernetes and the schema walker read:
//! every subschema inline, an optional field described by its type alone (a missing field is
//! the absent value; `null` is not one of its values), and a `uint32` bounded by its maximum.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use crate::policy::RolloutPolicy;

/// Where the published schema says it lives.
pub const POLICY_SCHEMA_ID: &str = "https://tollgate.dev/schemas/rolloutpolicy.schema.json";

/// The RolloutPolicy's JSON Schema (draft 2020-12), structural.
pub fn rollout_policy_schema() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut generated = generator.into_root_schema_for::<RolloutPolicy>().to_value();
    make_structural(&mut generated);
    let Value::Object(mut generated) = generated else {
        unreachable!("a derived schema is an object");
    };
    // What the schema is first, then what it says.
    let mut schema = Map::new();
    let draft = generated.remove("$schema").unwrap_or(Value::Null);
    schema.insert("$schema".into(), draft);
    schema.insert("$id".into(), POLICY_SCHEMA_ID.into());
    let title = generated.remove("title").unwrap_or(Value::Null);
    schema.insert("title".into(), title);
    schema.insert(
        "description".into(),
        "A tollgate RolloutPolicy (docs/rollout-policy.md): what a rollout does when clusters fail or stall. `tollgate validate` checks more than this schema: durations, names, CEL and PromQL, references between fields.".into(),
    );
    schema.extend(generated);
    Value::Object(schema)
}

/// Removes `null` from optional fields' types, unwraps `anyOf: [X, {type: null}]` into X, and
/// bounds `uint32`s, in `schema` and every subschema.
fn make_structural(schema: &mut Value) {
    let Value::Object(fields) = schema else {
        return;
    };
    unwrap_nullable(fields);
    if let Some(Value::Array(types)) = fields.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            fields.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = fields.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if fields.get("default") == Some(&Value::Null) {
        fields.remove("default");
    }
    if fields.get("format").and_then(Value::as_str) == Some("uint32")
        && !fields.contains_key("maximum")
    {
        fields.insert("maximum".into(), u32::MAX.into());
    }
    for key in ["properties", "additionalProperties", "items"] {
        match fields.get_mut(key) {
            Some(Value::Object(children)) if key == "properties" => {
                children.values_mut().for_each(make_structural);
            }
            Some(child) => make_structural(child),
            None => {}
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = fields.get_mut(key) {
            branches.iter_mut().for_each(make_structural);
        }
    }
}

/// `anyOf: [X, {type: null}]` (an optional field of an object type) becomes X, keeping the
/// field's own keywords (its description) beside X's.
fn unwrap_nullable(fields: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = fields.get("anyOf") else {
        return;
    };
    let is_null = |branch: &Value| branch.get("type").and_then(Value::as_str) == Some("null");
    let [first, second] = branches.as_slice() else {
        return;
    };
    let kept = match (is_null(first), is_null(second)) {
        (false, true) => first.clone(),
        (true, false) => second.clone(),
        _ => return,
    };
    fields.remove("anyOf");
    if let Value::Object(kept) = kept {
        let own = std::mem::take(fields);
        fields.extend(kept);
        for (key, value) in own {
            fields.entry(key).or_insert(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_structural_and_describes_the_spec() {
        let schema = rollout_policy_schema();
        let text = schema.to_string();
        assert!(!text.contains("\"null\""), "no null types: {text}");
        assert!(!text.contains("$ref"), "every subschema inline");
        let spec = &schema["properties"]["spec"];
        assert_eq!(spec["type"], "object");
        assert_eq!(spec["additionalProperties"], false);
        let waves = &spec["properties"]["stages"]["additionalProperties"]["properties"]["waves"];
        assert_eq!(waves["required"], serde_json::json!(["size"]));
        assert_eq!(waves["properties"]["canary"]["maximum"], u32::MAX);
        assert_eq!(schema["$id"], POLICY_SCHEMA_ID);
    }
}
