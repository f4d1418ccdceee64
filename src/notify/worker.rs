//! One queue and one worker task per endpoint: the rollout hands a delivery over with
//! `try_send` and moves on; a full queue drops the delivery and counts it. The worker sends with a
//! timeout and retries with backoff on 5xx, 429, timeouts and connection errors (never on other
//! 4xx: the request itself is wrong), at least once per delivery within the process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tollgate_engine::{EngineEvent, Notice};
use tollgate_model::policy::NotifyEndpoint;
use tracing::{debug, info, warn};

use super::dedup::{DeliveredLog, key};
use super::payload::{self, Context, Outgoing};
use super::secret::read_secret;
use crate::cluster::events::EventPublisher;
use crate::cluster::leader::LeaderGate;
use crate::metrics::Metrics;

/// Deliveries waiting per endpoint.
pub const QUEUE_PER_ENDPOINT: usize = 256;
/// Per-request timeout when the endpoint sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts per delivery (the first one included).
const ATTEMPTS: u32 = 5;
/// First retry delay; doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The Event reason of a refused delivery (secret file unreadable, request rejected).
pub const NOTIFICATION_FAILED: tollgate_engine::EventReason =
    tollgate_engine::EventReason::NotificationFailed;

pub type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One notice for one endpoint.
pub struct Delivery {
    pub notice: Notice,
    pub context: Context,
    /// The GitPromotion's uid, for the Warning event of a failed delivery.
    pub uid: Option<String>,
}

/// What a worker shares with the notifier.
#[derive(Clone)]
pub struct Shared {
    /// `Err`: no TLS roots could be loaded; every delivery fails saying so.
    pub client: Result<HttpsClient, Arc<str>>,
    pub log: Arc<DeliveredLog>,
    pub metrics: Arc<Metrics>,
    pub events: EventPublisher,
    pub leader: LeaderGate,
}

/// Starts the worker of `endpoint` with a queue of `capacity`; it ends when the sender is dropped
/// and the queue is empty.
pub fn spawn(
    endpoint: NotifyEndpoint,
    shared: Shared,
    capacity: usize,
) -> (mpsc::Sender<Delivery>, tokio::task::JoinHandle<()>) {
    let (queue, received) = mpsc::channel(capacity);
    let task = tokio::spawn(run(endpoint, shared, received));
    (queue, task)
}

async fn run(endpoint: NotifyEndpoint, shared: Shared, mut received: mpsc::Receiver<Delivery>) {
    while let Some(delivery) = received.recv().await {
        deliver(&endpoint, &shared, &delivery).await;
    }
}

/// Why one attempt failed, and whether another can succeed.
enum Failure {
    Retry(String),
    GiveUp(String),
}

async fn deliver(endpoint: &NotifyEndpoint, shared: &Shared, delivery: &Delivery) {
    let notice = &delivery.notice;
    let delivered_key = key(&endpoint.name, &notice.id);
    let name = endpoint.name.as_str();
    if shared.log.contains(&notice.promotion, &delivered_key) {
        debug!(endpoint = name, id = %notice.id, "already delivered");
        return;
    }
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        if !shared.leader.is_leader() {
            debug!(
                endpoint = name,
                "not leading: notification left to the leader"
            );
            return;
        }
        let started = Instant::now();
        let why = match attempt_once(endpoint, notice, &delivery.context, &shared.client).await {
            Ok(()) => {
                shared.metrics.notification_sent(name, started.elapsed());
                info!(endpoint = name, promotion = %notice.promotion, event = notice.kind.as_str(), stage = %notice.stage, "notification delivered");
                shared.log.record(&notice.promotion, &delivered_key).await;
                return;
            }
            Err(Failure::GiveUp(why)) => why,
            Err(Failure::Retry(why)) if attempt < ATTEMPTS => {
                debug!(endpoint = name, attempt, %why, "notification failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
            Err(Failure::Retry(why)) => why,
        };
        shared.metrics.notification_failed(name);
        warn!(endpoint = name, promotion = %notice.promotion, event = notice.kind.as_str(), %why, "notification not delivered");
        shared.events.publish(
            &notice.promotion,
            delivery.uid.as_deref(),
            &EngineEvent::warning(
                NOTIFICATION_FAILED,
                format!(
                    "{} notification to endpoint {name} not delivered: {why}",
                    notice.kind.as_str()
                ),
            ),
        );
        return;
    }
}

async fn attempt_once(
    endpoint: &NotifyEndpoint,
    notice: &Notice,
    context: &Context,
    client: &Result<HttpsClient, Arc<str>>,
) -> Result<(), Failure> {
    let client = client
        .as_ref()
        .map_err(|e| Failure::GiveUp(format!("no HTTP client: {e}")))?;
    // Read at each attempt: a rotated or newly mounted secret is used at once.
    let secret = read_secret(&endpoint.address_secret_file, endpoint.kind)
        .map_err(|e| Failure::GiveUp(e.to_string()))?;
    let Some(outgoing) = payload::request(endpoint.kind, &secret, notice, context) else {
        return Ok(());
    };
    let timeout = endpoint
        .timeout
        .as_ref()
        .map_or(DEFAULT_TIMEOUT, |t| t.value);
    send(client, outgoing, timeout).await
}

async fn send(client: &HttpsClient, outgoing: Outgoing, timeout: Duration) -> Result<(), Failure> {
    let mut request = hyper::Request::post(outgoing.url.as_str())
        .header("Content-Type", "application/json")
        .header(
            "User-Agent",
            concat!("tollgate/", env!("CARGO_PKG_VERSION")),
        );
    for (name, value) in &outgoing.headers {
        request = request.header(*name, value.as_str());
    }
    // The URL is secret (a Slack webhook URL is its own credential): errors never include it.
    let request = request
        .body(Full::new(Bytes::from(outgoing.body)))
        .map_err(|_| Failure::GiveUp("the address is not a valid URL".to_string()))?;
    let exchange = async {
        let response = client.request(request).await?;
        let status = response.status();
        // Read the body so the connection can be reused; its content is not needed.
        let _ = response.into_body().collect().await;
        Ok::<_, hyper_util::client::legacy::Error>(status)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Err(_) => Err(Failure::Retry(format!("no answer within {timeout:?}"))),
        Ok(Err(error)) if error.is_connect() => Err(Failure::Retry("cannot connect".to_string())),
        Ok(Err(_)) => Err(Failure::Retry("the connection failed".to_string())),
        Ok(Ok(status)) if status.is_success() => Ok(()),
        Ok(Ok(status)) if status.is_server_error() || status.as_u16() == 429 => {
            Err(Failure::Retry(format!("answered {status}")))
        }
        Ok(Ok(status)) => Err(Failure::GiveUp(format!("answered {status}"))),
    }
}

/// An HTTPS (and plain HTTP, for in-cluster receivers) client trusting the system's roots.
pub fn https_client() -> Result<HttpsClient, std::io::Error> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}
