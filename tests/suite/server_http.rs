//! The non-webhook routes (`/metrics`, `/healthz`, `/readyz`, the status API), the real socket
//! server, and secret hygiene.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use chrono::{DateTime, Utc};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tollgate::cluster::leader::LeaderGate;
use tollgate::metrics::{ALL_PHASES, Metrics, ReconcileResult};
use tollgate::outbound::signature::hmac_sha256_hex;
use tollgate::server::{ServerConfig, ServerState, WebhookSecrets, bind, router};
use tollgate_engine::PromotionStatus;
use tollgate_source::{Poker, Secret};
use tower::ServiceExt;

use crate::support::exposition::{Sample, parse_exposition};

// ---------------------------------------------------------------------------------------------
// Helpers.

struct Harness {
    router: Router,
    metrics: Arc<Metrics>,
    ready: watch::Sender<bool>,
    leader: LeaderGate,
    poker: Poker,
    /// With no grace: a failing watch makes the replica unready at once.
    watch_health: tollgate::cluster::watch::WatchHealth,
}

fn state_with(
    statuses: Vec<(String, Value)>,
) -> (ServerState, watch::Sender<bool>, Arc<Metrics>, LeaderGate) {
    let metrics = Arc::new(Metrics::new());
    let (ready_tx, ready) = watch::channel(false);
    let leader = LeaderGate::always();
    let state = ServerState {
        metrics: metrics.clone(),
        ready,
        startup: watch::channel(tollgate::controller::Startup::Started).1,
        poker: Poker::new(),
        statuses: Arc::new(move |only: Option<&str>| {
            statuses
                .iter()
                .filter(|(name, _)| only.is_none_or(|only| only == name))
                .map(|(name, status)| (name.clone(), typed(status)))
                .collect()
        }),
        leader: leader.clone(),
        fetch_relay: None,
        branch: "main".to_string(),
        watch_health: tollgate::cluster::watch::WatchHealth::with_grace(std::time::Duration::ZERO),
    };
    (state, ready_tx, metrics, leader)
}

fn harness_with(statuses: Vec<(String, Value)>, secrets: WebhookSecrets) -> Harness {
    let (state, ready, metrics, leader) = state_with(statuses);
    let poker = state.poker.clone();
    let watch_health = state.watch_health.clone();
    let mut config = ServerConfig::new(([127, 0, 0, 1], 0).into());
    config.webhooks = secrets;
    Harness {
        router: router(state, &config),
        metrics,
        ready,
        leader,
        poker,
        watch_health,
    }
}

fn harness() -> Harness {
    harness_with(Vec::new(), WebhookSecrets::default())
}

async fn call(router: &Router, request: Request<Body>) -> (StatusCode, HeaderMap, String) {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

async fn get(router: &Router, path: &str) -> (StatusCode, HeaderMap, String) {
    call(
        router,
        Request::get(path).body(Body::empty()).expect("request"),
    )
    .await
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("timestamp")
        .with_timezone(&Utc)
}

fn awaiting_approval_status() -> Value {
    json!({
        "hashScheme": 1,
        "phase": "Waiting",
        "snapshotIndex": 4,
        "currentStageName": "prod",
        "lastPromotionTime": "2026-11-20T10:00:00Z",
        "message": "waiting for approval of stage prod",
        "stages": [
            {
                "name": "canary",
                "snapshotIndex": 4,
                "appliedAt": "2026-11-20T09:00:00Z",
                "appliedSpecHash": "aaaa",
                "succeededAt": "2026-11-20T09:30:00Z",
            },
            {
                "name": "prod",
                "snapshotIndex": 4,
                "appliedAt": "2026-11-20T10:00:00Z",
                "appliedSpecHash": "bbbb",
                "provisionedAt": "2026-11-20T10:00:30Z",
                "currentStatusDescription": "Paused: Awaiting Manual Approval (2026-11-20T10:01:00Z)",
                "awaitingApprovalSince": "2026-11-20T10:01:00Z",
                "activity": {"kind": "AwaitingApproval"},
                "activitySince": "2026-11-20T10:01:00Z",
            }
        ]
    })
}

fn progressing_status() -> Value {
    json!({
        "hashScheme": 1,
        "phase": "Progressing",
        "snapshotIndex": 2,
        "currentStageName": "dev",
        "lastPromotionTime": "2026-11-20T10:01:00Z",
        "message": "provisioning stage dev",
        "stages": [
            {
                "name": "dev",
                "snapshotIndex": 2,
                "appliedAt": "2026-11-20T10:01:00Z",
                "appliedSpecHash": "cccc",
                "currentStatusDescription": "Clusters are being provisioned (2026-11-20T10:01:00Z)",
            }
        ]
    })
}

fn typed(status: &Value) -> PromotionStatus {
    serde_json::from_value(status.clone()).expect("status JSON matches PromotionStatus")
}

fn record_everything(metrics: &Metrics) {
    let now = at("2026-11-20T10:01:30Z");
    metrics.reconcile(ReconcileResult::Ok);
    metrics.reconcile(ReconcileResult::Ok);
    metrics.reconcile(ReconcileResult::Error);
    metrics.git_sync(std::time::Duration::from_millis(120), true);
    metrics.git_sync(std::time::Duration::from_secs(3), false);
    metrics.stage_transition("web", "canary");
    metrics.stage_transition("web", "prod");
    metrics.stage_transition("api", "dev");
    metrics.apply_error("web");
    metrics.observe_promotion("web", &typed(&awaiting_approval_status()), now);
    metrics.observe_promotion("api", &typed(&progressing_status()), now);
    metrics.webhook("github", "accepted");
    metrics.webhook("gitlab", "bad_signature");
}

// ---------------------------------------------------------------------------------------------
// /metrics

/// The names and labels of every sample of a scrape (values move with the clock).
fn sample_keys(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' ').map(|(key, _)| key.to_string()))
        .collect()
}

async fn get_with(router: &Router, path: &str, accept_encoding: &str) -> (HeaderMap, Vec<u8>) {
    let request = Request::get(path)
        .header("accept-encoding", accept_encoding)
        .body(Body::empty())
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.expect("body");
    (headers, body.to_bytes().to_vec())
}

/// Prometheus asks for gzip: the scrape is the same exposition, compressed; a scraper that
/// refuses gzip (`q=0`) or names only others gets the text.
#[tokio::test]
async fn metrics_are_gzipped_for_a_scraper_that_accepts_it_and_only_then() {
    use std::io::Read;
    let h = harness();
    record_everything(&h.metrics);
    let (_, _, plain) = get(&h.router, "/metrics").await;
    let (headers, body) = get_with(&h.router, "/metrics", "gzip").await;
    assert_eq!(
        headers
            .get("content-encoding")
            .and_then(|v| v.to_str().ok()),
        Some("gzip")
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(&body[..])
        .read_to_string(&mut text)
        .expect("a gzip stream");
    parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(sample_keys(&text), sample_keys(&plain));
    assert!(body.len() < text.len(), "{} bytes gzipped", body.len());
    for refused in [
        "gzip;q=0",
        "gzip; q=0.000",
        "identity",
        "br, deflate",
        "x-gzip-not",
    ] {
        let (headers, body) = get_with(&h.router, "/metrics", refused).await;
        assert!(headers.get("content-encoding").is_none(), "{refused}");
        assert_eq!(
            sample_keys(&String::from_utf8(body).expect("text")),
            sample_keys(&plain),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn metrics_parse_as_openmetrics_with_every_family() {
    let h = harness();
    record_everything(&h.metrics);
    let (status, headers, text) = get(&h.router, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let m = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));

    for (family, kind) in [
        ("tollgate_reconciles", "counter"),
        ("tollgate_git_syncs", "counter"),
        ("tollgate_git_sync_duration_seconds", "histogram"),
        ("tollgate_stage_transitions", "counter"),
        ("tollgate_apply_errors", "counter"),
        ("tollgate_promotion_current_stage_index", "gauge"),
        ("tollgate_promotion_phase", "gauge"),
        ("tollgate_stage_activity", "gauge"),
        ("tollgate_promotion_time_in_stage_seconds", "gauge"),
        ("tollgate_promotion_approval_wait_seconds", "gauge"),
        ("tollgate_webhook_requests", "counter"),
        ("tollgate_leader", "gauge"),
    ] {
        let f = m.family(family);
        assert_eq!(f.kind, kind, "{family}");
        assert!(
            f.help.as_deref().is_some_and(|h| !h.is_empty()),
            "{family} has help"
        );
    }
    assert_eq!(
        m.family("tollgate_git_sync_duration_seconds")
            .unit
            .as_deref(),
        Some("seconds")
    );

    assert_eq!(
        m.value("tollgate_reconciles_total", &[("result", "ok")]),
        Some(2.0)
    );
    assert_eq!(
        m.value("tollgate_reconciles_total", &[("result", "error")]),
        Some(1.0)
    );
    assert_eq!(
        m.value("tollgate_git_syncs_total", &[("result", "ok")]),
        Some(1.0)
    );
    assert_eq!(
        m.value("tollgate_git_syncs_total", &[("result", "error")]),
        Some(1.0)
    );
    assert_eq!(
        m.value("tollgate_git_sync_duration_seconds_count", &[]),
        Some(2.0)
    );
    assert_eq!(
        m.value("tollgate_git_sync_duration_seconds_sum", &[]),
        Some(3.12)
    );
    let buckets = m.samples("tollgate_git_sync_duration_seconds_bucket");
    assert!(buckets.iter().all(|b| b.labels.contains_key("le")));
    assert_eq!(
        m.value(
            "tollgate_git_sync_duration_seconds_bucket",
            &[("le", "+Inf")]
        ),
        Some(2.0)
    );

    assert_eq!(
        m.value(
            "tollgate_stage_transitions_total",
            &[("promotion", "web"), ("stage", "prod")]
        ),
        Some(1.0)
    );
    assert_eq!(
        m.value("tollgate_apply_errors_total", &[("promotion", "web")]),
        Some(1.0)
    );
    assert_eq!(
        m.value(
            "tollgate_promotion_current_stage_index",
            &[("promotion", "web")]
        ),
        Some(1.0)
    );
    assert_eq!(
        m.value(
            "tollgate_promotion_current_stage_index",
            &[("promotion", "api")]
        ),
        Some(0.0)
    );

    // One series per phase and promotion; exactly the current phase is 1.
    for (promotion, current) in [("web", "Waiting"), ("api", "Progressing")] {
        let series: Vec<&Sample> = m
            .samples("tollgate_promotion_phase")
            .into_iter()
            .filter(|s| s.labels.get("promotion").is_some_and(|p| p == promotion))
            .collect();
        assert_eq!(series.len(), ALL_PHASES.len(), "{promotion}");
        let on: Vec<&str> = series
            .iter()
            .filter(|s| s.value == 1.0)
            .filter_map(|s| s.labels.get("phase").map(String::as_str))
            .collect();
        assert_eq!(on, vec![current], "{promotion}");
        let phases: BTreeSet<&str> = series
            .iter()
            .filter_map(|s| s.labels.get("phase").map(String::as_str))
            .collect();
        assert_eq!(phases.len(), ALL_PHASES.len());
    }

    // Durations are computed at scrape time (live, not frozen at the last step): measured from
    // the status's instants up to now, so only their differences are fixed.
    let value = |family: &str, promotion: &str| {
        m.value(family, &[("promotion", promotion)])
            .unwrap_or_else(|| panic!("{family} for {promotion}"))
    };
    let in_stage_web = value("tollgate_promotion_time_in_stage_seconds", "web");
    let in_stage_api = value("tollgate_promotion_time_in_stage_seconds", "api");
    let approval_web = value("tollgate_promotion_approval_wait_seconds", "web");
    assert!(in_stage_web >= 90.0, "{in_stage_web}");
    assert!(
        (in_stage_web - in_stage_api - 60.0).abs() < 1.0,
        "{in_stage_web} {in_stage_api}"
    );
    // Waiting since the description's stamp (10:01:00), not since the stage started.
    assert!(
        (in_stage_web - approval_web - 60.0).abs() < 1.0,
        "{in_stage_web} {approval_web}"
    );
    assert_eq!(
        m.value(
            "tollgate_promotion_approval_wait_seconds",
            &[("promotion", "api")]
        ),
        None,
        "a promotion not waiting for approval has no approval-wait series"
    );

    assert_eq!(
        m.value(
            "tollgate_webhook_requests_total",
            &[("provider", "gitlab"), ("result", "bad_signature")]
        ),
        Some(1.0)
    );
    assert_eq!(m.value("tollgate_leader", &[]), Some(1.0));
}

#[tokio::test]
async fn leader_gauge_follows_the_gate_at_scrape_time() {
    let h = harness();
    h.leader.set(false);
    let (_, _, text) = get(&h.router, "/metrics").await;
    let m = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(m.value("tollgate_leader", &[]), Some(0.0));
    h.leader.set(true);
    let (_, _, text) = get(&h.router, "/metrics").await;
    let m = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(m.value("tollgate_leader", &[]), Some(1.0));
}

#[tokio::test]
async fn forgetting_a_promotion_removes_all_its_series() {
    let h = harness();
    record_everything(&h.metrics);
    h.metrics.forget_promotion("web");
    let (_, _, text) = get(&h.router, "/metrics").await;
    let m = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(!m.mentions("promotion", "web"), "{text}");
    assert!(m.mentions("promotion", "api"));
    assert_eq!(
        m.value(
            "tollgate_stage_transitions_total",
            &[("promotion", "api"), ("stage", "dev")]
        ),
        Some(1.0)
    );
}

#[tokio::test]
async fn approval_wait_series_goes_away_once_approved() {
    let h = harness();
    let now = at("2026-11-20T10:01:30Z");
    h.metrics
        .observe_promotion("web", &typed(&awaiting_approval_status()), now);
    let mut approved = awaiting_approval_status();
    approved["phase"] = json!("Completed");
    approved["stages"][1]["currentStatusDescription"] =
        json!("Successfully provisioned (2026-11-20T10:05:00Z)");
    approved["stages"][1]
        .as_object_mut()
        .expect("stage")
        .remove("awaitingApprovalSince");
    approved["stages"][1]["activity"] = json!({"kind": "Completed"});
    h.metrics.observe_promotion("web", &typed(&approved), now);
    let (_, _, text) = get(&h.router, "/metrics").await;
    let m = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(
        m.value(
            "tollgate_promotion_approval_wait_seconds",
            &[("promotion", "web")]
        ),
        None
    );
    assert_eq!(
        m.value(
            "tollgate_promotion_phase",
            &[("promotion", "web"), ("phase", "Completed")]
        ),
        Some(1.0)
    );
    // The stage's activity series moved with it: no series still says it awaits approval.
    let activity = |kind: &str| {
        m.value(
            "tollgate_stage_activity",
            &[("promotion", "web"), ("stage", "prod"), ("activity", kind)],
        )
    };
    assert_eq!(activity("Completed"), Some(1.0));
    assert_eq!(activity("AwaitingApproval"), None);
}

#[tokio::test]
async fn empty_metrics_still_parse() {
    let h = harness();
    let (_, _, text) = get(&h.router, "/metrics").await;
    let m = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(m.family("tollgate_leader").kind, "gauge");
}

// ---------------------------------------------------------------------------------------------
// Probes

#[tokio::test]
async fn healthz_answers_ok() {
    let h = harness();
    let (status, _, text) = get(&h.router, "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text.trim(), "ok");
}

#[tokio::test]
async fn readyz_flips_from_503_to_200_when_ready() {
    let h = harness();
    let (status, _, text) = get(&h.router, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(text.contains("git sync"), "{text}");
    // Liveness does not wait for readiness.
    assert_eq!(get(&h.router, "/healthz").await.0, StatusCode::OK);
    h.ready.send(true).expect("receiver alive");
    let (status, _, _) = get(&h.router, "/readyz").await;
    assert_eq!(status, StatusCode::OK);
}

/// A controller waiting for its management cluster (a restart, missing RBAC or CRD) is alive but
/// not ready, and `/readyz` says what it waits for and what fixes it, whatever the other flags.
#[tokio::test]
async fn readyz_says_what_a_starting_controller_waits_for_and_the_fix() {
    use tollgate::controller::Startup;
    let (mut state, ready, _, _) = state_with(Vec::new());
    let (startup_tx, startup) = watch::channel(Startup::Connecting);
    state.startup = startup;
    let router = router(state, &ServerConfig::new(([127, 0, 0, 1], 0).into()));
    ready.send(true).expect("receiver alive");
    let (status, _, text) = get(&router, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        text.contains("connecting to the management cluster"),
        "{text}"
    );
    startup_tx.send_replace(Startup::Waiting {
        cause: "RBAC forbids tollgate to list clusterprofiles".into(),
        fix: "apply the ClusterRole".into(),
    });
    let (status, _, text) = get(&router, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        text.contains("RBAC forbids tollgate to list clusterprofiles")
            && text.contains("fix: apply the ClusterRole"),
        "{text}"
    );
    assert_eq!(get(&router, "/healthz").await.0, StatusCode::OK);
    startup_tx.send_replace(Startup::Started);
    assert_eq!(get(&router, "/readyz").await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_watch_failing_beyond_its_grace_makes_the_replica_unready_and_says_why() {
    let h = harness();
    h.ready.send(true).expect("receiver alive");
    h.watch_health.set(
        "clustersummaries",
        Some("the server could not find the requested resource".into()),
    );
    let (status, _, text) = get(&h.router, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        text.contains("clustersummaries") && text.contains("could not find"),
        "{text}"
    );
    let (_, _, metrics) = get(&h.router, "/metrics").await;
    let m = parse_exposition(&metrics).unwrap_or_else(|e| panic!("{e}\n{metrics}"));
    assert_eq!(
        m.value(
            "tollgate_watch_failing",
            &[("resource", "clustersummaries")]
        ),
        Some(1.0)
    );
    h.watch_health.set("clustersummaries", None);
    assert_eq!(get(&h.router, "/readyz").await.0, StatusCode::OK);
    let (_, _, metrics) = get(&h.router, "/metrics").await;
    let m = parse_exposition(&metrics).unwrap_or_else(|e| panic!("{e}\n{metrics}"));
    assert_eq!(
        m.value(
            "tollgate_watch_failing",
            &[("resource", "clustersummaries")]
        ),
        Some(0.0)
    );
}

// ---------------------------------------------------------------------------------------------
// Status API

fn with_statuses() -> Harness {
    harness_with(
        vec![
            ("web".to_string(), awaiting_approval_status()),
            ("api".to_string(), progressing_status()),
        ],
        WebhookSecrets::default(),
    )
}

#[tokio::test]
async fn promotions_list_summarizes_each_promotion_sorted_by_name() {
    let h = with_statuses();
    let (status, headers, text) = get(&h.router, "/api/v1/promotions").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let list: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        list,
        json!([
            {
                "name": "api",
                "phase": "Progressing",
                "currentStage": "dev",
                "snapshotIndex": 2,
                "message": "provisioning stage dev",
            },
            {
                "name": "web",
                "phase": "Waiting",
                "currentStage": "prod",
                "snapshotIndex": 4,
                "message": "waiting for approval of stage prod",
            }
        ])
    );
}

#[tokio::test]
async fn promotion_detail_is_the_full_status_and_unknown_is_404() {
    let h = with_statuses();
    let (status, _, text) = get(&h.router, "/api/v1/promotions/web").await;
    assert_eq!(status, StatusCode::OK);
    let detail: Value = serde_json::from_str(&text).expect("JSON");
    // The engine's typed status, serialized: what the GitPromotion holds.
    let expected = serde_json::to_value(typed(&awaiting_approval_status())).expect("status");
    assert_eq!(detail, expected);

    let (status, _, text) = get(&h.router, "/api/v1/promotions/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let error: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(error["name"], json!("nope"));
}

#[tokio::test]
async fn status_api_is_read_only() {
    let h = with_statuses();
    for method in ["POST", "PUT", "PATCH", "DELETE"] {
        for path in ["/api/v1/promotions", "/api/v1/promotions/web"] {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .body(Body::from("{}"))
                .expect("request");
            let (status, _, _) = call(&h.router, request).await;
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        }
    }
    assert!(!h.poker.take());
}

#[tokio::test]
async fn empty_status_list_is_an_empty_json_array() {
    let h = harness();
    let (status, _, text) = get(&h.router, "/api/v1/promotions").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("JSON"),
        json!([])
    );
}

// ---------------------------------------------------------------------------------------------
// Secrets

const SECRETS: [&str; 4] = [
    "github-secret-e1c4f0",
    "gitlab-secret-77ab19",
    "gitea-secret-3d9e52",
    "generic-secret-a0f6c8",
];

fn secrets() -> WebhookSecrets {
    tollgate::server::Provider::ALL
        .into_iter()
        .zip(SECRETS)
        .fold(WebhookSecrets::default(), |secrets, (provider, secret)| {
            secrets.with(provider, Secret::new(secret))
        })
}

#[test]
fn config_debug_never_shows_webhook_secrets() {
    let mut config = ServerConfig::new(([127, 0, 0, 1], 8080).into());
    config.webhooks = secrets();
    for text in [format!("{config:?}"), format!("{config:#?}")] {
        for secret in SECRETS {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(text.contains("<redacted>"), "{text}");
    }
}

#[tokio::test]
async fn no_response_ever_contains_a_webhook_secret() {
    let h = harness_with(
        vec![("web".to_string(), awaiting_approval_status())],
        secrets(),
    );
    let body = br#"{"ref":"refs/heads/main"}"#.to_vec();
    let mut requests = Vec::new();
    for (path, header, value) in [
        (
            "/webhooks/github",
            "x-hub-signature-256",
            format!("sha256={}", hmac_sha256_hex(SECRETS[0].as_bytes(), &body)),
        ),
        (
            "/webhooks/github",
            "x-hub-signature-256",
            "sha256=00".to_string(),
        ),
        ("/webhooks/gitlab", "x-gitlab-token", SECRETS[1].to_string()),
        ("/webhooks/gitlab", "x-gitlab-token", "wrong".to_string()),
        (
            "/webhooks/gitea",
            "x-gitea-signature",
            hmac_sha256_hex(SECRETS[2].as_bytes(), &body),
        ),
        ("/webhooks/gitea", "x-gitea-signature", "zz".to_string()),
        (
            "/webhooks/generic",
            "x-tollgate-signature",
            format!("sha256={}", hmac_sha256_hex(SECRETS[3].as_bytes(), &body)),
        ),
        (
            "/webhooks/generic",
            "x-tollgate-signature",
            "nope".to_string(),
        ),
    ] {
        let event = if path.ends_with("gitlab") {
            "Push Hook"
        } else {
            "push"
        };
        requests.push(
            Request::post(path)
                .header(header, value)
                .header("x-github-event", event)
                .header("x-gitlab-event", event)
                .header("x-gitea-event", event)
                .body(Body::from(body.clone()))
                .expect("request"),
        );
    }
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/v1/promotions",
        "/api/v1/promotions/web",
    ] {
        requests.push(Request::get(path).body(Body::empty()).expect("request"));
    }
    let mut accepted = 0;
    for request in requests {
        let path = request.uri().path().to_string();
        let (status, headers, text) = call(&h.router, request).await;
        if status == StatusCode::ACCEPTED {
            accepted += 1;
        }
        let header_text = format!("{headers:?}");
        for secret in SECRETS {
            assert!(!text.contains(secret), "{path} body leaks a secret");
            assert!(
                !header_text.contains(secret),
                "{path} headers leak a secret"
            );
        }
    }
    assert_eq!(accepted, 4, "each provider's valid request was accepted");
    let (_, _, metrics) = get(&h.router, "/metrics").await;
    for secret in SECRETS {
        assert!(!metrics.contains(secret));
    }
}

// ---------------------------------------------------------------------------------------------
// A real socket

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("read response");
    response
}

#[tokio::test]
async fn serves_http_on_loopback_and_shuts_down_cleanly() {
    let (state, ready, _metrics, _leader) = state_with(Vec::new());
    let poker = state.poker.clone();
    let mut config = ServerConfig::new(([127, 0, 0, 1], 0).into());
    config.webhooks = secrets();
    let server = bind(&config, state).await.expect("bind 127.0.0.1:0");
    let addr = server.local_addr();
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stop_rx.await;
    }));

    let health = http_get(addr, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.ends_with("ok\n"), "{health}");
    let not_ready = http_get(addr, "/readyz").await;
    assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
    ready.send(true).expect("receiver alive");
    let now_ready = http_get(addr, "/readyz").await;
    assert!(now_ready.starts_with("HTTP/1.1 200"), "{now_ready}");

    // A signed GitLab push over the wire pokes the source.
    let body = r#"{"object_kind":"push","ref":"refs/heads/main"}"#;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "POST /webhooks/gitlab HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nX-Gitlab-Event: Push Hook\r\nX-Gitlab-Token: {}\r\nContent-Length: {}\r\n\r\n{body}",
        SECRETS[1],
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    assert!(response.starts_with("HTTP/1.1 202"), "{response}");
    assert!(poker.take());

    stop_tx.send(()).expect("server still running");
    let result = task.await.expect("server task did not panic");
    assert!(result.is_ok(), "{result:?}");
    // Binding the address proves nobody listens on it any more. A connect alone would not: on
    // loopback it can pick the same ephemeral port as its source and connect to itself. But the
    // freed port is an ephemeral port again, and a parallel test's connection may hold it as its
    // source (the bind then fails though nothing listens; seen once in a full suite run): then a
    // refused connect proves it (the port is taken, so it cannot be this connect's source).
    let closed =
        std::net::TcpListener::bind(addr).is_ok() || std::net::TcpStream::connect(addr).is_err();
    assert!(closed, "the listener is closed after shutdown");
}

#[tokio::test]
async fn binding_a_taken_port_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let (state, _ready, _metrics, _leader) = state_with(Vec::new());
    let config = ServerConfig::new(addr);
    let error = match bind(&config, state).await {
        Ok(_) => panic!("bound a taken port"),
        Err(error) => error,
    };
    assert!(error.to_string().contains(&addr.to_string()), "{error}");
}
