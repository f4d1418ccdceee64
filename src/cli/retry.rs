//! `tollgate retry NAME STAGE`: writes `retry.tollgate.dev/<stage>: <snapshot id>/<n>` into the
//! promotion's manifest as of the branch tip and commits it, signed and verified as `approve`
//! does, on a new branch (`tollgate/retry-<name>-<stage>-<commit>-<n>`) or with `--commit` on the
//! tracked branch itself. A run halted at that stage with that snapshot re-drives its failed and
//! timed-out clusters once per `n` (default: one more than the annotation's counter). With a
//! cluster named, a run the GitPromotion shows not halted at that stage is refused, naming its
//! phase, and nothing is committed. Exit 0 committed, 1 unknown name/stage, an invalid manifest
//! or a run not halted at the stage, 2 other errors.

use std::process::ExitCode;

use tollgate_source::edit_retry::{RetryRequest, retry};

use super::approve::{edit_target, finish, report_error};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The promotion's `metadata.name`.
    pub name: String,
    /// The halted stage to retry.
    pub stage: String,
    /// Local clone to commit in (its working tree and checkout are not touched).
    #[arg(long, default_value = ".")]
    pub repo: String,
    /// Branch whose tip the retry is based on.
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// Sub-path of the repository holding the manifests ("" = the whole repository).
    #[arg(long, default_value = "")]
    pub path: String,
    /// The retry counter (default: one more than the annotation's counter for this snapshot).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub n: Option<u64>,
    /// Commit on BRANCH itself instead of on a new branch.
    #[arg(long)]
    pub commit: bool,
    /// Push the branch to this remote (otherwise nothing leaves the clone).
    #[arg(long)]
    pub push: Option<String>,
    /// The controller's verification: snapshots numbered as it numbers them, and nothing
    /// committed on a tip that would not verify.
    #[command(flatten)]
    pub trust: super::trust_args::TrustArgs,
    /// The management cluster whose GitPromotion says whether the run is halted at STAGE (also
    /// `KUBECONFIG`); without one, git alone decides and the controller refuses a retry of a run
    /// that is not halted.
    #[command(flatten)]
    pub cluster: super::connect::ClusterArgs,
}

/// Exit code of a retry the run does not need (as for an unknown stage: the request is wrong).
const EXIT_NOT_HALTED: u8 = 1;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let status = super::controller_view::read_or_warn(&args.cluster, &args.name, true);
    if let Some(refusal) =
        status.and_then(|s| tollgate_engine::retry::refusal_of(&s, &args.name, &args.stage))
    {
        eprintln!("error: {refusal}; nothing was committed");
        return Ok(ExitCode::from(EXIT_NOT_HALTED));
    }
    let trust = args.trust.config();
    let target = edit_target(&args.repo, &args.branch, &args.path, &trust);
    let request = RetryRequest {
        name: &args.name,
        stage: &args.stage,
        n: args.n,
        direct: args.commit,
    };
    match retry(&target, &request) {
        Ok(outcome) => {
            super::report_line(&format!(
                "Retry of {} stage {} for snapshot #{} ({}).",
                args.name,
                args.stage,
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
