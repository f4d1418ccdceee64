//! Every POST under `/ui` (the buttons, the sign-in form) must prove it comes from the web view's
//! own pages (issue #44 item 9): the pages hold no session token of their own, so a form on
//! another site, posted through a signed-in browser, would otherwise press a button. Browsers
//! send `Origin` with every POST (Chromium and Firefox do for same-origin forms too); without it,
//! only `Sec-Fetch-Site: same-origin` is proof. Neither header proves nothing, so the request is
//! refused: a script (curl) sends `Origin` like a browser would. `Sec-Fetch-Site: none` is a
//! navigation the user typed or bookmarked, and no page of ours posts one: refused too.

use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::hosts::authority;

pub(super) async fn require(request: Request, next: Next) -> Response {
    if request.method() != Method::POST || same_origin(request.headers()) {
        return next.run(request).await;
    }
    let body = "cross-site request refused: a POST must come from the web view's own page (an \
                Origin header naming this server, or Sec-Fetch-Site: same-origin). From a \
                script, send the Origin a browser would: Origin: http://HOST:PORT\n";
    (StatusCode::FORBIDDEN, body).into_response()
}

/// The scheme the browser used: a TLS-terminating proxy says `https` in `X-Forwarded-Proto`
/// (the first of a list is the client's); the web view itself serves plain HTTP.
fn scheme(headers: &HeaderMap) -> String {
    headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .map(|value| value.trim().to_ascii_lowercase())
        .filter(|value| value == "https" || value == "http")
        .unwrap_or_else(|| "http".to_string())
}

/// Whether the request's `Origin` is this server as the browser reached it (the request's Host,
/// already on the allow-list, and scheme), or else `Sec-Fetch-Site` says same-origin.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    match headers.get(header::ORIGIN) {
        Some(origin) => origin
            .to_str()
            .is_ok_and(|origin| origin_is(origin, host, &scheme(headers))),
        None => headers
            .get("sec-fetch-site")
            .is_some_and(|site| site.as_bytes() == b"same-origin"),
    }
}

/// `origin` (`scheme://host[:port]`) against `host` (a Host header) reached over `scheme`; a port
/// left out is the scheme's default on either side. `null` and anything with a path is not.
fn origin_is(origin: &str, host: &str, scheme: &str) -> bool {
    let Some((origin_scheme, origin_authority)) = origin.split_once("://") else {
        return false;
    };
    if !origin_scheme.eq_ignore_ascii_case(scheme) {
        return false;
    }
    let default = if scheme == "https" { 443 } else { 80 };
    match (authority(origin_authority), authority(host)) {
        (Some((origin_host, origin_port)), Some((host, port))) => {
            origin_host == host && origin_port.unwrap_or(default) == port.unwrap_or(default)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("header value"));
        }
        map
    }

    #[test]
    fn only_this_servers_origin_or_same_origin_fetch_metadata_is_proof() {
        let host = ("host", "127.0.0.1:8080");
        let yes =
            |extra: &[(&'static str, &str)]| same_origin(&headers(&[&[host], extra].concat()));
        assert!(yes(&[("origin", "http://127.0.0.1:8080")]));
        assert!(yes(&[("sec-fetch-site", "same-origin")]));
        assert!(!yes(&[]), "no proof at all");
        assert!(
            !yes(&[("sec-fetch-site", "none")]),
            "a typed navigation posts nothing"
        );
        assert!(!yes(&[("sec-fetch-site", "same-site")]));
        assert!(!yes(&[("origin", "null")]));
        assert!(!yes(&[("origin", "http://127.0.0.1:8081")]), "another port");
        assert!(
            !yes(&[("origin", "https://127.0.0.1:8080")]),
            "another scheme"
        );
        assert!(
            !yes(&[("origin", "http://127.0.0.1:8080/ui")]),
            "not an origin"
        );
        assert!(
            !yes(&[
                ("origin", "http://evil.example:8080"),
                ("sec-fetch-site", "same-origin")
            ]),
            "a wrong Origin is not rescued by fetch metadata"
        );
    }

    #[test]
    fn behind_a_tls_proxy_the_origin_is_https_on_the_default_port() {
        let proxied = |origin: &str, proto: &str| {
            same_origin(&headers(&[
                ("host", "tollgate.example.com"),
                ("origin", origin),
                ("x-forwarded-proto", proto),
            ]))
        };
        assert!(proxied("https://tollgate.example.com", "https"));
        assert!(proxied("https://Tollgate.Example.com:443", "https, http"));
        assert!(!proxied("http://tollgate.example.com", "https"));
        assert!(!proxied("https://tollgate.example.com", "http"));
        assert!(!proxied(
            "https://tollgate.example.com.evil.example",
            "https"
        ));
    }
}
