//! The outside services a recovery chaos run talks to, as loopback servers whose behaviour the
//! schedule switches: a Prometheus stand-in that answers, errors or stalls, and a notification
//! receiver that is down (503) until it is brought up.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use serde_json::{Value, json};

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

/// One notice the receiver got, and whether it accepted it.
#[derive(Clone, Debug)]
pub struct Got {
    pub body: Value,
    pub accepted: bool,
}

/// A generic-webhook receiver: 503 while down, 200 once up.
#[derive(Clone)]
pub struct NoticeReceiver {
    pub url: String,
    got: Arc<Mutex<Vec<Got>>>,
    up: Arc<AtomicBool>,
}

type ReceiverState = (Arc<Mutex<Vec<Got>>>, Arc<AtomicBool>);

impl NoticeReceiver {
    /// Starts down.
    pub async fn start() -> NoticeReceiver {
        let got = Arc::new(Mutex::new(Vec::new()));
        let up = Arc::new(AtomicBool::new(false));
        let state: ReceiverState = (got.clone(), up.clone());
        let app = Router::new().fallback(receive).with_state(state);
        let addr = serve(app).await;
        NoticeReceiver {
            url: format!("http://{addr}/hook"),
            got,
            up,
        }
    }

    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    /// Every request so far, in arrival order.
    pub fn got(&self) -> Vec<Got> {
        self.got.lock().expect("receiver log").clone()
    }
}

async fn receive(State((got, up)): State<ReceiverState>, _uri: Uri, body: Bytes) -> StatusCode {
    let accepted = up.load(Ordering::SeqCst);
    got.lock().expect("receiver log").push(Got {
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        accepted,
    });
    match accepted {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    }
}
