//! One attempt at one notice for one endpoint: read the secret, build the request, send it with
//! the endpoint's timeout, and say whether another attempt can succeed.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use tollgate_engine::Notice;
use tollgate_model::policy::NotifyEndpoint;

use super::payload::{self, Context, Outgoing};
use crate::outbound::endpoint_secret::read_secret;
use crate::outbound::https::HttpsClient;

/// Per-request timeout when the endpoint sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why one attempt failed, and whether another can succeed.
pub enum Failure {
    Retry(String),
    GiveUp(String),
}

pub async fn attempt_once(
    endpoint: &NotifyEndpoint,
    notice: &Notice,
    client: &Result<HttpsClient, Arc<str>>,
) -> Result<(), Failure> {
    let client = client
        .as_ref()
        .map_err(|e| Failure::GiveUp(format!("no HTTP client: {e}")))?;
    // Read at each attempt: a rotated or newly mounted secret is used at once.
    let secret = read_secret(&endpoint.address_secret_file, endpoint.kind)
        .map_err(|e| Failure::GiveUp(e.to_string()))?;
    let context = Context {
        author: notice.author.clone(),
        target_url: endpoint.target_url.clone(),
    };
    let Some(outgoing) = payload::request(endpoint.kind, &secret, notice, &context) else {
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
