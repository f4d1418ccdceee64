//! The JSONPath subset of CRD printer columns (`additionalPrinterColumns[].jsonPath`): fields
//! (`.a.b`, `['a.b']`), indices (`[0]`, `[-1]`), wildcards (`[*]`) and equality filters
//! (`[?(@.featureID=="Helm")]`, `!=`). Like the real server's table convertor, a column shows the
//! first result.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter {
        path: Vec<Step>,
        equal: bool,
        value: Value,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported jsonPath {path:?}: {why}")]
pub struct JsonPathError {
    path: String,
    why: &'static str,
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

impl JsonPath {
    /// Parses `.a.b[0]`, with or without kubectl's `{…}` around it.
    pub fn parse(text: &str) -> Result<Self, JsonPathError> {
        let error = |why| JsonPathError {
            path: text.to_string(),
            why,
        };
        let inner = text.trim();
        let inner = inner
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(inner);
        let inner = inner.strip_prefix('$').unwrap_or(inner);
        parse_steps(inner)
            .map(|steps| Self { steps })
            .map_err(error)
    }

    /// The first value the path selects in `object`.
    pub fn first<'a>(&self, object: &'a Value) -> Option<&'a Value> {
        select(&self.steps, object).into_iter().next()
    }
}

fn parse_steps(mut rest: &str) -> Result<Vec<Step>, &'static str> {
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return Err("empty field name");
            }
            steps.push(Step::Field(after[..end].to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = bracket_end(after).ok_or("unclosed [")?;
            steps.push(bracket_step(after[..end].trim())?);
            rest = &after[end + 1..];
        } else {
            return Err("expected . or [");
        }
    }
    Ok(steps)
}

/// The position of the `]` closing a bracket, skipping quoted text.
fn bracket_end(text: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ']') => return Some(i),
            _ => {}
        }
    }
    None
}

fn unquote(text: &str) -> Option<&str> {
    ['\'', '"']
        .iter()
        .find_map(|q| text.strip_prefix(*q).and_then(|t| t.strip_suffix(*q)))
}

fn bracket_step(inside: &str) -> Result<Step, &'static str> {
    if inside == "*" {
        return Ok(Step::All);
    }
    if let Some(name) = unquote(inside) {
        return Ok(Step::Field(name.to_string()));
    }
    if let Ok(index) = inside.parse::<i64>() {
        return Ok(Step::Index(index));
    }
    let filter = inside
        .strip_prefix("?(")
        .and_then(|f| f.strip_suffix(')'))
        .ok_or("only [n], [*], ['name'] and [?(@.path==value)] are supported")?;
    let (left, right, equal) = match filter.split_once("!=") {
        Some((l, r)) => (l, r, false),
        None => {
            let (l, r) = filter
                .split_once("==")
                .ok_or("filters compare with == or !=")?;
            (l, r, true)
        }
    };
    let path = left
        .trim()
        .strip_prefix('@')
        .ok_or("filters start with @")?;
    let right = right.trim();
    let value = match unquote(right) {
        Some(text) => Value::from(text),
        None => serde_json::from_str(right).map_err(|_| "filter value is not a literal")?,
    };
    Ok(Step::Filter {
        path: parse_steps(path)?,
        equal,
        value,
    })
}

fn select<'a>(steps: &[Step], value: &'a Value) -> Vec<&'a Value> {
    let Some((step, rest)) = steps.split_first() else {
        return vec![value];
    };
    let next: Vec<&Value> = match step {
        Step::Field(name) => value.get(name).into_iter().collect(),
        Step::Index(index) => {
            let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
            let position = if *index < 0 {
                usize::try_from(-index)
                    .ok()
                    .and_then(|back| items.len().checked_sub(back))
            } else {
                usize::try_from(*index).ok()
            };
            position.and_then(|p| items.get(p)).into_iter().collect()
        }
        Step::All => match value {
            Value::Array(items) => items.iter().collect(),
            Value::Object(map) => map.values().collect(),
            _ => Vec::new(),
        },
        Step::Filter {
            path,
            equal,
            value: wanted,
        } => value
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| {
                let found = select(path, item).into_iter().next();
                (found == Some(wanted)) == *equal
            })
            .collect(),
    };
    next.into_iter().flat_map(|v| select(rest, v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn first(path: &str, object: &Value) -> Option<Value> {
        JsonPath::parse(path).unwrap().first(object).cloned()
    }

    #[test]
    fn printer_column_paths_of_the_fixture_crds() {
        let summary = json!({"metadata": {"creationTimestamp": "t"}, "status": {"featureSummaries": [
            {"featureID": "Helm", "status": "Provisioned"},
            {"featureID": "Kustomize", "status": "Provisioning"}]}});
        assert_eq!(
            first(
                r#".status.featureSummaries[?(@.featureID=="Kustomize")].status"#,
                &summary
            ),
            Some(json!("Provisioning"))
        );
        assert_eq!(
            first(
                ".status.featureSummaries[?(@.featureID!='Helm')].featureID",
                &summary
            ),
            Some(json!("Kustomize"))
        );
        assert_eq!(
            first("{.metadata.creationTimestamp}", &summary),
            Some(json!("t"))
        );
        assert_eq!(
            first(".status.featureSummaries[-1].featureID", &summary),
            Some(json!("Kustomize"))
        );
        assert_eq!(
            first(".status.featureSummaries[*].status", &summary),
            Some(json!("Provisioned"))
        );
        assert_eq!(
            first(".metadata['creationTimestamp']", &summary),
            Some(json!("t"))
        );
        assert_eq!(first(".status.missing", &summary), None);
        assert_eq!(first(".status.featureSummaries[7]", &summary), None);
    }

    #[test]
    fn unsupported_paths_are_errors() {
        for path in ["status", ".a[", ".a[?(@.b>1)]", ".a..b"] {
            assert!(JsonPath::parse(path).is_err(), "{path}");
        }
    }
}
