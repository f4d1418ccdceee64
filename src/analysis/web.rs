//! The `web` provider: GET the URL (its templates rendered), headers from `headersSecretFile`,
//! and read the JSON answer at `jsonPath` (kube's JSONPath syntax, `{.status.ok}`; the whole
//! document without one). One match is the result, several a list, none no data.

use std::time::Duration;

use jsonpath_rust::JsonPath;
use serde_json::Value;
use tollgate_model::analysis::WebCheck;

use super::http;
use super::observation::{MeasureError, Observation, ResultValue, show_number};
use super::secrets;
use crate::outbound::https::HttpsClient;

/// Longest value shown in status; a larger one is cut (the conditions see it whole).
const SHOWN_CHARS: usize = 200;

pub async fn measure(
    client: &HttpsClient,
    check: &WebCheck,
    url: &str,
    timeout: Duration,
) -> Result<Observation, MeasureError> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(MeasureError::Config(
            "url is not an http:// or https:// URL".to_string(),
        ));
    }
    let headers = match &check.headers_secret_file {
        Some(path) => secrets::web_headers(path)?,
        None => Vec::new(),
    };
    let server = secrets::shown_origin(url);
    let answer = http::get(client, url, &server, &headers, timeout).await?;
    if !(200..300).contains(&answer.status) {
        return Err(MeasureError::Status {
            status: answer.status,
            detail: None,
        });
    }
    let document: Value = serde_json::from_slice(&answer.body)
        .map_err(|e| MeasureError::Malformed(format!("the answer is not JSON: {e}")))?;
    select(&document, check.json_path.as_deref())
}

/// The value at `path` (kube's `{.a.b}` or a JSONPath `$.a.b`).
fn select(document: &Value, path: Option<&str>) -> Result<Observation, MeasureError> {
    let Some(path) = path else {
        return Ok(observed(document.clone()));
    };
    let query = jsonpath(path);
    let found = document
        .query(&query)
        .map_err(|e| MeasureError::Config(format!("jsonPath {path:?} is not valid: {e}")))?;
    Ok(match found.as_slice() {
        [] => Observation::NoData(format!("jsonPath {path} matched nothing")),
        [one] => observed((*one).clone()),
        many => observed(Value::Array(many.iter().map(|v| (*v).clone()).collect())),
    })
}

/// kube's JSONPath template (`{.items[0].ok}`) as a JSONPath query (`$.items[0].ok`), as kube's
/// client reads the paths of a kubeconfig's exec credentials.
fn jsonpath(path: &str) -> String {
    let inner = path.trim();
    let inner = inner
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(inner)
        .trim();
    if inner.starts_with('$') {
        inner.to_string()
    } else if inner.starts_with('.') || inner.starts_with('[') {
        format!("${inner}")
    } else {
        format!("$.{inner}")
    }
}

fn observed(value: Value) -> Observation {
    let shown = match &value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number
            .as_f64()
            .map_or_else(|| number.to_string(), show_number),
        other => other.to_string(),
    };
    let shown = match shown.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &shown[..cut]),
        None => shown,
    };
    let result = match value {
        Value::Null => return Observation::NoData("jsonPath selected null".to_string()),
        Value::Bool(b) => ResultValue::Bool(b),
        other => ResultValue::Json(other),
    };
    Observation::Value { result, shown }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kube_style_paths_select_one_value_several_or_none() {
        let document = json!({"ok": true, "checks": [{"p99": 120}, {"p99": 80}], "none": null});
        assert_eq!(
            select(&document, Some("{.ok}")),
            Ok(Observation::Value {
                result: ResultValue::Bool(true),
                shown: "true".into()
            })
        );
        assert_eq!(
            select(&document, Some("{.checks[*].p99}")),
            Ok(Observation::Value {
                result: ResultValue::Json(json!([120, 80])),
                shown: "[120,80]".into()
            })
        );
        assert!(matches!(
            select(&document, Some("{.missing}")),
            Ok(Observation::NoData(_))
        ));
        assert!(matches!(
            select(&document, Some("{.none}")),
            Ok(Observation::NoData(_))
        ));
        assert!(matches!(
            select(&document, Some("$.checks[0].p99")),
            Ok(Observation::Value { .. })
        ));
        assert!(select(&document, Some("{.checks[?(@.p99 >}")).is_err());
    }

    #[test]
    fn without_a_path_the_whole_document_is_the_result() {
        assert_eq!(
            select(&json!(0.5), None),
            Ok(Observation::Value {
                result: ResultValue::Json(json!(0.5)),
                shown: "0.5".into()
            })
        );
        assert_eq!(jsonpath("{ .a.b }"), "$.a.b");
        assert_eq!(jsonpath("a"), "$.a");
    }
}
