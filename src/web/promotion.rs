//! One promotion: the pipeline (one column per stage, waves, gates, analyses), the clusters that
//! are not provisioned with Sveltos' messages, approvals (which count and why not), the actions,
//! delivery figures, the run history and timeline, and the snapshots in git.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use tollgate_engine::PromotionStatus;
use tollgate_engine::pipeline::StageView;

use super::actions::{self, Planned};
use super::delivery_view;
use super::git_view::{ActionRepo, GitFacts};
use super::page::{id_of, short, time};
use super::signed_gates::{self, ApprovalRoute, GatePolicies};
use crate::views::bars;
use crate::views::stage_words::{self, Times};

/// What the promotion page is made of.
pub struct PageInput<'a> {
    pub name: &'a str,
    pub status: &'a PromotionStatus,
    pub git: Option<&'a GitFacts>,
    /// Turns a full SHA into a link on the git host, when one is known.
    pub commit_url: &'a dyn Fn(&str) -> Option<String>,
    /// Whether action buttons can commit (a repository is configured).
    pub can_commit: bool,
    /// The repository's action branches and committer (a repeated action takes the next free
    /// name; a trailer approval's branch names its approver).
    pub action_repo: &'a ActionRepo,
    pub now: DateTime<Utc>,
}

/// The page's live fragments, by element id, in page order.
pub fn fragments(input: &PageInput<'_>) -> Vec<(&'static str, Markup)> {
    vec![
        ("summary", summary(input)),
        ("pipeline", pipeline(input)),
        ("clusters", clusters(input.status)),
        ("approvals", approvals(input.status)),
        ("actions", actions_section(input)),
        ("delivery", delivery_view::section(input.status)),
        ("runs", runs(input)),
        ("history", history(input)),
    ]
}

/// When the commit that introduced snapshot `index` was made, as git says.
fn summary(input: &PageInput<'_>) -> Markup {
    let status = input.status;
    html! {
        section id="summary" aria-label="Summary" {
            h1 { (input.name) " "
                span class={ "phase phase-" (status.phase.as_str()) } data-phase=(status.phase.as_str()) { (status.phase.as_str()) } }
            p {
                @if let Some(index) = status.snapshot_index { "Snapshot #" (index) }
                @if let Some(commit) = &status.snapshot_commit { " from commit " (commit_link(input, commit)) }
                @if let Some(of) = status.rollback_of { " (rollback to #" (of) ")" }
            }
            @if let Some(message) = &status.message { p { (message) } }
            @if let Some(invalid) = &status.invalid_spec { p.notice.error role="alert" { "Invalid at HEAD: " (invalid) } }
            @if let Some(refusal) = status.commit_refusal() { p.notice.error role="alert" { "Refused commit: " (refusal) } }
            @if let Some(failure) = &status.failure {
                p.notice.error role="alert" { "Stage " (failure.stage) " failed at " (time(failure.at)) ": " (failure.reason) }
            }
        }
    }
}

fn commit_link(input: &PageInput<'_>, sha: &str) -> Markup {
    match (input.commit_url)(sha) {
        Some(url) => html! { a href=(url) { code { (short(sha)) } } },
        None => html! { code { (short(sha)) } },
    }
}

fn pipeline(input: &PageInput<'_>) -> Markup {
    pipeline_of(input.status, input.now)
}

/// The pipeline fragment of a promotion's page: one column per stage of the engine's projection
/// (`data-stage`, `data-activity`), as the page and its live refresh render it.
pub fn pipeline_of(status: &PromotionStatus, now: DateTime<Utc>) -> Markup {
    html! {
        section id="pipeline" aria-label="Pipeline" {
            h2 { "Pipeline" }
            div.pipeline {
                @for view in status.pipeline() { (stage_column(&view, now)) }
            }
        }
    }
}

fn stage_column(view: &StageView<'_>, now: DateTime<Utc>) -> Markup {
    let status = view.status;
    html! {
        div.stage id={ "stage-" (id_of(view.name)) } data-stage=(view.name) data-activity=(view.activity.kind()) {
            div.name { (view.name) }
            div.muted { @match view.snapshot { Some(n) => { "runs snapshot #" (n) }, None => { "no snapshot yet" } } }
            (bars::svg_bar(view))
            div.muted { (bars::counts_text(view)) }
            div class={ "act-" (view.activity.kind()) } { (stage_words::activity(view, Times::Relative(now))) }
            @if let Some(reason) = status.and_then(|s| s.waiting_reason.as_deref()) { div.muted { "gate: " (reason) } }
            @if let Some(waves) = status.and_then(|s| s.waves.as_deref()) {
                details { summary { "waves: " (waves.reached) " of " (waves.total()) " started" @if waves.canary { " (canary first)" } }
                    ol { @for (i, wave) in waves.clusters.iter().enumerate() {
                        li { @if (i as u32) < waves.reached { "started: " } @else { "waiting: " } (wave.join(", ")) }
                    } }
                }
            }
            @for run in status.and_then(|s| s.analyses.as_deref()).map(Vec::as_slice).unwrap_or_default() {
                div.analysis data-analysis=(run.name) {
                    "analysis " strong { (run.name) } @if let Some(c) = &run.cluster { " on " (c) } ": "
                    (format!("{:?}", run.phase)) ", " (run.taken) "/" (run.count) " measured"
                    @if let Some(last) = run.measurements.last() {
                        ", newest " (last.value.as_deref().unwrap_or("no value")) " (" (format!("{:?}", last.verdict)) ")"
                    }
                    @if let Some(compared) = run.measurements.last().and_then(|m| m.comparison.as_deref()) {
                        div.comparison { "compared: " (compared.describe()) }
                    }
                    @if let Some(message) = &run.message { div.muted { (message) } }
                }
            }
        }
    }
}

/// Every listed not-provisioned cluster of every stage, and the failed run's clusters, with
/// Sveltos' messages.
fn clusters(status: &PromotionStatus) -> Markup {
    let mut rows: Vec<(&str, &tollgate_engine::ClusterCondition)> = status
        .pipeline()
        .into_iter()
        .flat_map(|view| {
            let (listed, _) = stage_words::not_provisioned(&view);
            listed.iter().map(move |c| (view.name, c))
        })
        .collect();
    if let Some(failure) = &status.failure {
        for cluster in &failure.clusters {
            if !rows
                .iter()
                .any(|(s, c)| *s == failure.stage && c.cluster == cluster.cluster)
            {
                rows.push((failure.stage.as_str(), cluster));
            }
        }
    }
    html! {
        section id="clusters" aria-label="Clusters not provisioned" {
            h2 { "Clusters not provisioned" }
            @if rows.is_empty() { p.muted { "Every cluster of the stages started is provisioned." } }
            @else {
                div.table-wrap { table.grid-clusters {
                    thead { tr { th { "stage" } th { "cluster" } th { "state" } th { "since" } th { "Sveltos' message" } } }
                    tbody { @for (stage, c) in &rows {
                        tr data-cluster=(c.cluster) data-state=(c.state.as_str()) {
                            td data-label="stage" { (stage) } td data-label="cluster" { (c.cluster) }
                            td data-label="state" { (c.state.as_str()) } td data-label="since" { (time(c.since)) }
                            td.message data-label="Sveltos' message" { (c.message.as_deref().unwrap_or("")) }
                        }
                    } }
                } }
            }
        }
    }
}

fn approvals(status: &PromotionStatus) -> Markup {
    let stages: Vec<_> = status
        .stages
        .iter()
        .filter(|st| st.approver.is_some() || st.approvals.is_some())
        .collect();
    let pipeline = status.pipeline();
    html! {
        section id="approvals" aria-label="Approvals" {
            h2 { "Approvals" }
            @if stages.is_empty() { p.muted { "No approval in this run yet." } }
            @for st in stages {
                h3 { (st.name) }
                @if let Some(quorum) = pipeline.iter().find(|v| v.name == st.name).and_then(|v| v.quorum()) {
                    p.quorum { (quorum.tally()) " approvals" @if quorum.is_met() { ": the gate opened" } }
                }
                @if let Some(words) = tollgate_engine::approval::approved_words(st) {
                    p { "Approved " (words) }
                }
                @if let Some(reviews) = st.approvals.as_deref() {
                    table { thead { tr { th { "approver" } th { "commit" } th { "signature" } th { "counts" } th { "why not" } } }
                        tbody { @for review in reviews { tr {
                            td { (review.approver) } td { code { (short(&review.sha)) } } td { (review.signature) }
                            td { @if review.counts { "yes" } @else { "no" } } td { (review.reason.as_deref().unwrap_or("")) }
                        } } } }
                }
            }
        }
    }
}

fn actions_section(input: &PageInput<'_>) -> Markup {
    let taken = |branch: &str| input.action_repo.branches.contains(branch);
    let no_annotations = BTreeMap::new();
    let trailer_approvals = |stage: &str| input.git?.gates.trailer_approvals(stage);
    let rollback_changes = |to: u64| input.git?.rollback_changes(to);
    let repo = actions::RepoState {
        taken: &taken,
        tip: actions::Tip {
            annotations: input
                .git
                .map_or(&no_annotations, |facts| &facts.annotations),
            trailer_approvals: &trailer_approvals,
            approver: &input.action_repo.approver,
            rollback_changes: &rollback_changes,
        },
    };
    let planned = actions::planned(input.name, input.status, repo);
    let gates = input.git.map(|facts| &facts.gates);
    html! {
        section id="actions" aria-label="Actions" {
            h2 { "Actions" }
            p.muted { "Each button commits the change shown on a new branch of the repository (never to the cluster); merge it to act." }
            div.actions { @for action in &planned {
                @match approval_route(input.status, gates, action) {
                    ApprovalRoute::SignedCommand { why } => (signed_command(action, &why)),
                    ApprovalRoute::Button => (action_form(input, action)),
                }
            } }
        }
    }
}

/// How `action` is offered: an approval that a policy wants signed is a command, not a button.
fn approval_route(
    status: &PromotionStatus,
    gates: Option<&GatePolicies>,
    action: &Planned,
) -> ApprovalRoute {
    match &action.request {
        actions::Request::Approve { stage } => signed_gates::route(status, gates, stage),
        _ => ApprovalRoute::Button,
    }
}

/// An approval only an approver's own signature counts for: the command, and why no button.
fn signed_command(action: &Planned, why: &str) -> Markup {
    let stage = match &action.request {
        actions::Request::Approve { stage } => stage.as_str(),
        _ => "",
    };
    html! {
        div.action data-action="approve-signed" data-stage=(stage) {
            div { strong { (action.label) } }
            p { (signed_gates::note(why)) }
            pre aria-label={ "Command for " (action.label) } { (action.command) }
        }
    }
}

fn action_form(input: &PageInput<'_>, action: &Planned) -> Markup {
    let (kind, stage, to) = match &action.request {
        actions::Request::Approve { stage } => ("approve", Some(stage.as_str()), None),
        actions::Request::Retry { stage } => ("retry", Some(stage.as_str()), None),
        actions::Request::Rollback { to } => ("rollback", None, Some(*to)),
        actions::Request::Pause => ("pause", None, None),
        actions::Request::Resume => ("resume", None, None),
    };
    html! {
        form.action method="post" action={ "/ui/promotions/" (input.name) "/actions" } data-action=(kind) {
            input type="hidden" name="action" value=(kind);
            @if let Some(stage) = stage { input type="hidden" name="stage" value=(stage); }
            @if let Some(to) = to { input type="hidden" name="to" value=(to); }
            div { "Commit on branch " code { (action.branch) } ":" }
            pre aria-label={ "Change made by " (action.label) } { @for line in &action.diff { (line) "\n" } }
            div.muted { "Same as: " code { (action.command) } }
            button.primary type="submit" aria-label=(action.label) disabled[!input.can_commit] { (action.label) }
            @if !input.can_commit { div.muted { "Start the web view with a repository (--repo) to commit." } }
        }
    }
}

fn runs(input: &PageInput<'_>) -> Markup {
    html! {
        section id="runs" aria-label="Runs" {
            h2 { "Runs" }
            div.table-wrap { table {
                thead { tr { th { "snapshot" } th { "commit" } th { "started" } th { "ended" } th { "outcome" } th { "stages" } th { "trace" } } }
                tbody { @for run in input.status.runs.iter().rev() { tr data-snapshot=(run.snapshot_index) {
                    td { "#" (run.snapshot_index) @if let Some(of) = run.rollback_of { " (rollback to #" (of) ")" } }
                    td { code { (run.commit) } }
                    td { (time(run.started_at)) }
                    td { (run.ended_at.map(time).unwrap_or_default()) }
                    td { (format!("{:?}", run.outcome)) }
                    td { (run.stages.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(" → ")) }
                    // The run's OpenTelemetry trace id: what to search a tracing backend for.
                    td { @if let Some(id) = run.trace_id { code data-trace-id=(id) { (id) } } }
                } } }
            } }
            div.timeline {
                img src={ "/ui/promotions/" (input.name) "/timeline.svg" } alt={ "Timeline of the recent runs of " (input.name) } loading="lazy";
            }
        }
    }
}

fn history(input: &PageInput<'_>) -> Markup {
    html! {
        section id="history" aria-label="Snapshots in git" {
            h2 { "Snapshots in git" }
            @match input.git {
                None => p.muted { "Start the web view with a repository (--repo) to list the snapshots." },
                Some(facts) => div.table-wrap { table {
                    thead { tr { th { "snapshot" } th { "commit" } th { "author" } th { "time" } th { "subject" } } }
                    tbody { @for row in facts.snapshots.iter().rev() { tr {
                        td { "#" (row.index) @if let Some(of) = row.same_content_as { " (same content as #" (of) ")" } }
                        td { (commit_link(input, &row.sha)) }
                        td { (row.author) } td { (time(row.time)) } td { (row.subject) }
                    } } }
                } },
            }
        }
    }
}
