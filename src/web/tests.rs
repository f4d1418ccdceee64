//! The web view's rules without a browser: which buttons a status offers and what they commit,
//! the overview's filter and order, the git host requests, and the access checks.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request as HttpRequest, StatusCode};
use serde_json::json;
use tollgate_engine::PromotionStatus;
use tower::ServiceExt as _;

use super::actions::{RepoState, Request, Tip, planned};
use super::overview::{Filter, select};
use super::source::Listed;

/// No branch taken, no annotation at the tip.
fn no_repo() -> RepoState<'static> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    RepoState {
        taken: &|_| false,
        tip: Tip {
            annotations: &NONE,
            trailer_approvals: &|_| None,
            approver: "",
            rollback_changes: &|_| None,
        },
    }
}
use super::{WebConfig, router};

fn stage(name: &str, activity: serde_json::Value) -> serde_json::Value {
    json!({
        "name": name, "activity": activity, "activitySince": "2026-01-01T00:00:00Z",
        "snapshotIndex": 3, "appliedAt": "2026-01-01T00:00:00Z", "appliedSpecHash": "h",
        "counts": {"members": 2, "matchingClusters": 2, "summaries": 2, "provisioned": 1, "failed": 0}
    })
}

fn status(phase: &str, stages: Vec<serde_json::Value>, runs: serde_json::Value) -> PromotionStatus {
    serde_json::from_value(json!({
        "hashScheme": 1, "phase": phase, "snapshotIndex": 3,
        "snapshotId": "0123456789abcdef0123456789abcdef", "snapshotCommit": "c".repeat(40),
        "stages": stages, "runs": runs,
    }))
    .expect("a status")
}

fn run(index: u64, outcome: &str) -> serde_json::Value {
    json!({"snapshotIndex": index, "commit": "abc1234", "startedAt": "2026-01-01T00:00:00Z", "outcome": outcome})
}

#[test]
fn a_waiting_gate_offers_approve_a_failed_stage_retry_and_completed_snapshots_rollback() {
    let status = status(
        "Waiting",
        vec![
            stage("dev", json!({"kind": "Failed", "reason": "budget spent"})),
            stage("prod", json!({"kind": "AwaitingApproval"})),
        ],
        json!([run(1, "Completed"), run(2, "RolledBack"), run(3, "Running")]),
    );
    let offered = planned("web", &status, no_repo());
    let approve = offered
        .iter()
        .find(|p| {
            p.request
                == Request::Approve {
                    stage: "prod".into(),
                }
        })
        .expect("Approve prod");
    assert_eq!(
        approve.diff,
        ["+ approve.tollgate.dev/prod: \"0123456789ab\""]
    );
    assert_eq!(approve.branch, "tollgate/approve-web-prod-0123456789ab");
    assert_eq!(approve.command, "tollgate approve web prod --snapshot '#3'");
    let retry = offered
        .iter()
        .find(|p| {
            p.request
                == Request::Retry {
                    stage: "dev".into(),
                }
        })
        .expect("Retry dev");
    assert_eq!(retry.diff, ["+ retry.tollgate.dev/dev: \"0123456789ab/1\""]);
    assert_eq!(retry.command, "tollgate retry web dev");
    assert_eq!(
        retry.branch,
        tollgate_source::edit_retry::retry_branch("web", "dev", &"c".repeat(40), 1),
        "the branch `tollgate retry` makes"
    );
    assert_eq!(retry.branch, "tollgate/retry-web-dev-ccccccc-1");
    let rollbacks: Vec<&Request> = offered
        .iter()
        .map(|p| &p.request)
        .filter(|r| matches!(r, Request::Rollback { .. }))
        .collect();
    assert_eq!(
        rollbacks,
        [&Request::Rollback { to: 1 }],
        "only completed content is restored"
    );
    assert_eq!(offered.last().map(|p| &p.request), Some(&Request::Pause));
}

#[test]
fn a_paused_promotion_offers_resume_and_nothing_to_approve_without_a_snapshot() {
    let mut paused = status(
        "Paused",
        vec![stage("prod", json!({"kind": "AwaitingApproval"}))],
        json!([]),
    );
    paused.snapshot_id = None;
    let offered = planned("web", &paused, no_repo());
    assert_eq!(
        offered.iter().map(|p| &p.request).collect::<Vec<_>>(),
        [&Request::Resume]
    );
    assert_eq!(offered[0].diff, ["+ tollgate.dev/paused: \"false\""]);
}

fn listed(name: &str, phase: &str, labels: &[(&str, &str)]) -> Listed {
    Listed {
        name: name.to_string(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        status: Ok(Some(Arc::new(status(phase, Vec::new(), json!([]))))),
    }
}

#[test]
fn the_overview_lists_failures_first_and_filters_by_phase_and_label() {
    let all = vec![
        listed("a", "Completed", &[("team", "web")]),
        listed("b", "Failed", &[("team", "api")]),
        listed("c", "Waiting", &[]),
        Listed {
            name: "d".into(),
            labels: BTreeMap::new(),
            status: Err("unreadable".into()),
        },
    ];
    let names = |filter: Filter| -> Vec<String> {
        select(all.clone(), &filter)
            .into_iter()
            .map(|l| l.name)
            .collect()
    };
    assert_eq!(names(Filter::default()), ["b", "d", "a", "c"]);
    let failed = Filter {
        phase: Some("Failed".into()),
        label: None,
    };
    assert_eq!(names(failed), ["b"]);
    let team = Filter {
        phase: None,
        label: Some("team=web".into()),
    };
    assert_eq!(names(team), ["a"]);
    let any_team = Filter {
        phase: Some(String::new()),
        label: Some("team".into()),
    };
    assert_eq!(names(any_team), ["b", "a"]);
}

fn app(token: Option<&str>) -> axum::Router {
    let source: super::source::PromotionSource = Arc::new(|| vec![listed("web", "Waiting", &[])]);
    router(WebConfig {
        source,
        repo: None,
        token: token.map(tollgate_source::Secret::new),
        pull_requests: None,
        allowed_hosts: Vec::new(),
    })
}

/// The address the test requests reached, as a real server's connection tells the router.
const SERVED_ON: &str = "127.0.0.1:8080";

fn served(mut request: HttpRequest<Body>) -> HttpRequest<Body> {
    let addr = SERVED_ON.parse().expect("an address");
    request
        .extensions_mut()
        .insert(axum::extract::ConnectInfo(super::ServedOn(addr)));
    request
}

async fn send(app: axum::Router, request: HttpRequest<Body>) -> (StatusCode, String) {
    let response = app.oneshot(served(request)).await.expect("a response");
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn get(path: &str) -> axum::http::request::Builder {
    HttpRequest::get(path).header("host", "127.0.0.1:8080")
}

#[tokio::test]
async fn with_a_token_pages_need_it_and_the_login_sets_a_strict_cookie() {
    let (status, body) = send(app(Some("s3cret")), get("/ui").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("Sign in") && !body.contains("s3cret"));
    let bearer = get("/ui")
        .header("authorization", "Bearer s3cret")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(app(Some("s3cret")), bearer).await.0, StatusCode::OK);
    let wrong = get("/ui")
        .header("cookie", "tollgate_ui_token=nope")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        send(app(Some("s3cret")), wrong).await.0,
        StatusCode::UNAUTHORIZED
    );
    let login = HttpRequest::post("/ui/login")
        .header("host", "127.0.0.1:8080")
        .header("origin", "http://127.0.0.1:8080")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from("token=s3cret"))
        .unwrap();
    let response = app(Some("s3cret"))
        .oneshot(served(login))
        .await
        .expect("a response");
    let cookie = response
        .headers()
        .get("set-cookie")
        .expect("a cookie")
        .to_str()
        .unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = get("/ui")
        .header("cookie", "a=b; tollgate_ui_token=s3cret")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(app(Some("s3cret")), cookie).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_cross_site_post_is_refused_and_without_a_repository_nothing_is_committed() {
    let form = |origin: &str| {
        HttpRequest::post("/ui/promotions/web/actions")
            .header("host", "127.0.0.1:8080")
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from("action=pause"))
            .unwrap()
    };
    assert_eq!(
        send(app(None), form("https://evil.example")).await.0,
        StatusCode::FORBIDDEN
    );
    let (status, body) = send(app(None), form("http://127.0.0.1:8080")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(body.contains("no repository configured"), "{body}");
}

#[tokio::test]
async fn the_pages_render_without_script_and_unknown_promotions_are_404() {
    let (status, body) = send(
        app(None),
        get("/ui/promotions/web").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    for part in [
        "id=\"pipeline\"",
        "id=\"actions\"",
        "aria-label=\"Pause web\"",
        "disabled",
    ] {
        assert!(body.contains(part), "{part} in {body}");
    }
    let (status, _) = send(
        app(None),
        get("/ui/promotions/nope").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, css) = send(
        app(None),
        get("/ui/static/tollgate.css").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        css.contains("@media"),
        "the one stylesheet has a phone layout"
    );
}

/// The page of promotion `web` with `status`, served without a repository.
async fn promotion_page(status: PromotionStatus) -> (StatusCode, String) {
    let status = Arc::new(status);
    let source: super::source::PromotionSource = Arc::new(move || {
        vec![Listed {
            name: "web".to_string(),
            labels: BTreeMap::new(),
            status: Ok(Some(status.clone())),
        }]
    });
    let app = router(WebConfig {
        source,
        repo: None,
        token: None,
        pull_requests: None,
        allowed_hosts: Vec::new(),
    });
    let page = get("/ui/promotions/web").body(Body::empty()).unwrap();
    send(app, page).await
}

#[tokio::test]
async fn without_a_repository_a_gate_under_an_approval_policy_shows_the_signed_command() {
    let mut prod = stage("prod", json!({"kind": "AwaitingApproval"}));
    prod["approvals"] = json!([]);
    let mut gated = status("Waiting", vec![prod], json!([]));
    gated.policy = serde_json::from_value(json!({"name": "gates", "version": "v"})).ok();
    let (status, body) = promotion_page(gated).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body.contains("data-action=\"approve\""), "{body}");
    assert!(body.contains("data-action=\"approve-signed\""), "{body}");
    assert!(
        body.contains("tollgate approve web prod --snapshot &#39;#3&#39;")
            || body.contains("tollgate approve web prod --snapshot '#3'"),
        "{body}"
    );
}

#[tokio::test]
async fn every_response_under_ui_carries_the_security_headers() {
    for (method, path, host, code) in [
        ("GET", "/ui", SERVED_ON, StatusCode::OK),
        ("GET", "/ui/static/live.js", SERVED_ON, StatusCode::OK),
        ("GET", "/ui/no-such-page", SERVED_ON, StatusCode::NOT_FOUND),
        ("GET", "/ui", "evil.example:8080", StatusCode::FORBIDDEN),
        // No Origin: refused, with the headers all the same.
        (
            "POST",
            "/ui/promotions/web/actions",
            SERVED_ON,
            StatusCode::FORBIDDEN,
        ),
    ] {
        let request = HttpRequest::builder()
            .method(method)
            .uri(path)
            .header("host", host)
            .body(Body::empty())
            .unwrap();
        let response = app(None)
            .oneshot(served(request))
            .await
            .expect("a response");
        assert_eq!(response.status(), code, "{method} {path} via {host}");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        assert_eq!(
            header("content-security-policy").as_deref(),
            Some(super::CONTENT_SECURITY_POLICY),
            "{method} {path} via {host}"
        );
        assert_eq!(header("x-frame-options").as_deref(), Some("DENY"));
        assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
        assert_eq!(header("referrer-policy").as_deref(), Some("same-origin"));
    }
}

#[tokio::test]
async fn without_a_host_header_the_request_authority_is_the_host_as_http2_sends_it() {
    let form = |authority: &str| {
        HttpRequest::post(format!("http://{authority}/ui/promotions/web/actions"))
            .header("origin", format!("http://{authority}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from("action=pause"))
            .unwrap()
    };
    let (status, body) = send(app(None), form(SERVED_ON)).await;
    assert_eq!(status, StatusCode::CONFLICT, "past both checks: {body}");
    let (status, _) = send(app(None), form("evil.example:8080")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_page_shows_a_refused_commit_and_the_quorum() {
    let mut prod = stage("prod", json!({"kind": "AwaitingApproval"}));
    prod["approvals"] = json!([
        {"kind": "Trailer", "sha": "a".repeat(40), "approver": "alice@example.com",
         "signature": "verified", "counts": true},
        {"kind": "Annotation", "sha": "b".repeat(40), "approver": "bob@example.com",
         "signature": "unsigned", "counts": false, "reason": "unsigned"}
    ]);
    prod["approvalsNeeded"] = json!(2);
    let mut gated = status("Waiting", vec![prod], json!([]));
    gated.conditions = serde_json::from_value(json!([{
        "type": "CommitVerified", "status": "False", "reason": "CommitNotVerified",
        "message": "commit 6666666 (\"web 6.6.6\" by Mallory) failed verification: unsigned",
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]))
    .expect("conditions");
    let (status, body) = promotion_page(gated).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Refused commit: commit 6666666"), "{body}");
    assert!(body.contains("1 of 2 approvals"), "{body}");
}
