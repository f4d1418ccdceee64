//! Watch streams: newline-delimited JSON events over a chunked response.

use std::collections::HashMap;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::api_error::ApiError;
use crate::registry::ResourceType;
use crate::selector::LabelSelector;
use crate::state::ApiState;
use crate::store::{WatchEvent, WatchFilter};

/// Default and upper bound of `timeoutSeconds`, like the real server's min-request-timeout range.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// An open watch, ready to be streamed.
pub struct WatchStream {
    /// Events sent before anything from `receiver` (the 410 error, or nothing).
    leading: Vec<Value>,
    receiver: Option<mpsc::UnboundedReceiver<WatchEvent>>,
    /// With `sendInitialEvents`: how many queued events are the initial state, then the bookmark.
    initial: Option<(usize, Value)>,
    deadline: Instant,
    /// Turns stored objects into what this watch's API version shows (core/v1 Events).
    convert: Option<Convert>,
}

/// A conversion of stored objects for another API version's readers.
pub type Convert = fn(&Value) -> Value;

fn event_line(event: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(event).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

pub fn open(
    state: &mut ApiState,
    resource: &ResourceType,
    namespace: Option<String>,
    query: &HashMap<String, String>,
    convert: Option<Convert>,
) -> Result<WatchStream, ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let fields = super::field_selector(query, resource)?;
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs)
        .min(DEFAULT_TIMEOUT);
    let send_initial = query.get("sendInitialEvents").is_some_and(|v| v == "true");
    let from =
        match query.get("resourceVersion").map(String::as_str) {
            None | Some("") | Some("0") => None,
            Some(_) if send_initial => None,
            Some(version) => Some(version.parse::<u64>().map_err(|_| {
                ApiError::BadRequest(format!("invalid resourceVersion {version:?}"))
            })?),
        };
    let filter = WatchFilter {
        resource: resource.qualified_plural(),
        namespace,
        labels,
        fields,
    };
    let deadline = Instant::now() + timeout;
    match state.store.watch(filter, from) {
        Ok(receiver) => {
            let initial = send_initial.then(|| {
                let bookmark = json!({"type": "BOOKMARK", "object": {
                    "apiVersion": resource.api_version(), "kind": resource.kind,
                    "metadata": {"resourceVersion": state.store.resource_version().to_string(),
                                 "annotations": {"k8s.io/initial-events-end": "true"}}}});
                (receiver.len(), bookmark)
            });
            Ok(WatchStream {
                leading: Vec::new(),
                receiver: Some(receiver),
                initial,
                deadline,
                convert,
            })
        }
        // A watch from a forgotten version answers 200 with one ERROR event, as the real server's
        // watch cache does. Not an HTTP 410: kube-runtime's watcher (5.0) relists on a 410 ERROR
        // event but retries a watch whose start failed with the same version, forever.
        Err(error @ ApiError::Gone { .. }) => Ok(WatchStream {
            leading: vec![json!({"type": "ERROR", "object": error.status_body()})],
            receiver: None,
            initial: None,
            deadline,
            convert,
        }),
        Err(other) => Err(other),
    }
}

/// One event line around the object's JSON, serialised once at commit for every watcher.
fn render(event: WatchEvent, convert: Option<Convert>) -> Bytes {
    let (kind, json) = event;
    if let Some(convert) = convert.filter(|_| kind != "ERROR") {
        // Only core/v1 Event watches convert: they parse the stored shape back.
        let object = json.parse();
        return event_line(&json!({"type": kind, "object": convert(&object)}));
    }
    let mut bytes = Vec::with_capacity(json.len() + 32);
    bytes.extend_from_slice(b"{\"type\":\"");
    bytes.extend_from_slice(kind.as_bytes());
    bytes.extend_from_slice(b"\",\"object\":");
    json.write_to(&mut bytes);
    bytes.extend_from_slice(b"}\n");
    Bytes::from(bytes)
}

pub fn response(stream: WatchStream) -> Response {
    let WatchStream {
        leading,
        receiver,
        initial,
        deadline,
        convert,
    } = stream;
    let leading = futures_util::stream::iter(
        leading
            .into_iter()
            .map(|e| Ok::<Bytes, std::io::Error>(event_line(&e))),
    );
    let live =
        futures_util::stream::unfold((receiver, initial), move |(receiver, initial)| async move {
            let mut receiver = receiver?;
            if let Some((remaining, bookmark)) = initial {
                if remaining == 0 {
                    return Some((Ok(event_line(&bookmark)), (Some(receiver), None)));
                }
                let event = receiver.recv().await?;
                return Some((
                    Ok(render(event, convert)),
                    (Some(receiver), Some((remaining - 1, bookmark))),
                ));
            }
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(event)) => Some((Ok(render(event, convert)), (Some(receiver), None))),
                // Closed (dropped watches, outage, shutdown) or timed out: end the response.
                Ok(None) | Err(_) => None,
            }
        });
    let body = Body::from_stream(futures_util::StreamExt::chain(leading, live));
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
