//! Short operations of a step as live spans (an apply, a status write, a measurement): started now, ended when
//! the operation returns, under the span of the stage they belong to (its id derived by the
//! engine, so the stage's own span, sent when the stage ends, is their parent).

use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};
use tollgate_engine::status::PromotionStatus;
use tollgate_engine::status::trace_spans::{current_stage, live_parent};

use super::Traces;
use super::finished::{remote_parent, snapshot_value};

/// A live span; dropped without [`LiveSpan::end`], it ends then (as an error if `failed`).
pub struct LiveSpan {
    span: Option<Span>,
}

/// Where spans of one stage of a run go: its span as their parent, the run's attributes on
/// them. Kept by what measures later (an analysis measurement, in its own task).
#[derive(Clone)]
pub struct SpanSite {
    tracer: SdkTracer,
    parent: Context,
    attributes: Vec<KeyValue>,
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
        match self.site(promotion, status, stage) {
            Some(site) => site.start(name, Vec::new()),
            None => LiveSpan { span: None },
        }
    }

    /// Where spans of `stage` (`None`: the newest stage the run entered) of the run `status`
    /// describes go; `None` when traces are off or no traced run is going.
    pub fn site(
        &self,
        promotion: &str,
        status: &PromotionStatus,
        stage: Option<&str>,
    ) -> Option<SpanSite> {
        let inner = self.inner.as_ref()?;
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
        Some(SpanSite {
            tracer: inner.tracer.clone(),
            parent: remote_parent(trace, parent),
            attributes,
        })
    }
}

impl SpanSite {
    /// Starts span `name` here, with `more` attributes besides the run's.
    pub fn start(&self, name: &str, more: Vec<KeyValue>) -> LiveSpan {
        let mut attributes = self.attributes.clone();
        attributes.extend(more);
        let builder = self
            .tracer
            .span_builder(name.to_string())
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        LiveSpan {
            span: Some(builder.start_with_context(&self.tracer, &self.parent)),
        }
    }
}

impl LiveSpan {
    /// Adds what is known only once the operation ran (a measurement's verdict).
    pub fn set_attribute(&mut self, attribute: KeyValue) {
        if let Some(span) = &mut self.span {
            span.set_attribute(attribute);
        }
    }

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
