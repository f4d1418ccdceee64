//! A run's trace (`status/trace_ids.rs`, `status/trace_spans.rs`): the unhappy cases first (a run
//! superseded mid-stage ends its trace and starts another; a controller restarted mid-run
//! computes the same ids), then a rollout's spans, each told once, with its real start and end.

mod common;

use chrono::Duration;
use common::{P, profile_spec, promotion_with, stage, t0};

use tollgate_engine::Desired;
use tollgate_engine::PromotionStatus;
use tollgate_engine::status::trace_ids::TraceId;
use tollgate_engine::status::trace_spans::{FinishedSpan, SpanOf, finished_spans, live_parent};
use tollgate_engine::testing::{self, World};
use tollgate_engine::transitions::transitions;

/// dev then prod, deploying `chart`.
fn promotion(chart: &str) -> tollgate_model::ClusterPromotion {
    promotion_with(
        profile_spec(chart),
        vec![stage("dev", None), stage("prod", None)],
    )
}

fn world() -> (World, tollgate_model::Snapshot) {
    let mut world = World::new(t0());
    for env in ["dev", "prod"] {
        world.add_cluster(&format!("{env}-1"), &[("env", env)]);
    }
    let snapshot = testing::snapshot(promotion("1.0.0"), 1, testing::commit(1));
    world.history.push(snapshot.clone());
    (world, snapshot)
}

/// Steps until `done`, collecting the spans each persisted step ended.
fn step_until(
    world: &mut World,
    snapshot: &tollgate_model::Snapshot,
    spans: &mut Vec<FinishedSpan>,
    done: impl Fn(&PromotionStatus) -> bool,
) -> PromotionStatus {
    for _ in 0..20 {
        let before = world.status.clone();
        let desired = Desired::Snapshot {
            current: snapshot,
            invalid: None,
        };
        let status = world.step(desired, &[]).status;
        let told = transitions(before.as_ref(), &status);
        spans.extend(finished_spans(before.as_ref(), &status, &told));
        if done(&status) {
            return status;
        }
        world.sveltos();
        world.advance(Duration::seconds(10));
    }
    panic!("the rollout never got there");
}

#[test]
fn a_superseded_run_ends_its_trace_and_the_next_run_has_another() {
    let (mut world, first) = world();
    let mut spans = Vec::new();
    let old = step_until(&mut world, &first, &mut spans, |s| {
        s.stage("prod").is_some()
    });
    let old_trace = old.runs[0].trace_id.expect("the run has a trace id");
    let second = testing::snapshot(promotion("2.0.0"), 2, testing::commit(2));
    world.history.push(second.clone());
    let new = step_until(&mut world, &second, &mut spans, |s| {
        s.snapshot_index == Some(2)
    });
    let new_trace = new.runs.last().and_then(|r| r.trace_id).expect("trace id");
    assert_ne!(old_trace, new_trace);
    let roots: Vec<&FinishedSpan> = spans.iter().filter(|s| s.of == SpanOf::Run).collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    assert_eq!(roots[0].trace, old_trace);
    assert_eq!(roots[0].outcome, "superseded");
    assert_eq!(roots[0].start, old.runs[0].started_at);
    // prod was in progress: its span ends with the run, so that its applies have their parent.
    let prod = spans
        .iter()
        .find(|s| {
            s.trace == old_trace
                && s.of
                    == SpanOf::Stage {
                        stage: "prod".into(),
                    }
        })
        .expect("a span for the stage the new run cut short");
    assert_eq!(prod.outcome, "superseded");
    assert_eq!(prod.end, roots[0].end);
    assert_eq!(prod.parent, Some(old_trace.run_span()));
}

#[test]
fn the_trace_id_is_the_same_whichever_process_computes_it() {
    let (mut world, first) = world();
    let status = step_until(&mut world, &first, &mut Vec::new(), |s| {
        s.stage("dev").is_some()
    });
    let run = &status.runs[0];
    assert_eq!(
        run.trace_id,
        Some(TraceId::of_run(P, 1, run.started_at)),
        "the trace id is not derived from the promotion, snapshot and start"
    );
    // What another process reads back from the persisted status.
    let json = serde_json::to_value(&status).expect("serializes");
    assert_eq!(
        json.pointer("/runs/0/traceId").and_then(|v| v.as_str()),
        Some(run.trace_id.expect("id").to_string().as_str())
    );
    let read: PromotionStatus = serde_json::from_value(json).expect("reads back");
    assert_eq!(read.runs[0].trace_id, run.trace_id);
    assert_eq!(
        live_parent(&read, Some("dev")),
        live_parent(&status, Some("dev"))
    );
}

#[test]
fn a_rollout_tells_each_stage_span_once_under_the_run_with_its_real_times() {
    let (mut world, first) = world();
    let mut spans = Vec::new();
    let done = step_until(&mut world, &first, &mut spans, |s| {
        s.runs.last().is_some_and(|r| r.ended_at.is_some())
    });
    let run = &done.runs[0];
    let trace = run.trace_id.expect("trace id");
    let root = trace.run_span();
    let names: Vec<&SpanOf> = spans.iter().map(|s| &s.of).collect();
    assert_eq!(
        names,
        [
            &SpanOf::Stage {
                stage: "dev".into()
            },
            &SpanOf::Stage {
                stage: "prod".into()
            },
            &SpanOf::Run
        ],
        "{spans:#?}"
    );
    for span in &spans {
        assert_eq!(span.trace, trace);
        assert_eq!(span.snapshot, 1);
        assert_eq!(span.outcome, "completed");
        assert!(span.start < span.end, "{span:?}");
    }
    for (span, stage) in spans.iter().zip(["dev", "prod"]) {
        let record = run.stages.iter().find(|s| s.name == stage).expect("record");
        assert_eq!(span.parent, Some(root));
        assert_eq!(span.id, trace.stage_span(stage, record.applied_at));
        assert_eq!(span.start, record.applied_at);
        assert_eq!(Some(span.end), record.succeeded_at);
    }
    assert_eq!(spans[2].id, root);
    assert_eq!(spans[2].parent, None);
    assert_eq!(
        (spans[2].start, Some(spans[2].end)),
        (run.started_at, run.ended_at)
    );
}
