//! `seal` as a git edit: a signed statement commit (empty, on the branch tip) whose message ends
//! with `Tollgate-Seal: <justification>`. Under `--verify-commits Strict` it vouches for the
//! unsigned history before it (docs/trust.md#verified-commits-head-and-strict). It is never
//! refused for an unverified tip: vouching for one is what it is for.

use git2::Repository;

use crate::edit::{
    EditError, EditOutcome, Statement, Target, commit_statement, git_error, signing_note, tip,
};
use crate::trailers;

/// Commits the seal on `tollgate/seal-<tip>`; a seal git would not sign is refused.
pub fn seal(target: &Target<'_>, justification: &str) -> Result<EditOutcome, EditError> {
    let justification = justification.trim();
    if justification.is_empty() || justification.contains('\n') {
        return Err(EditError::SealJustification);
    }
    let repo = Repository::open(target.repo).map_err(git_error(format!(
        "open the repository {}",
        target.repo.display()
    )))?;
    let signed = signing_note(&repo)?.ok_or(EditError::SealUnsigned)?;
    let tip = tip(&repo, target.branch)?;
    let short = tollgate_model::snapshot::short_sha(&tip.id().to_string()).to_string();
    let subject = format!("Seal the history up to {short}");
    let statement = Statement {
        branch: super::branch_for(&repo, target, format!("tollgate/seal-{short}")),
        message: format!("{subject}\n\n{}\n", trailers::seal_line(justification)),
        subject,
        notes: vec![signed],
    };
    commit_statement(&repo, &tip, statement)
}
