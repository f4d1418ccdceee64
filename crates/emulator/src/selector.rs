//! Label selectors (query-string syntax and `metav1.LabelSelector` objects) and field selectors.

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed selector; all requirements must hold. Empty matches everything (query-string semantics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {0:?}")]
    Requirement(String),
    #[error("unable to parse field selector requirement: {0:?}")]
    Field(String),
    #[error("field label not supported: {field} (supported: {supported})")]
    FieldLabel { field: String, supported: String },
    #[error("invalid label selector object: {0}")]
    Object(String),
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_set(text: &str, original: &str) -> Result<Vec<String>, SelectorError> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Requirement(original.to_string()))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` query syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
    /// `a`, `!a`, comma-separated.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let requirement = if let Some(key) = part.strip_prefix('!') {
                Requirement::DoesNotExist(key.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::Equals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::Equals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, set)) = part.split_once(" notin ") {
                Requirement::NotIn(k.trim().to_string(), parse_set(set, part)?)
            } else if let Some((k, set)) = part.split_once(" in ") {
                Requirement::In(k.trim().to_string(), parse_set(set, part)?)
            } else if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                Requirement::Exists(part.to_string())
            } else {
                return Err(SelectorError::Requirement(part.to_string()));
            };
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    /// Converts a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`).
    pub fn from_object(selector: &Value) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                let value = v
                    .as_str()
                    .ok_or_else(|| SelectorError::Object(format!("matchLabels.{k}")))?;
                requirements.push(Requirement::Equals(k.clone(), value.to_string()));
            }
        }
        for expression in selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expression["key"]
                .as_str()
                .ok_or_else(|| SelectorError::Object("key".into()))?
                .to_string();
            let values: Vec<String> = expression["values"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            requirements.push(match expression["operator"].as_str() {
                Some("In") => Requirement::In(key, values),
                Some("NotIn") => Requirement::NotIn(key, values),
                Some("Exists") => Requirement::Exists(key),
                Some("DoesNotExist") => Requirement::DoesNotExist(key),
                other => return Err(SelectorError::Object(format!("operator {other:?}"))),
            });
        }
        Ok(Self { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.matches_labels(|k| labels.get(k).and_then(Value::as_str))
    }

    /// Whether labels, looked up by `get` (None: absent or not a string), satisfy every
    /// requirement.
    pub fn matches_labels<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// The fields every kind can be selected by.
const IDENTITY_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// The fields Events (stored as events.k8s.io/v1) can be selected by, as the real server allows:
/// what kubectl users type (`type=Warning`, `reason=…`, `regarding.name=…`; the core/v1 edge
/// renames `involvedObject.*` and `reportingComponent` to these).
pub const EVENT_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "type",
    "reason",
    "reportingController",
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
];

/// The fields a field selector may name for objects of `kind` (others are refused, as the real
/// server refuses them).
pub fn selectable_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "Event" => EVENT_FIELDS,
        _ => IDENTITY_FIELDS,
    }
}

/// A field selector (`=`, `==`, `!=`) on the fields [`selectable_fields`] allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// (field path, expected value, equal?)
    terms: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses `text`, allowing only the fields in `supported`.
    pub fn parse(text: &str, supported: &[&str]) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, value, equal) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, true)
            } else {
                return Err(SelectorError::Field(part.to_string()));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(SelectorError::FieldLabel {
                    field: field.to_string(),
                    supported: supported.join(", "),
                });
            }
            terms.push((field.to_string(), value.trim().to_string(), equal));
        }
        Ok(Self { terms })
    }

    /// Whether an object whose field values `value` gives (empty when absent) matches.
    pub fn matches_fields<'v>(&self, value: impl Fn(&str) -> &'v str) -> bool {
        self.terms
            .iter()
            .all(|(field, expected, equal)| (value(field) == expected) == *equal)
    }
}

/// The value at a dotted `path` of `object`, as a field selector compares it: a string, a
/// number's or boolean's text, empty when absent.
pub fn field_value(object: &Value, path: &str) -> String {
    let found = path.split('.').fold(object, |at, key| &at[key]);
    match found {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn query_syntax_covers_every_operator() {
        let object = labelled(json!({"env": "prod", "tier": "web"}));
        let cases = [
            ("env=prod", true),
            ("env==prod", true),
            ("env!=prod", false),
            ("env in (dev, prod)", true),
            ("env notin (prod)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing,env=prod", true),
            ("env in (dev),tier=web", false),
            ("", true),
        ];
        for (text, expected) in cases {
            let selector = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(selector.matches(&object), expected, "{text}");
        }
    }

    #[test]
    fn object_selector_converts_match_expressions() {
        let selector = LabelSelector::from_object(&json!({"matchLabels": {"env": "prod"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}))
        .unwrap();
        assert!(selector.matches(&labelled(json!({"env": "prod", "tier": "web"}))));
        assert!(!selector.matches(&labelled(json!({"env": "prod", "tier": "db"}))));
        assert!(LabelSelector::from_object(&json!({})).unwrap().is_empty());
    }

    #[test]
    fn an_unsupported_field_label_is_refused_naming_what_is_supported() {
        let error = FieldSelector::parse("reason=Failed", IDENTITY_FIELDS).unwrap_err();
        assert_eq!(
            error.to_string(),
            "field label not supported: reason (supported: metadata.name, metadata.namespace)"
        );
        assert!(FieldSelector::parse("type=Warning,reason=Failed", EVENT_FIELDS).is_ok());
    }

    #[test]
    fn field_values_are_read_at_their_dotted_path() {
        let event = json!({"type": "Warning", "regarding": {"name": "p", "uid": 7}});
        assert_eq!(field_value(&event, "regarding.name"), "p");
        assert_eq!(field_value(&event, "regarding.uid"), "7");
        assert_eq!(field_value(&event, "reason"), "");
    }

    #[test]
    fn field_selector_on_name_and_namespace() {
        let object = labelled(json!({}));
        let matches = |text: &str| {
            FieldSelector::parse(text, IDENTITY_FIELDS)
                .unwrap()
                .matches_fields(|field| match field {
                    "metadata.name" => object["metadata"]["name"].as_str().unwrap_or(""),
                    _ => object["metadata"]["namespace"].as_str().unwrap_or(""),
                })
        };
        assert!(matches("metadata.name=a,metadata.namespace==ns"));
        assert!(!matches("metadata.name!=a"));
        assert!(FieldSelector::parse("spec.x=1", IDENTITY_FIELDS).is_err());
    }
}
