//! Short operations of a step as live spans (an apply, a status write): started now, ended when
//! the operation returns, under the span of the stage they belong to (its id derived by the
//! engine, so the stage's own span, sent when the stage ends, is their parent).

use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry_sdk::trace::Span;
use tollgate_engine::status::PromotionStatus;
use tollgate_engine::status::trace_spans::{current_stage, live_parent};

use super::Traces;
use super::finished::{remote_parent, snapshot_value};

/// A live span; dropped without [`LiveSpan::end`], it ends then (as an error if `failed`).
pub struct LiveSpan {
    span: Option<Span>,
}

impl Traces {
    /// A span `name` of `promotion`'s step towards `status`, under `stage`'s span (`None`: the
    /// newest stage the run entered). Nothing when traces are off or no traced run is going.
    pub fn live(
        &self,
        name: &str,
        promotion: &str,
        status: &PromotionStatus,
        stage: Option<&str>,
    ) -> LiveSpan {
        let span = self.inner.as_ref().and_then(|inner| {
            let stage = stage.or_else(|| current_stage(status));
            let (trace, parent) = live_parent(status, stage)?;
            let mut attributes = vec![KeyValue::new("tollgate.promotion", promotion.to_string())];
            if let Some(index) = status.snapshot_index {
                attributes.push(KeyValue::new("tollgate.snapshot", snapshot_value(index)));
            }
            if let Some(commit) = &status.snapshot_commit {
                attributes.push(KeyValue::new("vcs.commit", commit.clone()));
            }
            if let Some(stage) = stage {
                attributes.push(KeyValue::new("tollgate.stage", stage.to_string()));
            }
            let builder = inner
                .tracer
                .span_builder(name.to_string())
                .with_kind(SpanKind::Internal)
                .with_attributes(attributes);
            Some(builder.start_with_context(&inner.tracer, &remote_parent(trace, parent)))
        });
        LiveSpan { span }
    }
}

impl LiveSpan {
    /// Ends the span; an `Err` marks it failed with the error's text.
    pub fn end<T, E: std::fmt::Display>(mut self, result: &Result<T, E>) {
        if let Some(mut span) = self.span.take() {
            if let Err(error) = result {
                span.set_status(Status::error(error.to_string()));
            }
            span.end();
        }
    }
}

impl Drop for LiveSpan {
    fn drop(&mut self) {
        if let Some(mut span) = self.span.take() {
            span.end();
        }
    }
}
