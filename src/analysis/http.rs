//! One GET with a timeout and a bounded answer, over the client notifications use (hyper-util's
//! legacy client over rustls, plain HTTP allowed for in-cluster services).

use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;

use super::observation::MeasureError;
use crate::outbound::https::HttpsClient;

/// The largest answer read (a Prometheus vector of a few thousand samples fits).
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// An answer: its status code and body.
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
}

/// GETs `url` with `headers`, within `timeout`. Errors name the server as `server` (the caller
/// knows whether its address may be shown: [`super::secrets::shown_origin`]), never the URL or a
/// header value.
pub async fn get(
    client: &HttpsClient,
    url: &str,
    server: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<Answer, MeasureError> {
    let mut request = hyper::Request::get(url)
        .header("Accept", "application/json")
        .header(
            "User-Agent",
            concat!("tollgate/", env!("CARGO_PKG_VERSION")),
        );
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request
        .body(Full::new(Bytes::new()))
        .map_err(|_| MeasureError::Config("not a valid URL or header".to_string()))?;
    let server = server.to_string();
    let exchange = async {
        let response = client.request(request).await.map_err(|error| {
            if error.is_connect() {
                MeasureError::Connect(server.clone(), error_kind(&error))
            } else {
                MeasureError::Connection(server.clone(), error_kind(&error))
            }
        })?;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(
                |error| match error.downcast_ref::<http_body_util::LengthLimitError>() {
                    Some(_) => MeasureError::TooLarge(MAX_ANSWER_BYTES),
                    None => MeasureError::Connection(
                        server.clone(),
                        "reading the answer failed".to_string(),
                    ),
                },
            )?
            .to_bytes();
        Ok(Answer { status, body })
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| Err(MeasureError::TimedOut(server.clone(), timeout)))
}

/// The error's sources without the request (hyper's texts name no URL).
fn error_kind(error: &hyper_util::client::legacy::Error) -> String {
    let mut text = String::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text = cause.to_string();
        source = cause.source();
    }
    if text.is_empty() {
        "no answer".to_string()
    } else {
        text
    }
}
