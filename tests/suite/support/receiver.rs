//! A notification receiver on loopback that records every request it gets and answers as told:
//! accepting, failing once, hanging, refusing, or down (503) until it is brought up.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::Value;

/// One request a receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// What it answered (a hanging answer: none yet).
    pub answered: Option<StatusCode>,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// How a receiver answers.
#[derive(Clone, Copy)]
pub enum Answer {
    Ok,
    /// 500 to the first request, then 200.
    FailFirst,
    /// Never answers.
    Hang,
    /// 400 to everything: the request itself is wrong.
    Refuse,
    /// 503 while the receiver is down (see [`Receiver::set_up`]), 200 once it is up.
    WhileUp,
}

#[derive(Clone)]
pub struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Received>>>,
    up: Arc<AtomicBool>,
}

type ReceiverState = (Arc<Mutex<Vec<Received>>>, Answer, Arc<AtomicBool>);

impl Receiver {
    pub async fn start(answer: Answer) -> Receiver {
        let got = Arc::new(Mutex::new(Vec::new()));
        let up = Arc::new(AtomicBool::new(false));
        let state: ReceiverState = (got.clone(), answer, up.clone());
        let app = Router::new().fallback(record).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind receiver");
        let addr = listener.local_addr().expect("receiver address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { addr, got, up }
    }

    /// For [`Answer::WhileUp`]: whether it answers 200 (up) or 503 (down).
    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn got(&self) -> Vec<Received> {
        self.got.lock().expect("receiver log").clone()
    }

    pub fn under(&self, prefix: &str) -> Vec<Received> {
        self.got()
            .into_iter()
            .filter(|r| r.path.starts_with(prefix))
            .collect()
    }
}

async fn record(
    State((got, answer, up)): State<ReceiverState>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let code = {
        let mut log = got.lock().expect("receiver log");
        let first = log.is_empty();
        let code = answer_of(answer, first, &up);
        log.push(Received {
            path: uri.path().to_string(),
            headers,
            body,
            answered: code,
        });
        code
    };
    match code {
        Some(code) => code,
        None => {
            std::future::pending::<()>().await;
            StatusCode::OK
        }
    }
}

/// `None`: never answers.
fn answer_of(answer: Answer, first: bool, up: &AtomicBool) -> Option<StatusCode> {
    match answer {
        Answer::Ok => Some(StatusCode::CREATED),
        Answer::FailFirst if first => Some(StatusCode::INTERNAL_SERVER_ERROR),
        Answer::FailFirst => Some(StatusCode::OK),
        Answer::Refuse => Some(StatusCode::BAD_REQUEST),
        Answer::WhileUp if up.load(Ordering::SeqCst) => Some(StatusCode::OK),
        Answer::WhileUp => Some(StatusCode::SERVICE_UNAVAILABLE),
        Answer::Hang => None,
    }
}
