//! The headers every `/ui` response carries (issue #44 item 9). No other site may frame the
//! pages (a framed page turns a click on the framing page into a button press), and the pages
//! load nothing but the web view's own files: the stylesheet and the live script are served
//! files, no markup carries inline script or style, so a string that reached a page from git or
//! a git host cannot run or restyle it even if escaping ever failed.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

/// `default-src 'self'` covers the stylesheet, the script, the timeline image and the live
/// events (`connect-src`); the rest closes what `default-src` does not.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Every header and its value, as each response carries them.
pub const HEADERS: [(HeaderName, &str); 4] = [
    (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
    // Older browsers know framing only by this one.
    (header::X_FRAME_OPTIONS, "DENY"),
    // A file is what its Content-Type says, never sniffed into script.
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    // Links to a git host do not tell it the web view's paths (promotion names).
    (header::REFERRER_POLICY, "same-origin"),
];

/// Sets the headers on the response, whatever the handler (or a refusal) answered.
pub(super) async fn add(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
