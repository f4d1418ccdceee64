//! A comparative analysis's samples from Prometheus (issue #48): the cohort's query, instant
//! (one sample per series) or, with `samples: Range`, a range query's every point, each sample
//! labelled by the series' `cluster` label. A sample is kept only when that label names a
//! cluster of the cohort (a query whose `{{ clustersRegex }}` is empty would match series
//! without the label), and `NaN` samples (0/0) are left out.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_engine::comparison::ClusterSample;
use tollgate_model::analysis::PrometheusCheck;

use super::http;
use super::observation::MeasureError;
use super::prometheus::{answer_data, query_url, sample};
use super::secrets;
use crate::outbound::https::HttpsClient;

/// Points a range query returns per series at most (its step is chosen so).
const RANGE_POINTS: u64 = 60;

/// When and over what a cohort is measured.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// The instant measured (the end of a range); `None`: Prometheus' now.
    pub at: Option<DateTime<Utc>>,
    /// `samples: Range`: this many seconds up to `at` (or now).
    pub range_seconds: Option<u64>,
}

/// The samples of the clusters of `cohort` (`namespace/name` keys) that `query` returns.
pub async fn cohort_samples(
    client: &HttpsClient,
    check: &PrometheusCheck,
    query: &str,
    cohort: &[String],
    window: Window,
    timeout: Duration,
) -> Result<Vec<ClusterSample>, MeasureError> {
    let mut headers = Vec::new();
    if let Some(path) = &check.credentials_secret_file {
        headers.push((
            "Authorization".to_string(),
            secrets::prometheus_authorization(path)?,
        ));
    }
    let url = windowed_url(&query_url(&check.address, query)?, window);
    let server = secrets::shown_origin(&url);
    let answer = http::get(client, &url, &server, &headers, timeout).await?;
    let data = answer_data(answer.status, &answer.body)?;
    let names: Vec<&str> = cohort.iter().map(|key| cluster_name(key)).collect();
    let mut samples = read_samples(&data)?;
    samples.retain(|s| names.contains(&s.cluster.as_str()) && s.value.is_finite());
    Ok(samples)
}

/// A cluster's name from its `namespace/name` key (the `cluster` label carries the name).
fn cluster_name(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, name)| name)
}

fn windowed_url(instant: &str, window: Window) -> String {
    match window.range_seconds {
        None => match window.at {
            None => instant.to_string(),
            Some(at) => format!("{instant}&time={}", unix(at)),
        },
        Some(range) => {
            let end = window.at.unwrap_or_else(Utc::now);
            let start =
                end - chrono::Duration::seconds(i64::try_from(range).unwrap_or(i64::MAX / 2000));
            let step = (range / RANGE_POINTS).max(1);
            let ranged = instant.replacen("/api/v1/query?", "/api/v1/query_range?", 1);
            format!(
                "{ranged}&start={}&end={}&step={step}",
                unix(start),
                unix(end)
            )
        }
    }
}

/// Unix seconds with milliseconds, as Prometheus reads a time: truncated to the second, a
/// window could end before the newest scrape.
fn unix(at: DateTime<Utc>) -> String {
    format!("{}.{:03}", at.timestamp(), at.timestamp_subsec_millis())
}

/// Every sample of a vector or matrix answer, by its series' `cluster` label.
fn read_samples(data: &Value) -> Result<Vec<ClusterSample>, MeasureError> {
    let kind = data["resultType"].as_str().unwrap_or("(none)");
    if !matches!(kind, "vector" | "matrix") {
        return Err(MeasureError::Query(format!(
            "a comparison needs series labelled by cluster, and the query returns a {kind}"
        )));
    }
    let series = data["result"]
        .as_array()
        .ok_or_else(|| MeasureError::Malformed(format!("a {kind} result that is not a list")))?;
    let mut samples = Vec::new();
    for one in series {
        let Some(cluster) = one["metric"]["cluster"].as_str() else {
            continue;
        };
        let points: Vec<&Value> = match kind {
            "vector" => vec![&one["value"]],
            _ => one["values"]
                .as_array()
                .map(|v| v.iter().collect())
                .unwrap_or_default(),
        };
        for point in points {
            samples.push(ClusterSample {
                cluster: cluster.to_string(),
                value: sample(point)?,
            });
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn vector_and_matrix_samples_are_read_by_their_cluster_label() {
        let vector = json!({"resultType": "vector", "result": [
            {"metric": {"cluster": "eu-1"}, "value": [1.7e9, "0.25"]},
            {"metric": {"job": "x"}, "value": [1.7e9, "9"]},
        ]});
        assert_eq!(
            read_samples(&vector),
            Ok(vec![ClusterSample {
                cluster: "eu-1".into(),
                value: 0.25
            }])
        );
        let matrix = json!({"resultType": "matrix", "result": [
            {"metric": {"cluster": "us-2"}, "values": [[1.7e9, "1"], [1.7e9 + 1.0, "2"]]},
        ]});
        assert_eq!(read_samples(&matrix).map(|s| s.len()), Ok(2));
        let scalar = json!({"resultType": "scalar", "result": [1.7e9, "1"]});
        assert!(read_samples(&scalar).is_err());
    }

    #[test]
    fn a_before_window_ends_at_the_apply_and_a_range_asks_for_its_points() {
        let at = DateTime::from_timestamp(1_700_000_000, 0);
        let instant = "http://p:9090/api/v1/query?query=up";
        assert_eq!(
            windowed_url(
                instant,
                Window {
                    at,
                    range_seconds: None
                }
            ),
            "http://p:9090/api/v1/query?query=up&time=1700000000.000"
        );
        assert_eq!(
            windowed_url(
                instant,
                Window {
                    at,
                    range_seconds: Some(120)
                }
            ),
            "http://p:9090/api/v1/query_range?query=up&start=1699999880.000&end=1700000000.000&step=2"
        );
        assert_eq!(cluster_name("fleet/eu-1"), "eu-1");
    }
}
