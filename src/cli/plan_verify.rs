//! `tollgate plan --trusted-keys DIR`: whether the commits of the range would verify (issue #33)
//! — each commit's signature, and what `--verify-commits Head` and `Strict` would do with the tip.

use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;
use tollgate_manifest::snapshot::short_sha;
use tollgate_model::{SignatureCheck, Unverified};
use tollgate_source::plan::RangePlan;
use tollgate_source::trust::{RangeVerification, verify_range};

/// Verifies the plan's range (from its merge base, else `from`, to `to`).
pub fn verify(repo: &Path, plan: &RangePlan, keys: &Path) -> anyhow::Result<RangeVerification> {
    let repository = git2::Repository::open(repo)
        .with_context(|| format!("cannot open git repository {}", repo.display()))?;
    let base = plan
        .merge_base
        .as_ref()
        .map_or(plan.from.sha.as_str(), |m| m.sha.as_str());
    let oid = |sha: &str| git2::Oid::from_str(sha).with_context(|| format!("bad commit {sha}"));
    verify_range(&repository, oid(base)?, oid(&plan.to.sha)?, keys)
        .context("cannot verify the range's commits")
}

fn verdict(refusal: &Option<tollgate_source::Refusal>) -> String {
    match refusal {
        None => "would roll out".to_string(),
        Some(refusal) => format!("would not roll out: {}", refusal.message()),
    }
}

/// The section for the text and Markdown outputs.
pub fn render(verification: &RangeVerification, markdown: bool) -> String {
    let mut out = String::new();
    out.push_str(if markdown {
        "\n### Commit verification\n\n"
    } else {
        "\nCommit verification:\n"
    });
    for commit in &verification.commits {
        let bullet = if markdown { "- " } else { "  " };
        out.push_str(&format!(
            "{bullet}{} {:?}: {}\n",
            short_sha(&commit.sha),
            commit.subject,
            commit.check.describe()
        ));
    }
    let bullet = if markdown { "- " } else { "  " };
    out.push_str(&format!(
        "{bullet}--verify-commits Head: {}\n",
        verdict(&verification.head)
    ));
    out.push_str(&format!(
        "{bullet}--verify-commits Strict: {}\n",
        verdict(&verification.strict)
    ));
    out
}

/// The `commitVerification` member of the JSON output.
#[derive(Serialize)]
pub struct VerificationReport<'v> {
    commits: Vec<CommitReport<'v>>,
    head: ModeReport<'v>,
    strict: ModeReport<'v>,
}

/// One commit of the range and its signature check.
#[derive(Serialize)]
struct CommitReport<'v> {
    sha: &'v str,
    subject: &'v str,
    signature: &'v SignatureCheck,
}

/// What a `--verify-commits` mode would do with the tip: roll out, or refuse a commit.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModeReport<'v> {
    rolls_out: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    commit: Option<&'v str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'v Unverified>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

impl<'v> VerificationReport<'v> {
    pub fn of(verification: &'v RangeVerification) -> Self {
        let commits = (verification.commits.iter())
            .map(|c| CommitReport {
                sha: &c.sha,
                subject: &c.subject,
                signature: &c.check,
            })
            .collect();
        VerificationReport {
            commits,
            head: ModeReport::of(verification.head.as_ref()),
            strict: ModeReport::of(verification.strict.as_ref()),
        }
    }
}

impl<'v> ModeReport<'v> {
    fn of(refusal: Option<&'v tollgate_source::Refusal>) -> Self {
        ModeReport {
            rolls_out: refusal.is_none(),
            commit: refusal.map(|r| r.commit.as_str()),
            reason: refusal.map(|r| &r.reason),
            message: refusal.map(tollgate_source::Refusal::message),
        }
    }
}
