//! Text fitted to a width (the terminal's tables and live view). A table: a column no row has
//! a value in is left out; the others are as wide as their content when it fits, else each at
//! least as wide as its longest word, the rest shared by the columns that need it most. Cells
//! wrap at word boundaries, never inside a word: an id, a commit or a time is printed whole.
//! When even the longest words do not fit side by side, the rows are printed one after the
//! other as records (`COLUMN  value` lines) rather than cut. The widths are chosen here, so the
//! table is the same whatever the terminal comfy-table would detect.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};

/// `rows` under `header`, at most `width` characters wide (a single word wider than the whole
/// width excepted: it is printed whole).
pub fn table(header: &[&str], rows: &[Vec<String>], width: usize) -> String {
    let (header, rows) = without_empty_columns(header, rows);
    if !fits_whole_words(&header, &rows, width) {
        return records(&header, &rows, width);
    }
    let columns = header.len();
    let widths = widths(&header, &rows, width);
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
    for row in &rows {
        let cells: Vec<String> = (0..columns)
            .map(|i| wrap(row.get(i).map_or("", String::as_str), widths[i]))
            .collect();
        table.add_row(cells);
    }
    format!("{table}\n")
}

/// The columns some row has a value in (the first one always): an empty column is never shown,
/// whatever the width, so it does not come and go with the terminal.
fn without_empty_columns<'h>(
    header: &[&'h str],
    rows: &[Vec<String>],
) -> (Vec<&'h str>, Vec<Vec<String>>) {
    let kept: Vec<usize> = (0..header.len())
        .filter(|&i| {
            i == 0
                || rows
                    .iter()
                    .any(|row| row.get(i).is_some_and(|cell| !cell.trim().is_empty()))
        })
        .collect();
    let header = kept.iter().map(|&i| header[i]).collect();
    let rows = rows
        .iter()
        .map(|row| {
            kept.iter()
                .map(|&i| row.get(i).cloned().unwrap_or_default())
                .collect()
        })
        .collect();
    (header, rows)
}

/// Whether `rows` under `header` fit `width` as a table without cutting a word (columns no row
/// has a value in left out, as [`table`] leaves them out).
pub fn fits_whole_words(header: &[&str], rows: &[Vec<String>], width: usize) -> bool {
    let (header, rows) = without_empty_columns(header, rows);
    let columns = header.len();
    let longest_words: usize = (0..columns)
        .map(|i| {
            std::iter::once(header[i])
                .chain(rows.iter().map(|r| r.get(i).map_or("", String::as_str)))
                .flat_map(words)
                .map(chars)
                .max()
                .unwrap_or(0)
        })
        .sum();
    longest_words <= available(width, columns)
}

/// Rows too wide for a table, one record after the other: each non-empty cell on lines of its
/// own under the column's name, wrapped at word boundaries, a blank line between records.
fn records(header: &[&str], rows: &[Vec<String>], width: usize) -> String {
    let label = header.iter().map(|h| chars(h)).max().unwrap_or(0) + 2;
    let value_width = width.saturating_sub(label).max(20);
    let mut out = String::new();
    for (n, row) in rows.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        for (name, cell) in header.iter().zip(row) {
            if cell.trim().is_empty() {
                continue;
            }
            for (i, line) in wrap(cell, value_width).lines().enumerate() {
                let name = if i == 0 { *name } else { "" };
                out.push_str(format!("{name:<label$}{line}").trim_end());
                out.push('\n');
            }
        }
    }
    out
}

/// The width left for content: "│ a ┆ b │" takes three characters a column, plus the last border.
fn available(width: usize, columns: usize) -> usize {
    width.saturating_sub(3 * columns + 1)
}

/// Each column's width (content only, without padding and borders), for rows whose longest
/// words fit side by side.
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
        .map(|i| cells(i).flat_map(words).map(chars).max().unwrap_or(0))
        .collect();
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

/// `text` in lines of at most `width` characters, broken at spaces; a longer word (an id, a
/// URL) is never cut: it gets a line of its own.
pub fn wrap(text: &str, width: usize) -> String {
    let width = width.max(1);
    let mut lines: Vec<String> = Vec::new();
    for paragraph in text.lines() {
        let mut line = String::new();
        for word in words(paragraph) {
            if !line.is_empty() && chars(&line) + 1 + chars(word) > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
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

/// What a line may not be broken inside: a no-break space joins a date to its time.
pub const NO_BREAK: char = '\u{a0}';

/// The words of `text`: broken at whitespace, never at a [`NO_BREAK`].
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() && c != NO_BREAK)
        .filter(|word| !word.is_empty())
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

    /// The overview of a promotion with a long name and a message naming the snapshot id to
    /// copy: at 80 columns its words cannot stand side by side in six columns.
    fn too_wide() -> (Vec<&'static str>, Vec<Vec<String>>) {
        let header = vec![
            "PROMOTION",
            "PHASE",
            "STAGE",
            "SNAPSHOT",
            "MESSAGE",
            "NEXT WAKE-UP",
        ];
        let input = rows(&[&[
            "core-payments-gateway-eu",
            "Waiting",
            "production",
            "#3 37f6dff",
            "waiting for approval: annotate approve.tollgate.dev/production: 37f6dffbab12",
            "2026-12-06T02:56:00Z",
        ]]);
        (header, input)
    }

    #[test]
    fn rows_whose_words_do_not_fit_side_by_side_are_records_with_every_word_whole() {
        let (header, input) = too_wide();
        assert!(!fits_whole_words(&header, &input, 80));
        let text = table(&header, &input, 80);
        assert!(!text.contains('…'), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        let known: Vec<String> = input.iter().flatten().flat_map(|c| words_of(c)).collect();
        for word in [
            "core-payments-gateway-eu",
            "37f6dffbab12",
            "2026-12-06T02:56:00Z",
        ] {
            assert!(
                words_of(&text).contains(&word.to_string()),
                "{word} not whole:\n{text}"
            );
        }
        for word in words_of(&text) {
            let header_word = header.iter().any(|h| h.split(' ').any(|w| w == word));
            assert!(
                known.contains(&word) || header_word,
                "{word:?} is a piece of a word:\n{text}"
            );
        }
        assert!(
            text.starts_with("PROMOTION     core-payments-gateway-eu\n"),
            "{text}"
        );
        assert!(
            text.contains("NEXT WAKE-UP  2026-12-06T02:56:00Z\n"),
            "{text}"
        );
    }

    #[test]
    fn the_same_rows_are_a_table_where_they_fit() {
        let (header, input) = too_wide();
        let text = table(&header, &input, 120);
        assert!(text.contains("│ core-payments-gateway-eu ┆"), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 120), "{text}");
        assert!(text.contains("37f6dffbab12"), "{text}");
    }

    #[test]
    fn a_column_no_row_has_a_value_in_is_never_shown() {
        let input = rows(&[&["dev", "", "x"], &["prod", " ", "y"]]);
        for width in [40, 80, 200] {
            let text = table(&["STAGE", "NEXT WAKE-UP", "ACTIVITY"], &input, width);
            assert!(!text.contains("WAKE-UP"), "{text}");
            assert!(text.contains("│ dev   ┆ x        │"), "{text}");
        }
    }

    #[test]
    fn a_word_wider_than_the_width_is_printed_whole_on_a_line_of_its_own() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let text = wrap(&format!("git revert {sha} to acknowledge"), 24);
        assert_eq!(text, format!("git revert\n{sha}\nto acknowledge"));
    }

    #[test]
    fn a_date_joined_to_its_time_by_a_no_break_space_stays_on_one_line() {
        let when = format!("2026-11-20{NO_BREAK}10:01");
        let text = wrap(&format!("completed {when}"), 12);
        assert_eq!(text, format!("completed\n{when}"));
    }
}
