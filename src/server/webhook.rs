//! Webhook receivers. A request may only ever ask for a git sync (a poke, relayed to the leader
//! when this replica is a standby): it never carries content tollgate acts on, so the worst a forged call could do is trigger a fetch, and
//! authentication makes even that impossible. Checks run cheapest and safest first: provider
//! configured, size, signature, then event and branch.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::Deserialize;
use tollgate_source::Secret;
use tracing::{debug, info, warn};

use super::AppState;
use crate::outbound::signature::{hmac_sha256_matches, token_matches};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Provider {
    GitHub,
    GitLab,
    Gitea,
    Generic,
}

impl Provider {
    pub const ALL: [Provider; 4] = [
        Provider::GitHub,
        Provider::GitLab,
        Provider::Gitea,
        Provider::Generic,
    ];

    /// The provider named `name` in a route (`/webhooks/{name}`).
    pub fn from_name(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The provider's name in routes and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Provider::GitHub => "github",
            Provider::GitLab => "gitlab",
            Provider::Gitea => "gitea",
            Provider::Generic => "generic",
        }
    }

    /// The header carrying the signature (or, for GitLab, the shared token).
    pub fn auth_header(self) -> &'static str {
        match self {
            Provider::GitHub => "x-hub-signature-256",
            Provider::GitLab => "x-gitlab-token",
            Provider::Gitea => "x-gitea-signature",
            Provider::Generic => "x-tollgate-signature",
        }
    }

    /// The header naming the event, for providers that send several kinds.
    pub fn event_header(self) -> Option<&'static str> {
        match self {
            Provider::GitHub => Some("x-github-event"),
            Provider::GitLab => Some("x-gitlab-event"),
            Provider::Gitea => Some("x-gitea-event"),
            Provider::Generic => None,
        }
    }

    pub fn push_event(self) -> &'static str {
        match self {
            Provider::GitLab => "Push Hook",
            _ => "push",
        }
    }

    /// Whether `value` of the auth header proves knowledge of `secret` for `body`.
    pub fn authenticates(self, secret: &Secret, body: &[u8], value: &str) -> bool {
        let key = secret.expose().as_bytes();
        match self {
            Provider::GitLab => token_matches(key, value.as_bytes()),
            Provider::Gitea => hmac_sha256_matches(key, body, value),
            Provider::GitHub | Provider::Generic => match value.strip_prefix("sha256=") {
                Some(hex) => hmac_sha256_matches(key, body, hex),
                None => false,
            },
        }
    }
}

/// How long a sender may take to deliver a body: a client trickling bytes must not hold a
/// connection (and its buffer) forever.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The outcome of one webhook request: its metric label, status and (secret-free) body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    Pong,
    IgnoredEvent,
    IgnoredRef,
    NotConfigured,
    TooLarge,
    Unreadable,
    Timeout,
    MissingSignature,
    BadSignature,
    BadPayload,
    /// Verified, but on a standby that cannot hand the fetch to the leader: refused so that
    /// the git host sends it again, rather than acknowledged and dropped.
    RelayUnavailable,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Pong | Outcome::IgnoredEvent | Outcome::IgnoredRef => "ignored",
            Outcome::NotConfigured => "not_configured",
            Outcome::TooLarge => "too_large",
            Outcome::Timeout => "timeout",
            Outcome::Unreadable | Outcome::BadPayload => "bad_payload",
            Outcome::MissingSignature => "missing_signature",
            Outcome::BadSignature => "bad_signature",
            Outcome::RelayUnavailable => "unavailable",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Outcome::Accepted | Outcome::IgnoredEvent | Outcome::IgnoredRef => StatusCode::ACCEPTED,
            Outcome::Pong => StatusCode::OK,
            Outcome::NotConfigured => StatusCode::NOT_FOUND,
            Outcome::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Outcome::Timeout => StatusCode::REQUEST_TIMEOUT,
            Outcome::Unreadable | Outcome::BadPayload => StatusCode::BAD_REQUEST,
            Outcome::MissingSignature | Outcome::BadSignature => StatusCode::UNAUTHORIZED,
            Outcome::RelayUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted: git sync requested\n",
            Outcome::Pong => "pong\n",
            Outcome::IgnoredEvent => "ignored: not a push event\n",
            Outcome::IgnoredRef => "ignored: not the tracked branch\n",
            Outcome::NotConfigured => "no webhook is configured for this provider\n",
            Outcome::TooLarge => "payload too large\n",
            Outcome::Timeout => "timed out reading the request body\n",
            Outcome::Unreadable => "cannot read the request body\n",
            Outcome::MissingSignature => "missing signature\n",
            Outcome::BadSignature => "invalid signature\n",
            Outcome::BadPayload => "invalid push payload: no ref\n",
            Outcome::RelayUnavailable => {
                "this replica cannot reach the leader now; send the webhook again\n"
            }
        }
    }
}

/// The one field of a push payload tollgate reads; GitHub, GitLab and Gitea all send it.
#[derive(Deserialize)]
struct PushPayload {
    #[serde(rename = "ref")]
    git_ref: Option<String>,
}

/// `POST /webhooks/{provider}`: one route for every provider in [`Provider::ALL`]; any other
/// name is not found.
pub(super) async fn receive_named(
    State(app): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match Provider::from_name(&name) {
        Some(provider) => receive(&app, provider, &headers, body).await,
        None => (StatusCode::NOT_FOUND, "no such webhook provider\n").into_response(),
    }
}

async fn receive(app: &AppState, provider: Provider, headers: &HeaderMap, body: Body) -> Response {
    let mut outcome = decide(app, provider, headers, body).await;
    if outcome == Outcome::Accepted {
        app.state.poker.poke();
        // A standby cannot write: the leader must fetch, and only a verified request may ask it.
        // The relay keeps the request until the leader has it; one it cannot take is refused.
        if let Some(relay) = &app.state.fetch_relay
            && !app.state.leader.is_leader()
            && relay.request().is_err()
        {
            outcome = Outcome::RelayUnavailable;
        }
    }
    app.state.metrics.webhook(provider.name(), outcome.label());
    match outcome {
        Outcome::Accepted => info!(provider = provider.name(), "webhook: git sync requested"),
        Outcome::MissingSignature
        | Outcome::BadSignature
        | Outcome::NotConfigured
        | Outcome::RelayUnavailable => {
            warn!(
                provider = provider.name(),
                result = outcome.label(),
                "webhook refused"
            )
        }
        _ => debug!(
            provider = provider.name(),
            result = outcome.label(),
            "webhook"
        ),
    }
    (outcome.status(), outcome.message()).into_response()
}

/// Everything short of the poke itself, so that no path but `Accepted` can trigger one.
async fn decide(app: &AppState, provider: Provider, headers: &HeaderMap, body: Body) -> Outcome {
    let Some(secret) = app.secret(provider) else {
        return Outcome::NotConfigured;
    };
    let body = match read_limited(body, headers, app.max_body_bytes).await {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    classify(provider, secret, headers, &body, &app.state.branch)
}

/// Judges a fully read request: signature first (nothing of an unauthenticated body is parsed),
/// then the event, then the pushed ref. Pure, so the fuzz targets and tests drive it directly.
pub fn classify(
    provider: Provider,
    secret: &Secret,
    headers: &HeaderMap,
    body: &[u8],
    branch: &str,
) -> Outcome {
    let Some(presented) = headers.get(provider.auth_header()) else {
        return Outcome::MissingSignature;
    };
    let Ok(presented) = presented.to_str() else {
        return Outcome::BadSignature;
    };
    if !provider.authenticates(secret, body, presented) {
        return Outcome::BadSignature;
    }
    if let Some(event_header) = provider.event_header() {
        let event = headers.get(event_header).and_then(|v| v.to_str().ok());
        match event {
            Some(event) if event == provider.push_event() => {}
            Some("ping") if provider == Provider::GitHub => return Outcome::Pong,
            _ => return Outcome::IgnoredEvent,
        }
    }
    let git_ref = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        match serde_json::from_slice::<PushPayload>(body) {
            Ok(payload) => payload.git_ref,
            Err(_) => return Outcome::BadPayload,
        }
    };
    match git_ref {
        Some(git_ref) if is_branch(&git_ref, branch) => Outcome::Accepted,
        Some(_) => Outcome::IgnoredRef,
        // The generic hook may be a bare "sync now" with no payload; providers always send a ref.
        None if provider == Provider::Generic => Outcome::Accepted,
        None => Outcome::BadPayload,
    }
}

fn is_branch(git_ref: &str, branch: &str) -> bool {
    git_ref
        .strip_prefix("refs/heads/")
        .is_some_and(|name| name == branch)
}

/// Reads at most `limit` bytes; a declared or actual larger body is refused without reading it all.
async fn read_limited(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, Outcome> {
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(Outcome::TooLarge);
    }
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, Limited::new(body, limit).collect());
    match read.await {
        Err(_elapsed) => Err(Outcome::Timeout),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
            Err(Outcome::TooLarge)
        }
        Ok(Err(_)) => Err(Outcome::Unreadable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_is_found_by_its_route_name() {
        for provider in Provider::ALL {
            assert_eq!(Provider::from_name(provider.name()), Some(provider));
        }
        assert_eq!(
            Provider::from_name("GitHub"),
            None,
            "route names are lower case"
        );
    }

    #[test]
    fn only_the_exact_branch_ref_matches() {
        assert!(is_branch("refs/heads/main", "main"));
        assert!(!is_branch("refs/heads/main2", "main"));
        assert!(!is_branch("refs/tags/main", "main"));
        assert!(!is_branch("main", "main"));
        assert!(is_branch("refs/heads/release/1.0", "release/1.0"));
    }

    #[test]
    fn every_refusal_maps_to_a_client_error() {
        for outcome in [
            Outcome::NotConfigured,
            Outcome::TooLarge,
            Outcome::Unreadable,
            Outcome::Timeout,
            Outcome::MissingSignature,
            Outcome::BadSignature,
            Outcome::BadPayload,
        ] {
            assert!(outcome.status().is_client_error(), "{outcome:?}");
        }
        // Not the sender's fault: a 5xx, which git hosts may send again.
        assert!(Outcome::RelayUnavailable.status().is_server_error());
    }

    #[test]
    fn github_and_generic_require_the_sha256_prefix() {
        let secret = Secret::new("k");
        let hex = crate::outbound::signature::hmac_sha256_hex(b"k", b"{}");
        assert!(Provider::GitHub.authenticates(&secret, b"{}", &format!("sha256={hex}")));
        assert!(!Provider::GitHub.authenticates(&secret, b"{}", &hex));
        assert!(Provider::Generic.authenticates(&secret, b"{}", &format!("sha256={hex}")));
        assert!(Provider::Gitea.authenticates(&secret, b"{}", &hex));
        assert!(!Provider::Gitea.authenticates(&secret, b"{}", &format!("sha256={hex}")));
    }
}
