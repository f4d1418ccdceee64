//! Links to the git host (issue #44 item 9). An address the git host's API answers, or one made
//! from the clone's remote, is text from outside: put in an `href` as it came, a `javascript:`
//! address runs in the web view's origin when clicked, and an `http:` one leaks the click to
//! the network. Only a plain `https://host/…` address becomes a link; anything else is shown as
//! text, with a note saying why it is not linked.

use maud::{Markup, html};

/// `url` when it is fit for an `href`: `https://`, a host without user info, and only printable
/// ASCII that needs no escaping in a URL.
pub fn https_only(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://")?;
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = &rest[..host_end];
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    let printable = url
        .chars()
        .all(|c| c.is_ascii_graphic() && !matches!(c, '"' | '\'' | '<' | '>' | '\\' | '`'));
    (host_ok && printable).then_some(url)
}

/// A link to `url` showing `text` when it is https; else `text` and the address as plain text.
pub fn link_or_text(url: &str, id: &str, text: Markup) -> Markup {
    match https_only(url) {
        Some(url) => html! { a href=(url) id=(id) { (text) } },
        None => html! {
            span id=(id) { (text) } " "
            span.muted { "(not linked: the address " code { (url) } " is not https)" }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_https_addresses_become_links() {
        for good in [
            "https://github.com/acme/fleet/pull/7",
            "https://gitlab.example:8443/acme/infra/fleet/-/merge_requests/3?x=1#note",
            "https://[2001:db8::1]/acme/fleet/pull/7",
        ] {
            assert_eq!(https_only(good), Some(good), "{good}");
        }
        for bad in [
            "javascript:alert(document.domain)",
            "JAVASCRIPT:alert(1)",
            "http://git.example/acme/fleet/pull/8",
            "HTTPS://git.example/acme/fleet/pull/8",
            "data:text/html,<script>alert(1)</script>",
            "//evil.example/x",
            "/ui/promotions/web",
            "https://",
            "https://user:token@git.example/x",
            "https://git.example/x\"onmouseover=\"alert(1)",
            "https://git.example/x y",
            " https://git.example/x",
            "https://git.example/\u{202e}x",
        ] {
            assert_eq!(https_only(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_address_that_is_not_https_is_text_with_a_note() {
        let text = || html! { "pull request" };
        let linked = link_or_text("https://git.example/p/1", "pr", text()).into_string();
        assert_eq!(
            linked,
            "<a href=\"https://git.example/p/1\" id=\"pr\">pull request</a>"
        );
        let shown = link_or_text("javascript:alert(1)", "pr", text()).into_string();
        assert!(!shown.contains("href"), "{shown}");
        assert!(shown.contains("not https"), "{shown}");
    }
}
