//! `tollgate plan --from REV --to REV`: what a commit range would do, per promotion, from git
//! (and, for the clusters each stage would hit, from the management cluster when one is named).
//! Text for terminals, Markdown for a PR comment, JSON for machines.
//! Exit 0 planned, 1 `to` has invalid promotions, 2 usage or repository errors.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tollgate_engine::lineage::Lineage;
use tollgate_engine::preview::{RunStart, StartsAfter};
use tollgate_engine::{GateVerdict, Preview, PreviewInput, PromotionStatus, RunChange, preview};
use tollgate_manifest::Snapshot;
use tollgate_model::policy::OnNewSnapshot;
use tollgate_source::plan::{
    BaseChoice, ChartChange, ChartRef, MergeBase, PlanStatus, PromotionPlan, RangePlan, Revision,
    plan_range_verified,
};

use super::connect::ClusterArgs;
use crate::controller::desired::{InGit, Translation};
use targets::Fleet;

mod estimate;
mod gates;
mod mermaid;
mod targets;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Markdown,
    Json,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Markdown output (for a PR comment) adds, per changed promotion, the clusters each stage would hit \
and an estimated timeline as a Mermaid gantt block. The clusters are read from the management \
cluster only when --kubeconfig or --context is given ($KUBECONFIG alone is not used, so a plan \
in CI never reaches a cluster by accident); a failed read is a warning, not a failed plan.

Example (CI, on a PR): tollgate plan --repo . --from origin/main --to HEAD -o markdown")]
pub struct Args {
    /// The range's start (a commit, branch or tag: what runs now). When it names a branch
    /// (`main`, `origin/main`), the plan starts from the merge base of it and `--to`, so only
    /// the changes made on `--to` are shown.
    #[arg(long)]
    pub from: String,
    /// The range's end (what would run after the merge, e.g. the PR branch).
    #[arg(long)]
    pub to: String,
    /// Local repository (the config repository's checkout, not tollgate's own).
    #[arg(long, default_value = ".")]
    pub repo: String,
    /// Sub-path of the repository holding the manifests ("" = the whole repository).
    #[arg(long, default_value = "")]
    pub path: String,
    /// Compare `--to` with the merge base of `--from` and `--to`, whatever `--from` names
    /// (default when `--from` is a branch).
    #[arg(long, conflicts_with = "no_merge_base")]
    pub merge_base: bool,
    /// Compare `--to` with `--from` itself, even when `--from` is a branch: changes made on
    /// `--from` after the branch point then show as undone.
    #[arg(long)]
    pub no_merge_base: bool,
    /// Output: text for a terminal, markdown for a PR comment, json for scripts.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: OutputFormat,
    /// The management cluster whose clusters the Markdown output matches with each stage's
    /// clusterSelector. Read only when `--kubeconfig` or `--context` is given (a plan in CI must
    /// not reach a cluster by accident); without one the clusters are "unknown".
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Trusted keys, as `tollgate run --trusted-keys` takes them: the plan also says whether
    /// the range's commits would verify.
    #[arg(long, env = "TOLLGATE_TRUSTED_KEYS")]
    pub trusted_keys: Option<std::path::PathBuf>,
    /// The controller's `--verify-commits`: the base is read as the controller reads the branch
    /// (snapshots numbered as it numbers them), `--to` as a verified commit on top of it.
    #[arg(
        long,
        env = "TOLLGATE_VERIFY_COMMITS",
        value_enum,
        ignore_case = true,
        requires = "trusted_keys"
    )]
    pub verify_commits: Option<super::trust_args::VerifyMode>,
    /// The instant the timeline estimate starts from (RFC 3339; default: now). For tests.
    #[arg(long, hide = true, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
}

fn parse_now(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{text:?} is not an RFC 3339 time: {e}"))
}

impl Args {
    fn base_choice(&self) -> BaseChoice {
        match (self.merge_base, self.no_merge_base) {
            (true, _) => BaseChoice::MergeBase,
            (_, true) => BaseChoice::Tip,
            _ => BaseChoice::Auto,
        }
    }
}

/// What the Markdown output adds to git's facts: the fleet and the instant estimates start at.
pub struct Surroundings {
    pub fleet: Fleet,
    pub now: DateTime<Utc>,
}

const EXIT_INVALID: u8 = 1;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let trust = super::trust_args::TrustArgs {
        verify_commits: args.verify_commits,
        trusted_keys: args.trusted_keys.clone(),
    }
    .config();
    let plan = plan_range_verified(
        Path::new(&args.repo),
        (&args.from, &args.to),
        &args.path,
        args.base_choice(),
        Some(&trust),
    )
    .context("cannot plan the range")?;
    let now = args.now.unwrap_or_else(Utc::now);
    let verification = match &args.trusted_keys {
        Some(keys) => Some(super::plan_verify::verify(
            Path::new(&args.repo),
            &plan,
            keys,
        )?),
        None => None,
    };
    let mut output = match args.output {
        OutputFormat::Text => render_text(&plan, now),
        OutputFormat::Markdown => {
            let surroundings = Surroundings {
                fleet: targets::read_fleet(&args.cluster),
                now,
            };
            render_markdown(&plan, &surroundings)
        }
        OutputFormat::Json => {
            let mut document = to_json(&plan, now);
            if let (Some(verification), Some(object)) = (&verification, document.as_object_mut()) {
                let section = super::plan_verify::to_json(verification);
                object.insert("commitVerification".to_string(), section);
            }
            format!("{}\n", serde_json::to_string_pretty(&document)?)
        }
    };
    if let Some(verification) = &verification
        && args.output != OutputFormat::Json
    {
        let markdown = args.output == OutputFormat::Markdown;
        output.push_str(&super::plan_verify::render(verification, markdown));
    }
    super::write_stdout(&output)?;
    Ok(if plan.has_invalid() {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    })
}

use tollgate_manifest::snapshot::short_sha as short;

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

/// The engine's preview of one promotion's change at `now`, with its live status when the cluster
/// was read: what it does to the rollout.
fn preview_of(
    plan: &PromotionPlan,
    now: DateTime<Utc>,
    status: Option<&PromotionStatus>,
) -> Preview {
    // Read as the controller reads git (one translation for both).
    let after = Translation::new(&plan.name, InGit::of_plan(plan));
    let history: Vec<Snapshot> = plan
        .before
        .iter()
        .chain(&plan.after)
        .map(|s| (**s).clone())
        .collect();
    preview(&PreviewInput {
        before: plan.before.as_deref(),
        after: after.desired(),
        approvals: &plan.approvals,
        status,
        history: &history,
        policy: plan.policy.as_deref(),
        policy_problem: plan.policy_error.as_deref(),
        now,
    })
}

/// A promotion's plan beside the engine's preview of it.
struct Planned<'p> {
    plan: &'p PromotionPlan,
    preview: Preview,
}

/// Each promotion's plan and preview; `fleet` (Markdown only) gives the live statuses.
fn planned<'p>(plan: &'p RangePlan, now: DateTime<Utc>, fleet: Option<&Fleet>) -> Vec<Planned<'p>> {
    plan.promotions
        .iter()
        .map(|p| Planned {
            plan: p,
            preview: preview_of(p, now, fleet.and_then(|f| f.status(&p.name))),
        })
        .collect()
}

/// The one-word outcome, as the JSON `status` and the summary counts name it.
fn outcome(planned: &Planned<'_>) -> &'static str {
    match (&planned.preview.run, planned.plan.status) {
        (_, PlanStatus::Recovered) => "recovered",
        (RunChange::Starts, _) => "added",
        (RunChange::Restarts { .. }, _) => "restart",
        (RunChange::Continues, PlanStatus::Unchanged) => "unchanged",
        (RunChange::Continues, _) => "trigger-only",
        (RunChange::Invalid { .. }, _) => "invalid",
        (RunChange::Removed, _) => "removed",
    }
}

/// Whether the change touches the run at all (an unchanged promotion lists no gates).
fn touched(planned: &Planned<'_>) -> bool {
    planned.plan.status != PlanStatus::Unchanged
}

fn headline(planned: &Planned<'_>) -> String {
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

fn rollback_of(preview: &Preview) -> Option<u64> {
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
fn warnings(planned: &Planned<'_>) -> Vec<String> {
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
fn details(planned: &Planned<'_>) -> Vec<(&'static str, String)> {
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
    for warning in warnings(planned) {
        rows.push(("warning", warning));
    }
    for diagnostic in &plan.diagnostics {
        rows.push(("error", diagnostic.to_string()));
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

fn summary_counts(planned: &[Planned<'_>]) -> String {
    let mut parts = Vec::new();
    for label in [
        "restart",
        "added",
        "removed",
        "trigger-only",
        "recovered",
        "invalid",
        "unchanged",
    ] {
        let n = planned.iter().filter(|p| outcome(p) == label).count();
        if n > 0 {
            parts.push(format!("{n} {label}"));
        }
    }
    if parts.is_empty() {
        "no promotions".to_string()
    } else {
        parts.join(", ")
    }
}

pub fn render_text(plan: &RangePlan, now: DateTime<Utc>) -> String {
    let planned = planned(plan, now, None);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan {} → {}: {}",
        revision_label(&plan.from),
        revision_label(&plan.to),
        summary_counts(&planned)
    );
    if let Some(base) = &plan.merge_base {
        let _ = writeln!(out, "{}", merge_base_line(base));
    }
    for promotion in &planned {
        let _ = writeln!(out, "\n{}: {}", promotion.plan.name, headline(promotion));
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

/// Which commit the range started from, when it is the merge base rather than `from`.
fn merge_base_line(base: &MergeBase) -> String {
    format!(
        "compared with merge base {} of {} and {}",
        short(&base.sha),
        base.from,
        base.to
    )
}

/// The snapshot a new run would run, when the change starts one (the timeline is that run's).
fn new_run_snapshot<'p>(planned: &Planned<'p>) -> Option<&'p tollgate_manifest::Snapshot> {
    match planned.plan.status {
        PlanStatus::Removed | PlanStatus::Invalid => None,
        _ => planned.plan.after.as_deref(),
    }
}

/// The clusters each stage of a changed promotion would hit, as (stage, targets) pairs.
fn stage_targets(planned: &Planned<'_>, fleet: &Fleet) -> Vec<(String, String)> {
    let Some(snapshot) = new_run_snapshot(planned).filter(|_| touched(planned)) else {
        return Vec::new();
    };
    snapshot
        .promotion
        .spec
        .stages
        .iter()
        .map(|stage| (stage.name.clone(), fleet.targets(&stage.cluster_selector)))
        .collect()
}

/// The Mermaid timeline of the run the change starts, if it starts one: the engine's simulation.
fn timeline_of(planned: &Planned<'_>, surroundings: &Surroundings) -> Option<String> {
    let snapshot = new_run_snapshot(planned)?;
    let (plan, preview) = (planned.plan, &planned.preview);
    let simulation = estimate::estimate(plan, preview, &surroundings.fleet, surroundings.now)?;
    Some(mermaid::render(
        &plan.name,
        &simulation,
        snapshot.index,
        preview.run_start.as_ref(),
        surroundings.now,
    ))
}

/// Table cells must not break the table: pipes escaped, one line.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

pub fn render_markdown(plan: &RangePlan, surroundings: &Surroundings) -> String {
    let planned = planned(plan, surroundings.now, Some(&surroundings.fleet));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## tollgate plan: `{}` → `{}`\n\n{}",
        revision_label(&plan.from),
        revision_label(&plan.to),
        summary_counts(&planned)
    );
    if let Some(base) = &plan.merge_base {
        let _ = writeln!(out, "\n{}", merge_base_line(base));
    }
    if let Some(warning) = surroundings.fleet.warning() {
        let _ = writeln!(out, "\n> **warning**: {}", warning.replace('\n', " "));
    }
    for promotion in &planned {
        let _ = writeln!(
            out,
            "\n### `{}`: {}\n\n| | |\n|---|---|",
            promotion.plan.name,
            cell(&headline(promotion))
        );
        for (label, text) in details(promotion) {
            let _ = writeln!(out, "| {label} | {} |", cell(&text));
        }
        for (stage, targets) in stage_targets(promotion, &surroundings.fleet) {
            let _ = writeln!(out, "| clusters | {}: {} |", cell(&stage), cell(&targets));
        }
        if let Some(timeline) = timeline_of(promotion, surroundings) {
            let _ = write!(out, "\n**Estimated timeline**\n\n{timeline}");
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

fn gate_json(gate: &tollgate_engine::preview::GatePreview) -> Value {
    match &gate.verdict {
        GateVerdict::Approved(approver) => json!({
            "stage": gate.stage, "need": "approved", "approvedBy": approver.sha,
        }),
        GateVerdict::Standing => json!({"stage": gate.stage, "need": "standing"}),
        GateVerdict::Waits(hint) => json!({"stage": gate.stage, "need": "needed", "hint": hint}),
    }
}

fn promotion_json(planned: &Planned<'_>) -> Value {
    let (plan, preview) = (planned.plan, &planned.preview);
    let (profile_spec_changed, stages_changed) = match &preview.run {
        RunChange::Restarts {
            profile_spec_changed,
            stages_changed,
            ..
        } => (*profile_spec_changed, *stages_changed),
        _ => (false, false),
    };
    let gates: Vec<Value> = if touched(planned) {
        preview.gates.iter().map(gate_json).collect()
    } else {
        Vec::new()
    };
    json!({
        "name": plan.name,
        "file": plan.file,
        "status": outcome(planned),
        "restart": matches!(preview.run, RunChange::Restarts { .. }),
        "profileSpecChanged": profile_spec_changed,
        "stagesChanged": stages_changed,
        "snapshotFrom": plan.snapshot_from(),
        "snapshotTo": plan.snapshot_to(),
        "rollbackTo": rollback_of(preview),
        "sameContentAs": match preview.run {
            RunChange::Restarts { same_content_as, .. } => same_content_as,
            _ => None,
        },
        "stagesRerun": preview.stages_run,
        "runStart": preview.run_start.as_ref().map(run_start_json),
        "approvals": gates,
        "prunes": preview.pruned,
        "kept": preview.kept,
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
        "warnings": warnings(planned),
        "diagnostics": plan.diagnostics.iter().map(diagnostic_json).collect::<Vec<_>>(),
    })
}

/// When the run starts, for scripts: what it waits for, and a blackout in force.
fn run_start_json(start: &RunStart) -> Value {
    let waits = match &start.after {
        StartsAfter::Nothing { supersedes } => json!({"for": "nothing", "supersedes": supersedes}),
        StartsAfter::NothingAsARollback => json!({"for": "nothing", "rollback": true}),
        StartsAfter::RunningRun {
            policy,
            running,
            between,
        } => json!({
            "for": "runningRun", "onNewSnapshot": policy.as_str(), "running": running,
            "between": between,
        }),
        StartsAfter::RunInProgressIfAny { policy } => {
            json!({"for": "runInProgressIfAny", "onNewSnapshot": policy.as_str()})
        }
        StartsAfter::PolicyProblem { problem } => json!({"for": "policyFix", "problem": problem}),
    };
    json!({
        "waits": waits,
        "blackoutUntil": start.blackout.as_ref().map(|b| b.until),
        "blackoutReason": start.blackout.as_ref().and_then(|b| b.reason.clone()),
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

pub fn to_json(plan: &RangePlan, now: DateTime<Utc>) -> Value {
    let revision = |r: &Revision| json!({"rev": r.rev, "sha": r.sha, "subject": r.subject});
    json!({
        "from": revision(&plan.from),
        "to": revision(&plan.to),
        "mergeBase": plan.merge_base.as_ref().map(|b| json!({"sha": b.sha, "from": b.from, "to": b.to})),
        "invalid": plan.has_invalid(),
        "promotions": planned(plan, now, None).iter().map(promotion_json).collect::<Vec<_>>(),
        "fileErrors": plan.file_errors.iter().map(diagnostic_json).collect::<Vec<_>>(),
    })
}
