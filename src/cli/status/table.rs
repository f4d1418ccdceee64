//! The plain text output: an overview table of all promotions, or one promotion in detail, as
//! wide as the terminal (80 columns when it cannot tell or when piped), wrapped at word
//! boundaries. Stable for scripts: no escapes, no times relative to now.

use tollgate_engine::conditions;
use tollgate_engine::pipeline::StageView;
use tollgate_engine::status::{ClusterCondition, StageCounts};
use tollgate_engine::{Phase, PromotionStatus, RunFailure};

use super::Shown;
use super::quoted_errors::QuotedErrors;
use crate::views::fit;
use crate::views::relative::time;
use crate::views::stage_words::{self, Times};

pub(super) use tollgate_manifest::snapshot::short_sha as short;

fn snapshot_label(status: &PromotionStatus) -> String {
    let Some(index) = status.snapshot_index else {
        return String::new();
    };
    let commit = status.snapshot_commit.as_deref().unwrap_or_default();
    let mut label = format!("#{index} {}", short(commit));
    if let Some(rollback) = status.rollback_of {
        let mode = match status.rollback {
            Some(mode) => format!(", {}", mode.as_str().to_lowercase()),
            None => String::new(),
        };
        label.push_str(&format!(" (rollback to #{rollback}{mode})"));
    }
    label
}

/// What the newest retry did (`Retry` condition): re-driven, or refused and why.
fn retry_line(status: &PromotionStatus) -> Option<String> {
    let retry = status
        .conditions
        .iter()
        .find(|c| c.type_ == tollgate_engine::retry::RETRY_CONDITION)?;
    Some(match retry.status.as_str() {
        "True" => retry.message.clone(),
        _ => format!("refused: {}", retry.message),
    })
}

/// The stage the promotion's phase is about (the engine's projection names it).
fn stage_label(status: &PromotionStatus) -> String {
    status.current_stage().unwrap_or_default().to_string()
}

pub(super) fn render_overview(shown: &[Shown], width: usize) -> String {
    if shown.is_empty() {
        return "no promotions\n".into();
    }
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|promotion| match &promotion.status {
            Ok(Some(status)) => vec![
                promotion.name.clone(),
                status.phase.as_str().to_string(),
                stage_label(status),
                snapshot_label(status),
                overview_message(status),
                time(status.next_wake_up),
            ],
            Ok(None) => vec![promotion.name.clone()],
            Err(error) => vec![
                promotion.name.clone(),
                String::new(),
                String::new(),
                String::new(),
                error.clone(),
            ],
        })
        .collect();
    let header = [
        "PROMOTION",
        "PHASE",
        "STAGE",
        "SNAPSHOT",
        "MESSAGE",
        "NEXT WAKE-UP",
    ];
    let without_wake_up: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().take(5).cloned().collect())
        .collect();
    // Too narrow for every column: the wake-up goes (`status NAME` has it), not half of a time.
    // Too narrow even then: one record per promotion, every column in it.
    if !fit::fits_whole_words(&header, &rows, width)
        && fit::fits_whole_words(&header[..5], &without_wake_up, width)
    {
        return fit::table(&header[..5], &without_wake_up, width);
    }
    fit::table(&header, &rows, width)
}

/// The overview's message: a refused commit first (it is not in what the run does), then what
/// the run does.
fn overview_message(status: &PromotionStatus) -> String {
    let message = status.message.clone().unwrap_or_default();
    match status.commit_refusal() {
        Some(refusal) if message.is_empty() => format!("refused: {refusal}"),
        Some(refusal) => format!("refused: {refusal}; {message}"),
        None => message,
    }
}

/// Where the labels of the detail's first lines end.
const LABEL: usize = 14;

pub(super) fn render_detail(promotion: &Shown, width: usize) -> String {
    let status = match &promotion.status {
        Ok(Some(status)) => status,
        Ok(None) => return format!("Promotion:    {}\n(no status yet)\n\n", promotion.name),
        Err(error) => return format!("Promotion:    {}\n{error}\n\n", promotion.name),
    };
    let pipeline = status.pipeline();
    let quoted = QuotedErrors::of(status);
    let stage = Some(stage_label(status)).filter(|s| !s.is_empty());
    let snapshot = match status.snapshot_index {
        Some(_) => snapshot_label(status),
        None => "none running yet".to_string(),
    };
    let mut out = String::new();
    for (label, value) in [
        ("Promotion", Some(promotion.name.clone())),
        ("Phase", Some(phase_line(status))),
        ("Stage", stage),
        ("Snapshot", Some(snapshot)),
        (
            "Message",
            status.message.as_deref().map(|m| quoted.point(m)),
        ),
        ("Next wake-up", status.next_wake_up.map(|t| time(Some(t)))),
        ("Paused since", status.paused_since.map(|t| time(Some(t)))),
        ("Invalid spec", status.invalid_spec.clone()),
        ("Refused", status.commit_refusal().map(str::to_string)),
        (
            "Policy error",
            conditions::problem(status, conditions::POLICY_VALID).map(|c| c.message.clone()),
        ),
        (
            "Warning",
            conditions::problem(status, conditions::REJECTED_CONTENT).map(|c| c.message.clone()),
        ),
        ("Retry", retry_line(status)),
        (
            "Queued",
            // A held snapshot does not start when the run finishes: the message says what it
            // waits for.
            status
                .queued_snapshot
                .filter(|_| status.phase != Phase::Held)
                .map(|q| format!("snapshot #{q} starts when this run finishes")),
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
            out.push_str(&labelled(&format!("{label}:"), &value, width));
        }
    }
    out.push_str(&render_stages(&pipeline, &quoted, width));
    for view in &pipeline {
        out.push_str(&render_approver(view, width));
        out.push_str(&render_quorum(view, width));
    }
    if let Some(failure) = &status.failure {
        out.push_str(&render_failure(status, failure, &quoted, width));
    }
    for view in &pipeline {
        out.push_str(&render_clusters(view, width));
    }
    for view in &pipeline {
        out.push_str(&super::analyses::render(view, &quoted, width));
    }
    out.push('\n');
    out
}

/// The phase, and since when the promotion has been in it (the live view's "for 3m").
fn phase_line(status: &PromotionStatus) -> String {
    match status.phase_since {
        Some(since) => format!("{} since {}", status.phase.as_str(), time(Some(since))),
        None => status.phase.as_str().to_string(),
    }
}

/// `label` then `value`, wrapped at word boundaries under the value's first column.
fn labelled(label: &str, value: &str, width: usize) -> String {
    let wrapped = fit::wrap(value, width.saturating_sub(LABEL).max(20));
    let mut out = String::new();
    for (i, line) in wrapped.lines().enumerate() {
        let label = if i == 0 { label } else { "" };
        out.push_str(&format!("{label:<LABEL$}{line}\n"));
    }
    out
}

/// Every stage of the pipeline: the snapshot it runs, its counts over its members, what it does.
fn render_stages(pipeline: &[StageView<'_>], quoted: &QuotedErrors, width: usize) -> String {
    let rows: Vec<Vec<String>> = pipeline
        .iter()
        .map(|view| {
            vec![
                view.name.to_string(),
                view.snapshot.map(|i| format!("#{i}")).unwrap_or_default(),
                stage_words::counts(view).map(clusters).unwrap_or_default(),
                quoted.point(&stage_words::activity(view, Times::Absolute)),
            ]
        })
        .collect();
    let header = ["STAGE", "SNAPSHOT", "CLUSTERS", "ACTIVITY"];
    fit::table(&header, &rows, width)
}

/// "6/7 provisioned, 1 failed": the stage's counts over its members.
fn clusters(counts: &StageCounts) -> String {
    let mut text = format!(
        "{}/{} provisioned",
        counts.provisioned,
        stage_words::members(counts)
    );
    if counts.failed > 0 {
        text.push_str(&format!(", {} failed", counts.failed));
    }
    if counts.timed_out > 0 {
        text.push_str(&format!(", {} timed out", counts.timed_out));
    }
    text
}

/// Who approved a manual stage of this run (each wave's approver, for a waved stage).
fn render_approver(view: &StageView<'_>, width: usize) -> String {
    let Some(words) = view
        .status
        .and_then(tollgate_engine::approval::approved_words)
    else {
        return String::new();
    };
    labelled("Approved:", &format!("{} {words}", view.name), width)
}

/// A gate's quorum under an approval policy: the tally, then each approval it looked at.
fn render_quorum(view: &StageView<'_>, width: usize) -> String {
    let Some(quorum) = view.quorum() else {
        return String::new();
    };
    let mut out = labelled(
        "Approvals:",
        &format!("{} {} approvals", view.name, quorum.tally()),
        width,
    );
    for review in quorum.counted.iter().chain(&quorum.refused) {
        let verdict = match &review.reason {
            None => "counts".to_string(),
            Some(reason) => format!("does not count: {reason}"),
        };
        let line = format!("{} {} {verdict}", short(&review.sha), review.approver);
        out.push_str(&labelled("", &line, width));
    }
    out
}

/// The failed stage, why, and what the user does next (the stages' rows say what the rollback
/// did to each).
fn render_failure(
    status: &PromotionStatus,
    failure: &RunFailure,
    quoted: &QuotedErrors,
    width: usize,
) -> String {
    let commit = status
        .snapshot_commit
        .as_deref()
        .map(short)
        .unwrap_or_default();
    let headline = format!(
        "FAILED: stage {} with snapshot #{} at {} (onFailure: {})",
        failure.stage,
        failure.snapshot_index,
        time(Some(failure.at)),
        failure.on_failure,
    );
    let mut out = format!("\n{}\n", fit::wrap(&headline, width));
    out.push_str(&indented(&quoted.point(&failure.reason), width));
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
    out.push_str(&indented(&format!("next: {next}"), width));
    if !failure.clusters.is_empty() {
        out.push_str(&clusters_table(&failure.clusters, width));
    }
    out
}

/// `text` wrapped at word boundaries, each line indented by two spaces.
fn indented(text: &str, width: usize) -> String {
    fit::wrap(text, width.saturating_sub(2).max(20))
        .lines()
        .map(|line| format!("  {line}\n"))
        .collect()
}

/// A stage's clusters that are not Provisioned, with why and since when: for stages whose counts
/// are shown (a restored stage's are of the rejected snapshot).
fn render_clusters(view: &StageView<'_>, width: usize) -> String {
    let (listed, unlisted) = stage_words::not_provisioned(view);
    let (Some(stage), Some(counts)) = (view.status, stage_words::counts(view)) else {
        return String::new();
    };
    if listed.is_empty() {
        return String::new();
    }
    let mut line = format!(
        "Stage {}: {} pending, {} provisioning, {} failed, {} timed out",
        view.name, counts.pending, counts.provisioning, counts.failed, counts.timed_out
    );
    if counts.later_waves > 0 {
        line.push_str(&format!(", {} in later waves", counts.later_waves));
    }
    if counts.paused > 0 {
        line.push_str(&format!(
            ", {} paused (waiting for a maintenance window)",
            counts.paused
        ));
    }
    if let Some(allowed) = stage.allowed_failures {
        line.push_str(&format!(" (tolerated: {allowed})"));
    }
    let mut out = format!("\n{}", fit::wrap(&line, width));
    out.push('\n');
    out.push_str(&clusters_table(listed, width));
    if unlisted > 0 {
        out.push_str(&format!("… and {unlisted} more not Provisioned\n"));
    }
    out
}

fn clusters_table(clusters: &[ClusterCondition], width: usize) -> String {
    let rows: Vec<Vec<String>> = clusters
        .iter()
        .map(|cluster| {
            vec![
                cluster.cluster.clone(),
                cluster.state.as_str().to_string(),
                time(Some(cluster.since)),
                cluster.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    fit::table(&["CLUSTER", "STATE", "SINCE", "MESSAGE"], &rows, width)
}
