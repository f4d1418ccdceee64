//! Text fitted to a width (the terminal's tables and live view). A table: columns as wide as
//! their content when it fits, else each at least as wide as its longest word, the rest shared by
//! the columns that need it most. Cells wrap at
//! word boundaries, never inside a word; a word wider than the whole column can get is cut with
//! `…`. The widths are chosen here, so the table is the same whatever the terminal comfy-table
//! would detect.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};

/// The narrowest a column gets when even the longest words do not fit.
const NARROWEST: usize = 4;

/// `rows` under `header`, at most `width` characters wide.
pub fn table(header: &[&str], rows: &[Vec<String>], width: usize) -> String {
    let columns = header.len();
    let widths = widths(header, rows, width);
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .force_no_tty();
    table.set_header(
        header
            .iter()
            .zip(&widths)
            .map(|(cell, w)| wrap(cell, *w))
            .collect::<Vec<_>>(),
    );
    for row in rows {
        let cells: Vec<String> = (0..columns)
            .map(|i| wrap(row.get(i).map_or("", String::as_str), widths[i]))
            .collect();
        table.add_row(cells);
    }
    format!("{table}\n")
}

/// Whether `rows` under `header` fit `width` without cutting a word.
pub fn fits_whole_words(header: &[&str], rows: &[Vec<String>], width: usize) -> bool {
    let columns = header.len();
    let longest_words: usize = (0..columns)
        .map(|i| {
            std::iter::once(header[i])
                .chain(rows.iter().map(|r| r.get(i).map_or("", String::as_str)))
                .flat_map(str::split_whitespace)
                .map(chars)
                .max()
                .unwrap_or(0)
        })
        .sum();
    longest_words <= available(width, columns)
}

/// The width left for content: "│ a ┆ b │" takes three characters a column, plus the last border.
fn available(width: usize, columns: usize) -> usize {
    width.saturating_sub(3 * columns + 1)
}

/// Each column's width (content only, without padding and borders).
fn widths(header: &[&str], rows: &[Vec<String>], width: usize) -> Vec<usize> {
    let columns = header.len();
    let available = available(width, columns);
    let cells = |i: usize| {
        std::iter::once(header[i]).chain(rows.iter().map(move |r| r.get(i).map_or("", |c| c)))
    };
    let longest: Vec<usize> = (0..columns)
        .map(|i| cells(i).flat_map(str::lines).map(chars).max().unwrap_or(0))
        .collect();
    if longest.iter().sum::<usize>() <= available {
        return longest;
    }
    let mut widths: Vec<usize> = (0..columns)
        .map(|i| {
            cells(i)
                .flat_map(str::split_whitespace)
                .map(chars)
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Even the longest words do not fit: the widest columns give way (their words get cut),
    // the first one (what the rows are: a promotion, a stage, a cluster) last.
    while widths.iter().sum::<usize>() > available {
        let narrowable = |i: &usize| widths[*i] > NARROWEST;
        let Some(widest) = (1..columns)
            .filter(narrowable)
            .max_by_key(|&i| widths[i])
            .or_else(|| (0..1).find(narrowable))
        else {
            break;
        };
        widths[widest] -= 1;
    }
    // The space left goes first to the columns missing the least, so that as few columns as
    // possible wrap; the column missing the most gets the rest.
    let mut left = available.saturating_sub(widths.iter().sum());
    let mut needy: Vec<usize> = (0..columns).filter(|&i| widths[i] < longest[i]).collect();
    needy.sort_by_key(|&i| longest[i] - widths[i]);
    for i in needy {
        let given = (longest[i] - widths[i]).min(left);
        widths[i] += given;
        left -= given;
    }
    widths
}

/// `text` in lines of at most `width` characters, broken at spaces; a longer word is cut with `…`.
pub fn wrap(text: &str, width: usize) -> String {
    let width = width.max(1);
    let mut lines: Vec<String> = Vec::new();
    for paragraph in text.lines() {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            let word = cut(word, width);
            if !line.is_empty() && chars(&line) + 1 + chars(&word) > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(&word);
        }
        lines.push(line);
    }
    lines.join("\n")
}

/// `text` in at most `width` characters, cut with `…`.
pub fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut kept: String = text.chars().take(width - 1).collect();
    kept.push('…');
    kept
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(cells: &[&[&str]]) -> Vec<Vec<String>> {
        cells
            .iter()
            .map(|row| row.iter().map(|c| c.to_string()).collect())
            .collect()
    }

    fn words_of(text: &str) -> Vec<String> {
        text.split(|c: char| c.is_whitespace() || "│┆├┤┼─╞╪═╡┌┐└┘┬┴".contains(c))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_table_that_fits_keeps_its_content_on_one_line() {
        let text = table(&["A", "B"], &rows(&[&["x", "y z"]]), 80);
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(text.contains("│ x ┆ y z │"), "{text}");
    }

    #[test]
    fn at_80_columns_a_long_cell_wraps_between_words_never_inside_one() {
        let long =
            "wave 3/4 held: blackout until 2026-12-31T23:00:00Z (year-end freeze of the platform)";
        let input = rows(&[
            &["production", "#12", "3/7 provisioned", "1", long],
            &[
                "staging-eu-west-1",
                "#11",
                "12/12 provisioned",
                "0",
                "completed",
            ],
        ]);
        let text = table(
            &["STAGE", "SNAPSHOT", "CLUSTERS", "FAILED", "ACTIVITY"],
            &input,
            80,
        );
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "wider than 80: {line:?}\n{text}"
            );
        }
        let known: Vec<String> = input.iter().flatten().flat_map(|c| words_of(c)).collect();
        for word in words_of(&text) {
            let header = ["STAGE", "SNAPSHOT", "CLUSTERS", "FAILED", "ACTIVITY"];
            assert!(
                known.contains(&word) || header.contains(&word.as_str()),
                "{word:?} is a piece of a word:\n{text}"
            );
        }
    }

    #[test]
    fn a_wider_terminal_gets_a_wider_table() {
        let long = "awaiting the promotion window, opens 2026-11-24T18:00:00Z";
        let input = rows(&[&["production", long]]);
        let narrow = table(&["STAGE", "ACTIVITY"], &input, 40);
        let wide = table(&["STAGE", "ACTIVITY"], &input, 120);
        assert!(
            narrow.lines().count() > wide.lines().count(),
            "{narrow}{wide}"
        );
        assert!(wide.contains(long), "{wide}");
        assert!(narrow.lines().all(|l| l.chars().count() <= 40), "{narrow}");
    }

    #[test]
    fn the_first_column_is_cut_last() {
        let input = rows(&[&[
            "kyverno-prog-rollout-man",
            "Progressing",
            "staging",
            "#12 0123456",
            "stage staging: waits",
            "2026-11-24T17:40:00Z",
        ]]);
        let header = [
            "PROMOTION",
            "PHASE",
            "STAGE",
            "SNAPSHOT",
            "MESSAGE",
            "NEXT WAKE-UP",
        ];
        let text = table(&header, &input, 80);
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        assert!(text.contains("│ kyverno-prog-rollout-man ┆"), "{text}");
    }

    #[test]
    fn a_word_wider_than_any_column_can_be_is_cut_with_an_ellipsis() {
        let input = rows(&[&["a-very-long-stage-name-that-cannot-fit", "x"]]);
        let text = table(&["STAGE", "ACTIVITY"], &input, 24);
        assert!(text.lines().all(|l| l.chars().count() <= 24), "{text}");
        assert!(text.contains('…'), "{text}");
    }
}
