//! `tollgate history NAME`: the snapshots of one promotion from git (index, commit, author, date,
//! subject, hashes, equal-content markers) and its approval events. With `--kubeconfig` or
//! `--context`, what each snapshot's run did, from the GitPromotion's status: completed,
//! rejected (and why), superseded, never ran, and which runs were rollbacks.
//! Exit 0 found, 1 unknown promotion, 2 repository errors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};
use tollgate_engine::PromotionStatus;
use tollgate_engine::lineage::{self, SnapshotRun};
use tollgate_manifest::{ApprovalEvent, ApprovalKind, CommitInfo, Snapshot};
use tollgate_source::{GitSource, IgnoredStatement, PromotionView, SourceConfig, current_branch};

use crate::views::fit;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Table,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The promotion's `metadata.name`.
    pub name: String,
    /// Repository: a local path, or a URL fetched into `--cache-dir`.
    #[arg(long, default_value = ".")]
    pub repo: String,
    /// Branch to read (default: the branch checked out in a local `--repo`, else `main`).
    #[arg(long)]
    pub branch: Option<String>,
    /// Sub-path of the repository holding the manifests ("" = the whole repository).
    #[arg(long, default_value = "")]
    pub path: String,
    /// Where remote repositories are cloned.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
    /// The controller's verification (`--verify-commits`, `--trusted-keys`): snapshots numbered
    /// as the controller numbers them, each commit marked verified (by whom) or not (why).
    #[command(flatten)]
    pub trust: super::trust_args::TrustArgs,
    /// Credentials for a remote `--repo`, as `tollgate run` takes them.
    #[command(flatten)]
    pub git_auth: super::run::GitAuthArgs,
    /// The management cluster whose GitPromotion says what each snapshot's run did. Read only
    /// when `--kubeconfig` or `--context` is given; a failed read is a warning.
    #[command(flatten)]
    pub cluster: super::connect::ClusterArgs,
}

const EXIT_UNKNOWN: u8 = 1;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let branch = args
        .branch
        .clone()
        .or_else(|| current_branch(Path::new(&args.repo)))
        .unwrap_or_else(|| "main".to_string());
    let cache_dir = args
        .cache_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("tollgate-cache"));
    let mut config = SourceConfig::new(
        args.repo.clone(),
        branch.clone(),
        args.path.clone(),
        cache_dir,
    );
    config.auth = args.git_auth.to_auth()?;
    config.trust = args.trust.config();
    let mut source = GitSource::open(config).context("cannot open the repository")?;
    source
        .sync()
        .with_context(|| format!("cannot read branch {branch:?}"))?;

    let snapshots = source.history(&args.name);
    let view = source.promotion(&args.name);
    if snapshots.is_empty() && view.is_none() {
        let known: Vec<&str> = source.promotions().map(|(name, _)| name).collect();
        let known = if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        };
        eprintln!(
            "error: no ClusterPromotion named {:?} on branch {branch:?} (known: {known})",
            args.name
        );
        return Ok(ExitCode::from(EXIT_UNKNOWN));
    }
    let approvals = source.approvals(&args.name);
    let runs = read_status(&args);
    let output = match args.output {
        OutputFormat::Json => {
            let git = Git {
                head: source.head(),
                view,
                snapshots,
                approvals,
            };
            let mut document = json_document(&args, &branch, &git, runs.as_ref());
            document["ignoredStatements"] = ignored_json(source.ignored_statements(&args.name));
            format!("{}\n", serde_json::to_string_pretty(&document)?)
        }
        OutputFormat::Table => {
            let width = super::width::plain_width();
            let mut out = render_table(view, snapshots, approvals, runs.as_ref(), width);
            out.push_str(&render_ignored(
                source.ignored_statements(&args.name),
                width,
            ));
            out
        }
    };
    super::write_stdout(&output)?;
    Ok(ExitCode::SUCCESS)
}

/// `Tollgate-Approve` trailers that are no statements (issue #44): ignored, and why.
fn render_ignored(ignored: &[IgnoredStatement], width: usize) -> String {
    if ignored.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = ignored
        .iter()
        .map(|statement| {
            vec![
                statement.trailer.stage.clone(),
                format!("Tollgate-Approve @{}", statement.trailer.snapshot),
                short_sha(&statement.commit).to_string(),
                signed_author(&statement.commit),
                statement.why.to_string(),
            ]
        })
        .collect();
    let header = ["stage", "trailer", "commit", "author", "ignored because"];
    format!(
        "\nIgnored approval trailers (no statement commit):\n{}",
        fit::table(&header, &rows, width)
    )
}

fn ignored_json(ignored: &[IgnoredStatement]) -> Value {
    ignored
        .iter()
        .map(|statement| {
            json!({
                "stage": statement.trailer.stage,
                "snapshot": statement.trailer.snapshot,
                "commit": statement.commit.sha,
                "author": format!("{} <{}>", statement.commit.author, statement.commit.author_email),
                "why": statement.why,
            })
        })
        .collect()
}

/// What git says of the promotion.
struct Git<'a> {
    head: Option<&'a CommitInfo>,
    view: Option<&'a PromotionView>,
    snapshots: &'a [Snapshot],
    approvals: &'a [ApprovalEvent],
}

/// The promotion's status from the cluster, when one was named and could be read.
fn read_status(args: &Args) -> Option<PromotionStatus> {
    super::controller_view::read_or_warn(&args.cluster, &args.name, false)
}

/// The trace ids of the recorded runs of snapshot `index`.
fn trace_ids(status: &PromotionStatus, index: u64) -> Vec<String> {
    status
        .runs
        .iter()
        .filter(|run| run.snapshot_index == index)
        .filter_map(|run| Some(run.trace_id?.to_string()))
        .collect()
}

/// What the status tells of a snapshot's run, in words.
fn run_note(status: &PromotionStatus, index: u64) -> (String, Option<u64>) {
    let (run, rollback_of) = lineage::snapshot_run(status, index);
    let when = |at: &chrono::DateTime<chrono::Utc>| minute(at);
    let note = match run {
        SnapshotRun::Running => "running".to_string(),
        SnapshotRun::Completed { at } => format!("completed {}", when(&at)),
        SnapshotRun::Rejected { at, reason } if reason.is_empty() => {
            format!("rejected {}", when(&at))
        }
        SnapshotRun::Rejected { at, reason } => format!("rejected {}: {reason}", when(&at)),
        SnapshotRun::Superseded => "superseded".to_string(),
        SnapshotRun::Waiting => "waiting".to_string(),
        SnapshotRun::Skipped { next } => format!("skipped: #{next} runs next"),
        SnapshotRun::NeverRan => "never ran".to_string(),
        SnapshotRun::Unknown => String::new(),
    };
    (note, rollback_of)
}

/// The note column: the run (with the cluster), rollback or equal-content markers, current.
fn snapshot_notes(
    snapshot: &Snapshot,
    current: Option<u64>,
    status: Option<&PromotionStatus>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let run = status.map(|status| run_note(status, snapshot.index));
    match (&run, snapshot.same_content_as) {
        (Some((_, Some(to))), _) => notes.push(format!("rollback to #{to}")),
        (_, Some(same)) => notes.push(format!("same content as #{same}")),
        _ => {}
    }
    if let Some((note, _)) = run.filter(|(note, _)| !note.is_empty()) {
        notes.push(note);
    }
    if Some(snapshot.index) == current {
        notes.push("current".to_string());
    }
    notes
}

fn status(view: Option<&PromotionView>) -> &'static str {
    match view {
        Some(PromotionView::Valid { .. }) => "valid",
        Some(PromotionView::Invalid { .. }) => "invalid",
        None => "removed",
    }
}

fn short_sha(commit: &CommitInfo) -> &str {
    tollgate_manifest::snapshot::short_sha(&commit.sha)
}

fn short_hash(hash: &str) -> &str {
    &hash[..hash.len().min(8)]
}

fn date(commit: &CommitInfo) -> String {
    minute(&commit.time)
}

/// A time to the minute, its date and time joined so that a table never wraps between them.
fn minute(at: &chrono::DateTime<chrono::Utc>) -> String {
    at.format(&format!("%Y-%m-%d{}%H:%M", fit::NO_BREAK))
        .to_string()
}

/// The author, and with --trusted-keys whether the commit is verified.
fn signed_author(commit: &CommitInfo) -> String {
    match &commit.signature {
        Some(signature) => format!("{} ({})", commit.author, signature.describe()),
        None => commit.author.clone(),
    }
}

/// The snapshot that was current when `commit` landed (first-parent order).
fn snapshot_at(snapshots: &[Snapshot], commit: &CommitInfo) -> Option<u64> {
    snapshots
        .iter()
        .rev()
        .find(|s| s.commit.seq <= commit.seq)
        .map(|s| s.index)
}

/// The snapshots, what the head says, and the approvals, in tables at most `width` wide.
pub fn render_table(
    view: Option<&PromotionView>,
    snapshots: &[Snapshot],
    approvals: &[ApprovalEvent],
    runs: Option<&PromotionStatus>,
    width: usize,
) -> String {
    let mut out = snapshots_table(view, snapshots, runs, width);
    out.push_str(&head_note(view));
    if approvals.is_empty() {
        out.push_str("\nNo approvals in history.\n");
        return out;
    }
    out.push_str(&format!(
        "\nApprovals:\n{}",
        approvals_table(snapshots, approvals, width)
    ));
    out
}

/// One row per snapshot, with what happened to it.
fn snapshots_table(
    view: Option<&PromotionView>,
    snapshots: &[Snapshot],
    runs: Option<&PromotionStatus>,
    width: usize,
) -> String {
    let current = view
        .and_then(PromotionView::effective_snapshot)
        .map(|s| s.index);
    let header = [
        "#",
        "commit",
        "author",
        "date",
        "subject",
        "snapshot",
        "profileSpec",
        "stages",
        "note",
    ];
    let rows: Vec<Vec<String>> = snapshots
        .iter()
        .map(|snapshot| {
            let mut notes = snapshot_notes(snapshot, current, runs);
            // With --trusted-keys: whether the commit is verified, and by whom (issue #33).
            notes.extend(snapshot.commit.signature.as_ref().map(|s| s.describe()));
            vec![
                format!("#{}", snapshot.index),
                short_sha(&snapshot.commit).to_string(),
                snapshot.commit.author.clone(),
                date(&snapshot.commit),
                snapshot.commit.subject.clone(),
                snapshot.hashes.short().to_string(),
                short_hash(&snapshot.hashes.profile_spec).to_string(),
                short_hash(&snapshot.hashes.stages).to_string(),
                notes.join(", "),
            ]
        })
        .collect();
    fit::table(&header, &rows, width)
}

/// What the branch head says when it does not define the promotion validly.
fn head_note(view: Option<&PromotionView>) -> String {
    let mut out = String::new();
    match view {
        Some(PromotionView::Invalid { errors, last_good }) => {
            let kept = last_good.as_ref().map_or("no snapshot".to_string(), |s| {
                format!("snapshot #{}", s.index)
            });
            out.push_str(&format!(
                "\nThe content at the branch head is invalid; {kept} keeps running:\n"
            ));
            for error in errors {
                out.push_str(&format!(
                    "  {}:{}:{}: {}: {}\n",
                    error.file,
                    error.line,
                    error.column,
                    error.severity.as_str(),
                    error.message
                ));
            }
        }
        None => out.push_str("\nThe promotion is no longer defined at the branch head.\n"),
        Some(PromotionView::Valid { .. }) => {}
    }
    out
}

/// One row per approval, with the snapshot current when it landed.
fn approvals_table(snapshots: &[Snapshot], approvals: &[ApprovalEvent], width: usize) -> String {
    let header = [
        "stage", "approval", "commit", "author", "date", "subject", "during",
    ];
    let rows: Vec<Vec<String>> = approvals
        .iter()
        .map(|event| {
            let approval = match &event.kind {
                ApprovalKind::Field => "approved: true".to_string(),
                ApprovalKind::Annotation { value } => format!("annotation {value}"),
                ApprovalKind::Trailer { snapshot } => format!("Tollgate-Approve @{snapshot}"),
            };
            vec![
                event.stage.clone(),
                approval,
                short_sha(&event.commit).to_string(),
                signed_author(&event.commit),
                date(&event.commit),
                event.commit.subject.clone(),
                snapshot_at(snapshots, &event.commit).map_or(String::new(), |i| format!("#{i}")),
            ]
        })
        .collect();
    fit::table(&header, &rows, width)
}

fn json_document(
    args: &Args,
    branch: &str,
    git: &Git<'_>,
    runs: Option<&PromotionStatus>,
) -> Value {
    let Git {
        head,
        view,
        snapshots,
        approvals,
    } = *git;
    let errors = match view {
        Some(PromotionView::Invalid { errors, .. }) => json!(errors),
        _ => json!([]),
    };
    let snapshots: Vec<Value> = snapshots
        .iter()
        .map(|s| {
            let run = runs.map(|status| run_note(status, s.index));
            json!({
                "index": s.index,
                "snapshotId": s.id(),
                "profileSpecHash": s.hashes.profile_spec,
                "stagesHash": s.hashes.stages,
                "sameContentAs": s.same_content_as,
                "rollbackOf": run.as_ref().and_then(|(_, to)| *to),
                "run": run.map(|(note, _)| note),
                // The OpenTelemetry trace of each run of the snapshot (oldest first).
                "traceIds": runs.map(|status| trace_ids(status, s.index)),
                "file": s.file,
                "commit": s.commit,
            })
        })
        .collect();
    json!({
        "name": args.name,
        "repo": tollgate_source::redact_url(&args.repo),
        "branch": branch,
        "path": args.path,
        "head": head,
        "status": status(view),
        "current": view.and_then(PromotionView::effective_snapshot).map(|s| s.index),
        "errors": errors,
        "snapshots": snapshots,
        "approvals": approvals,
    })
}
