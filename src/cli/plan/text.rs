//! The plan for a terminal.

use std::fmt::Write as _;

use super::report::PlanReport;

pub fn render(report: &PlanReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan {} → {}: {}",
        report.from.label(),
        report.to.label(),
        report.summary_counts()
    );
    if let Some(base) = &report.merge_base {
        let _ = writeln!(out, "{}", base.line());
    }
    if let Some(warning) = &report.fleet_warning {
        let _ = writeln!(out, "warning: {}", warning.replace('\n', " "));
    }
    for promotion in &report.promotions {
        let _ = writeln!(out, "\n{}: {}", promotion.name, promotion.headline);
        for (label, text) in &promotion.details {
            let _ = writeln!(out, "  {label:<17}{text}");
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
