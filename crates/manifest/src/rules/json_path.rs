//! The `jsonPath` of a `web` analysis: where in the endpoint's JSON answer the measured value
//! is. The form is kubectl's: `{.a.b}`, `{.items[0].value}`, `{.data["key.with.dots"]}`
//! (a leading `$` is allowed: `{$.a}`; `{.}` is the whole document). Wildcards, filters and
//! slices are not supported: one path names one value.

use serde_json::Value;

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonPathStep {
    /// A field of an object.
    Field(String),
    /// An element of a list.
    Index(usize),
}

/// Why a `jsonPath` is not of the supported form, and where (1-based, in characters of ASCII
/// paths; in bytes otherwise).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at character {column} of {text:?}); write it as {{.field.list[0].value}}")]
pub struct JsonPathError {
    pub text: String,
    pub column: usize,
    pub message: String,
}

/// Parses `{.a.b[0]}` into its steps.
pub fn parse_json_path(text: &str) -> Result<Vec<JsonPathStep>, JsonPathError> {
    let fail = |offset: usize, message: &str| JsonPathError {
        text: text.to_string(),
        column: offset + 1,
        message: message.to_string(),
    };
    let inner = text
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| fail(0, "a jsonPath is enclosed in braces"))?;
    let body = inner.strip_prefix('$').unwrap_or(inner);
    let start = text.len() - 1 - body.len();
    if body == "." || body.is_empty() && inner == "$" {
        return Ok(Vec::new());
    }
    if !body.starts_with(['.', '[']) {
        return Err(fail(start, "a jsonPath starts with `.` or `$`"));
    }
    let mut steps = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let offset = start + body.len() - rest.len();
        let (step, after) = if let Some(after_dot) = rest.strip_prefix('.') {
            field(after_dot).ok_or_else(|| fail(offset + 1, "expected a field name after `.`"))?
        } else if let Some(after_bracket) = rest.strip_prefix('[') {
            bracket(after_bracket).ok_or_else(|| {
                fail(
                    offset,
                    "expected an index such as [0] or a quoted key such as [\"a.b\"]",
                )
            })?
        } else {
            return Err(fail(offset, "expected `.` or `[`"));
        };
        steps.push(step);
        rest = after;
    }
    Ok(steps)
}

/// A field name up to the next `.` or `[`.
fn field(text: &str) -> Option<(JsonPathStep, &str)> {
    let end = text.find(['.', '[']).unwrap_or(text.len());
    let name = &text[..end];
    let bad = |c: char| c.is_whitespace() || "]{}'\"*@?()".contains(c);
    if name.is_empty() || name.contains(bad) {
        return None;
    }
    Some((JsonPathStep::Field(name.to_string()), &text[end..]))
}

/// `0]` or `"key"]` or `'key']`, after the opening bracket.
fn bracket(text: &str) -> Option<(JsonPathStep, &str)> {
    if let Some(quote) = text.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let body = &text[1..];
        let end = body.find(quote)?;
        let after = body[end + 1..].strip_prefix(']')?;
        return Some((JsonPathStep::Field(body[..end].to_string()), after));
    }
    let end = text.find(']')?;
    let index = text[..end].parse::<usize>().ok()?;
    Some((JsonPathStep::Index(index), &text[end + 1..]))
}

/// The value at `steps` in `document`, when there is one.
pub fn lookup<'a>(steps: &[JsonPathStep], document: &'a Value) -> Option<&'a Value> {
    steps.iter().try_fold(document, |value, step| match step {
        JsonPathStep::Field(name) => value.get(name),
        JsonPathStep::Index(index) => value.get(index),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use JsonPathStep::{Field, Index};

    fn field(name: &str) -> JsonPathStep {
        Field(name.to_string())
    }

    #[test]
    fn kubectl_forms_parse_into_steps() {
        assert_eq!(parse_json_path("{.ok}"), Ok(vec![field("ok")]));
        assert_eq!(
            parse_json_path("{$.data.result[0].value}"),
            Ok(vec![
                field("data"),
                field("result"),
                Index(0),
                field("value")
            ])
        );
        assert_eq!(
            parse_json_path("{.labels[\"app.kubernetes.io/name\"]}"),
            Ok(vec![field("labels"), field("app.kubernetes.io/name")])
        );
        assert_eq!(parse_json_path("{.}"), Ok(Vec::new()));
        assert_eq!(parse_json_path("{$}"), Ok(Vec::new()));
        assert_eq!(parse_json_path("{.is-ok}"), Ok(vec![field("is-ok")]));
    }

    #[test]
    fn other_forms_are_errors_that_say_where() {
        for (text, column) in [
            (".ok", 1),
            ("{ok}", 2),
            ("{.a..b}", 5),
            ("{.a[x]}", 4),
            ("{.a[*]}", 4),
            ("{.items[?(@.x)]}", 8),
            ("{.a b}", 3),
            ("{.a[\"b]}", 4),
        ] {
            let error = parse_json_path(text).expect_err(text);
            assert_eq!(error.column, column, "{text}: {error}");
        }
    }

    #[test]
    fn lookup_follows_the_steps() {
        let document = serde_json::json!({"data": {"result": [{"value": 0.5}]}, "ok": true});
        let steps = parse_json_path("{.data.result[0].value}").expect("path");
        assert_eq!(lookup(&steps, &document), Some(&serde_json::json!(0.5)));
        assert_eq!(lookup(&[field("missing")], &document), None);
        assert_eq!(lookup(&[], &document), Some(&document));
    }
}
