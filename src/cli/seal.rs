//! `tollgate seal JUSTIFICATION`: a signed, empty statement commit on the branch tip whose
//! `Tollgate-Seal:` trailer vouches for the unsigned history before it under `--verify-commits
//! Strict` (docs/trust.md). Committed on a new branch (`tollgate/seal-<tip>`), never pushed
//! unless `--push REMOTE`. Exit 0 committed, 1 no justification, 2 other errors (git would not
//! sign it among them).

use std::path::Path;
use std::process::ExitCode;

use tollgate_source::edit::Target;
use tollgate_source::edit_seal::seal;

use super::approve::{finish, report_error};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Why the history before the seal is vouched for (one line; kept in the commit).
    pub justification: String,
    /// Local clone to commit in (its working tree and checkout are not touched).
    #[arg(long, default_value = ".")]
    pub repo: String,
    /// Branch whose tip the seal is based on.
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// Push the new branch to this remote (otherwise nothing leaves the clone).
    #[arg(long)]
    pub push: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let target = Target {
        repo: Path::new(&args.repo),
        branch: &args.branch,
        path: "",
        trust: None,
        fresh_branch: false,
    };
    match seal(&target, &args.justification) {
        Ok(outcome) => {
            super::report_line(&format!(
                "Sealed the history of {} up to {}.",
                args.branch,
                tollgate_manifest::snapshot::short_sha(&outcome.base)
            ));
            for note in &outcome.notes {
                super::report_line(&format!("  {note}"));
            }
            finish(&args.repo, &outcome, args.push.as_deref())
        }
        Err(error) => report_error(&error),
    }
}
