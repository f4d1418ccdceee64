//! `approve --policy` as a git edit (issue #44): an admin's signed statement commit (empty, on
//! the branch tip) with `Tollgate-Approve-Policy: <policy>@<change commit>`, which puts the
//! changes waiting under the policy, up to the newest one, into force.

use tollgate_model::snapshot::short_sha;

use crate::edit::{EditError, EditOutcome, Loaded, Statement, Target, commit_statement, load, tip};
use crate::trailers;

/// Commits the statement approving every change now waiting for the admins of `policy`.
pub fn approve_policy(target: &Target<'_>, policy: &str) -> Result<EditOutcome, EditError> {
    let Loaded { repo, source } = load(target)?;
    let policies = source.policies();
    let pending = policies.governance().pending_for(policy);
    let Some(newest) = pending.iter().map(|u| u.latest()).max_by_key(|c| c.seq) else {
        return Err(EditError::NothingToApprove {
            policy: policy.to_string(),
        });
    };
    let signed = crate::edit::signing_note(&repo)?.ok_or(EditError::AdminSignatureRequired {
        policy: policy.to_string(),
    })?;
    let tip = tip(&repo, target.branch)?;
    let change = short_sha(&newest.sha).to_string();
    let change12 = &newest.sha[..12.min(newest.sha.len())];
    let subject = format!("Approve the changes under RolloutPolicy {policy} up to {change}");
    let what: Vec<String> = pending
        .iter()
        .map(|u| format!("- {} (commit {})", u.subject, short_sha(&u.latest().sha)))
        .collect();
    let statement = Statement {
        branch: super::branch_for(
            &repo,
            target,
            format!("tollgate/approve-policy-{policy}-{change}"),
        ),
        message: format!(
            "{subject}\n\n{}\n\n{}\n",
            what.join("\n"),
            trailers::approve_policy_line(policy, change12)
        ),
        subject,
        notes: what.into_iter().chain([signed]).collect(),
    };
    commit_statement(&repo, &tip, statement)
}
