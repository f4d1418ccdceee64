//! A Prometheus stand-in on loopback for the recovery chaos run, whose behaviour the schedule
//! switches: it answers, errors or stalls. (Its notification receiver is `support::receiver`.)

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::json;

/// Serves `app` on a free loopback port for the rest of the test.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// How the Prometheus stand-in answers an instant query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PromMode {
    /// A one-sample vector well under the analyses' threshold.
    Healthy = 0,
    /// 500 with Prometheus' error document.
    Erroring = 1,
    /// Answers healthy after [`STALL`]: a slow server, not a dead one.
    Stalling = 2,
}

/// How long a stalling answer takes (under the controller's analysis timeout).
pub const STALL: Duration = Duration::from_secs(3);

/// A Prometheus HTTP API stand-in (`/api/v1/query`).
#[derive(Clone)]
pub struct PromStandIn {
    pub address: String,
    mode: Arc<AtomicU8>,
}

impl PromStandIn {
    pub async fn start() -> PromStandIn {
        let mode = Arc::new(AtomicU8::new(PromMode::Healthy as u8));
        let app = Router::new()
            .fallback(answer_query)
            .with_state(mode.clone());
        let addr = serve(app).await;
        PromStandIn {
            address: format!("http://{addr}"),
            mode,
        }
    }

    pub fn set(&self, mode: PromMode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }
}

async fn answer_query(State(mode): State<Arc<AtomicU8>>) -> (StatusCode, String) {
    let mode = mode.load(Ordering::SeqCst);
    if mode == PromMode::Erroring as u8 {
        let error = json!({"status": "error", "errorType": "execution", "error": "chaos: the query failed"});
        return (StatusCode::INTERNAL_SERVER_ERROR, error.to_string());
    }
    if mode == PromMode::Stalling as u8 {
        tokio::time::sleep(STALL).await;
    }
    let now = chrono::Utc::now().timestamp() as f64;
    let healthy = json!({"status": "success", "data": {"resultType": "vector",
        "result": [{"metric": {}, "value": [now, "0.01"]}]}});
    (StatusCode::OK, healthy.to_string())
}
