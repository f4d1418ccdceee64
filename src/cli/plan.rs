//! `tollgate plan --from REV --to REV`: what a commit range would do, per promotion, from git
//! (and, for the clusters each stage would hit, from the management cluster when one is named).
//! One typed report (`report`), serialized for machines, rendered as text for terminals and
//! Markdown for a PR comment.
//! Exit 0 planned, 1 `to` has invalid promotions, 2 usage or repository errors.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use tollgate_source::plan::{BaseChoice, plan_range_verified};

use super::connect::ClusterArgs;
pub use report::PlanReport;

mod estimate;
mod estimate_report;
mod gates;
mod markdown;
mod mermaid;
mod planned;
mod report;
mod targets;
mod text;
mod words;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Markdown,
    Json,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Every output estimates the run a change starts (a typical duration, p50, and a p10-p90 range, \
from the run history the promotion's status keeps; 1m per provisioning without it). Markdown \
output (for a PR comment) adds, per changed promotion, the clusters each stage would hit and \
the estimated timeline as a Mermaid gantt block. The management cluster (clusters and run \
history) is read only when --kubeconfig or --context is given ($KUBECONFIG alone is not used, \
so a plan in CI never reaches a cluster by accident); a failed read is a warning, not a failed \
plan.

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
    /// The management cluster: its clusters (the Markdown output matches them with each stage's
    /// clusterSelector) and each promotion's run history (the estimate's provisioning times).
    /// Read only when `--kubeconfig` or `--context` is given (a plan in CI must not reach a
    /// cluster by accident); without one the clusters are "unknown".
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
    // Every output carries the same estimate, from the fleet and run history when read.
    let fleet = targets::read_fleet(&args.cluster);
    let mut report = PlanReport::build(&plan, now, Some(&fleet));
    report.commit_verification = verification;
    let output = match args.output {
        OutputFormat::Text => text::render(&report, super::width::plain_width()),
        OutputFormat::Markdown => markdown::render(&report),
        OutputFormat::Json => format!("{}\n", serde_json::to_string_pretty(&report)?),
    };
    super::write_stdout(&output)?;
    Ok(if plan.has_invalid() {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    })
}
