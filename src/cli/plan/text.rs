//! The plan for a terminal, wrapped at word boundaries to the width of plain output (a detail's
//! value under its first line, never cut inside a word).

use std::fmt::Write as _;

use super::report::PlanReport;
use crate::views::fit;

/// Where a detail's value starts: two spaces, then its label padded to 17.
const VALUE: usize = 19;

pub fn render(report: &PlanReport, width: usize) -> String {
    let mut out = String::new();
    let heading = format!(
        "Plan {} → {}: {}",
        report.from.label(),
        report.to.label(),
        report.summary_counts()
    );
    let _ = writeln!(out, "{}", fit::wrap(&heading, width));
    if let Some(base) = &report.merge_base {
        let _ = writeln!(out, "{}", fit::wrap(&base.line(), width));
    }
    if let Some(warning) = &report.fleet_warning {
        let warning = format!("warning: {}", warning.replace('\n', " "));
        let _ = writeln!(out, "{}", fit::wrap(&warning, width));
    }
    for promotion in &report.promotions {
        let headline = format!("{}: {}", promotion.name, promotion.headline);
        let _ = writeln!(out, "\n{}", fit::wrap(&headline, width));
        for (label, text) in &promotion.details {
            let value = fit::wrap(text, width.saturating_sub(VALUE).max(20));
            for (i, line) in value.lines().enumerate() {
                let label: &str = if i == 0 { label } else { "" };
                let _ = writeln!(out, "  {label:<17}{line}");
            }
        }
    }
    if !report.file_errors.is_empty() {
        let _ = writeln!(out, "\nfiles with errors:");
        for diagnostic in &report.file_errors {
            let _ = writeln!(out, "  {}", diagnostic.shown);
        }
    }
    if let Some(verification) = &report.commit_verification {
        out.push_str(&crate::cli::plan_verify::render(verification, false));
    }
    out
}
