//! The embedded fleet's health endpoint: with `healthEndpoint: 127.0.0.1:PORT` in the fleet file,
//! `run --embedded` answers `GET /clusters/<namespace>/<name>` with the cluster's `health` values
//! as JSON (`{"cluster": "prod-1", "namespace": "fleet", "errorRate": 0.001}`), so a `web`
//! analysis has something real to measure without installing anything.
//!
//! The file is read again for every request: editing a value in the fleet file changes the next
//! measurement, which is how the demo shows a gate failing. A file that no longer reads is a 503
//! naming the error (the analysis records it), never the last good answer.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use tollgate_emulator::Fleet;

/// The health endpoint of a running embedded fleet; it stops when dropped.
pub struct FleetHealth {
    pub addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FleetHealth {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Serves the health of the clusters of `fleet_file` at `addr` (loopback only: it has no
/// authentication, like the emulator).
pub async fn serve(addr: SocketAddr, fleet_file: &Path) -> anyhow::Result<FleetHealth> {
    if !addr.ip().is_loopback() {
        bail!(
            "healthEndpoint {addr} in {}: the fleet's health endpoint listens on a loopback address only",
            fleet_file.display()
        );
    }
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!(
            "healthEndpoint {addr} in {}: cannot listen there (is another demo running? change the port in the fleet file and in the policy that measures it)",
            fleet_file.display()
        )
    })?;
    let addr = listener.local_addr()?;
    let router = Router::new()
        .route("/clusters/{namespace}/{name}", get(health_of))
        .with_state(Arc::new(fleet_file.to_path_buf()));
    let server = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::warn!(%error, "the fleet's health endpoint stopped");
        }
    });
    Ok(FleetHealth { addr, server })
}

async fn health_of(
    State(fleet_file): State<Arc<PathBuf>>,
    UrlPath((namespace, name)): UrlPath<(String, String)>,
) -> Response {
    let fleet = match Fleet::load(&fleet_file) {
        Ok(fleet) => fleet,
        Err(error) => {
            let body = json!({"error": error.to_string()});
            return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
        }
    };
    match fleet
        .clusters
        .iter()
        .find(|c| c.namespace == namespace && c.name == name)
    {
        Some(cluster) => axum::Json(cluster.health_answer(&fleet.defaults)).into_response(),
        None => {
            let body = json!({"error": format!("no cluster {namespace}/{name} in the fleet file")});
            (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
        }
    }
}
