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

/// How long the last handle's drop waits for the batch to go out (the end of `tollgate run`).
const FLUSH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// The last handle gone: what is batched is sent, waiting at most [`FLUSH_PATIENCE`]. The SDK's
/// shutdown waits for the batch task without a timeout (it ignores the one it is given), so it
/// runs on a thread of its own that nothing waits on unbounded: on a blocking-pool thread, a
/// runtime dropping its pool waited forever while the task was stuck exporting to a failing
/// collector (seen once in a full suite run, `e2e_traces::a_collector_answering_errors…`).
impl Drop for Exporting {
    fn drop(&mut self) {
        let provider = self.provider.clone();
        let (done, finished) = std::sync::mpsc::channel();
        let shutdown = move || {
            let _ = provider.shutdown();
            let _ = done.send(());
        };
        let spawned = std::thread::Builder::new()
            .name("traces-shutdown".into())
            .spawn(shutdown);
        if spawned.is_ok() {
            let _ = finished.recv_timeout(FLUSH_PATIENCE);
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
