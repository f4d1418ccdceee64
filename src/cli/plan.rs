//! `tollgate plan --from REV --to REV`: what a commit range would do, per promotion, from git
//! alone (no cluster). Text for terminals, Markdown for a PR comment, JSON for machines.
//! Exit 0 planned, 1 `to` has invalid promotions, 2 usage or repository errors.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};
use tollgate_source::plan::{
    ChartChange, ChartRef, PlanStatus, PromotionPlan, RangePlan, Revision, plan_range,
};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Markdown,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The range's start (a commit, branch or tag: what runs now).
    #[arg(long)]
    pub from: String,
    /// The range's end (what would run after the merge).
    #[arg(long)]
    pub to: String,
    /// Local repository.
    #[arg(long, default_value = ".")]
    pub repo: String,
    /// Sub-path of the repository holding the manifests ("" = the whole repository).
    #[arg(long, default_value = "")]
    pub path: String,
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: OutputFormat,
}

const EXIT_INVALID: u8 = 1;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let plan = plan_range(Path::new(&args.repo), &args.from, &args.to, &args.path)
        .context("cannot plan the range")?;
    let output = match args.output {
        OutputFormat::Text => render_text(&plan),
        OutputFormat::Markdown => render_markdown(&plan),
        OutputFormat::Json => format!("{}\n", serde_json::to_string_pretty(&to_json(&plan))?),
    };
    super::write_stdout(&output)?;
    Ok(if plan.has_invalid() {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    })
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(8)]
}

fn revision_label(revision: &Revision) -> String {
    if revision.rev == revision.sha {
        short(&revision.sha).to_string()
    } else {
        format!("{} ({})", revision.rev, short(&revision.sha))
    }
}

fn chart_text(chart: &ChartRef) -> String {
    format!(
        "{} {} from {}",
        chart.chart_name, chart.chart_version, chart.repository_url
    )
}

fn chart_change_text(change: &ChartChange) -> String {
    match (&change.old, &change.new) {
        (Some(old), Some(new)) => {
            let mut parts = Vec::new();
            if old.chart_version != new.chart_version {
                parts.push(format!(
                    "chartVersion {} → {}",
                    old.chart_version, new.chart_version
                ));
            }
            if old.chart_name != new.chart_name {
                parts.push(format!("chartName {} → {}", old.chart_name, new.chart_name));
            }
            if old.repository_url != new.repository_url {
                parts.push(format!(
                    "repositoryURL {} → {}",
                    old.repository_url, new.repository_url
                ));
            }
            format!("{}: {}", change.release, parts.join(", "))
        }
        (None, Some(new)) => format!("{}: added ({})", change.release, chart_text(new)),
        (Some(old), None) => format!("{}: removed (was {})", change.release, chart_text(old)),
        (None, None) => change.release.clone(),
    }
}

/// One headline per promotion status.
fn headline(plan: &PromotionPlan) -> String {
    let mut line = match plan.status {
        PlanStatus::Added => "added: the pipeline starts at stage 1".to_string(),
        PlanStatus::Removed => "removed".to_string(),
        PlanStatus::Restart => {
            let mut changed = Vec::new();
            if plan.profile_spec_changed {
                changed.push("profileSpec");
            }
            if plan.stages_changed {
                changed.push("stages");
            }
            format!("RESTART from stage 1 ({} changed)", changed.join(" and "))
        }
        PlanStatus::TriggerOnly => {
            "changed, no restart (trigger or metadata edit only)".to_string()
        }
        PlanStatus::Unchanged => "unchanged".to_string(),
        PlanStatus::Invalid => "INVALID at `to`: the last good snapshot keeps running".to_string(),
        PlanStatus::Recovered if plan.stages_rerun.is_empty() => {
            "valid again, no restart (same content as its last good snapshot)".to_string()
        }
        PlanStatus::Recovered => "valid again: the pipeline restarts from stage 1".to_string(),
    };
    if let Some(index) = plan.rollback_to {
        let _ = write!(line, "; rollback to #{index}");
    }
    line
}

/// The detail lines of one promotion, as (label, text) pairs shared by text and Markdown.
fn details(plan: &PromotionPlan) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    if let Some(file) = &plan.file {
        rows.push(("file", file.clone()));
    }
    match (&plan.snapshot_from, &plan.snapshot_to) {
        (Some(old), Some(new)) if old != new => {
            rows.push((
                "snapshot",
                format!(
                    "{} → {}",
                    &old[..12.min(old.len())],
                    &new[..12.min(new.len())]
                ),
            ));
        }
        (_, Some(new)) => rows.push(("snapshot", new[..12.min(new.len())].to_string())),
        (Some(old), None) => rows.push((
            "snapshot",
            format!("{} (at from)", &old[..12.min(old.len())]),
        )),
        (None, None) => {}
    }
    if let Some(index) = plan.rollback_to {
        rows.push((
            "rollback",
            format!("rollback to #{index}: same content as snapshot #{index}"),
        ));
    }
    if !plan.stages_rerun.is_empty() {
        rows.push(("stages that run", plan.stages_rerun.join(" → ")));
    } else if matches!(
        plan.status,
        PlanStatus::TriggerOnly | PlanStatus::Unchanged | PlanStatus::Recovered
    ) {
        rows.push(("stages that run", "none re-run".to_string()));
    }
    for approval in &plan.approvals {
        let how = match approval.need {
            tollgate_source::plan::Need::Fresh => format!(
                "fresh approval needed: `tollgate approve {} {}` after the run reaches it (automaticReset: true)",
                plan.name, approval.stage
            ),
            tollgate_source::plan::Need::Standing => {
                "passes: standing approval (automaticReset: false, approved: true)".to_string()
            }
            tollgate_source::plan::Need::Pending => format!(
                "approval needed: `tollgate approve {} {}` or approved: true (automaticReset: false)",
                plan.name, approval.stage
            ),
        };
        rows.push(("approval", format!("{}: {how}", approval.stage)));
    }
    for change in &plan.selector_changes {
        rows.push((
            "selector",
            format!("{}: {} → {}", change.stage, change.old, change.new),
        ));
    }
    if !plan.stages_added.is_empty() {
        rows.push(("stages added", plan.stages_added.join(", ")));
    }
    if !plan.stages_removed.is_empty() {
        rows.push(("stages removed", plan.stages_removed.join(", ")));
    }
    if let Some((old, new)) = &plan.stages_reordered {
        rows.push((
            "stages reordered",
            format!("{} → {}", old.join(", "), new.join(", ")),
        ));
    }
    for change in &plan.chart_changes {
        rows.push(("chart", chart_change_text(change)));
    }
    if !plan.profile_fields_changed.is_empty() {
        rows.push((
            "profileSpec",
            format!("changed: {}", plan.profile_fields_changed.join(", ")),
        ));
    }
    for change in &plan.trigger_changes {
        rows.push((
            "trigger",
            format!("{}: {} → {}", change.stage, change.old, change.new),
        ));
    }
    for warning in &plan.warnings {
        rows.push(("warning", warning.clone()));
    }
    for diagnostic in &plan.diagnostics {
        rows.push(("error", diagnostic.to_string()));
    }
    rows
}

fn summary_counts(plan: &RangePlan) -> String {
    let count = |status: PlanStatus| {
        plan.promotions
            .iter()
            .filter(|p| p.status == status)
            .count()
    };
    let mut parts = Vec::new();
    for status in [
        PlanStatus::Restart,
        PlanStatus::Added,
        PlanStatus::Removed,
        PlanStatus::TriggerOnly,
        PlanStatus::Recovered,
        PlanStatus::Invalid,
        PlanStatus::Unchanged,
    ] {
        let n = count(status);
        if n > 0 {
            parts.push(format!("{n} {}", status.as_str()));
        }
    }
    if parts.is_empty() {
        "no promotions".to_string()
    } else {
        parts.join(", ")
    }
}

pub fn render_text(plan: &RangePlan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan {} → {}: {}",
        revision_label(&plan.from),
        revision_label(&plan.to),
        summary_counts(plan)
    );
    for promotion in &plan.promotions {
        let _ = writeln!(out, "\n{}: {}", promotion.name, headline(promotion));
        for (label, text) in details(promotion) {
            let _ = writeln!(out, "  {label:<17}{text}");
        }
    }
    if !plan.file_errors.is_empty() {
        let _ = writeln!(out, "\nfiles with errors:");
        for diagnostic in &plan.file_errors {
            let _ = writeln!(out, "  {diagnostic}");
        }
    }
    out
}

/// Table cells must not break the table: pipes escaped, one line.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

pub fn render_markdown(plan: &RangePlan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## tollgate plan: `{}` → `{}`\n\n{}",
        revision_label(&plan.from),
        revision_label(&plan.to),
        summary_counts(plan)
    );
    for promotion in &plan.promotions {
        let _ = writeln!(
            out,
            "\n### `{}`: {}\n\n| | |\n|---|---|",
            promotion.name,
            cell(&headline(promotion))
        );
        for (label, text) in details(promotion) {
            let _ = writeln!(out, "| {label} | {} |", cell(&text));
        }
    }
    if !plan.file_errors.is_empty() {
        let _ = writeln!(out, "\n### Files with errors\n");
        for diagnostic in &plan.file_errors {
            let _ = writeln!(out, "- `{}`", diagnostic.to_string().replace('`', "'"));
        }
    }
    out
}

fn chart_json(chart: Option<&ChartRef>) -> Value {
    chart.map_or(Value::Null, |c| {
        json!({
            "repositoryURL": c.repository_url,
            "chartName": c.chart_name,
            "chartVersion": c.chart_version,
        })
    })
}

fn promotion_json(plan: &PromotionPlan) -> Value {
    json!({
        "name": plan.name,
        "file": plan.file,
        "status": plan.status.as_str(),
        "restart": plan.status == PlanStatus::Restart,
        "profileSpecChanged": plan.profile_spec_changed,
        "stagesChanged": plan.stages_changed,
        "snapshotFrom": plan.snapshot_from,
        "snapshotTo": plan.snapshot_to,
        "rollbackTo": plan.rollback_to,
        "stagesRerun": plan.stages_rerun,
        "approvals": plan.approvals.iter().map(|a| json!({
            "stage": a.stage,
            "need": match a.need {
                tollgate_source::plan::Need::Fresh => "fresh",
                tollgate_source::plan::Need::Standing => "standing",
                tollgate_source::plan::Need::Pending => "pending",
            },
        })).collect::<Vec<_>>(),
        "selectorChanges": plan.selector_changes.iter().map(|c| json!({
            "stage": c.stage, "old": c.old, "new": c.new,
        })).collect::<Vec<_>>(),
        "stagesAdded": plan.stages_added,
        "stagesRemoved": plan.stages_removed,
        "stagesReordered": plan.stages_reordered.as_ref().map(|(old, new)| json!({"old": old, "new": new})),
        "chartChanges": plan.chart_changes.iter().map(|c| json!({
            "release": c.release,
            "old": chart_json(c.old.as_ref()),
            "new": chart_json(c.new.as_ref()),
        })).collect::<Vec<_>>(),
        "profileSpecFieldsChanged": plan.profile_fields_changed,
        "triggerChanges": plan.trigger_changes.iter().map(|c| json!({
            "stage": c.stage, "old": c.old, "new": c.new,
        })).collect::<Vec<_>>(),
        "warnings": plan.warnings,
        "diagnostics": plan.diagnostics.iter().map(diagnostic_json).collect::<Vec<_>>(),
    })
}

fn diagnostic_json(diagnostic: &tollgate_source::Diagnostic) -> Value {
    json!({
        "file": diagnostic.file,
        "line": diagnostic.line,
        "column": diagnostic.column,
        "path": diagnostic.path,
        "code": diagnostic.code,
        "message": diagnostic.message,
    })
}

pub fn to_json(plan: &RangePlan) -> Value {
    let revision = |r: &Revision| json!({"rev": r.rev, "sha": r.sha, "subject": r.subject});
    json!({
        "from": revision(&plan.from),
        "to": revision(&plan.to),
        "invalid": plan.has_invalid(),
        "promotions": plan.promotions.iter().map(promotion_json).collect::<Vec<_>>(),
        "fileErrors": plan.file_errors.iter().map(diagnostic_json).collect::<Vec<_>>(),
    })
}
