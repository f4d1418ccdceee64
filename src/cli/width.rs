//! How wide the plain text output (tables, plans) is: `COLUMNS` when set to a number (as a shell
//! exports it, and as tests and scripts choose a width), else the terminal's on stdout, else 80
//! so that piped output is the same everywhere.

/// When nothing says.
pub const DEFAULT_COLUMNS: usize = 80;

/// The width of plain output.
pub fn plain_width() -> usize {
    from_env(std::env::var("COLUMNS").ok().as_deref())
        .or_else(terminal_width)
        .unwrap_or(DEFAULT_COLUMNS)
}

/// The terminal's width on stdout, when stdout is one that says.
pub fn terminal_width() -> Option<usize> {
    match rustix::termios::tcgetwinsize(std::io::stdout()) {
        Ok(size) if size.ws_col > 0 => Some(usize::from(size.ws_col)),
        _ => None,
    }
}

/// `COLUMNS` as a width: a positive number, else nothing (an empty or odd value is ignored).
fn from_env(value: Option<&str>) -> Option<usize> {
    value?.trim().parse::<usize>().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_says_the_width_only_when_it_is_a_positive_number() {
        assert_eq!(from_env(Some("abc")), None);
        assert_eq!(from_env(Some("0")), None);
        assert_eq!(from_env(Some("")), None);
        assert_eq!(from_env(None), None);
        assert_eq!(from_env(Some("120")), Some(120));
    }
}
