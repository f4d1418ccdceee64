//! A stage's progress bar, over the stage's members (every wave): provisioned clusters filled,
//! failed or timed-out clusters apart (never hidden by rounding), the rest open. One measure for
//! every front end: the terminal draws it in character cells (`status`'s live view), the web view
//! as an SVG in percent; both say the same counts.

use maud::{Markup, html};
use tollgate_engine::pipeline::StageView;
use tollgate_engine::status::StageCounts;

use crate::views::stage_words::{self, failures, members};

pub const PROVISIONED: char = '█';
pub const FAILED: char = '✗';
pub const OPEN: char = '░';
/// A stage that matches no cluster: nothing to fill.
pub const EMPTY: char = '·';

/// What a bar shows: provisioned and failed clusters of `total` (the members, or more when the
/// counts run past them).
struct Measure {
    provisioned: u32,
    failed: u32,
    total: u32,
}

impl Measure {
    fn of(counts: &StageCounts) -> Self {
        let provisioned = counts.provisioned;
        let failed = failures(counts);
        let total = members(counts).max(provisioned + failed);
        Measure {
            provisioned,
            failed,
            total,
        }
    }
}

/// The terminal's bar: `cells` characters for `counts`.
pub fn bar(counts: &StageCounts, cells: usize) -> String {
    let measure = Measure::of(counts);
    let (provisioned, failed) = (measure.provisioned as usize, measure.failed as usize);
    let total = measure.total as usize;
    if total == 0 {
        return EMPTY.to_string().repeat(cells);
    }
    let mut done = provisioned * cells / total;
    if provisioned > 0 && done == 0 {
        done = 1;
    }
    if provisioned == total {
        done = cells;
    }
    let failed_cells = if failed == 0 {
        0
    } else {
        (failed * cells).div_ceil(total).max(1)
    };
    // Failures stay visible: they take cells from the provisioned part if rounding must.
    let failed_cells = failed_cells.min(cells);
    let done = done.min(cells - failed_cells);
    let open = cells - done - failed_cells;
    let mut text = String::with_capacity(cells * 3);
    text.extend(std::iter::repeat_n(PROVISIONED, done));
    text.extend(std::iter::repeat_n(FAILED, failed_cells));
    text.extend(std::iter::repeat_n(OPEN, open));
    text
}

/// The web view's bar of `view`, with an accessible name saying the numbers.
pub fn svg_bar(view: &StageView<'_>) -> Markup {
    let Some(counts) = stage_words::counts(view) else {
        return html! {
            div.bar role="img" aria-label={ (view.name) ": no cluster counts for what it runs now" } {}
        };
    };
    let Measure {
        provisioned,
        failed,
        total,
    } = Measure::of(counts);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(matching: u32, provisioned: u32, failed: u32, timed_out: u32) -> StageCounts {
        StageCounts {
            matching_clusters: matching,
            summaries: matching,
            provisioned,
            failed,
            timed_out,
            ..StageCounts::default()
        }
    }

    #[test]
    fn the_bar_fills_with_provisioned_clusters() {
        assert_eq!(bar(&counts(3, 0, 0, 0), 12), "░░░░░░░░░░░░");
        assert_eq!(bar(&counts(3, 2, 0, 0), 12), "████████░░░░");
        assert_eq!(bar(&counts(3, 3, 0, 0), 12), "████████████");
        // One of a hundred still shows.
        assert_eq!(bar(&counts(100, 1, 0, 0), 12), "█░░░░░░░░░░░");
    }

    #[test]
    fn failed_and_timed_out_clusters_have_their_own_glyph_and_never_round_away() {
        assert_eq!(bar(&counts(3, 1, 1, 1), 12), "████✗✗✗✗✗✗✗✗");
        assert_eq!(bar(&counts(100, 99, 1, 0), 12), "███████████✗");
        assert_eq!(bar(&counts(3, 0, 3, 0), 12), "✗✗✗✗✗✗✗✗✗✗✗✗");
    }

    #[test]
    fn a_waved_stage_fills_over_all_its_members_not_the_waves_reached() {
        // After the canary of seven: one of seven, not one of one.
        let canary = StageCounts {
            members: 7,
            later_waves: 6,
            ..counts(1, 1, 0, 0)
        };
        assert_eq!(bar(&canary, 12), "█░░░░░░░░░░░");
    }

    #[test]
    fn a_stage_without_clusters_shows_an_empty_bar_of_the_same_width() {
        assert_eq!(bar(&counts(0, 0, 0, 0), 12), "············");
    }

    #[test]
    fn counts_past_the_matching_clusters_do_not_overflow_the_bar() {
        assert_eq!(bar(&counts(1, 2, 1, 0), 6).chars().count(), 6);
    }
}
