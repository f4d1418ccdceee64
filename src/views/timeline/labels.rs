//! Where the picture's labels go, so that no two of them overlap: every run's label on top, in the
//! first row where it covers no other (as many rows as it takes); a run's label on its first bar
//! in a lane only where it covers no other label there; a wave's label inside its bar only where
//! the bar is wide enough. Widths are estimated generously (DejaVu Sans averages about 0.6 em per
//! character), so a label drawn in a narrower font still keeps clear of the next.

/// Estimated width of a character, in ems.
pub const EM_PER_CHAR: f64 = 0.62;

/// Space kept between two labels on one row.
const GAP: f64 = 6.0;

pub fn text_width(text: &str, font_size: f64) -> f64 {
    text.chars().count() as f64 * font_size * EM_PER_CHAR
}

/// A horizontal extent on one row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Extent {
    pub start: f64,
    pub end: f64,
}

impl Extent {
    fn clear_of(&self, other: &Extent) -> bool {
        self.end + GAP <= other.start || other.end + GAP <= self.start
    }
}

/// Rows of labels: the extents each row holds.
#[derive(Debug, Default)]
pub struct Rows {
    rows: Vec<Vec<Extent>>,
}

impl Rows {
    /// The first row where `extent` covers no label, opening a new row when none is free.
    pub fn place(&mut self, extent: Extent) -> usize {
        let free = self
            .rows
            .iter()
            .position(|row| row.iter().all(|e| e.clear_of(&extent)));
        let row = free.unwrap_or(self.rows.len());
        if row == self.rows.len() {
            self.rows.push(Vec::new());
        }
        self.rows[row].push(extent);
        row
    }

    /// Takes `extent` on the only row there is, if it covers no label there.
    pub fn place_in_one_row(&mut self, extent: Extent) -> bool {
        if self.rows.is_empty() {
            self.rows.push(Vec::new());
        }
        let row = &mut self.rows[0];
        if row.iter().any(|e| !e.clear_of(&extent)) {
            return false;
        }
        row.push(extent);
        true
    }

    pub fn count(&self) -> usize {
        self.rows.len()
    }
}

/// Where a run's label goes on its row: right of its start line, or left of it near the right
/// edge so that it is not cut off.
pub fn beside_line(x: f64, width: f64, right_edge: f64) -> (Extent, bool) {
    if x + 3.0 + width > right_edge {
        (
            Extent {
                start: x - 3.0 - width,
                end: x - 3.0,
            },
            true,
        )
    } else {
        (
            Extent {
                start: x + 3.0,
                end: x + 3.0 + width,
            },
            false,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_that_would_cover_another_takes_the_next_free_row() {
        let mut rows = Rows::default();
        let at = |start: f64| Extent {
            start,
            end: start + 50.0,
        };
        assert_eq!(rows.place(at(0.0)), 0);
        assert_eq!(rows.place(at(20.0)), 1);
        assert_eq!(rows.place(at(40.0)), 2);
        assert_eq!(rows.place(at(60.0)), 0, "clear of the first: 0 + 50 + gap");
        assert_eq!(rows.place(at(80.0)), 1, "clear of the one at 20 only");
        assert_eq!(rows.place(at(200.0)), 0);
        assert_eq!(rows.count(), 3);
    }

    #[test]
    fn one_row_refuses_a_label_that_would_cover_another() {
        let mut row = Rows::default();
        assert!(row.place_in_one_row(Extent {
            start: 0.0,
            end: 50.0
        }));
        assert!(!row.place_in_one_row(Extent {
            start: 40.0,
            end: 90.0
        }));
        assert!(row.place_in_one_row(Extent {
            start: 60.0,
            end: 90.0
        }));
    }
}
