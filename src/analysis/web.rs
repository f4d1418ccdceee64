//! The `web` provider: GET the URL (its templates rendered), headers from `headersSecretFile`,
//! and read the JSON answer at `jsonPath` (kube's JSONPath syntax, `{.status.ok}`; the whole
//! document without one). The path is read by the parser `validate` checks it with
//! (`tollgate_manifest::rules::json_path`), so what validates is what runs: one path names one
//! value; no value there (or `null`) is no data.

use std::time::Duration;

use serde_json::Value;
use tollgate_manifest::rules::json_path::{lookup, parse_json_path};
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

/// The value at `path` (kube's `{.a.b}`, `{.items[0].ok}`, `{.labels["a.b"]}`, `{.}`).
fn select(document: &Value, path: Option<&str>) -> Result<Observation, MeasureError> {
    let Some(path) = path else {
        return Ok(observed(document.clone()));
    };
    let steps = parse_json_path(path)
        .map_err(|e| MeasureError::Config(format!("jsonPath {path:?} is not valid: {e}")))?;
    Ok(match lookup(&steps, document) {
        None => Observation::NoData(format!("jsonPath {path} matched nothing")),
        Some(found) => observed(found.clone()),
    })
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
    fn kube_style_paths_select_one_value_or_none() {
        let document = json!({"ok": true, "checks": [{"p99": 120}, {"p99": 80}], "none": null});
        assert_eq!(
            select(&document, Some("{.ok}")),
            Ok(Observation::Value {
                result: ResultValue::Bool(true),
                shown: "true".into()
            })
        );
        assert_eq!(
            select(&document, Some("{.checks[1].p99}")),
            Ok(Observation::Value {
                result: ResultValue::Json(json!(80)),
                shown: "80".into()
            })
        );
        assert!(matches!(
            select(&document, Some("{.missing}")),
            Ok(Observation::NoData(_))
        ));
        assert!(matches!(
            select(&document, Some("{.checks[2]}")),
            Ok(Observation::NoData(_))
        ));
        assert!(matches!(
            select(&document, Some("{.none}")),
            Ok(Observation::NoData(_))
        ));
        assert!(matches!(
            select(&document, Some("{$.checks[0].p99}")),
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
    }

    /// What `validate` accepts is what runs: a path the manifest crate's check passes selects,
    /// at run time, the value its steps name (quoted keys with dots, indexes, the whole
    /// document as `{.}` and `{$}`); one it refuses is a configuration error here too.
    #[test]
    fn a_validated_path_selects_what_its_steps_name() {
        let document = json!({
            "labels": {"app.kubernetes.io/name": "web", "a": {"b": "nested"}},
            "items": [{"value": 0.25}, {"value": "second"}],
            "ok": false
        });
        for (path, expected) in [
            ("{.ok}", json!(false)),
            ("{$.ok}", json!(false)),
            ("{.labels[\"app.kubernetes.io/name\"]}", json!("web")),
            ("{.labels['app.kubernetes.io/name']}", json!("web")),
            ("{.labels.a.b}", json!("nested")),
            ("{.items[0].value}", json!(0.25)),
            ("{.items[1][\"value\"]}", json!("second")),
            ("{.}", document.clone()),
            ("{$}", document.clone()),
        ] {
            let steps = parse_json_path(path).expect(path);
            assert_eq!(lookup(&steps, &document), Some(&expected), "{path}");
            assert_eq!(
                select(&document, Some(path)),
                Ok(observed(expected.clone())),
                "{path}"
            );
        }
        for refused in ["{.items[*].value}", ".ok", "{.a b}", "$.ok"] {
            assert!(parse_json_path(refused).is_err(), "{refused}");
            assert!(
                matches!(
                    select(&document, Some(refused)),
                    Err(MeasureError::Config(_))
                ),
                "{refused}"
            );
        }
    }
}
