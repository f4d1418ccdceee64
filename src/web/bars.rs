//! A stage's progress bar: provisioned clusters, failed or timed-out clusters, the rest open,
//! over the stage's members (the same counts as the terminal's bar; `stage_words` picks them).

use maud::{Markup, html};
use tollgate_engine::pipeline::StageView;

use crate::views::stage_words::{self, failures, members};

/// The bar of `view` with an accessible name saying the numbers.
pub fn bar(view: &StageView<'_>) -> Markup {
    let Some(counts) = stage_words::counts(view) else {
        return html! {
            div.bar role="img" aria-label={ (view.name) ": no cluster counts for what it runs now" } {}
        };
    };
    let provisioned = counts.provisioned;
    let failed = failures(counts);
    let total = members(counts).max(provisioned + failed);
    let percent = |n: u32| match total {
        0 => 0.0,
        total => f64::from(n) * 100.0 / f64::from(total),
    };
    let label = format!(
        "{}: {provisioned} of {total} clusters provisioned, {failed} failed",
        view.name
    );
    let (done, broken) = (percent(provisioned), percent(failed));
    // An SVG drawn in percent: its geometry is attributes, not an inline `style`, which the
    // Content-Security-Policy (`default-src 'self'`) would refuse.
    html! {
        div.bar role="progressbar" aria-label=(label) aria-valuemin="0"
            aria-valuemax=(total) aria-valuenow=(provisioned) data-failed=(failed) {
            svg viewBox="0 0 100 1" preserveAspectRatio="none" aria-hidden="true" focusable="false" {
                rect.provisioned x="0" y="0" height="1" width=(format!("{done:.1}")) {}
                rect.failed x=(format!("{done:.1}")) y="0" height="1" width=(format!("{broken:.1}")) {}
            }
        }
    }
}

/// "3/7 provisioned, 1 failed" (empty for a stage without counts for what it runs).
pub fn counts_text(view: &StageView<'_>) -> String {
    let Some(counts) = stage_words::counts(view) else {
        return String::new();
    };
    let mut text = format!("{}/{} provisioned", counts.provisioned, members(counts));
    if failures(counts) > 0 {
        text.push_str(&format!(", {} failed", failures(counts)));
    }
    if counts.later_waves > 0 {
        text.push_str(&format!(", {} in later waves", counts.later_waves));
    }
    text
}
