//! Webhook receivers through the router: only an authenticated push to the tracked branch pokes
//! the git source; everything else is refused or ignored and changes nothing.

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use futures::StreamExt;
use http_body_util::BodyExt;
use tokio::sync::watch;
use tollgate::cluster::fetch_request::{FetchRelay, start_relay};
use tollgate::cluster::leader::LeaderGate;
use tollgate::metrics::Metrics;
use tollgate::outbound::signature::hmac_sha256_hex;
use tollgate::server::{Provider, ServerConfig, ServerState, WebhookSecrets, router};
use tollgate_source::{Poker, Secret};
use tower::ServiceExt;

const GITHUB_SECRET: &str = "gh-webhook-secret-7f3a";
const GITLAB_SECRET: &str = "gl-token-51c9";
const GITEA_SECRET: &str = "gitea-secret-0be2";
const GENERIC_SECRET: &str = "generic-secret-9d41";

struct Harness {
    router: Router,
    poker: Poker,
    metrics: Arc<Metrics>,
}

fn harness(secrets: WebhookSecrets, max_body_bytes: usize) -> Harness {
    harness_on(secrets, max_body_bytes, LeaderGate::always(), None)
}

/// A replica leading or not (`leader`), relaying to the leader through `fetch_relay`.
fn harness_on(
    secrets: WebhookSecrets,
    max_body_bytes: usize,
    leader: LeaderGate,
    fetch_relay: Option<FetchRelay>,
) -> Harness {
    let poker = Poker::new();
    let metrics = Arc::new(Metrics::new());
    let (_ready_tx, ready) = watch::channel(true);
    let state = ServerState {
        metrics: metrics.clone(),
        ready,
        startup: watch::channel(tollgate::controller::Startup::Started).1,
        poker: poker.clone(),
        statuses: Arc::new(|_| Vec::new()),
        leader,
        fetch_relay,
        branch: "main".to_string(),
        watch_health: Default::default(),
    };
    let mut config = ServerConfig::new(([127, 0, 0, 1], 0).into());
    config.webhooks = secrets;
    config.max_body_bytes = max_body_bytes;
    Harness {
        router: router(state, &config),
        poker,
        metrics,
    }
}

fn all_secrets() -> WebhookSecrets {
    WebhookSecrets::default()
        .with(Provider::GitHub, Secret::new(GITHUB_SECRET))
        .with(Provider::GitLab, Secret::new(GITLAB_SECRET))
        .with(Provider::Gitea, Secret::new(GITEA_SECRET))
        .with(Provider::Generic, Secret::new(GENERIC_SECRET))
}

fn configured() -> Harness {
    harness(all_secrets(), 1024 * 1024)
}

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/suite/fixtures/webhooks")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn with_ref(payload: &[u8], git_ref: &str) -> Vec<u8> {
    let mut value: serde_json::Value = serde_json::from_slice(payload).expect("fixture is JSON");
    value["ref"] = serde_json::Value::String(git_ref.to_string());
    serde_json::to_vec(&value).expect("serialize")
}

fn github_request(body: Vec<u8>, event: &str, signature: Option<String>) -> Request<Body> {
    let mut builder = Request::post("/webhooks/github")
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958");
    if let Some(signature) = signature {
        builder = builder.header("x-hub-signature-256", signature);
    }
    builder.body(Body::from(body)).expect("request")
}

fn github_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hmac_sha256_hex(secret.as_bytes(), body))
}

fn gitlab_request(body: Vec<u8>, event: &str, token: Option<&str>) -> Request<Body> {
    let mut builder = Request::post("/webhooks/gitlab")
        .header("content-type", "application/json")
        .header("x-gitlab-event", event)
        .header("x-gitlab-instance", "https://gitlab.acme.example");
    if let Some(token) = token {
        builder = builder.header("x-gitlab-token", token);
    }
    builder.body(Body::from(body)).expect("request")
}

fn gitea_request(body: Vec<u8>, event: &str, signature: Option<String>) -> Request<Body> {
    let mut builder = Request::post("/webhooks/gitea")
        .header("content-type", "application/json")
        .header("x-gitea-event", event)
        .header("x-gitea-delivery", "b7c5e8a2-4f7d-4c3e-9f1a-2d6b8e0c1a3f");
    if let Some(signature) = signature {
        builder = builder.header("x-gitea-signature", signature);
    }
    builder.body(Body::from(body)).expect("request")
}

fn generic_request(body: Vec<u8>, signature: Option<String>) -> Request<Body> {
    let mut builder = Request::post("/webhooks/generic");
    if let Some(signature) = signature {
        builder = builder.header("x-tollgate-signature", signature);
    }
    builder.body(Body::from(body)).expect("request")
}

async fn send(router: &Router, request: Request<Body>) -> (StatusCode, String) {
    let response: Response<Body> = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn webhook_count(metrics: &Metrics, provider: &str, result: &str) -> u64 {
    let wanted =
        format!("tollgate_webhook_requests_total{{provider=\"{provider}\",result=\"{result}\"}} ");
    metrics
        .encode()
        .lines()
        .find_map(|line| line.strip_prefix(&wanted))
        .map(|value| value.parse().expect("counter value"))
        .unwrap_or(0)
}

// ---- A standby ----

/// A verified webhook on a standby is handed to the relay, which keeps it until the leader has
/// it. A relay that cannot take it any more (its task is gone) must not be acknowledged and
/// dropped: 503, so the git host sends it again.
#[tokio::test]
async fn a_standby_that_cannot_keep_a_webhook_answers_503_for_the_git_host_to_retry() {
    // Never contacted: the relay's task is stopped before any request.
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
    let client = kube::Client::try_from(config).expect("client");
    let (relay, relay_task) =
        start_relay(client, "default", "tollgate-leader", LeaderGate::follower());
    relay_task.abort();
    let _ = relay_task.await;
    let h = harness_on(
        all_secrets(),
        1024 * 1024,
        LeaderGate::follower(),
        Some(relay),
    );
    let body = br#"{"ref": "refs/heads/main"}"#.to_vec();
    let signature = format!(
        "sha256={}",
        hmac_sha256_hex(GENERIC_SECRET.as_bytes(), &body)
    );
    let (status, text) = send(&h.router, generic_request(body, Some(signature))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
    assert!(text.contains("send the webhook again"), "{text}");
    assert_eq!(webhook_count(&h.metrics, "generic", "unavailable"), 1);
    assert_eq!(webhook_count(&h.metrics, "generic", "accepted"), 0);
}

// ---- GitHub ----

#[tokio::test]
async fn github_valid_push_to_tracked_branch_pokes() {
    let h = configured();
    let body = fixture("github_push.json");
    let signature = github_signature(GITHUB_SECRET, &body);
    let (status, text) = send(&h.router, github_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{text}");
    assert!(text.starts_with("accepted"), "{text}");
    assert!(h.poker.take());
    assert_eq!(webhook_count(&h.metrics, "github", "accepted"), 1);
}

#[tokio::test]
async fn github_wrong_signature_is_refused_and_does_not_poke() {
    let h = configured();
    let body = fixture("github_push.json");
    let signature = github_signature("not-the-secret", &body);
    let (status, _) = send(&h.router, github_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!h.poker.take());
    assert_eq!(webhook_count(&h.metrics, "github", "bad_signature"), 1);
}

#[tokio::test]
async fn github_signature_over_another_body_is_refused() {
    let h = configured();
    let body = fixture("github_push.json");
    let signature = github_signature(GITHUB_SECRET, &body);
    let tampered = with_ref(&body, "refs/heads/main");
    assert_ne!(tampered, body, "re-serialization changes the bytes");
    let (status, _) = send(&h.router, github_request(tampered, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn github_signature_without_sha256_prefix_is_refused() {
    let h = configured();
    let body = fixture("github_push.json");
    let bare_hex = hmac_sha256_hex(GITHUB_SECRET.as_bytes(), &body);
    let (status, _) = send(&h.router, github_request(body, "push", Some(bare_hex))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn github_missing_signature_is_refused_and_does_not_poke() {
    let h = configured();
    let (status, _) = send(
        &h.router,
        github_request(fixture("github_push.json"), "push", None),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!h.poker.take());
    assert_eq!(webhook_count(&h.metrics, "github", "missing_signature"), 1);
}

#[tokio::test]
async fn github_push_to_another_branch_is_ignored() {
    let h = configured();
    let body = with_ref(&fixture("github_push.json"), "refs/heads/feature/x");
    let signature = github_signature(GITHUB_SECRET, &body);
    let (status, text) = send(&h.router, github_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(text.starts_with("ignored"), "{text}");
    assert!(!h.poker.take());
    assert_eq!(webhook_count(&h.metrics, "github", "ignored"), 1);
}

#[tokio::test]
async fn github_tag_named_like_the_branch_is_ignored() {
    let h = configured();
    let body = with_ref(&fixture("github_push.json"), "refs/tags/main");
    let signature = github_signature(GITHUB_SECRET, &body);
    let (status, _) = send(&h.router, github_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn github_ping_answers_without_poking() {
    let h = configured();
    let body = br#"{"zen":"Keep it logically awesome.","hook_id":1}"#.to_vec();
    let signature = github_signature(GITHUB_SECRET, &body);
    let (status, text) = send(&h.router, github_request(body, "ping", Some(signature))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text.trim(), "pong");
    assert!(!h.poker.take());
}

#[tokio::test]
async fn github_other_event_is_ignored_even_when_signed() {
    let h = configured();
    let body = fixture("github_push.json");
    let signature = github_signature(GITHUB_SECRET, &body);
    let (status, _) = send(&h.router, github_request(body, "issues", Some(signature))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn github_unsigned_ping_is_refused() {
    let h = configured();
    let (status, _) = send(&h.router, github_request(b"{}".to_vec(), "ping", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn github_signed_garbage_is_a_bad_request_and_does_not_poke() {
    let h = configured();
    let body = b"ref=refs/heads/main".to_vec();
    let signature = github_signature(GITHUB_SECRET, &body);
    let (status, _) = send(&h.router, github_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(!h.poker.take());
}

// ---- GitLab ----

#[tokio::test]
async fn gitlab_valid_token_push_pokes() {
    let h = configured();
    let (status, text) = send(
        &h.router,
        gitlab_request(
            fixture("gitlab_push.json"),
            "Push Hook",
            Some(GITLAB_SECRET),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{text}");
    assert!(h.poker.take());
    assert_eq!(webhook_count(&h.metrics, "gitlab", "accepted"), 1);
}

#[tokio::test]
async fn gitlab_wrong_token_is_refused_and_does_not_poke() {
    let h = configured();
    for token in ["gl-token-51c8", "gl-token-51c9 ", "", "gl-token"] {
        let (status, _) = send(
            &h.router,
            gitlab_request(fixture("gitlab_push.json"), "Push Hook", Some(token)),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "token {token:?}");
    }
    assert!(!h.poker.take());
    assert_eq!(webhook_count(&h.metrics, "gitlab", "bad_signature"), 4);
}

#[tokio::test]
async fn gitlab_missing_token_is_refused_and_does_not_poke() {
    let h = configured();
    let (status, _) = send(
        &h.router,
        gitlab_request(fixture("gitlab_push.json"), "Push Hook", None),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn gitlab_push_to_another_branch_is_ignored() {
    let h = configured();
    let body = with_ref(&fixture("gitlab_push.json"), "refs/heads/develop");
    let (status, _) = send(
        &h.router,
        gitlab_request(body, "Push Hook", Some(GITLAB_SECRET)),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn gitlab_tag_push_hook_is_ignored() {
    let h = configured();
    let body = with_ref(&fixture("gitlab_push.json"), "refs/tags/v1.4.2");
    let (status, _) = send(
        &h.router,
        gitlab_request(body, "Tag Push Hook", Some(GITLAB_SECRET)),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(!h.poker.take());
}

// ---- Gitea ----

#[tokio::test]
async fn gitea_valid_signature_push_pokes() {
    let h = configured();
    let body = fixture("gitea_push.json");
    let signature = hmac_sha256_hex(GITEA_SECRET.as_bytes(), &body);
    let (status, text) = send(&h.router, gitea_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{text}");
    assert!(h.poker.take());
    assert_eq!(webhook_count(&h.metrics, "gitea", "accepted"), 1);
}

#[tokio::test]
async fn gitea_wrong_signature_is_refused_and_does_not_poke() {
    let h = configured();
    let body = fixture("gitea_push.json");
    // Signed with another provider's secret.
    let signature = hmac_sha256_hex(GITHUB_SECRET.as_bytes(), &body);
    let (status, _) = send(&h.router, gitea_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn gitea_missing_signature_is_refused_and_does_not_poke() {
    let h = configured();
    let (status, _) = send(
        &h.router,
        gitea_request(fixture("gitea_push.json"), "push", None),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn gitea_push_to_another_branch_is_ignored() {
    let h = configured();
    let body = with_ref(&fixture("gitea_push.json"), "refs/heads/staging");
    let signature = hmac_sha256_hex(GITEA_SECRET.as_bytes(), &body);
    let (status, _) = send(&h.router, gitea_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(!h.poker.take());
}

// ---- Generic ----

#[tokio::test]
async fn generic_signed_empty_body_pokes() {
    let h = configured();
    let signature = github_signature(GENERIC_SECRET, b"");
    let (status, _) = send(&h.router, generic_request(Vec::new(), Some(signature))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(h.poker.take());
}

#[tokio::test]
async fn generic_signed_ref_is_filtered_by_branch() {
    let h = configured();
    let other = br#"{"ref":"refs/heads/other"}"#.to_vec();
    let signature = github_signature(GENERIC_SECRET, &other);
    let (status, _) = send(&h.router, generic_request(other, Some(signature))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(!h.poker.take());

    let main = br#"{"ref":"refs/heads/main"}"#.to_vec();
    let signature = github_signature(GENERIC_SECRET, &main);
    let (status, _) = send(&h.router, generic_request(main, Some(signature))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(h.poker.take());
}

#[tokio::test]
async fn generic_wrong_or_missing_signature_is_refused() {
    let h = configured();
    let signature = github_signature(GITHUB_SECRET, b"");
    let (status, _) = send(&h.router, generic_request(Vec::new(), Some(signature))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = send(&h.router, generic_request(Vec::new(), None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!h.poker.take());
}

// ---- Limits and configuration ----

#[tokio::test]
async fn oversized_bodies_are_refused_with_413_for_every_provider() {
    let limit = 4 * 1024;
    let h = harness(all_secrets(), limit);
    let mut body = fixture("github_push.json");
    body.resize(limit + 1, b' ');
    let requests = [
        github_request(
            body.clone(),
            "push",
            Some(github_signature(GITHUB_SECRET, &body)),
        ),
        gitlab_request(body.clone(), "Push Hook", Some(GITLAB_SECRET)),
        gitea_request(
            body.clone(),
            "push",
            Some(hmac_sha256_hex(GITEA_SECRET.as_bytes(), &body)),
        ),
        generic_request(body.clone(), Some(github_signature(GENERIC_SECRET, &body))),
    ];
    for request in requests {
        let path = request.uri().path().to_string();
        let (status, _) = send(&h.router, request).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}");
    }
    assert!(!h.poker.take());
    for provider in ["github", "gitlab", "gitea", "generic"] {
        assert_eq!(
            webhook_count(&h.metrics, provider, "too_large"),
            1,
            "{provider}"
        );
    }
}

#[tokio::test]
async fn oversized_streamed_body_without_content_length_is_refused() {
    let limit = 1024;
    let h = harness(all_secrets(), limit);
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..8).map(|_| Ok(vec![b' '; 512])).collect();
    let body = Body::from_stream(futures::stream::iter(chunks));
    let request = Request::post("/webhooks/gitlab")
        .header("x-gitlab-event", "Push Hook")
        .header("x-gitlab-token", GITLAB_SECRET)
        .body(body)
        .expect("request");
    assert!(request.headers().get("content-length").is_none());
    let (status, _) = send(&h.router, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(!h.poker.take());
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_finishes_times_out_without_poking() {
    let h = configured();
    let first: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(b"{\"ref\":".to_vec())];
    let stalled = futures::stream::iter(first).chain(futures::stream::pending());
    let request = Request::post("/webhooks/gitlab")
        .header("x-gitlab-event", "Push Hook")
        .header("x-gitlab-token", GITLAB_SECRET)
        .body(Body::from_stream(stalled))
        .expect("request");
    // Paused time jumps to the read deadline once the body stalls.
    let (status, _) = send(&h.router, request).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert!(!h.poker.take());
    assert_eq!(webhook_count(&h.metrics, "gitlab", "timeout"), 1);
}

#[tokio::test]
async fn body_at_the_limit_is_accepted() {
    let body = fixture("gitlab_push.json");
    let h = harness(all_secrets(), body.len());
    let (status, _) = send(
        &h.router,
        gitlab_request(body, "Push Hook", Some(GITLAB_SECRET)),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(h.poker.take());
}

#[tokio::test]
async fn unconfigured_providers_answer_404_even_with_valid_looking_requests() {
    let h = harness(WebhookSecrets::default(), 1024 * 1024);
    let body = fixture("github_push.json");
    let requests = [
        github_request(
            body.clone(),
            "push",
            Some(github_signature(GITHUB_SECRET, &body)),
        ),
        gitlab_request(body.clone(), "Push Hook", Some(GITLAB_SECRET)),
        gitea_request(
            body.clone(),
            "push",
            Some(hmac_sha256_hex(GITEA_SECRET.as_bytes(), &body)),
        ),
        generic_request(Vec::new(), None),
    ];
    for request in requests {
        let path = request.uri().path().to_string();
        let (status, _) = send(&h.router, request).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    assert!(!h.poker.take());
    assert_eq!(webhook_count(&h.metrics, "github", "not_configured"), 1);
}

#[tokio::test]
async fn an_empty_secret_counts_as_not_configured() {
    let secrets = WebhookSecrets::default().with(Provider::GitHub, Secret::new(""));
    let h = harness(secrets, 1024 * 1024);
    let body = fixture("github_push.json");
    let signature = github_signature("", &body);
    let (status, _) = send(&h.router, github_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn only_the_configured_provider_is_open() {
    let secrets = WebhookSecrets::default().with(Provider::GitLab, Secret::new(GITLAB_SECRET));
    let h = harness(secrets, 1024 * 1024);
    let body = fixture("github_push.json");
    let signature = github_signature(GITLAB_SECRET, &body);
    let (status, _) = send(&h.router, github_request(body, "push", Some(signature))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(
        &h.router,
        gitlab_request(
            fixture("gitlab_push.json"),
            "Push Hook",
            Some(GITLAB_SECRET),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(h.poker.take());
}

#[tokio::test]
async fn webhooks_only_accept_post() {
    let h = configured();
    let request = Request::get("/webhooks/github")
        .body(Body::empty())
        .expect("request");
    let (status, _) = send(&h.router, request).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(!h.poker.take());
}

#[tokio::test]
async fn an_unknown_provider_is_not_found_and_pokes_nothing() {
    let h = configured();
    let request = Request::post("/webhooks/bitbucket")
        .body(Body::from("{}"))
        .expect("request");
    let (status, _) = send(&h.router, request).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!h.poker.take());
}
