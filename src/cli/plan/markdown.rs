//! The plan for a PR comment: a table per promotion, with the clusters each stage would hit and
//! the estimated timeline when the report was built with the fleet.

use std::fmt::Write as _;

use super::report::PlanReport;

/// Table cells must not break the table: pipes escaped, one line.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

pub fn render(report: &PlanReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## tollgate plan: `{}` → `{}`\n\n{}",
        report.from.label(),
        report.to.label(),
        report.summary_counts()
    );
    if let Some(base) = &report.merge_base {
        let _ = writeln!(out, "\n{}", base.line());
    }
    if let Some(warning) = &report.fleet_warning {
        let _ = writeln!(out, "\n> **warning**: {}", warning.replace('\n', " "));
    }
    for promotion in &report.promotions {
        let _ = writeln!(
            out,
            "\n### `{}`: {}\n\n| | |\n|---|---|",
            promotion.name,
            cell(&promotion.headline)
        );
        for (label, text) in &promotion.details {
            let _ = writeln!(out, "| {label} | {} |", cell(text));
        }
        for (stage, targets) in &promotion.clusters {
            let _ = writeln!(out, "| clusters | {}: {} |", cell(stage), cell(targets));
        }
        if let Some(timeline) = &promotion.timeline {
            let _ = write!(out, "\n**Estimated timeline**\n\n{timeline}");
        }
    }
    if !report.file_errors.is_empty() {
        let _ = writeln!(out, "\n### Files with errors\n");
        for diagnostic in &report.file_errors {
            let _ = writeln!(out, "- `{}`", diagnostic.shown.replace('`', "'"));
        }
    }
    if let Some(verification) = &report.commit_verification {
        out.push_str(&crate::cli::plan_verify::render(verification, true));
    }
    out
}
