//! Traces (issue #49): with `--otlp-endpoint` (or `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) each run of a promotion is one OpenTelemetry trace.
//! The engine owns the ids (`tollgate_engine::status::trace_ids`: derived from the run, so that
//! they survive controller restarts) and says which spans ended in a step
//! (`tollgate_engine::status::trace_spans`); this module only turns them into OTLP spans: the
//! long ones (run, stage, wave, restore) when they end, with their real start and end, the short
//! ones (an apply, a status write) live, under the current stage's span. Without an endpoint
//! [`Traces`] is disabled: no exporter, nothing recorded.

mod collector;
mod finished;
mod live;
mod run_log;

use std::sync::Arc;

use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

pub use collector::{TracesError, TracesTarget};
pub use live::{LiveSpan, SpanSite};
pub use run_log::log_transitions;

/// Where a controller's spans go, or nowhere. Cheap to clone.
#[derive(Clone, Default)]
pub struct Traces {
    inner: Option<Arc<Exporting>>,
}

struct Exporting {
    /// Kept so that the batch processor lives as long as the handle.
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl Traces {
    /// Traces off: every method does nothing.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Exports to `target`'s collector (OTLP over HTTP, protobuf), from a batch processor on the
    /// current tokio runtime: a collector that is slow, down or refusing costs dropped spans
    /// (and one warning), never a step's time.
    pub fn exporting(target: &TracesTarget) -> Result<Self, TracesError> {
        let provider = collector::provider(target)?;
        let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "tollgate");
        Ok(Self {
            inner: Some(Arc::new(Exporting { provider, tracer })),
        })
    }

    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }
}

/// The last handle gone: what is batched is sent (the processor's shutdown blocks until its task
/// answered, so it waits on a blocking thread, not on a runtime worker).
impl Drop for Exporting {
    fn drop(&mut self) {
        let provider = self.provider.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || provider.shutdown())),
            Err(_) => drop(provider.shutdown()),
        }
    }
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces")
            .field("enabled", &self.enabled())
            .finish()
    }
}
