//! `tollgate rollback NAME --to N`: restores snapshot N's content (`spec`: profileSpec and stages)
//! under the branch tip's metadata (pause flag, approvals, labels) and commits it on a new
//! branch (`tollgate/rollback-<name>-to-<N>`), ready to push as a PR; the controller then marks
//! the new snapshot "rollback to #N". Never pushes unless `--push REMOTE`. Exit 0 committed, 1
//! unknown name/snapshot or nothing to roll back, 2 other errors.

use std::process::ExitCode;

use tollgate_source::edit::rollback;

use super::approve::{edit_target, finish, report_error};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The promotion's `metadata.name`.
    pub name: String,
    /// The snapshot index to restore (see `tollgate history NAME`).
    #[arg(long = "to", value_name = "N")]
    pub to: u64,
    /// Local clone to commit in (its working tree and checkout are not touched).
    #[arg(long, default_value = ".")]
    pub repo: String,
    /// Branch whose tip the rollback is based on.
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// Sub-path of the repository holding the manifests ("" = the whole repository).
    #[arg(long, default_value = "")]
    pub path: String,
    /// Push the new branch to this remote (otherwise nothing leaves the clone).
    #[arg(long)]
    pub push: Option<String>,
    /// The controller's verification: snapshots numbered as it numbers them, and nothing
    /// committed on a tip that would not verify.
    #[command(flatten)]
    pub trust: super::trust_args::TrustArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let trust = args.trust.config();
    let target = edit_target(&args.repo, &args.branch, &args.path, &trust);
    match rollback(&target, &args.name, args.to) {
        Ok(outcome) => {
            super::report_line(&format!(
                "Restored {} to the content of snapshot #{} in {}.",
                args.name, outcome.snapshot_index, outcome.file
            ));
            for note in &outcome.notes {
                super::report_line(&format!("  {note}"));
            }
            finish(&args.repo, &outcome, args.push.as_deref())
        }
        Err(error) => report_error(&error),
    }
}
