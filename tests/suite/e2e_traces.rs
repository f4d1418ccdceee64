//! Traces (issue #49 item 2): each run an OpenTelemetry trace, sent over OTLP/HTTP (protobuf)
//! to a loopback receiver that decodes what it gets with `opentelemetry-proto`. A collector
//! that is down or failing changes nothing of the rollout.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::Value;
use tollgate::traces::{Traces, TracesTarget};
use tollgate_fixtures::{promotion, stage};

use crate::support;
use support::receiver::{Answer, Receiver};
use support::web_page::{page_body, serve_in_process};
use support::{TestRepo, World, fleet_yaml, free_port, str_at, tollgate_binary};

/// Spans sent within a tenth of a second, so that a test waits for little.
fn traces_to(url: &str) -> Traces {
    Traces::exporting(&TracesTarget {
        traces_url: url.to_string(),
        batch_delay: Some(Duration::from_millis(100)),
    })
    .expect("an exporter")
}

/// A two-stage promotion `web` (dev, then staging, which soaks 2 s: a run to restart in the
/// middle of), committed.
fn two_stage_repo() -> TestRepo {
    let repo = TestRepo::new();
    let web = promotion("web")
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("staging").selector("env", "staging").delay("2s"))
        .to_yaml();
    repo.write("web.yaml", &web);
    repo.commit("web");
    repo
}

fn trace_id_of_run(status: &Value) -> String {
    str_at(status, "/runs/0/traceId")
        .unwrap_or_else(|| panic!("the run has a trace id: {status}"))
        .to_string()
}

async fn rollout_with_traces(traces: Traces) -> World {
    let mut world = World::without_controller(two_stage_repo(), &fleet_yaml(1, "50ms")).await;
    world.traces = traces;
    world.start_controller().await;
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_changes_nothing_of_the_rollout() {
    // Nothing listens there.
    let down = format!("http://127.0.0.1:{}/v1/traces", free_port());
    let world = rollout_with_traces(traces_to(&down)).await;
    let status = world.wait_phase("web", "Completed").await;
    assert_eq!(trace_id_of_run(&status).len(), 32);
    assert_eq!(world.failed_steps(), 0, "a step failed for the collector");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_answering_errors_changes_nothing_of_the_rollout() {
    // 503 to everything: it is never brought up.
    let failing = Receiver::start(Answer::WhileUp).await;
    let world = rollout_with_traces(traces_to(&failing.url("/v1/traces"))).await;
    world.wait_phase("web", "Completed").await;
    assert_eq!(world.failed_steps(), 0, "a step failed for the collector");
    world
        .eventually("the exporter tried the collector", || async {
            (!failing.under("/v1/traces").is_empty()).then_some(())
        })
        .await;
}

/// Every span the receiver decoded.
fn spans(receiver: &Receiver) -> Vec<Span> {
    receiver
        .under("/v1/traces")
        .iter()
        .flat_map(|got| {
            ExportTraceServiceRequest::decode(got.body.clone())
                .expect("an OTLP protobuf ExportTraceServiceRequest")
                .resource_spans
        })
        .flat_map(|resource| resource.scope_spans)
        .flat_map(|scope| scope.spans)
        .collect()
}

fn attribute(span: &Span, key: &str) -> Option<AnyValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone()?.value)
}

fn text(span: &Span, key: &str) -> Option<String> {
    match attribute(span, key)? {
        AnyValue::StringValue(text) => Some(text),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_one_trace_of_stage_spans_with_applies_under_them_across_a_restart() {
    let receiver = Receiver::start(Answer::Ok).await;
    let url = receiver.url("/v1/traces");
    let mut world = rollout_with_traces(traces_to(&url)).await;
    // Mid-run: the second stage entered (and soaking); the controller stops, another takes over.
    world
        .eventually("the run entered staging", || async {
            let status = world.status("web").await?;
            str_at(&status, "/runs/0/stages/1/appliedAt").map(|_| ())
        })
        .await;
    world.stop_controller().await;
    let stopped = world.status("web").await.expect("a status");
    assert_eq!(
        stopped.pointer("/runs/0/endedAt"),
        None,
        "the run ended before the restart: {stopped}"
    );
    let before_restart = trace_id_of_run(&stopped);
    world.traces = traces_to(&url);
    world.start_controller().await;
    let status = world.wait_phase("web", "Completed").await;
    let trace = trace_id_of_run(&status);
    assert_eq!(
        trace, before_restart,
        "a restart changed the run's trace id"
    );
    let commit = str_at(&status, "/snapshotCommit").expect("the snapshot's commit");
    // The promotion page's run history names the trace.
    let addr = serve_in_process(&world, None).await.to_string();
    let page = page_body(&addr, "/ui/promotions/web")
        .await
        .expect("the page");
    assert!(
        page.contains(&format!("data-trace-id=\"{trace}\"")),
        "the page's runs table lacks the trace id {trace}"
    );
    // `tollgate history -o json` with the cluster names it for the snapshot's run.
    let history = tollgate_binary()
        .args(["history", "web", "-o", "json", "--repo"])
        .arg(world.repo.path())
        .arg("--kubeconfig")
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate history runs");
    let document: Value = serde_json::from_slice(&history.stdout)
        .unwrap_or_else(|_| panic!("json: {}", String::from_utf8_lossy(&history.stderr)));
    assert_eq!(
        document["snapshots"][0]["traceIds"],
        serde_json::json!([trace]),
        "{document:#}"
    );

    let spans = world
        .eventually("the run's root span", || async {
            let spans = spans(&receiver);
            spans.iter().any(|s| s.name == "run").then_some(spans)
        })
        .await;
    assert!(
        spans.iter().all(|s| hex(&s.trace_id) == trace),
        "a span outside the run's trace {trace}: {:?}",
        spans
            .iter()
            .map(|s| (&s.name, hex(&s.trace_id)))
            .collect::<Vec<_>>()
    );
    let roots: Vec<&Span> = spans.iter().filter(|s| s.name == "run").collect();
    assert_eq!(roots.len(), 1, "one root span");
    let root = roots[0];
    assert!(root.parent_span_id.is_empty(), "the run's span is the root");
    assert_eq!(text(root, "tollgate.outcome").as_deref(), Some("completed"));
    for name in ["dev", "staging"] {
        let stage = spans
            .iter()
            .find(|s| s.name == format!("stage {name}"))
            .unwrap_or_else(|| panic!("a span for stage {name}"));
        assert_eq!(
            stage.parent_span_id, root.span_id,
            "{name} is under the run"
        );
        assert_eq!(text(stage, "tollgate.promotion").as_deref(), Some("web"));
        assert_eq!(text(stage, "tollgate.stage").as_deref(), Some(name));
        assert_eq!(text(stage, "vcs.commit").as_deref(), Some(commit));
        assert_eq!(
            attribute(stage, "tollgate.snapshot"),
            Some(AnyValue::IntValue(1))
        );
        assert!(stage.start_time_unix_nano < stage.end_time_unix_nano);
        assert!(root.start_time_unix_nano <= stage.start_time_unix_nano);
        assert!(stage.end_time_unix_nano <= root.end_time_unix_nano);
        let applies = spans
            .iter()
            .filter(|s| s.name == "apply" && text(s, "tollgate.stage").as_deref() == Some(name));
        let parents: Vec<&Vec<u8>> = applies.map(|s| &s.parent_span_id).collect();
        assert!(!parents.is_empty(), "no apply span for {name}");
        assert!(
            parents.iter().all(|p| **p == stage.span_id),
            "{name}'s applies are not under its span"
        );
    }
    assert!(
        spans.iter().any(|s| s.name == "status write"),
        "no status write span"
    );
    let first = &receiver.under("/v1/traces")[0];
    let request = ExportTraceServiceRequest::decode(first.body.clone()).expect("protobuf");
    let service = request.resource_spans[0]
        .resource
        .as_ref()
        .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
        .and_then(|kv| kv.value.clone()?.value);
    assert_eq!(service, Some(AnyValue::StringValue("tollgate".into())));
    assert_eq!(first.header("content-type"), Some("application/x-protobuf"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_analysis_measurement_is_a_span_under_its_stage() {
    let receiver = Receiver::start(Answer::Ok).await;
    // The receiver stands in for Prometheus too: whatever it answers, a measurement is taken.
    let prometheus = receiver.url("/prometheus");
    let policy = serde_json::json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "gates"},
        "spec": {"selector": {}, "stages": {"dev": {"analyses": ["error-rate"]}},
            "analyses": [{"name": "error-rate", "interval": "1s", "count": 1,
                "prometheus": {"address": prometheus, "query": "ratio"},
                "failureCondition": "result >= 0.05"}]}
    });
    let repo = two_stage_repo();
    repo.write("policy.yaml", &policy.to_string());
    repo.commit("gate dev");
    let mut world = World::without_controller(repo, &fleet_yaml(1, "50ms")).await;
    world.traces = traces_to(&receiver.url("/v1/traces"));
    world.start_controller().await;
    let spans = world
        .eventually("a measurement's span", || async {
            let spans = spans(&receiver);
            spans
                .iter()
                .any(|s| s.name == "analysis measurement")
                .then_some(spans)
        })
        .await;
    let measurement = spans
        .iter()
        .find(|s| s.name == "analysis measurement")
        .expect("found");
    assert_eq!(text(measurement, "tollgate.stage").as_deref(), Some("dev"));
    assert_eq!(
        text(measurement, "tollgate.analysis").as_deref(),
        Some("error-rate")
    );
    assert!(text(measurement, "tollgate.verdict").is_some());
    let dev_apply = spans
        .iter()
        .find(|s| s.name == "apply" && text(s, "tollgate.stage").as_deref() == Some("dev"))
        .expect("dev's apply span");
    assert_eq!(
        measurement.parent_span_id, dev_apply.parent_span_id,
        "the measurement is not under dev's span"
    );
    assert_eq!(measurement.trace_id, dev_apply.trace_id);
}
