//! A commit made on the branch that is checked out (`tollgate retry --commit`) moves the index and
//! the working tree along for the file it changed, as `git commit` does (issue #45): otherwise
//! they still hold the old file, and the user's next `git commit -a` silently reverts the change.
//! A file with uncommitted changes is never overwritten: the commit is refused first.

use std::path::Path;

use git2::{ObjectType, Oid, Repository};

use super::{EditError, git_error};

/// Whether `branch` is the branch checked out in `repo`'s working tree.
pub(crate) fn is_checked_out(repo: &Repository, branch: &str) -> bool {
    if repo.is_bare() {
        return false;
    }
    let wanted = format!("refs/heads/{branch}");
    repo.head()
        .ok()
        .is_some_and(|head| head.name().ok() == Some(wanted.as_str()))
}

/// Refuses when the index or the working tree holds `file` other than as `base_blob` (the
/// branch tip's blob; `None`: absent at the tip).
pub(crate) fn ensure_unchanged(
    repo: &Repository,
    file: &str,
    base_blob: Option<Oid>,
) -> Result<(), EditError> {
    let index = repo.index().map_err(git_error("read the index"))?;
    let staged = index.get_path(Path::new(file), 0).map(|entry| entry.id);
    let on_disk = repo
        .workdir()
        .and_then(|dir| std::fs::read(dir.join(file)).ok())
        .and_then(|bytes| Oid::hash_object(ObjectType::Blob, &bytes).ok());
    if staged != base_blob || on_disk != base_blob {
        return Err(EditError::UncommittedChanges {
            file: file.to_string(),
        });
    }
    Ok(())
}

/// Writes `content` to `file` in the working tree and stages it: the checkout then matches the
/// commit just made on its branch.
pub(crate) fn follow(repo: &Repository, file: &str, content: &[u8]) -> Result<(), EditError> {
    let Some(dir) = repo.workdir() else {
        return Ok(());
    };
    std::fs::write(dir.join(file), content).map_err(|source| EditError::Checkout {
        file: file.to_string(),
        message: source.to_string(),
    })?;
    let mut index = repo.index().map_err(git_error("read the index"))?;
    index
        .add_path(Path::new(file))
        .map_err(git_error(format!("stage {file}")))?;
    index.write().map_err(git_error("write the index"))
}
