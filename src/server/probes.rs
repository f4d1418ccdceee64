//! Liveness, readiness and the metrics scrape.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;

/// The content type of the OpenMetrics text format `prometheus-client` writes.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `GET /healthz`: the process serves requests.
pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: ready once git synced and every initial watch listed, so that a rollout of
/// the controller itself waits for a replica that knows the state of the world. A replica still
/// waiting for the management cluster says for what, and what fixes it.
pub(super) async fn readyz(State(app): State<AppState>) -> Response {
    let waiting = app.state.startup.borrow().not_ready_reason();
    if let Some(reason) = waiting {
        let text = format!("not ready: {reason}\n");
        return (StatusCode::SERVICE_UNAVAILABLE, text).into_response();
    }
    let failing = app.state.watch_health.failing_beyond_grace();
    if let Some((resource, failure)) = failing.first() {
        let text = format!(
            "not ready: the watch of {resource} has failed for {}s ({} errors): {}\n",
            failure.since.elapsed().as_secs(),
            failure.errors,
            failure.error
        );
        return (StatusCode::SERVICE_UNAVAILABLE, text).into_response();
    }
    if *app.state.ready.borrow() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: waiting for the first git sync and the initial cluster watch listings\n",
        )
            .into_response()
    }
}

/// `GET /metrics`: leadership is read at scrape time, so the gauge is never stale.
pub(super) async fn metrics(State(app): State<AppState>, headers: HeaderMap) -> Response {
    app.state.metrics.set_leader(app.state.leader.is_leader());
    let failing: Vec<(String, u64)> = app
        .state
        .watch_health
        .failures()
        .into_iter()
        .map(|(resource, failure)| (resource, failure.errors))
        .collect();
    app.state.metrics.set_failing_watches(&failing);
    let gzip = accepts_gzip(&headers);
    // Off the runtime's workers: at 10,000 promotions a scrape is 28 MB of text to encode and
    // compress, a fraction of a second the controller's tasks should not wait for.
    let metrics = app.state.metrics.clone();
    let encoded = tokio::task::spawn_blocking(move || metrics.exposition(gzip).into_chunks()).await;
    let chunks = match encoded {
        Ok(chunks) => chunks,
        // A scrape that cannot be encoded says so: an empty 200 would read as no metrics.
        Err(error) => {
            tracing::error!(%error, "cannot encode metrics");
            return (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response();
        }
    };
    let body = Body::from_stream(futures::stream::iter(
        chunks.into_iter().map(Ok::<_, std::convert::Infallible>),
    ));
    let mut response = ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::VARY,
        header::HeaderValue::from_static("accept-encoding"),
    );
    if gzip {
        headers.insert(
            header::CONTENT_ENCODING,
            header::HeaderValue::from_static("gzip"),
        );
    }
    response
}

/// Whether `Accept-Encoding` lists gzip with a non-zero weight (Prometheus sends `gzip`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    == Some(0.0)
            });
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}
