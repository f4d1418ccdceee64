//! What a change of a promotion's spec changes, field by field: `profileSpec.helmCharts[0].
//! chartVersion: "3.6.2" → "3.5.2"`. The web view's Rollback form shows it (the change a rollback
//! commits, not "the content of snapshot #1"); any view that explains a snapshot may.

use serde_json::Value;

/// One changed field: its path, and its value before and after (`None`: absent).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldChange {
    pub path: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

impl std::fmt::Display for FieldChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |value: &Option<Value>| match value {
            None => "(absent)".to_string(),
            Some(value) => value.to_string(),
        };
        write!(
            f,
            "{}: {} → {}",
            self.path,
            shown(&self.before),
            shown(&self.after)
        )
    }
}

/// Every leaf that differs between `before` and `after`, in document order, under `prefix`.
/// Lists are compared by position: a list of a different length also shows its added or
/// removed entries.
pub fn spec_changes(prefix: &str, before: &Value, after: &Value) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    walk(prefix, Some(before), Some(after), &mut changes);
    changes
}

fn walk(path: &str, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (before, after) {
        (Some(Value::Object(old)), Some(Value::Object(new))) => {
            let keys = old
                .keys()
                .chain(new.keys().filter(|k| !old.contains_key(*k)));
            for key in keys {
                walk(&format!("{path}.{key}"), old.get(key), new.get(key), out);
            }
        }
        (Some(Value::Array(old)), Some(Value::Array(new))) => {
            for index in 0..old.len().max(new.len()) {
                walk(
                    &format!("{path}[{index}]"),
                    old.get(index),
                    new.get(index),
                    out,
                );
            }
        }
        (old, new) if old != new => out.push(FieldChange {
            path: path.to_string(),
            before: old.cloned(),
            after: new.cloned(),
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::spec_changes;

    #[test]
    fn a_chart_version_change_is_one_field() {
        let before = json!({"profileSpec": {"helmCharts": [{"chartName": "web", "chartVersion": "3.6.2"}]}, "stages": [{"name": "dev"}]});
        let after = json!({"profileSpec": {"helmCharts": [{"chartName": "web", "chartVersion": "3.5.2"}]}, "stages": [{"name": "dev"}]});
        let shown: Vec<String> = spec_changes("spec", &before, &after)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            shown,
            [r#"spec.profileSpec.helmCharts[0].chartVersion: "3.6.2" → "3.5.2""#]
        );
    }

    #[test]
    fn added_and_removed_fields_and_entries_show_as_absent() {
        let before = json!({"a": 1, "list": [1]});
        let after = json!({"b": 2, "list": [1, 2]});
        let shown: Vec<String> = spec_changes("spec", &before, &after)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            shown,
            [
                "spec.a: 1 → (absent)",
                "spec.list[1]: (absent) → 2",
                "spec.b: (absent) → 2"
            ]
        );
    }
}
