//! JSON merge patch (RFC 7386; strategic merge patch is treated the same) and JSON patch (RFC 6902).

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error("json patch is not a list of operations")]
    NotAList,
    #[error("json patch operation {index}: {reason}")]
    Operation { index: usize, reason: String },
}

/// Applies a merge patch in place: objects merge recursively, `null` deletes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    // Every kept value of the patch is copied into the target either way.
    merge_patch_owned(target, patch.clone());
}

/// [`merge_patch`] taking the patch by value: its values move into the target instead of being
/// copied (a create merges the whole body into the object skeleton).
pub fn merge_patch_owned(target: &mut Value, patch: Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target_map) = target {
        for (key, value) in patch_map {
            if value.is_null() {
                target_map.remove(&key);
            } else {
                merge_patch_owned(target_map.entry(key).or_insert(Value::Null), value);
            }
        }
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(pointer: &str) -> Option<(String, String)> {
    let (parent, last) = pointer.rsplit_once('/')?;
    Some((parent.to_string(), unescape(last)))
}

fn insert(target: &mut Value, path: &str, value: Value, replace: bool) -> Result<(), String> {
    if path.is_empty() {
        *target = value;
        return Ok(());
    }
    let (parent_path, key) = split_pointer(path).ok_or_else(|| format!("invalid path {path:?}"))?;
    let parent = target
        .pointer_mut(&parent_path)
        .ok_or_else(|| format!("missing parent of {path:?}"))?;
    match parent {
        Value::Object(map) => {
            if replace && !map.contains_key(&key) {
                return Err(format!("path {path:?} does not exist"));
            }
            map.insert(key, value);
        }
        Value::Array(items) => {
            if key == "-" && !replace {
                items.push(value);
            } else {
                let index: usize = key.parse().map_err(|_| format!("bad index in {path:?}"))?;
                if replace {
                    let slot = items
                        .get_mut(index)
                        .ok_or_else(|| format!("index out of range in {path:?}"))?;
                    *slot = value;
                } else if index <= items.len() {
                    items.insert(index, value);
                } else {
                    return Err(format!("index out of range in {path:?}"));
                }
            }
        }
        _ => return Err(format!("parent of {path:?} is not a container")),
    }
    Ok(())
}

fn remove(target: &mut Value, path: &str) -> Result<Value, String> {
    let (parent_path, key) = split_pointer(path).ok_or_else(|| format!("invalid path {path:?}"))?;
    let parent = target
        .pointer_mut(&parent_path)
        .ok_or_else(|| format!("missing parent of {path:?}"))?;
    match parent {
        Value::Object(map) => map
            .remove(&key)
            .ok_or_else(|| format!("path {path:?} does not exist")),
        Value::Array(items) => {
            let index: usize = key.parse().map_err(|_| format!("bad index in {path:?}"))?;
            if index < items.len() {
                Ok(items.remove(index))
            } else {
                Err(format!("index out of range in {path:?}"))
            }
        }
        _ => Err(format!("parent of {path:?} is not a container")),
    }
}

/// Applies a JSON patch; on error the target is left unchanged.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let operations = patch.as_array().ok_or(PatchError::NotAList)?;
    let mut work = target.clone();
    for (index, op) in operations.iter().enumerate() {
        let fail = |reason: String| PatchError::Operation { index, reason };
        let path = op["path"]
            .as_str()
            .ok_or_else(|| fail("missing path".into()))?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| fail("missing value".into()))
        };
        match op["op"].as_str() {
            Some("add") => insert(&mut work, path, value()?, false).map_err(fail)?,
            Some("replace") => insert(&mut work, path, value()?, true).map_err(fail)?,
            Some("remove") => {
                remove(&mut work, path).map_err(fail)?;
            }
            Some("test") => {
                if work.pointer(path) != Some(&value()?) {
                    return Err(fail(format!("test failed at {path:?}")));
                }
            }
            Some(kind @ ("move" | "copy")) => {
                let from = op["from"]
                    .as_str()
                    .ok_or_else(|| fail("missing from".into()))?;
                let moved = if kind == "move" {
                    remove(&mut work, from).map_err(fail)?
                } else {
                    work.pointer(from)
                        .cloned()
                        .ok_or_else(|| fail(format!("missing {from:?}")))?
                };
                insert(&mut work, path, moved, false).map_err(fail)?;
            }
            other => return Err(fail(format!("unknown op {other:?}"))),
        }
    }
    *target = work;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_merges_and_deletes() {
        let mut target = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge_patch(&mut target, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(target, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn json_patch_ops_and_failed_test_leaves_target() {
        let mut target = json!({"metadata": {"finalizers": ["a"]}});
        json_patch(
            &mut target,
            &json!([{"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
                    {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
                    {"op": "remove", "path": "/metadata/finalizers/0"}]),
        )
        .unwrap();
        assert_eq!(target, json!({"metadata": {"finalizers": ["b"]}}));
        let failed = json_patch(
            &mut target,
            &json!([{"op": "replace", "path": "/x", "value": 1}]),
        );
        assert!(failed.is_err());
        assert_eq!(target, json!({"metadata": {"finalizers": ["b"]}}));
    }

    #[test]
    fn owned_merge_patch_equals_borrowed() {
        let target = json!({"a": {"b": 1, "c": [1]}, "d": "x", "e": 1});
        let patch = json!({"a": {"b": null, "n": {"m": 2}}, "d": {"y": 1}, "e": null, "f": [3]});
        let mut borrowed = target.clone();
        merge_patch(&mut borrowed, &patch);
        let mut owned = target;
        merge_patch_owned(&mut owned, patch);
        assert_eq!(owned, borrowed);
        assert!(
            owned
                .as_object()
                .unwrap()
                .keys()
                .eq(borrowed.as_object().unwrap().keys())
        );
    }
}
