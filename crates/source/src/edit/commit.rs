//! Committing an edit: one changed file on a new branch (or, with `direct`, on the tracked branch,
//! the checkout following), or an empty statement commit; signed when the repository's git
//! configuration signs. No checkout, index or working tree is used to build the commit.

use std::path::Path;

use git2::build::TreeUpdateBuilder;
use git2::{Commit, FileMode, Oid, Repository};

use super::{EditError, EditOutcome, git_error};

/// A one-file change to commit on a new branch.
pub struct FileCommit<'a> {
    /// The new branch; with `direct`, the existing branch whose tip `base` is, moved forward.
    pub branch: &'a str,
    pub direct: bool,
    pub file: &'a str,
    pub content: &'a [u8],
    pub message: &'a str,
}

/// Commits `change` on top of `base` and points the new branch `refs/heads/<branch>` at it. The
/// new tree is `base`'s tree with one blob replaced; no checkout, index or working tree is used.
pub fn commit_on_new_branch(
    repo: &Repository,
    base: &Commit<'_>,
    change: &FileCommit<'_>,
) -> Result<Oid, EditError> {
    let base_tree = base
        .tree()
        .map_err(git_error(format!("read the tree of {}", base.id())))?;
    let mode = match base_tree.get_path(Path::new(change.file)) {
        Ok(entry) if entry.filemode() == i32::from(FileMode::BlobExecutable) => {
            FileMode::BlobExecutable
        }
        _ => FileMode::Blob,
    };
    let blob = repo
        .blob(change.content)
        .map_err(git_error(format!("write the new {}", change.file)))?;
    let tree_id = TreeUpdateBuilder::new()
        .upsert(change.file, blob, mode)
        .create_updated(repo, &base_tree)
        .map_err(git_error("build the new tree"))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(git_error("read the new tree"))?;
    if !change.direct {
        return commit_tree(repo, base, &tree, change.branch, change.message);
    }
    // On the checked-out branch, the index and working tree follow the commit (as `git commit`
    // would have them); uncommitted changes to the file refuse it first.
    let checked_out = super::checkout::is_checked_out(repo, change.branch);
    if checked_out {
        let base_blob = base_tree
            .get_path(Path::new(change.file))
            .ok()
            .map(|e| e.id());
        super::checkout::ensure_unchanged(repo, change.file, base_blob)?;
    }
    let commit = commit_tree_on_tip(repo, base, &tree, change.branch, change.message)?;
    if checked_out {
        super::checkout::follow(repo, change.file, change.content)?;
    }
    Ok(commit)
}

/// Commits `tree` on top of `base`, the tip of `branch`, and moves `branch` to it (refused when
/// the tip moved meanwhile).
fn commit_tree_on_tip(
    repo: &Repository,
    base: &Commit<'_>,
    tree: &git2::Tree<'_>,
    branch: &str,
    message: &str,
) -> Result<Oid, EditError> {
    let commit = create_commit(repo, base, tree, message)?;
    repo.reference_matching(
        &format!("refs/heads/{branch}"),
        commit,
        true,
        base.id(),
        message,
    )
    .map_err(git_error(format!("move branch {branch} to the new commit")))?;
    Ok(commit)
}

/// Commits `tree` on top of `base`, signed when the repository's git configuration signs
/// commits (see [`crate::sign`]), and points the new branch `refs/heads/<branch>` at it.
pub fn commit_tree(
    repo: &Repository,
    base: &Commit<'_>,
    tree: &git2::Tree<'_>,
    branch: &str,
    message: &str,
) -> Result<Oid, EditError> {
    let reference = format!("refs/heads/{branch}");
    if repo.find_reference(&reference).is_ok() {
        return Err(EditError::BranchExists {
            branch: branch.to_string(),
        });
    }
    let commit = create_commit(repo, base, tree, message)?;
    repo.reference(&reference, commit, false, message)
        .map_err(git_error(format!("create branch {branch}")))?;
    Ok(commit)
}

/// A statement commit to make: empty, on the branch tip, on a new branch.
pub(crate) struct Statement {
    pub branch: String,
    pub subject: String,
    pub message: String,
    /// What to tell the user.
    pub notes: Vec<String>,
}

/// Commits `statement` on `tip` (its tree unchanged: a statement commit, issue #44).
pub(crate) fn commit_statement(
    repo: &Repository,
    tip: &Commit<'_>,
    statement: Statement,
) -> Result<EditOutcome, EditError> {
    let tree = tip
        .tree()
        .map_err(git_error(format!("read the tree of {}", tip.id())))?;
    let commit = commit_tree(repo, tip, &tree, &statement.branch, &statement.message)?;
    Ok(EditOutcome {
        branch: statement.branch,
        direct: false,
        commit: commit.to_string(),
        base: tip.id().to_string(),
        file: String::new(),
        message: statement.subject,
        snapshot_index: 0,
        snapshot_id: String::new(),
        notes: statement.notes,
        warnings: Vec::new(),
    })
}

/// The commit object of `tree` on top of `base`, signed when the git configuration signs.
fn create_commit(
    repo: &Repository,
    base: &Commit<'_>,
    tree: &git2::Tree<'_>,
    message: &str,
) -> Result<Oid, EditError> {
    let signature = repo
        .signature()
        .map_err(|source| EditError::NoIdentity { source })?;
    let committer = format!(
        "{} <{}>",
        signature.name().unwrap_or_default(),
        signature.email().unwrap_or_default()
    );
    let commit = match crate::sign::Signing::from_config(repo, &committer)? {
        None => repo
            .commit(None, &signature, &signature, message, tree, &[base])
            .map_err(git_error("create the commit"))?,
        Some(signing) => {
            let buffer = repo
                .commit_create_buffer(&signature, &signature, message, tree, &[base])
                .map_err(git_error("create the commit"))?;
            let payload = buffer.as_str().map_err(|_| EditError::Git {
                what: "sign the commit".to_string(),
                source: git2::Error::from_str("the commit is not UTF-8"),
            })?;
            let armored = signing.sign(payload.as_bytes())?;
            repo.commit_signed(payload, &armored, None)
                .map_err(git_error("create the signed commit"))?
        }
    };
    Ok(commit)
}

/// How the repository's git configuration signs commits, in words (`None`: it does not).
pub(crate) fn signing_note(repo: &Repository) -> Result<Option<String>, EditError> {
    let committer = repo
        .signature()
        .map(|s| s.to_string())
        .map_err(|source| EditError::NoIdentity { source })?;
    Ok(
        crate::sign::Signing::from_config(repo, &committer)?.map(|signing| {
            let format = match signing.format {
                crate::sign::SigningFormat::OpenPgp => "OpenPGP",
                crate::sign::SigningFormat::Ssh => "SSH",
            };
            format!("signed with your {format} key {}", signing.key)
        }),
    )
}
