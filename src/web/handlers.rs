//! The page handlers: overview, promotion, timeline picture, static files, and the actions.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use chrono::Utc;
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use tollgate_engine::PromotionStatus;

use super::actions::{self, Request};
use super::links;
use super::overview::{self, Filter};
use super::page::{self, frame, short};
use super::promotion::{self, PageInput};
use super::pull_request::{self, Change};
use super::signed_gates::{self, ApprovalRoute};
use super::{Web, WebState};
use crate::views::timeline::{Period, svg_of};

/// Runs a blocking read of the web view's sources (git is read with git2) off the runtime.
pub(super) async fn blocking<T: Send + 'static>(
    web: &WebState,
    read: impl FnOnce(&Web) -> T + Send + 'static,
) -> Result<T, Response> {
    let web = web.clone();
    tokio::task::spawn_blocking(move || read(&web))
        .await
        .map_err(|_| (StatusCode::INTERNAL_SERVER_ERROR, "the read failed").into_response())
}

pub(super) async fn overview(
    State(web): State<WebState>,
    Query(filter): Query<Filter>,
) -> Response {
    let (listed, _) = match blocking(&web, Web::read).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    let selected = overview::select(listed, &filter);
    let list = overview::list(&selected, Utc::now()).into_string();
    let seen = super::live::seen_query([("promotions", list.as_str())]);
    let events = format!("/ui/events/overview?{}&{seen}", filter.query());
    let body = html! {
        h1 { "Promotions" }
        (overview::filter_form(&filter))
        (PreEscaped(list))
    };
    Html(frame("Promotions", Some(&events), body).into_string()).into_response()
}

/// Why a promotion cannot be shown: answered as a 404 page.
pub(super) struct Missing {
    name: String,
    message: String,
}

impl IntoResponse for Missing {
    fn into_response(self) -> Response {
        let Missing { name, message } = self;
        let body = html! { h1 { (name) } p.notice.error role="alert" { (message) } p { a href="/ui" { "All promotions" } } };
        (
            StatusCode::NOT_FOUND,
            Html(frame(&name, None, body).into_string()),
        )
            .into_response()
    }
}

/// The promotion's status, or why there is none.
fn found(listed: Vec<super::source::Listed>, name: &str) -> Result<Arc<PromotionStatus>, Missing> {
    let missing = |message: String| Missing {
        name: name.to_string(),
        message,
    };
    match listed.into_iter().find(|l| l.name == name) {
        None => Err(missing(format!("No promotion named {name}."))),
        Some(l) => match l.status {
            Ok(Some(status)) => Ok(status),
            Ok(None) => Err(missing(format!("{name} has no status yet."))),
            Err(error) => Err(missing(format!(
                "The status of {name} is unreadable: {error}"
            ))),
        },
    }
}

/// The promotion page's fragments (shared with its live events).
pub(super) fn promotion_fragments(
    web: &Web,
    name: &str,
) -> Result<Vec<(&'static str, Markup)>, Missing> {
    let (listed, facts) = web.read();
    let status = found(listed, name)?;
    let commit_url = |sha: &str| web.commit_url(sha);
    let git = web
        .git
        .as_ref()
        .map(|_| facts.get(name).cloned().unwrap_or_default());
    let action_repo = web
        .git
        .as_ref()
        .map(|git| git.target.action_repo())
        .unwrap_or_default();
    let input = PageInput {
        name,
        status: &status,
        git: git.as_ref(),
        commit_url: &commit_url,
        can_commit: web.git.is_some(),
        action_repo: &action_repo,
        now: Utc::now(),
    };
    Ok(promotion::fragments(&input))
}

pub(super) async fn promotion(State(web): State<WebState>, Path(name): Path<String>) -> Response {
    let title = name.clone();
    let fragments = match blocking(&web, move |web| promotion_fragments(web, &name)).await {
        Ok(Ok(fragments)) => fragments,
        Ok(Err(missing)) => return missing.into_response(),
        Err(response) => return response,
    };
    let fragments: Vec<(&str, String)> = fragments
        .into_iter()
        .map(|(id, html)| (id, html.into_string()))
        .collect();
    let seen = super::live::seen_query(fragments.iter().map(|(id, html)| (*id, html.as_str())));
    let events = format!("/ui/events/promotions/{title}?{seen}");
    let body = html! {
        p { a href="/ui" { "← All promotions" } }
        @for (_, fragment) in &fragments { (PreEscaped(fragment)) }
    };
    Html(frame(&title, Some(&events), body).into_string()).into_response()
}

pub(super) async fn timeline(State(web): State<WebState>, Path(name): Path<String>) -> Response {
    let listed = match blocking(&web, |web| (web.source)()).await {
        Ok(listed) => listed,
        Err(response) => return response,
    };
    let status = match found(listed, &name) {
        Ok(status) => status,
        Err(missing) => return missing.into_response(),
    };
    let period = Period {
        text: "24h".to_string(),
        length: Duration::from_secs(24 * 3600),
    };
    let svg = svg_of(&name, Some(&status), &period, Utc::now());
    ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response()
}

pub(super) async fn asset(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "tollgate.css" => ([(header::CONTENT_TYPE, "text/css")], page::CSS).into_response(),
        "live.js" => ([(header::CONTENT_TYPE, "text/javascript")], page::JS).into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// A button's form.
#[derive(Debug, Deserialize)]
pub(super) struct ActionForm {
    action: String,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    to: Option<u64>,
}

impl ActionForm {
    fn request(&self) -> Option<Request> {
        let stage = || self.stage.clone().filter(|s| !s.is_empty());
        match self.action.as_str() {
            "approve" => Some(Request::Approve { stage: stage()? }),
            "retry" => Some(Request::Retry { stage: stage()? }),
            "rollback" => Some(Request::Rollback { to: self.to? }),
            "pause" => Some(Request::Pause),
            "resume" => Some(Request::Resume),
            _ => None,
        }
    }
}

fn result_page(name: &str, status: StatusCode, body: Markup) -> Response {
    let body = html! {
        p { a href={ "/ui/promotions/" (name) } { "← " (name) } }
        (body)
    };
    (status, Html(frame(name, None, body).into_string())).into_response()
}

fn refused(name: &str, status: StatusCode, message: &str) -> Response {
    result_page(
        name,
        status,
        html! { p.notice.error role="alert" { (message) } },
    )
}

/// What a POSTed action may be made with: the request, the clone, the promotion's status.
struct Admitted {
    request: Request,
    repo: super::git_view::RepoTarget,
    status: Arc<PromotionStatus>,
}

/// The action of `form`, when the page offers it for the promotion's current status; else the
/// refusal page. An approval that only an approver's own signature counts for is refused.
async fn admit(web: &WebState, name: &str, form: &ActionForm) -> Result<Admitted, Response> {
    let Some(request) = form.request() else {
        let message = "unknown action, or a field missing";
        return Err(refused(name, StatusCode::BAD_REQUEST, message));
    };
    let Some(repo) = web.git.as_ref().map(|git| git.target.clone()) else {
        let message = "no repository configured (--repo): nothing to commit in";
        return Err(refused(name, StatusCode::CONFLICT, message));
    };
    let (listed, facts) = blocking(web, Web::read).await?;
    let status = found(listed, name).map_err(IntoResponse::into_response)?;
    let git_facts = facts.get(name).cloned().unwrap_or_default();
    let trailer_approvals = |stage: &str| git_facts.gates.trailer_approvals(stage);
    let tip = actions::Tip {
        annotations: &git_facts.annotations,
        trailer_approvals: &trailer_approvals,
        approver: "",
        rollback_changes: &|_| None,
    };
    let Some(planned) = actions::offered(name, &status, tip)
        .into_iter()
        .find(|p| p.request == request)
    else {
        let message = "this action does not apply to the promotion now (its status changed?); reload the page";
        return Err(refused(name, StatusCode::CONFLICT, message));
    };
    if let Request::Approve { stage } = &request
        && let ApprovalRoute::SignedCommand { why } =
            signed_gates::route(&status, facts.get(name).map(|f| &f.gates), stage)
    {
        let message = signed_gates::refusal(&planned.command, &why);
        return Err(refused(name, StatusCode::FORBIDDEN, &message));
    }
    Ok(Admitted {
        request,
        repo,
        status,
    })
}

/// POST an action: commit it on a new branch (and open a pull request when a git host is
/// configured). Only an action the page offers for the promotion's current status is made.
pub(super) async fn act(
    State(web): State<WebState>,
    Path(name): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    let Admitted {
        request,
        repo,
        status,
    } = match admit(&web, &name, &form).await {
        Ok(admitted) => admitted,
        Err(refusal) => return refusal,
    };
    let _one_at_a_time = web.commit_lock.lock().await;
    let (edit_name, edit_status) = (name.clone(), status.clone());
    let edit_repo = repo.clone();
    let made = tokio::task::spawn_blocking(move || {
        actions::commit(&edit_repo, &edit_name, &request, Some(&edit_status))
    })
    .await;
    let outcome = match made {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(error)) => {
            let code = if error.is_request_error() {
                StatusCode::CONFLICT
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            return refused(&name, code, &error.to_string());
        }
        Err(_) => {
            return refused(
                &name,
                StatusCode::INTERNAL_SERVER_ERROR,
                "the commit task failed",
            );
        }
    };
    let pull_request = match &web.pull_requests {
        None => None,
        Some(config) => {
            let body = format!(
                "{}\n\n{}\n\nCommitted by the tollgate web view.",
                outcome.message,
                outcome.notes.join("\n")
            );
            let change = Change {
                branch: &outcome.branch,
                base: &repo.branch,
                title: &outcome.message,
                body: &body,
            };
            Some(pull_request::open(config, &repo.dir, &change).await)
        }
    };
    let body = html! {
        div.notice role="status" id="committed" data-branch=(outcome.branch) {
            p { "Committed " code { (short(&outcome.commit)) } " on new branch " strong { code { (outcome.branch) } } "." }
            p { (outcome.message) }
            @for note in &outcome.notes { p.muted { (note) } }
            @for warning in &outcome.warnings { p.notice.error { "warning: " (warning) } }
            @match &pull_request {
                None => p { "Nothing was pushed and nothing was written to the cluster. To apply it: "
                    code { "git merge --ff-only " (outcome.branch) } " into " code { (repo.branch) } ", or push it and open a pull request." },
                Some(Ok(url)) => p { "Pull request: " (links::link_or_text(url, "pull-request", html! { (url) })) },
                Some(Err(error)) => p.notice.error role="alert" { "The commit is on the branch, but the pull request was not opened: " (error) },
            }
        }
    };
    result_page(&name, StatusCode::OK, body)
}
