//! The OTLP/HTTP (protobuf) export: where to, the batch processor on the tokio runtime, and the
//! HTTP client under it (the outbound HTTPS client every other call out of tollgate uses), which
//! bounds each export's time and says once that the collector fails.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::runtime::Tokio;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{BatchConfigBuilder, SdkTracerProvider};

use crate::outbound::https::{HttpsClient, https_client};

/// The standard variables: the general one is `--otlp-endpoint`'s.
pub const ENDPOINT_VARIABLE: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub const TRACES_ENDPOINT_VARIABLE: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

/// How long one export may take: then it is dropped, and the next batch tries again.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where traces go.
#[derive(Clone, Debug)]
pub struct TracesTarget {
    /// The full URL spans are POSTed to (`…/v1/traces`).
    pub traces_url: String,
    /// How long spans wait to be sent in a batch; `None`: `OTEL_BSP_SCHEDULE_DELAY`, else
    /// OpenTelemetry's default of 5 s.
    pub batch_delay: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    #[error("the OTLP endpoint {url:?} is not a URL: {reason}")]
    Endpoint { url: String, reason: String },
    #[error("the HTTPS client for OTLP cannot start: {0}")]
    Client(#[from] std::io::Error),
}

impl TracesTarget {
    /// From `--otlp-endpoint` (a base URL; clap reads `OTEL_EXPORTER_OTLP_ENDPOINT` into it) and
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (a full URL), which wins over the general variable as
    /// the OTLP specification says; `None`: traces are off.
    pub fn resolve(flag: Option<&str>) -> Option<Self> {
        let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let flag = flag.filter(|f| !f.trim().is_empty());
        let from_general_variable = flag.is_none() || flag == set(ENDPOINT_VARIABLE).as_deref();
        let traces_url = match (set(TRACES_ENDPOINT_VARIABLE), flag) {
            (Some(url), _) if from_general_variable => url,
            (_, Some(base)) => under_base(base),
            (_, None) => return None,
        };
        Some(Self {
            traces_url,
            batch_delay: None,
        })
    }
}

/// The traces path under a base endpoint, as the OTLP specification builds it.
fn under_base(base: &str) -> String {
    format!("{}/v1/traces", base.trim().trim_end_matches('/'))
}

/// A tracer provider exporting to `target`; must be called on a tokio runtime.
pub(super) fn provider(target: &TracesTarget) -> Result<SdkTracerProvider, TracesError> {
    target
        .traces_url
        .parse::<hyper::Uri>()
        .map_err(|e| TracesError::Endpoint {
            url: target.traces_url.clone(),
            reason: e.to_string(),
        })?;
    let client = CollectorClient {
        client: https_client()?,
        url: target.traces_url.clone(),
        warned: AtomicBool::new(false),
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(target.traces_url.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| TracesError::Endpoint {
            url: target.traces_url.clone(),
            reason: e.to_string(),
        })?;
    // The builder starts from the `OTEL_BSP_*` variables.
    let mut batches = BatchConfigBuilder::default().with_max_export_timeout(EXPORT_TIMEOUT);
    if let Some(delay) = target.batch_delay {
        batches = batches.with_scheduled_delay(delay);
    }
    let batches = batches.build();
    let processor = BatchSpanProcessor::builder(exporter, Tokio)
        .with_batch_config(batches)
        .build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource())
        .build())
}

/// The process as `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` describe it, named `tollgate`
/// unless they name it.
fn resource() -> Resource {
    let detected = Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    if named {
        detected
    } else {
        Resource::builder().with_service_name("tollgate").build()
    }
}

/// Sends the exporter's requests through the outbound client.
struct CollectorClient {
    client: HttpsClient,
    url: String,
    /// A failing collector is told once in the log, not once per batch.
    warned: AtomicBool,
}

impl std::fmt::Debug for CollectorClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectorClient")
            .field("url", &self.url)
            .finish()
    }
}

impl CollectorClient {
    fn warn_once(&self, problem: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                collector = %self.url,
                problem,
                "the OTLP collector does not take spans: they are dropped (told once)"
            );
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for CollectorClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let request = hyper::Request::from_parts(parts, Full::new(body));
        let exchange = async {
            let response = self.client.request(request).await?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        let result = match tokio::time::timeout(EXPORT_TIMEOUT, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {EXPORT_TIMEOUT:?}").into()),
        };
        match &result {
            Ok(response) if !response.status().is_success() => {
                self.warn_once(&format!("it answered {}", response.status()));
            }
            Ok(_) => {}
            Err(error) => self.warn_once(&error.to_string()),
        }
        result
    }
}
