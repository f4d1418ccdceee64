//! A stage's progress as a bar of fixed width, over the stage's members (every wave):
//! provisioned clusters filled, failed or timed-out clusters in their own glyph (never hidden by
//! rounding), the rest open.

use tollgate_engine::status::StageCounts;

use crate::views::stage_words::{failures, members};

pub const PROVISIONED: char = '█';
pub const FAILED: char = '✗';
pub const OPEN: char = '░';
/// A stage that matches no cluster: nothing to fill.
pub const EMPTY: char = '·';

/// `cells` characters for `counts`.
pub fn bar(counts: &StageCounts, cells: usize) -> String {
    let provisioned = counts.provisioned as usize;
    let failed = failures(counts) as usize;
    let total = (members(counts) as usize).max(provisioned + failed);
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
