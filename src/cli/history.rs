//! `tollgate history NAME`: the snapshots of one promotion from git (index, commit, author, date,
//! subject, hashes, rollback markers) and its approval events.
//! Exit 0 found, 1 unknown promotion, 2 repository errors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde_json::{Value, json};
use tollgate_manifest::{ApprovalEvent, ApprovalKind, CommitInfo, Snapshot};
use tollgate_source::{GitSource, PromotionView, SourceConfig, current_branch};

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
    /// Credentials for a remote `--repo`, as `tollgate run` takes them.
    #[command(flatten)]
    pub git_auth: super::run::GitAuthArgs,
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
    let output = match args.output {
        OutputFormat::Json => {
            let document = json_document(&args, &branch, source.head(), view, snapshots, approvals);
            format!("{}\n", serde_json::to_string_pretty(&document)?)
        }
        OutputFormat::Table => render_table(view, snapshots, approvals),
    };
    super::write_stdout(&output)?;
    Ok(ExitCode::SUCCESS)
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
    commit.time.format("%Y-%m-%d %H:%M").to_string()
}

/// The snapshot that was current when `commit` landed (first-parent order).
fn snapshot_at(snapshots: &[Snapshot], commit: &CommitInfo) -> Option<u64> {
    snapshots
        .iter()
        .rev()
        .find(|s| s.commit.seq <= commit.seq)
        .map(|s| s.index)
}

fn render_table(
    view: Option<&PromotionView>,
    snapshots: &[Snapshot],
    approvals: &[ApprovalEvent],
) -> String {
    let current = view
        .and_then(PromotionView::effective_snapshot)
        .map(|s| s.index);
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header(vec![
        "#",
        "commit",
        "author",
        "date",
        "subject",
        "snapshot",
        "profileSpec",
        "stages",
        "note",
    ]);
    for snapshot in snapshots {
        let mut notes = Vec::new();
        if let Some(earlier) = snapshot.rollback_of {
            notes.push(format!("rollback to #{earlier}"));
        }
        if Some(snapshot.index) == current {
            notes.push("current".to_string());
        }
        table.add_row(vec![
            format!("#{}", snapshot.index),
            short_sha(&snapshot.commit).to_string(),
            snapshot.commit.author.clone(),
            date(&snapshot.commit),
            snapshot.commit.subject.clone(),
            snapshot.hashes.short().to_string(),
            short_hash(&snapshot.hashes.profile_spec).to_string(),
            short_hash(&snapshot.hashes.stages).to_string(),
            notes.join(", "),
        ]);
    }
    let mut out = format!("{table}\n");
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
    if approvals.is_empty() {
        out.push_str("\nNo approvals in history.\n");
        return out;
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header(vec![
        "stage", "approval", "commit", "author", "date", "subject", "during",
    ]);
    for event in approvals {
        let approval = match &event.kind {
            ApprovalKind::Field => "approved: true".to_string(),
            ApprovalKind::Annotation { value } => format!("annotation {value}"),
        };
        table.add_row(vec![
            event.stage.clone(),
            approval,
            short_sha(&event.commit).to_string(),
            event.commit.author.clone(),
            date(&event.commit),
            event.commit.subject.clone(),
            snapshot_at(snapshots, &event.commit).map_or(String::new(), |i| format!("#{i}")),
        ]);
    }
    out.push_str(&format!("\nApprovals:\n{table}\n"));
    out
}

fn json_document(
    args: &Args,
    branch: &str,
    head: Option<&CommitInfo>,
    view: Option<&PromotionView>,
    snapshots: &[Snapshot],
    approvals: &[ApprovalEvent],
) -> Value {
    let errors = match view {
        Some(PromotionView::Invalid { errors, .. }) => json!(errors),
        _ => json!([]),
    };
    let snapshots: Vec<Value> = snapshots
        .iter()
        .map(|s| {
            json!({
                "index": s.index,
                "snapshotId": s.id(),
                "profileSpecHash": s.hashes.profile_spec,
                "stagesHash": s.hashes.stages,
                "rollbackOf": s.rollback_of,
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
