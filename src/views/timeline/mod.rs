//! The picture of a promotion's recent runs, one lane per stage, from the run history the
//! controller keeps in the GitPromotion's status (`status.runs`): SVG, or PNG rendered from the
//! same SVG. Drawn for `tollgate timeline` and the web view alike.

mod draw;
mod held_run;
mod labels;
mod layout;
pub mod png;

use std::time::Duration;

use chrono::Utc;
use tollgate_engine::{PromotionStatus, RunRecord};

/// `--since`: the duration, and the text the user wrote (shown in the picture's heading).
#[derive(Clone, Debug)]
pub struct Period {
    pub text: String,
    pub length: Duration,
}

/// The SVG picture of the runs of `status` in the `period` before `now` (also the web view's).
pub fn svg_of(
    name: &str,
    status: Option<&PromotionStatus>,
    period: &Period,
    now: chrono::DateTime<Utc>,
) -> String {
    let length = chrono::Duration::from_std(period.length).unwrap_or(chrono::Duration::MAX);
    let since = now
        .checked_sub_signed(length)
        .unwrap_or(chrono::DateTime::<Utc>::MIN_UTC);
    let recorded: &[RunRecord] = status.map(|s| &*s.runs).unwrap_or_default();
    let held = status.and_then(|s| held_run::held_run(s, now));
    let history: Vec<RunRecord> = recorded.iter().cloned().chain(held).collect();
    let timeline = layout::lay_out(&history, since, now);
    let period_text = &period.text;
    let empty = match (history.last(), timeline.runs.is_empty()) {
        (None, _) => Some(format!("No runs recorded for {name} yet.")),
        (Some(newest), true) => Some(format!(
            "No runs of {name} in the last {period_text}; the newest started at {}.",
            newest.started_at.format("%Y-%m-%d %H:%M UTC")
        )),
        (Some(_), false) => None,
    };
    draw::svg(name, &timeline, period_text, empty.as_deref())
}

#[cfg(test)]
mod tests;
