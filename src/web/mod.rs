//! The web view (issue #35): server-rendered pages of every rollout under `/ui`, live through
//! server-sent events, with action buttons that commit to git (never to the management cluster).
//! Served by the controller (`run --ui`) or by `tollgate ui` on a workstation. No login of its
//! own: loopback by default, an optional bearer token, documented for use behind
//! `kubectl port-forward` or an authenticating proxy (docs/web.md). It answers only its own
//! origin: a Host allow-list, same-origin POSTs, no framing (issue #44 item 9).

pub mod actions;
mod auth;
mod broadcast;
mod delivery_view;
pub mod git_view;
mod handlers;
mod hosts;
mod links;
mod live;
mod origin;
mod overview;
mod page;
mod promotion;
pub mod pull_request;
mod security_headers;
mod signed_gates;
pub mod source;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{any, get};
use tollgate_source::Secret;

use git_view::{GitFacts, GitView, RepoTarget};
use pull_request::PullRequests;
use source::{Listed, PromotionSource};

pub use hosts::{AllowedHost, ServedOn};
pub use promotion::pipeline_of;
pub use security_headers::CONTENT_SECURITY_POLICY;

/// What the web view serves from and commits to.
pub struct WebConfig {
    pub source: PromotionSource,
    /// The clone the action buttons commit in (`--repo`); without one the buttons only show the
    /// commit and the command.
    pub repo: Option<RepoTarget>,
    /// Requests must carry it (`Authorization: Bearer`, or the cookie the login form sets).
    pub token: Option<Secret>,
    /// Open a pull request for each commit (`--ui-git-host`).
    pub pull_requests: Option<PullRequests>,
    /// Names besides the address a connection reached that requests may give as `Host`
    /// (`--ui-allowed-host`: the name a proxy or ingress serves the web view under).
    pub allowed_hosts: Vec<AllowedHost>,
}

/// What every handler sees.
pub(crate) struct Web {
    source: PromotionSource,
    git: Option<GitView>,
    token: Option<Secret>,
    pull_requests: Option<PullRequests>,
    allowed_hosts: Vec<AllowedHost>,
    /// One commit at a time: two presses must not race for the same branch.
    commit_lock: tokio::sync::Mutex<()>,
    /// The live streams' renderers, one per stream whatever the number of viewers.
    broadcast: broadcast::Broadcast,
}

type WebState = Arc<Web>;

impl Web {
    /// Every promotion, with the labels of its ClusterPromotion in git when a repository is
    /// configured, and the facts read from git (blocking: call from a blocking task).
    fn read(&self) -> (Vec<Listed>, Arc<BTreeMap<String, GitFacts>>) {
        let facts = self.git.as_ref().map(GitView::facts).unwrap_or_default();
        let mut listed = (self.source)();
        for promotion in &mut listed {
            if let Some(facts) = facts.get(&promotion.name) {
                promotion
                    .labels
                    .extend(facts.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        (listed, facts)
    }

    fn commit_url(&self, sha: &str) -> Option<String> {
        self.git.as_ref().and_then(|git| git.commit_url(sha))
    }
}

/// The routes under `/ui`, to merge into a server's router. Serve it with
/// `into_make_service_with_connect_info::<ServedOn>()`: the Host allow-list admits the address
/// each connection reached only when it knows that address.
pub fn router(config: WebConfig) -> Router {
    let web: WebState = Arc::new(Web {
        source: config.source,
        git: config.repo.map(GitView::new),
        token: config.token,
        pull_requests: config.pull_requests,
        allowed_hosts: config.allowed_hosts,
        commit_lock: tokio::sync::Mutex::new(()),
        broadcast: broadcast::Broadcast::default(),
    });
    let pages = Router::new()
        .route("/ui", get(handlers::overview))
        .route("/ui/", get(handlers::overview))
        .route("/ui/promotions/{name}", get(handlers::promotion))
        .route(
            "/ui/promotions/{name}/timeline.svg",
            get(handlers::timeline),
        )
        .route(
            "/ui/promotions/{name}/actions",
            axum::routing::post(handlers::act),
        )
        .route("/ui/events/overview", get(live::overview))
        .route("/ui/events/promotions/{name}", get(live::promotion))
        .route_layer(axum::middleware::from_fn_with_state(
            web.clone(),
            auth::require,
        ));
    // Every path under /ui is a route here (unknown ones answer 404), so that the checks below
    // cover all of them: the last layer added runs first.
    Router::new()
        .merge(pages)
        .route("/ui/static/{file}", get(handlers::asset))
        .route("/ui/login", get(auth::login_form).post(auth::login))
        .route("/ui/{*rest}", any(|| async { StatusCode::NOT_FOUND }))
        .route_layer(axum::middleware::from_fn(origin::require))
        .route_layer(axum::middleware::from_fn_with_state(
            web.clone(),
            hosts::require,
        ))
        .route_layer(axum::middleware::from_fn(security_headers::add))
        .with_state(web)
}

#[cfg(test)]
mod tests;
