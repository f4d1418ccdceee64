//! The spans that ended in a persisted step (`tollgate_engine::status::trace_spans`), sent with
//! the ids, start and end the engine gives them.

use std::time::SystemTime;

use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceState,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use tollgate_engine::status::PromotionStatus;
use tollgate_engine::status::trace_ids::{SpanId, TraceId};
use tollgate_engine::status::trace_spans::{FinishedSpan, SpanOf, finished_spans};
use tollgate_engine::transitions::Transition;

use super::Traces;

impl Traces {
    /// Sends the spans of `promotion` that the step from `before` to `after` ended (`told`: the
    /// step's transitions).
    pub fn after_step(
        &self,
        promotion: &str,
        before: Option<&PromotionStatus>,
        after: &PromotionStatus,
        told: &[Transition],
    ) {
        let Some(inner) = &self.inner else {
            return;
        };
        for span in finished_spans(before, after, told) {
            let parent = match span.parent {
                Some(parent) => remote_parent(span.trace, parent),
                None => Context::new(),
            };
            let mut builder = inner
                .tracer
                .span_builder(span_name(&span.of))
                .with_kind(SpanKind::Internal)
                .with_start_time(SystemTime::from(span.start))
                .with_attributes(attributes(promotion, &span));
            builder.trace_id = Some(otel_trace_id(span.trace));
            builder.span_id = Some(otel_span_id(span.id));
            let mut otel = builder.start_with_context(&inner.tracer, &parent);
            if matches!(span.outcome, "failed" | "rolled-back") {
                otel.set_status(Status::error(span.outcome));
            }
            otel.end_with_timestamp(SystemTime::from(span.end));
        }
    }
}

fn span_name(of: &SpanOf) -> String {
    match of {
        SpanOf::Run => "run".to_string(),
        SpanOf::Stage { stage } => format!("stage {stage}"),
        SpanOf::Wave { stage, wave, of } => format!("wave {wave}/{of} of {stage}"),
        SpanOf::Restore { stage, .. } => format!("restore {stage}"),
    }
}

fn attributes(promotion: &str, span: &FinishedSpan) -> Vec<KeyValue> {
    let mut out = vec![
        KeyValue::new("tollgate.promotion", promotion.to_string()),
        KeyValue::new("tollgate.snapshot", snapshot_value(span.snapshot)),
        KeyValue::new("vcs.commit", span.commit.clone()),
        KeyValue::new("tollgate.outcome", span.outcome),
    ];
    match &span.of {
        SpanOf::Run => {}
        SpanOf::Stage { stage } => out.push(KeyValue::new("tollgate.stage", stage.clone())),
        SpanOf::Wave { stage, wave, .. } => {
            out.push(KeyValue::new("tollgate.stage", stage.clone()));
            out.push(KeyValue::new("tollgate.wave", i64::from(*wave)));
        }
        SpanOf::Restore { stage, to } => {
            out.push(KeyValue::new("tollgate.stage", stage.clone()));
            if let Some(to) = to {
                out.push(KeyValue::new("tollgate.restored_to", snapshot_value(*to)));
            }
        }
    }
    out
}

/// A snapshot index as an OTLP integer (indexes start at 1 and never reach `i64::MAX`).
pub(super) fn snapshot_value(index: u64) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
}

/// A context whose span is `span` of `trace`, sampled: spans started under it join the trace.
pub(super) fn remote_parent(trace: TraceId, span: SpanId) -> Context {
    Context::new().with_remote_span_context(SpanContext::new(
        otel_trace_id(trace),
        otel_span_id(span),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    ))
}

fn otel_trace_id(id: TraceId) -> opentelemetry::trace::TraceId {
    opentelemetry::trace::TraceId::from_bytes(id.0)
}

fn otel_span_id(id: SpanId) -> opentelemetry::trace::SpanId {
    opentelemetry::trace::SpanId::from_bytes(id.0)
}
