//! Which commit the range starts from. A PR branch behind `main` must be compared with the
//! commit it branched from (the merge base), or `main`'s newer changes read as undone by the PR.

use git2::{BranchType, Commit, ErrorCode, Repository};

use super::PlanError;

/// How the start of the range is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BaseChoice {
    /// The merge base of `from` and `to` when `from` names a branch (local or remote-tracking),
    /// `from` itself otherwise (a commit, a tag, `HEAD~1`).
    #[default]
    Auto,
    /// Always the merge base of `from` and `to`.
    MergeBase,
    /// Always `from` itself.
    Tip,
}

/// The merge base a plan compared with, and the two revisions it is the base of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeBase {
    pub sha: String,
    pub from: String,
    pub to: String,
}

/// Whether `rev` names a local branch or a remote-tracking branch (`main`, `origin/main`,
/// `refs/heads/main`).
fn names_branch(repo: &Repository, rev: &str) -> bool {
    let short = rev.strip_prefix("refs/heads/").unwrap_or(rev);
    let remote = rev.strip_prefix("refs/remotes/").unwrap_or(rev);
    repo.find_branch(short, BranchType::Local).is_ok()
        || repo.find_branch(remote, BranchType::Remote).is_ok()
}

/// The commit the range starts from: `from_commit`, or the merge base of `from` and `to` when
/// `choice` asks for it.
pub(super) fn start_of_range<'r>(
    repo: &'r Repository,
    choice: BaseChoice,
    (from, from_commit): (&str, &Commit<'r>),
    (to, to_commit): (&str, &Commit<'r>),
) -> Result<(Commit<'r>, Option<MergeBase>), PlanError> {
    let wanted = match choice {
        BaseChoice::Auto => names_branch(repo, from),
        BaseChoice::MergeBase => true,
        BaseChoice::Tip => false,
    };
    if !wanted {
        return Ok((from_commit.clone(), None));
    }
    let missing = |source: git2::Error| {
        let (from, to) = (from.to_string(), to.to_string());
        match (source.code(), repo.is_shallow()) {
            (ErrorCode::NotFound, true) => PlanError::ShallowMissingBase { from, to },
            (ErrorCode::NotFound, false) => PlanError::NoMergeBase { from, to },
            _ => PlanError::MergeBase { from, to, source },
        }
    };
    let base = repo
        .merge_base(from_commit.id(), to_commit.id())
        .map_err(missing)?;
    let commit = repo.find_commit(base).map_err(missing)?;
    let merge_base = MergeBase {
        sha: base.to_string(),
        from: from.to_string(),
        to: to.to_string(),
    };
    Ok((commit, Some(merge_base)))
}
