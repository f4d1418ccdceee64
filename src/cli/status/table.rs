//! The plain text output: an overview table of all promotions, or one promotion in detail.
//! Stable for scripts: no escapes, no times relative to now.

use chrono::{DateTime, SecondsFormat, Utc};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use tollgate_engine::conditions;
use tollgate_engine::{Phase, PromotionStatus, RunFailure, StageStatus};

use super::Shown;

pub(super) use tollgate_manifest::snapshot::short_sha as short;

/// A timestamp as RFC 3339 to the second (never nanoseconds).
pub(super) fn time(at: Option<DateTime<Utc>>) -> String {
    at.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_default()
}

fn snapshot_label(status: &PromotionStatus) -> String {
    let Some(index) = status.snapshot_index else {
        return String::new();
    };
    let commit = status.snapshot_commit.as_deref().unwrap_or_default();
    let mut label = format!("#{index} {}", short(commit));
    if let Some(rollback) = status.rollback_of {
        label.push_str(&format!(" (rollback to #{rollback})"));
    }
    label
}

fn table() -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    table
}

pub(super) fn render_overview(shown: &[Shown]) -> String {
    if shown.is_empty() {
        return "no promotions\n".into();
    }
    let mut table = table();
    table.set_header([
        "PROMOTION",
        "PHASE",
        "STAGE",
        "SNAPSHOT",
        "MESSAGE",
        "NEXT WAKE-UP",
    ]);
    for promotion in shown {
        let row = match &promotion.status {
            Ok(Some(status)) => [
                promotion.name.clone(),
                status.phase.as_str().to_string(),
                status.current_stage_name.clone().unwrap_or_default(),
                snapshot_label(status),
                status.message.clone().unwrap_or_default(),
                time(status.next_wake_up),
            ],
            Ok(None) => [
                promotion.name.clone(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ],
            Err(error) => [
                promotion.name.clone(),
                String::new(),
                String::new(),
                String::new(),
                error.clone(),
                String::new(),
            ],
        };
        table.add_row(row);
    }
    format!("{table}\n")
}

pub(super) fn render_detail(promotion: &Shown) -> String {
    let status = match &promotion.status {
        Ok(Some(status)) => status,
        Ok(None) => return format!("Promotion:    {}\n(no status yet)\n\n", promotion.name),
        Err(error) => return format!("Promotion:    {}\n{error}\n\n", promotion.name),
    };
    let mut out = format!(
        "Promotion:    {}\nPhase:        {}\nStage:        {}\nSnapshot:     {}\n",
        promotion.name,
        status.phase.as_str(),
        status.current_stage_name.as_deref().unwrap_or_default(),
        snapshot_label(status),
    );
    for (label, value) in [
        ("Message", status.message.clone()),
        ("Next wake-up", status.next_wake_up.map(|t| time(Some(t)))),
        ("Paused since", status.paused_since.map(|t| time(Some(t)))),
        ("Invalid spec", status.invalid_spec.clone()),
        (
            "Policy error",
            conditions::problem(status, conditions::POLICY_VALID).map(|c| c.message.clone()),
        ),
        (
            "Warning",
            conditions::problem(status, conditions::REJECTED_CONTENT).map(|c| c.message.clone()),
        ),
        (
            "Policy",
            status
                .policy
                .as_ref()
                .map(|p| format!("{} (version {})", p.name, p.version)),
        ),
    ] {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            out.push_str(&format!("{:<14}{value}\n", format!("{label}:")));
        }
    }
    let mut table = table();
    table.set_header([
        "STAGE",
        "SNAPSHOT",
        "CLUSTERS",
        "FAILED",
        "STATUS",
        "WAITING FOR",
        "APPROVER",
    ]);
    for stage in &status.stages {
        let approver = match stage.approver.as_deref() {
            Some(approver) if approver.sha.is_some() => format!(
                "{} ({}, {})",
                approver.author.as_deref().unwrap_or_default(),
                approver.kind,
                short(approver.sha.as_deref().unwrap_or_default())
            ),
            _ => String::new(),
        };
        table.add_row([
            stage.name.clone(),
            format!("#{}", stage.snapshot_index),
            format!(
                "{}/{} provisioned",
                stage.counts.provisioned, stage.counts.matching_clusters
            ),
            stage.counts.failed.to_string(),
            stage.current_status_description.clone().unwrap_or_default(),
            stage.waiting_reason.clone().unwrap_or_default(),
            approver,
        ]);
    }
    out.push_str(&format!("{table}\n"));
    if let Some(failure) = &status.failure {
        out.push_str(&render_failure(status, failure));
    }
    for stage in &status.stages {
        out.push_str(&render_clusters(stage));
    }
    out.push('\n');
    out
}

/// The failed stage, why, what the rollback did, and what the user does next.
fn render_failure(status: &PromotionStatus, failure: &RunFailure) -> String {
    let commit = status
        .snapshot_commit
        .as_deref()
        .map(short)
        .unwrap_or_default();
    let mut out = format!(
        "\nFAILED: stage {} with snapshot #{} at {} (onFailure: {})\n  {}\n",
        failure.stage,
        failure.snapshot_index,
        time(Some(failure.at)),
        failure.on_failure,
        failure.reason
    );
    for restored in &failure.rollback {
        let to = restored
            .to_snapshot
            .map_or("withdrawn".to_string(), |i| format!("snapshot #{i}"));
        let state = if restored.restored_at.is_some() {
            "restored"
        } else if restored.applied_at.is_some() {
            "restoring"
        } else {
            "to restore"
        };
        out.push_str(&format!(
            "  rollback: stage {} → {to}: {state}\n",
            restored.name
        ));
    }
    let next = match status.phase {
        Phase::RollingBack => {
            "wait for the rollback to finish; then commit a fix, or revert to acknowledge"
                .to_string()
        }
        Phase::RolledBack => format!(
            "commit a fix (a new snapshot starts a new run), or `git revert {commit}` to acknowledge the rollback"
        ),
        _ => format!(
            "fix the cause and commit (a new snapshot starts a new run), or `git revert {commit}`"
        ),
    };
    out.push_str(&format!("  next: {next}\n"));
    out
}

/// A stage's clusters that are not Provisioned, with why and since when.
fn render_clusters(stage: &StageStatus) -> String {
    if stage.not_provisioned.is_empty() && !stage.skipped {
        return String::new();
    }
    let mut out = format!("\nStage {}:", stage.name);
    if stage.skipped {
        out.push_str(" Skipped: no matching clusters");
    }
    let counts = &stage.counts;
    if !stage.not_provisioned.is_empty() {
        out.push_str(&format!(
            " {} pending, {} provisioning, {} failed, {} timed out",
            counts.pending, counts.provisioning, counts.failed, counts.timed_out
        ));
    }
    if let Some(allowed) = stage.allowed_failures {
        out.push_str(&format!(" (tolerated: {allowed})"));
    }
    if let Some(deadline) = stage.deadline {
        out.push_str(&format!("; deadline {}", time(Some(deadline))));
    }
    out.push('\n');
    if stage.not_provisioned.is_empty() {
        return out;
    }
    let mut table = table();
    table.set_header(["CLUSTER", "STATE", "SINCE", "MESSAGE"]);
    for cluster in &stage.not_provisioned {
        table.add_row([
            cluster.cluster.clone(),
            cluster.state.as_str().to_string(),
            time(Some(cluster.since)),
            cluster.message.clone().unwrap_or_default(),
        ]);
    }
    out.push_str(&format!("{table}\n"));
    if stage.not_provisioned_unlisted > 0 {
        out.push_str(&format!(
            "… and {} more not Provisioned\n",
            stage.not_provisioned_unlisted
        ));
    }
    out
}
