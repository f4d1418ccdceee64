//! The overview: every promotion with its phase, the snapshot each stage runs and a bar per
//! stage; failures first; filtered by label and phase (query parameters, so a filtered view is a
//! link).

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;
use tollgate_engine::Phase;

use super::page::id_of;
use super::source::Listed;
use crate::views::bars;
use crate::views::stage_words::{self, Times};

/// `?phase=Failed&label=env=prod` (`label`: `key=value`, or `key` for any value).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Filter {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub label: Option<String>,
}

impl Filter {
    fn keeps(&self, listed: &Listed) -> bool {
        let phase_ok = match self.phase.as_deref().filter(|p| !p.is_empty()) {
            None => true,
            Some(wanted) => phase_of(listed).is_some_and(|phase| phase.as_str() == wanted),
        };
        let label_ok = match self
            .label
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            None => true,
            Some(wanted) => match wanted.split_once('=') {
                Some((key, value)) => {
                    listed.labels.get(key.trim()).map(String::as_str) == Some(value.trim())
                }
                None => listed.labels.contains_key(wanted),
            },
        };
        phase_ok && label_ok
    }

    /// The query string that selects this filter again (for the events URL).
    pub fn query(&self) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if let Some(phase) = &self.phase {
            query.append_pair("phase", phase);
        }
        if let Some(label) = &self.label {
            query.append_pair("label", label);
        }
        query.finish()
    }
}

fn phase_of(listed: &Listed) -> Option<&Phase> {
    listed.status.as_ref().ok()?.as_deref().map(|s| &s.phase)
}

/// Those that need attention first (an unreadable status, or a phase that does:
/// `Phase::needs_attention`), then by name.
fn failing(listed: &Listed) -> bool {
    listed.status.is_err() || phase_of(listed).is_some_and(Phase::needs_attention)
}

/// The filtered, ordered promotions.
pub fn select(mut all: Vec<Listed>, filter: &Filter) -> Vec<Listed> {
    all.retain(|listed| filter.keeps(listed));
    all.sort_by(|a, b| (!failing(a), &a.name).cmp(&(!failing(b), &b.name)));
    all
}

/// The filter form (no JavaScript needed: a GET form).
pub fn filter_form(filter: &Filter) -> Markup {
    const PHASES: [&str; 12] = [
        "Progressing",
        "Waiting",
        "Paused",
        "Completed",
        "Failed",
        "RollingBack",
        "RolledBack",
        "Invalid",
        "Held",
        "RemovalHeld",
        "Removing",
        "Removed",
    ];
    let chosen = filter.phase.as_deref().unwrap_or_default();
    html! {
        form.filter method="get" action="/ui" aria-label="Filter promotions" {
            label { "Phase"
                select name="phase" aria-label="Phase" {
                    option value="" selected[chosen.is_empty()] { "any" }
                    @for phase in PHASES {
                        option value=(phase) selected[chosen == phase] { (phase) }
                    }
                }
            }
            label { "Label (key=value)"
                input type="text" name="label" aria-label="Label (key=value)"
                    value=(filter.label.as_deref().unwrap_or_default()) placeholder="env=prod";
            }
            button type="submit" { "Filter" }
        }
    }
}

/// The list fragment (the live part of the overview).
pub fn list(selected: &[Listed], now: DateTime<Utc>) -> Markup {
    html! {
        section id="promotions" aria-label="Promotions" {
            @if selected.is_empty() {
                p.muted { "No promotion matches." }
            }
            ul.promotions {
                @for listed in selected { (item(listed, now)) }
            }
        }
    }
}

fn item(listed: &Listed, now: DateTime<Utc>) -> Markup {
    let name = &listed.name;
    html! {
        li.promotion.failing[failing(listed)] id={ "promotion-" (id_of(name)) } data-name=(name) {
            div.head {
                a href={ "/ui/promotions/" (name) } { strong { (name) } }
                @match &listed.status {
                    Err(error) => { span.phase."phase-Failed" { "unreadable" } span.muted { (error) } }
                    Ok(None) => { span.phase { "no status yet" } }
                    Ok(Some(status)) => {
                        span class={ "phase phase-" (status.phase.as_str()) } data-phase=(status.phase.as_str()) { (status.phase.as_str()) }
                        @if let Some(index) = status.snapshot_index { span { "snapshot #" (index) } }
                        @if let Some(message) = &status.message { span.muted { (message) } }
                    }
                }
                @for (key, value) in &listed.labels { span.muted { (key) "=" (value) } }
            }
            @if let Ok(Some(status)) = &listed.status {
                div.stages {
                    @for view in status.pipeline() {
                        div.stage data-stage=(view.name) {
                            span.name { (view.name) }
                            @if let Some(snapshot) = view.snapshot { " · runs #" (snapshot) }
                            (bars::svg_bar(&view))
                            div class={ "act-" (view.activity.kind()) } {
                                (stage_words::activity(&view, Times::Relative(now)))
                            }
                        }
                    }
                }
            }
        }
    }
}
