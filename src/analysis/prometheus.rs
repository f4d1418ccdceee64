//! The `prometheus` provider: an instant query (`GET {address}/api/v1/query?query=…`) and its
//! answer as a result: a scalar or a one-sample vector is a number, several samples a list of
//! numbers, an empty vector no data. A `NaN` sample (a ratio over no traffic, 0/0) is no data
//! too: it is left out of a list, and alone it is judged by `onNoData`, whatever the
//! conditions. A failed query (HTTP error, `"status":"error"`, a range
//! vector) is an error with Prometheus' own message.

use std::time::Duration;

use serde_json::Value;
use tollgate_model::analysis::PrometheusCheck;

use super::http;
use super::observation::{MeasureError, Observation, ResultValue, show_list, show_number};
use super::secrets;
use crate::outbound::https::HttpsClient;

/// Runs `query` (the check's query with its templates rendered) against the check's address.
pub async fn measure(
    client: &HttpsClient,
    check: &PrometheusCheck,
    query: &str,
    timeout: Duration,
) -> Result<Observation, MeasureError> {
    let mut headers = Vec::new();
    if let Some(path) = &check.credentials_secret_file {
        headers.push((
            "Authorization".to_string(),
            secrets::prometheus_authorization(path)?,
        ));
    }
    let url = query_url(&check.address, query)?;
    let server = secrets::shown_origin(&url);
    let answer = http::get(client, &url, &server, &headers, timeout).await?;
    read_answer(answer.status, &answer.body)
}

pub(super) fn query_url(address: &str, query: &str) -> Result<String, MeasureError> {
    let address = address.trim_end_matches('/');
    if !(address.starts_with("http://") || address.starts_with("https://")) {
        return Err(MeasureError::Config(format!(
            "address {address:?} is not an http:// or https:// URL"
        )));
    }
    let encoded: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
    Ok(format!("{address}/api/v1/query?query={encoded}"))
}

/// The `data` of a Prometheus HTTP API answer; an error with Prometheus' own message when the
/// query failed.
pub(super) fn answer_data(status: u16, body: &[u8]) -> Result<Value, MeasureError> {
    let document: Option<Value> = serde_json::from_slice(body).ok();
    let api_status = document
        .as_ref()
        .and_then(|d| d.get("status"))
        .and_then(Value::as_str);
    if api_status == Some("error") || !(200..300).contains(&status) {
        let detail = document.as_ref().and_then(api_error);
        return Err(match (api_status, detail) {
            (Some("error"), Some(detail)) => {
                MeasureError::Query(format!("Prometheus answered {status}: {detail}"))
            }
            (_, detail) => MeasureError::Status { status, detail },
        });
    }
    let Some(data) = document.as_ref().and_then(|d| d.get("data")) else {
        return Err(MeasureError::Malformed(
            "no data field: is the address a Prometheus server?".to_string(),
        ));
    };
    Ok(data.clone())
}

/// The Prometheus HTTP API's answer to an instant query.
fn read_answer(status: u16, body: &[u8]) -> Result<Observation, MeasureError> {
    let data = answer_data(status, body)?;
    let result = &data["result"];
    match data["resultType"].as_str() {
        Some("scalar") => {
            let number = sample(result)?;
            if number.is_nan() {
                return Ok(Observation::NoData(NAN_IS_NO_DATA.to_string()));
            }
            Ok(Observation::Value {
                result: ResultValue::Number(number),
                shown: show_number(number),
            })
        }
        Some("string") => {
            let text = result
                .get(1)
                .and_then(Value::as_str)
                .ok_or_else(|| MeasureError::Malformed("a string result without its value".into()))?;
            Ok(Observation::Value {
                result: ResultValue::Text(text.to_string()),
                shown: text.to_string(),
            })
        }
        Some("vector") => vector(result),
        Some("matrix") => Err(MeasureError::Query(
            "the query returns a range vector: gate on an instant vector, e.g. rate(x[2m]) or sum(...)".to_string(),
        )),
        other => Err(MeasureError::Malformed(format!(
            "unknown resultType {}",
            other.unwrap_or("(none)")
        ))),
    }
}

fn api_error(document: &Value) -> Option<String> {
    let error = document.get("error")?.as_str()?;
    Some(match document.get("errorType").and_then(Value::as_str) {
        Some(kind) => format!("{kind}: {error}"),
        None => error.to_string(),
    })
}

/// Why a `NaN` is no data.
const NAN_IS_NO_DATA: &str = "the query returned NaN (a ratio over no traffic, 0/0)";

fn vector(result: &Value) -> Result<Observation, MeasureError> {
    let samples = result
        .as_array()
        .ok_or_else(|| MeasureError::Malformed("a vector result that is not a list".into()))?;
    let mut numbers = Vec::with_capacity(samples.len());
    for entry in samples {
        numbers.push(sample(&entry["value"])?);
    }
    let any = !numbers.is_empty();
    numbers.retain(|n| !n.is_nan());
    Ok(match numbers.as_slice() {
        [] if any => Observation::NoData(NAN_IS_NO_DATA.to_string()),
        [] => Observation::NoData("the query returned an empty vector".to_string()),
        [one] => Observation::Value {
            result: ResultValue::Number(*one),
            shown: show_number(*one),
        },
        _ => Observation::Value {
            shown: show_list(&numbers.iter().map(|n| show_number(*n)).collect::<Vec<_>>()),
            result: ResultValue::Numbers(numbers),
        },
    })
}

/// `[<time>, "<value>"]`: the value as a number.
pub(super) fn sample(pair: &Value) -> Result<f64, MeasureError> {
    let text = pair
        .get(1)
        .and_then(Value::as_str)
        .ok_or_else(|| MeasureError::Malformed("a sample without its value".into()))?;
    text.parse::<f64>()
        .map_err(|_| MeasureError::Malformed(format!("sample value {text:?} is not a number")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(status: u16, body: Value) -> Result<Observation, MeasureError> {
        read_answer(status, body.to_string().as_bytes())
    }

    fn value(result: ResultValue, shown: &str) -> Result<Observation, MeasureError> {
        Ok(Observation::Value {
            result,
            shown: shown.to_string(),
        })
    }

    fn vector_of(values: &[&str]) -> Value {
        let result: Vec<Value> = values
            .iter()
            .map(|v| json!({"metric": {}, "value": [1.7e9, v]}))
            .collect();
        json!({"status": "success", "data": {"resultType": "vector", "result": result}})
    }

    #[test]
    fn a_scalar_or_one_sample_is_a_number_several_a_list_none_no_data() {
        let scalar = json!({"status": "success", "data": {"resultType": "scalar", "result": [1.7e9, "0.25"]}});
        assert_eq!(read(200, scalar), value(ResultValue::Number(0.25), "0.25"));
        assert_eq!(
            read(200, vector_of(&["0.5"])),
            value(ResultValue::Number(0.5), "0.5")
        );
        assert_eq!(
            read(200, vector_of(&["1", "+Inf"])),
            value(ResultValue::Numbers(vec![1.0, f64::INFINITY]), "[1, +Inf]")
        );
        assert!(matches!(
            read(200, vector_of(&[])),
            Ok(Observation::NoData(_))
        ));
        assert_eq!(
            read(200, vector_of(&["0.500000000000002"])),
            value(ResultValue::Number(0.500000000000002), "0.5"),
            "shown readably, judged exactly"
        );
    }

    #[test]
    fn nan_is_no_data_alone_and_left_out_of_a_list() {
        let nan_scalar = json!({"status": "success", "data": {"resultType": "scalar", "result": [1.7e9, "NaN"]}});
        for answer in [nan_scalar, vector_of(&["NaN"]), vector_of(&["NaN", "NaN"])] {
            assert_eq!(
                read(200, answer),
                Ok(Observation::NoData(NAN_IS_NO_DATA.to_string()))
            );
        }
        assert_eq!(
            read(200, vector_of(&["NaN", "0.2"])),
            value(ResultValue::Number(0.2), "0.2")
        );
    }

    #[test]
    fn an_api_error_carries_prometheus_message_and_a_range_vector_is_refused() {
        let error =
            json!({"status": "error", "errorType": "execution", "error": "found duplicate series"});
        assert_eq!(
            read(422, error).map_err(|e| e.to_string()),
            Err("Prometheus answered 422: execution: found duplicate series".to_string())
        );
        assert_eq!(
            read_answer(502, b"<html>bad gateway</html>").map_err(|e| e.to_string()),
            Err("answered 502".to_string())
        );
        let matrix = json!({"status": "success", "data": {"resultType": "matrix", "result": []}});
        assert!(read(200, matrix).is_err());
        assert!(matches!(
            read(200, json!({"status": "success"})),
            Err(MeasureError::Malformed(_))
        ));
    }

    #[test]
    fn the_query_is_url_encoded_onto_the_address() {
        assert_eq!(
            query_url("http://p:9090/", "sum(x{a=~\"b|c\"}) / 2").as_deref(),
            Ok("http://p:9090/api/v1/query?query=sum%28x%7Ba%3D%7E%22b%7Cc%22%7D%29+%2F+2")
        );
        assert!(query_url("p:9090", "up").is_err());
    }
}
