//! The frame every page shares: head, the one stylesheet, the live script, the top bar.

use maud::{DOCTYPE, Markup, html};

pub const CSS: &str = include_str!("assets/tollgate.css");
pub const JS: &str = include_str!("assets/live.js");

/// A whole page: `events` is the server-sent events URL its fragments follow (`None`: static).
pub fn frame(title: &str, events: Option<&str>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · tollgate" }
                link rel="stylesheet" href="/ui/static/tollgate.css";
                script src="/ui/static/live.js" defer {}
            }
            body {
                header.top {
                    a href="/ui" aria-label="tollgate: all promotions" { "tollgate" }
                    span.muted { "rollouts from git; every action here is a git commit" }
                }
                main data-events=[events] { (body) }
            }
        }
    }
}

/// `name` as a safe element id fragment (promotion and stage names are DNS labels, but a status
/// from elsewhere could carry anything).
pub fn id_of(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A short SHA (12 characters).
pub fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

/// A time as the pages show it (UTC, to the second).
pub fn time(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}
