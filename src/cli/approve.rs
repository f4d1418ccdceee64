//! `tollgate approve NAME STAGE`: writes the snapshot-bound approval annotation
//! (`approve.tollgate.dev/<stage>: <snapshot id prefix>`, or the SHA of the commit that introduced
//! the snapshot when the annotation already holds its id) into the promotion's manifest as of the
//! branch tip and commits it on a new branch, ready to push as a PR. Never pushes unless
//! `--push REMOTE`. It approves the run that waits: with a cluster named (`--kubeconfig`,
//! `--context`, or `KUBECONFIG`), the snapshot the GitPromotion runs; and it commits nothing
//! on a tip that carries a commit the controller would not roll out (issue #44). Exit 0
//! committed, 1 unknown name/stage/snapshot, a stage without a manual trigger or an invalid
//! manifest, 2 other errors (a tip that would not verify among them).

use std::path::Path;
use std::process::ExitCode;

use tollgate_engine::PromotionStatus;
use tollgate_manifest::snapshot::short_sha;
use tollgate_source::edit::{EditError, EditOutcome, Target, approve_run};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The promotion's `metadata.name`.
    #[arg(required_unless_present = "policy")]
    pub name: Option<String>,
    /// The manual stage to approve.
    #[arg(required_unless_present = "policy")]
    pub stage: Option<String>,
    /// As an admin of this RolloutPolicy, approve the changes waiting for its admins (issue #44):
    /// a signed statement commit naming the newest one.
    #[arg(long, conflicts_with_all = ["name", "stage", "snapshot"])]
    pub policy: Option<String>,
    /// Local clone to commit in (its working tree and checkout are not touched).
    #[arg(long, default_value = ".")]
    pub repo: String,
    /// Branch whose tip the approval is based on.
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// Sub-path of the repository holding the manifests ("" = the whole repository).
    #[arg(long, default_value = "")]
    pub path: String,
    /// The snapshot to approve: `#N` or a snapshot-id prefix (default: the current one).
    #[arg(long)]
    pub snapshot: Option<String>,
    /// Push the new branch to this remote (otherwise nothing leaves the clone).
    #[arg(long)]
    pub push: Option<String>,
    /// The controller's verification: snapshots numbered as it numbers them, and nothing
    /// committed on a tip that would not verify.
    #[command(flatten)]
    pub trust: super::trust_args::TrustArgs,
    /// The management cluster whose GitPromotion says which run waits (also `KUBECONFIG`).
    #[command(flatten)]
    pub cluster: super::connect::ClusterArgs,
}

/// Exit code of a refusal to approve on top of content the controller refuses.
const EXIT_REFUSED: u8 = 2;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(policy) = &args.policy {
        return run_policy(&args, policy);
    }
    let (Some(name), Some(stage)) = (&args.name, &args.stage) else {
        anyhow::bail!("approve needs NAME and STAGE, or --policy NAME");
    };
    let status = super::controller_view::read_or_warn(&args.cluster, name, true);
    if let Some(refusal) = status.as_ref().and_then(PromotionStatus::commit_refusal) {
        eprintln!(
            "error: the controller refuses a commit of the branch: {refusal}. Approving on top of it would sign for it; nothing was committed (sign or revert that commit first)"
        );
        return Ok(ExitCode::from(EXIT_REFUSED));
    }
    let waiting = status
        .as_ref()
        .and_then(super::controller_view::current_run);
    let trust = args.trust.config();
    let target = edit_target(&args.repo, &args.branch, &args.path, &trust);
    let snapshot = args.snapshot.as_deref();
    match approve_run(&target, name, stage, snapshot, waiting.as_ref()) {
        Ok(outcome) => {
            super::report_line(&format!(
                "Approved {name} stage {stage} for snapshot #{} ({}).",
                outcome.snapshot_index,
                &outcome.snapshot_id[..12.min(outcome.snapshot_id.len())]
            ));
            for note in &outcome.notes {
                super::report_line(&format!("  {note}"));
            }
            finish(&args.repo, &outcome, args.push.as_deref())
        }
        Err(error) => report_error(&error),
    }
}

/// `approve --policy NAME`: the admin's statement for the changes waiting under the policy.
fn run_policy(args: &Args, policy: &str) -> anyhow::Result<ExitCode> {
    let trust = args.trust.config();
    let target = edit_target(&args.repo, &args.branch, &args.path, &trust);
    match tollgate_source::edit_policy::approve_policy(&target, policy) {
        Ok(outcome) => {
            super::report_line(&format!(
                "Approved the changes waiting for the admins of RolloutPolicy {policy}:"
            ));
            for note in &outcome.notes {
                super::report_line(&format!("  {note}"));
            }
            finish(&args.repo, &outcome, args.push.as_deref())
        }
        Err(error) => report_error(&error),
    }
}

/// The clone to commit in, with the controller's verification (shared with `rollback`, `retry`).
pub(crate) fn edit_target<'a>(
    repo: &'a str,
    branch: &'a str,
    path: &'a str,
    trust: &'a tollgate_source::TrustConfig,
) -> Target<'a> {
    Target {
        repo: Path::new(repo),
        branch,
        path,
        trust: Some(trust),
        fresh_branch: false,
    }
}

const EXIT_REQUEST: u8 = 1;

/// Prints the new branch and what to do next (shared with `rollback`); pushes only when asked.
pub(crate) fn finish(
    repo: &str,
    outcome: &EditOutcome,
    push: Option<&str>,
) -> anyhow::Result<ExitCode> {
    for warning in &outcome.warnings {
        eprintln!("warning: {warning}");
    }
    if outcome.direct {
        super::report_line(&format!(
            "Committed {} on branch {} (on {}; {} changed).",
            short_sha(&outcome.commit),
            outcome.branch,
            short_sha(&outcome.base),
            outcome.file
        ));
        super::report_line(&format!("  {}", outcome.message));
        return push_branch(repo, outcome, push);
    }
    let changed = match outcome.file.as_str() {
        "" => "no file changed".to_string(),
        file => format!("{file} changed"),
    };
    super::report_line(&format!(
        "Committed {} on new branch {} (from {}; {changed}).",
        short_sha(&outcome.commit),
        outcome.branch,
        short_sha(&outcome.base),
    ));
    super::report_line(&format!("  {}", outcome.message));
    match push {
        None => {
            match suggested_remote(repo) {
                Some(remote) => {
                    super::report_line("Nothing was pushed. To propose it:");
                    super::report_line(&format!("  git push {remote} {}", outcome.branch));
                    super::report_line(&format!(
                        "then open a pull request from {} into the tracked branch.",
                        outcome.branch
                    ));
                }
                // A local repository (the controller may track it directly): merge, not push.
                None => {
                    super::report_line(
                        "Nothing was pushed (the repository has no remote). To apply it:",
                    );
                    super::report_line(&format!(
                        "  git -C {repo} merge --ff-only {}",
                        outcome.branch
                    ));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(_) => push_branch(repo, outcome, push),
    }
}

/// Pushes the outcome's branch to `push`, when asked.
fn push_branch(repo: &str, outcome: &EditOutcome, push: Option<&str>) -> anyhow::Result<ExitCode> {
    match push {
        None => Ok(ExitCode::SUCCESS),
        Some(remote) => {
            let refspec = format!("refs/heads/{0}:refs/heads/{0}", outcome.branch);
            let status = std::process::Command::new("git")
                .args(["-C", repo, "push", remote, &refspec])
                .status()
                .map_err(|e| anyhow::anyhow!("cannot run git push: {e}"))?;
            if !status.success() {
                anyhow::bail!("git push {remote} {} failed ({status})", outcome.branch);
            }
            super::report_line(&format!(
                "Pushed {} to {remote}; open a pull request from it into the tracked branch.",
                outcome.branch
            ));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The remote to suggest pushing to: `origin` if there is one, else the first; `None` without any.
fn suggested_remote(repo: &str) -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["-C", repo, "remote"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let remotes: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .collect();
    remotes
        .iter()
        .find(|r| **r == "origin")
        .or(remotes.first())
        .map(|r| r.to_string())
}

/// Request errors (unknown name, stage, snapshot…) exit 1; the rest go up as errors (exit 2).
pub(crate) fn report_error(error: &EditError) -> anyhow::Result<ExitCode> {
    if error.is_request_error() {
        eprintln!("error: {error}");
        Ok(ExitCode::from(EXIT_REQUEST))
    } else {
        Err(anyhow::anyhow!("{error}"))
    }
}
