//! The optional bearer token (`--ui-token-file`) and the sign-in form that sets it as a cookie.
//! (Whether a POST, the sign-in form's included, comes from the web view's own pages is checked
//! before this, for every route: see `origin`.)

use axum::extract::{Form, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::WebState;
use super::page::frame;

const COOKIE: &str = "tollgate_ui_token";

/// Lets a request through when no token is configured or it carries the token.
pub(super) async fn require(State(web): State<WebState>, request: Request, next: Next) -> Response {
    let Some(token) = &web.token else {
        return next.run(request).await;
    };
    let offered = bearer(request.headers()).or_else(|| cookie(request.headers()));
    if offered.is_some_and(|offered| matches(offered, token.expose())) {
        return next.run(request).await;
    }
    (StatusCode::UNAUTHORIZED, login_page(false)).into_response()
}

fn matches(offered: &str, token: &str) -> bool {
    !token.is_empty() && bool::from(offered.as_bytes().ct_eq(token.as_bytes()))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

fn login_page(failed: bool) -> Html<String> {
    Html(
        frame(
            "Sign in",
            None,
            html! {
                h1 { "Sign in" }
                @if failed { p.notice.error role="alert" { "That token is not the one this server was started with." } }
                form method="post" action="/ui/login" {
                    label { "Token " input type="password" name="token" aria-label="Token" autocomplete="current-password"; }
                    " " button type="submit" { "Sign in" }
                }
            },
        )
        .into_string(),
    )
}

pub(super) async fn login_form() -> Html<String> {
    login_page(false)
}

#[derive(Deserialize)]
pub(super) struct Login {
    token: String,
}

/// Sets the token cookie (HttpOnly, SameSite=Strict, only under /ui) when the token is right.
pub(super) async fn login(State(web): State<WebState>, Form(login): Form<Login>) -> Response {
    match &web.token {
        Some(token) if matches(&login.token, token.expose()) => {
            let cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/ui",
                login.token
            );
            ([(header::SET_COOKIE, cookie)], Redirect::to("/ui")).into_response()
        }
        Some(_) => (StatusCode::UNAUTHORIZED, login_page(true)).into_response(),
        None => Redirect::to("/ui").into_response(),
    }
}
