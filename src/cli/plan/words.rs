//! The words of a plan: each promotion's headline and detail rows, shared by the text and
//! Markdown outputs, and the warnings the JSON output lists too.

use std::fmt::Write as _;

use tollgate_engine::lineage::Lineage;
use tollgate_engine::preview::{RunStart, StartsAfter};
use tollgate_engine::{GateVerdict, Preview, RunChange};
use tollgate_manifest::snapshot::short_sha as short;
use tollgate_model::policy::OnNewSnapshot;
use tollgate_source::plan::{ChartChange, ChartRef, PlanStatus, PromotionPlan};

use super::gates;
use super::planned::{Planned, new_run_snapshot, touched};

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

pub fn headline(planned: &Planned<'_>) -> String {
    let recovered = planned.plan.status == PlanStatus::Recovered;
    let mut line = match &planned.preview.run {
        RunChange::Starts if recovered => "valid again: the pipeline starts at stage 1".to_string(),
        RunChange::Starts => "added: the pipeline starts at stage 1".to_string(),
        RunChange::Restarts { .. } if recovered => {
            "valid again: the pipeline restarts from stage 1".to_string()
        }
        RunChange::Restarts {
            profile_spec_changed,
            stages_changed,
            ..
        } => {
            let mut changed = Vec::new();
            if *profile_spec_changed {
                changed.push("profileSpec");
            }
            if *stages_changed {
                changed.push("stages");
            }
            format!("RESTART from stage 1 ({} changed)", changed.join(" and "))
        }
        RunChange::Continues if recovered => {
            "valid again, no restart (same content as its last good snapshot)".to_string()
        }
        RunChange::Continues if planned.plan.status == PlanStatus::Unchanged => {
            "unchanged".to_string()
        }
        RunChange::Continues => "changed, no restart (trigger or metadata edit only)".to_string(),
        RunChange::Invalid { keeps: Some(_) } => {
            "INVALID at `to`: the last good snapshot keeps running".to_string()
        }
        RunChange::Invalid { keeps: None } => "INVALID at `to`: nothing runs".to_string(),
        RunChange::Removed => "removed".to_string(),
    };
    if let Some(note) = lineage_note(&planned.preview) {
        let _ = write!(line, "; {note}");
    }
    line
}

pub fn rollback_of(preview: &Preview) -> Option<u64> {
    match &preview.run {
        RunChange::Restarts {
            lineage: Some(lineage),
            ..
        } => lineage.rollback_to(),
        _ => None,
    }
}

/// What content equal to an earlier snapshot's means for this change: a rollback only when that
/// content completed a run (the engine's rule, `lineage`); unknown without the live status.
fn lineage_note(preview: &Preview) -> Option<String> {
    let RunChange::Restarts {
        same_content_as,
        lineage,
        ..
    } = &preview.run
    else {
        return None;
    };
    let same = (*same_content_as)?;
    Some(match lineage {
        Some(Lineage::Rollback { to }) => format!("rollback to #{to}"),
        Some(Lineage::RejectedContent { of, at, reason }) => format!(
            "same content as snapshot #{of}, rejected at {}: {reason}; a new change, not a rollback",
            at.format("%Y-%m-%d %H:%M UTC")
        ),
        Some(Lineage::Forward) => format!(
            "same content as snapshot #{same}, which never completed a run here: a new change, not a rollback"
        ),
        None => format!(
            "same content as snapshot #{same}: a rollback if #{same} completed its run (the cluster was not read)"
        ),
    })
}

fn gate_text(stage: &str, verdict: &GateVerdict) -> String {
    match verdict {
        GateVerdict::Approved(approver) => format!(
            "{stage}: passes: approved by {} (commit {}, {})",
            approver.author.as_deref().unwrap_or("an unknown author"),
            approver.sha.as_deref().map(short).unwrap_or("-"),
            approver.kind
        ),
        GateVerdict::Standing => {
            format!("{stage}: passes: standing approval (automaticReset: false, approved: true)")
        }
        GateVerdict::Waits(hint) => {
            let how = hint.strip_prefix("waiting for approval: ").unwrap_or(hint);
            format!("{stage}: approval needed once the run reaches it: {how}")
        }
    }
}

/// The warnings the preview calls for: what a removal does to the profiles, prunes, empty stages.
pub fn warnings(planned: &Planned<'_>) -> Vec<String> {
    let preview = &planned.preview;
    let mut warnings = Vec::new();
    if preview.run == RunChange::Removed {
        if !preview.pruned.is_empty() {
            warnings.push(format!(
                "removal deletes the {} generated ClusterProfile(s): add-ons are withdrawn from every matching cluster (set preserveClusterProfilesOnDelete: true first to keep them)",
                preview.pruned.len()
            ));
        }
        if !preview.kept.is_empty() {
            warnings.push(format!(
                "removal keeps the {} generated ClusterProfile(s) (preserveClusterProfilesOnDelete: true): add-ons stay deployed, unmanaged",
                preview.kept.len()
            ));
        }
        return warnings;
    }
    for profile in &preview.pruned {
        warnings.push(format!(
            "generated ClusterProfile {profile} is pruned: its stage is removed"
        ));
    }
    if touched(planned) {
        for stage in &preview.empty_stages {
            warnings.push(format!(
                "stage {stage:?} has an empty clusterSelector: it matches no cluster and completes at once (Skipped: no matching clusters)"
            ));
        }
    }
    warnings
}

/// The detail lines of one promotion, as (label, text) pairs shared by text and Markdown.
pub fn details(planned: &Planned<'_>) -> Vec<(&'static str, String)> {
    let (plan, preview) = (planned.plan, &planned.preview);
    let mut rows = Vec::new();
    if let Some(file) = &plan.file {
        rows.push(("file", file.clone()));
    }
    let id = |id: &str| id[..12.min(id.len())].to_string();
    match (plan.snapshot_from(), plan.snapshot_to()) {
        (Some(old), Some(new)) if old != new => {
            rows.push(("snapshot", format!("{} → {}", id(old), id(new))));
        }
        (_, Some(new)) => rows.push(("snapshot", id(new))),
        (Some(old), None) => rows.push(("snapshot", format!("{} (at from)", id(old)))),
        (None, None) => {}
    }
    if let Some(note) = lineage_note(preview) {
        rows.push(("rollback", note));
    }
    if touched(planned) {
        if let Some(policy) = &plan.policy {
            rows.extend(tollgate_source::plan::describe_policy(policy));
        }
        if let Some(start) = &preview.run_start {
            rows.extend(run_start_rows(start));
        }
        if let Some(error) = &plan.policy_error {
            rows.push(("policy", format!("none can be chosen: {error}")));
        }
    }
    if !preview.stages_run.is_empty() {
        rows.push(("stages that run", preview.stages_run.join(" → ")));
    } else if preview.run == RunChange::Continues {
        rows.push(("stages that run", "none re-run".to_string()));
    }
    if touched(planned) {
        for gate in &preview.gates {
            rows.push(("approval", gate_text(&gate.stage, &gate.verdict)));
        }
    }
    if let Some(snapshot) = new_run_snapshot(planned).filter(|_| touched(planned)) {
        rows.extend(gates::rows(&snapshot.promotion, plan.policy.as_deref()));
        rows.extend(depends_on_rows(&snapshot.promotion));
    }
    rows.extend(content_change_rows(plan));
    for warning in warnings(planned) {
        rows.push(("warning", warning));
    }
    for diagnostic in &plan.diagnostics {
        rows.push(("error", diagnostic.to_string()));
    }
    rows
}

/// What the commit changes in the promotion: selectors, stages, charts, profileSpec fields,
/// triggers.
fn content_change_rows(plan: &PromotionPlan) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
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
    rows
}

/// `tollgate.dev/depends-on`: what each stage's start waits for (a dependency without a stage of
/// that name holds nothing; the live view says which ones still hold).
fn depends_on_rows(
    promotion: &tollgate_manifest::model::ClusterPromotion,
) -> Vec<(&'static str, String)> {
    let dependencies = tollgate_model::depends_on::depends_on(promotion);
    if dependencies.is_empty() {
        return Vec::new();
    }
    promotion
        .spec
        .stages
        .iter()
        .map(|stage| {
            let waits: Vec<String> = dependencies
                .iter()
                .map(|d| format!("{d}/{}", stage.name))
                .collect();
            (
                "order",
                format!(
                    "stage {} {}",
                    stage.name,
                    tollgate_engine::depends_on::waits_for_text(&waits)
                ),
            )
        })
        .collect()
}

/// What the engine says about when the run starts: `onNewSnapshot` and a blackout in force.
fn run_start_rows(start: &RunStart) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    let when = match &start.after {
        StartsAfter::Nothing { supersedes: None } => None,
        StartsAfter::Nothing {
            supersedes: Some(running),
        } => Some(format!(
            "Restart: run #{running} in progress is superseded; this run starts at once"
        )),
        StartsAfter::NothingAsARollback => Some(
            "a rollback: it starts at once whatever onNewSnapshot says, and no blackout holds it"
                .to_string(),
        ),
        StartsAfter::RunningRun {
            policy,
            running,
            between,
        } => Some(running_run_text(*policy, *running, between)),
        StartsAfter::RunInProgressIfAny { policy } => Some(match policy {
            OnNewSnapshot::Queue => "Queue: a run in progress completes first; then every newer snapshot runs in commit order, this one last".to_string(),
            _ => "FinishCurrent: a run in progress completes with its snapshot first; then this one starts (snapshots in between are superseded)".to_string(),
        }),
        // The policy row already says why no policy can be chosen.
        StartsAfter::PolicyProblem { .. } => None,
    };
    if let Some(when) = when {
        rows.push(("new commits", when));
    }
    if let Some(blackout) = &start.blackout {
        let reason = blackout
            .reason
            .as_ref()
            .map_or(String::new(), |r| format!(" ({r})"));
        rows.push((
            "blackout",
            format!(
                "in force until {}{reason}: no stage of this run starts before then",
                blackout.until.format("%Y-%m-%d %H:%M UTC")
            ),
        ));
    }
    rows
}

fn running_run_text(policy: OnNewSnapshot, running: u64, between: &[u64]) -> String {
    let named = between
        .iter()
        .map(|i| format!("#{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    match (policy, between.is_empty()) {
        (OnNewSnapshot::Queue, false) => format!(
            "Queue: run #{running} in progress completes first, then {named} in commit order; then this one"
        ),
        (_, false) => format!(
            "{}: run #{running} in progress completes first; then this one starts ({named} superseded)",
            policy.as_str()
        ),
        (_, true) => format!(
            "{}: run #{running} in progress completes first; then this one starts",
            policy.as_str()
        ),
    }
}
