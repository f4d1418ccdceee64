//! "Carries": does an object written back by Kubernetes or Sveltos still hold what tollgate set?

use serde_json::Value;

/// Whether `actual` carries everything in `expected`. Objects may have extra keys (defaults
/// Sveltos or the API server add); a key absent from `actual` is accepted when the expected value
/// is a zero value, because Go's `omitempty` drops those when Sveltos writes it back. Lists must
/// have the same length and carry element by element (order is content, docs/architecture.md#d5-order-is-content).
pub fn carries(expected: &Value, actual: Option<&Value>) -> bool {
    match (expected, actual) {
        (expected, None) => is_zero(expected),
        (Value::Object(exp), Some(Value::Object(act))) => {
            // Fast path: written back with the same keys in the same order (the common case),
            // compare pairwise instead of hashing every key.
            let same_keys =
                exp.len() == act.len() && exp.keys().zip(act.keys()).all(|(e, a)| e == a);
            if same_keys {
                exp.values()
                    .zip(act.values())
                    .all(|(e, a)| carries(e, Some(a)))
            } else {
                exp.iter().all(|(k, v)| carries(v, act.get(k)))
            }
        }
        (Value::Array(exp), Some(Value::Array(act))) => {
            exp.len() == act.len() && exp.iter().zip(act).all(|(e, a)| carries(e, Some(a)))
        }
        (Value::Number(exp), Some(Value::Number(act))) => {
            exp == act || (exp.as_f64().is_some() && exp.as_f64() == act.as_f64())
        }
        (expected, Some(actual)) => expected == actual || (is_zero(expected) && actual.is_null()),
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero),
    }
}

/// Upstream compares these three first, in this order; every other field tollgate set follows.
const FIRST_COMPARED: [&str; 3] = ["helmCharts", "policyRefs", "kustomizationRefs"];

/// Fields that choose *which* clusters, not *what* is deployed to them. A ClusterSummary is about
/// one cluster already chosen, and Sveltos need not copy them into `clusterProfileSpec`.
const SELECTION_FIELDS: [&str; 3] = ["clusterSelector", "clusterRefs", "setRefs"];

pub(crate) fn first_field_out_of_sync<'e>(expected: &'e Value, actual: &Value) -> Option<&'e str> {
    // Usually everything carries: one pass, and the field order only matters for the message.
    if carries(expected, Some(actual)) {
        return None;
    }
    let expected = expected.as_object()?;
    let fields = FIRST_COMPARED
        .iter()
        .filter_map(|f| expected.get_key_value(*f))
        .chain(
            expected
                .iter()
                .filter(|(k, _)| !FIRST_COMPARED.contains(&k.as_str()))
                .filter(|(k, _)| !SELECTION_FIELDS.contains(&k.as_str())),
        );
    for (field, value) in fields {
        let carried = actual.get(field.as_str());
        if !carries(value, carried) {
            return Some(field.as_str());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_added_defaults_and_omitted_zero_values() {
        let expected =
            json!({"tier": 100, "reloader": false, "helmCharts": [{"releaseName": "a"}]});
        let actual = json!({"tier": 100, "helmCharts": [{"releaseName": "a", "helmChartAction": "Install"}]});
        assert!(carries(&expected, Some(&actual)));
    }

    #[test]
    fn key_order_does_not_matter() {
        let expected = json!({"a": 1, "b": {"c": "x", "d": true}});
        let reordered = json!({"b": {"d": true, "c": "x"}, "a": 1});
        assert!(carries(&expected, Some(&reordered)));
        let changed = json!({"b": {"d": true, "c": "y"}, "a": 1});
        assert!(!carries(&expected, Some(&changed)));
    }

    #[test]
    fn rejects_changed_values_lengths_and_missing_content() {
        let expected = json!({"tier": 100, "helmCharts": [{"chartVersion": "2"}]});
        assert!(!carries(
            &expected,
            Some(&json!({"tier": 100, "helmCharts": [{"chartVersion": "1"}]}))
        ));
        assert!(!carries(
            &expected,
            Some(&json!({"tier": 90, "helmCharts": [{"chartVersion": "2"}]}))
        ));
        assert!(!carries(
            &expected,
            Some(&json!({"tier": 100, "helmCharts": []}))
        ));
        assert!(!carries(&expected, Some(&json!({"tier": 100}))));
    }
}
