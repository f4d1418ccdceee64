//! The terminal under the live view, on plain ANSI escapes: its size, and a redraw in place
//! (cursor home, each line rewritten, the rest of the screen cleared) so a frame replaces the
//! last one without flicker or scrolling.

use std::io::Write;

use super::live::Size;

/// Wider than this, lines get long to read; the view stays this wide.
pub const MAX_COLUMNS: usize = 120;
use crate::cli::width::DEFAULT_COLUMNS;

const HOME: &str = "\x1b[H";
const CLEAR_LINE: &str = "\x1b[2K";
const CLEAR_BELOW: &str = "\x1b[J";
const CLEAR_SCREEN: &str = "\x1b[2J";
const HIDE_CURSOR: &str = "\x1b[?25l";
const SHOW_CURSOR: &str = "\x1b[?25h";

/// The size of the terminal on stdout: its width (80 when unknown, never more than it has).
/// The live view redraws in place on the screen it has, so its width is the terminal's
/// (`COLUMNS` is for plain output).
pub fn size() -> Size {
    match rustix::termios::tcgetwinsize(std::io::stdout()) {
        Ok(size) if size.ws_col > 0 => Size {
            columns: usize::from(size.ws_col).min(MAX_COLUMNS),
            rows: (size.ws_row > 0).then_some(usize::from(size.ws_row)),
        },
        _ => Size {
            columns: DEFAULT_COLUMNS,
            rows: None,
        },
    }
}

/// The width of plain output (`status`, `status NAME`): `COLUMNS`, else the terminal's on
/// stdout, however wide; 80 when stdout is not a terminal, so that piped output is the same
/// everywhere.
pub fn plain_width() -> usize {
    crate::cli::width::plain_width()
}

/// The bytes that replace the screen's content with `lines` (at most `rows` of them). Each line
/// is cleared before it is written, not after: a line as wide as the screen leaves the cursor in
/// the last column, where clearing to the end of the line would erase its last character.
pub fn redraw(lines: &[String], rows: Option<usize>) -> String {
    let mut out = String::from(HOME);
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        out.push_str(CLEAR_LINE);
        out.push_str(line);
    }
    // Below the frame, clear what the last (longer) frame left; a full screen has nothing below,
    // and a newline there would scroll.
    if rows.is_none_or(|rows| lines.len() < rows) {
        out.push_str("\r\n");
        out.push_str(CLEAR_BELOW);
    }
    out
}

/// The terminal while the view is on it: cleared, cursor hidden; the cursor comes back on drop.
pub struct Screen<W: Write> {
    out: W,
}

impl<W: Write> Screen<W> {
    pub fn enter(mut out: W) -> std::io::Result<Self> {
        write!(out, "{CLEAR_SCREEN}{HOME}{HIDE_CURSOR}")?;
        out.flush()?;
        Ok(Screen { out })
    }

    pub fn draw(&mut self, lines: &[String], rows: Option<usize>) -> std::io::Result<()> {
        self.out.write_all(redraw(lines, rows).as_bytes())?;
        self.out.flush()
    }
}

impl<W: Write> Drop for Screen<W> {
    fn drop(&mut self) {
        // Leave the shell prompt below the last frame, with its cursor.
        let _ = write!(self.out, "{SHOW_CURSOR}\r\n");
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redraw_homes_the_cursor_rewrites_each_line_and_clears_below() {
        let lines = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            redraw(&lines, Some(40)),
            "\x1b[H\x1b[2Ka\r\n\x1b[2Kb\r\n\x1b[J"
        );
    }

    #[test]
    fn a_full_screen_is_not_followed_by_a_newline_that_would_scroll_it() {
        let lines = vec!["a".to_string(), "b".to_string()];
        assert_eq!(redraw(&lines, Some(2)), "\x1b[H\x1b[2Ka\r\n\x1b[2Kb");
    }
}
