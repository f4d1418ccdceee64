//! `tollgate plan --trusted-keys DIR`: whether the commits of the range would verify (issue #33)
//! — each commit's signature, and what `--verify-commits Head` and `Strict` would do with the tip.

use std::path::Path;

use anyhow::Context as _;
use serde_json::{Value, json};
use tollgate_manifest::snapshot::short_sha;
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
pub fn to_json(verification: &RangeVerification) -> Value {
    let commits: Vec<Value> = verification
        .commits
        .iter()
        .map(|c| json!({"sha": c.sha, "subject": c.subject, "signature": c.check}))
        .collect();
    let mode = |refusal: &Option<tollgate_source::Refusal>| match refusal {
        None => json!({"rollsOut": true}),
        Some(refusal) => {
            json!({"rollsOut": false, "commit": refusal.commit, "reason": refusal.reason, "message": refusal.message()})
        }
    };
    json!({
        "commits": commits,
        "head": mode(&verification.head),
        "strict": mode(&verification.strict),
    })
}
