//! Filesystem watch on a local repository's refs, so a new commit is seen within moments
//! instead of at the next poll.

use std::path::{Path, PathBuf};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::error::SourceError;

/// Stops watching when dropped.
pub struct LocalWatch {
    _watcher: RecommendedWatcher,
}

impl std::fmt::Debug for LocalWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalWatch")
    }
}

/// Calls `on_change` whenever a ref, `HEAD` or `packed-refs` of the repository at `repo_path`
/// changes. Calls may come in bursts (one commit touches several files); callers should treat
/// them as "sync soon", e.g. through [`crate::Poker::poke`].
pub fn watch_local(
    repo_path: &Path,
    on_change: impl Fn() + Send + 'static,
) -> Result<LocalWatch, SourceError> {
    let repo = git2::Repository::open(repo_path).map_err(|source| SourceError::Open {
        repo: repo_path.display().to_string(),
        source,
    })?;
    let git_dir = repo.path().to_path_buf();
    let refs_dir = git_dir.join("refs");
    let watched_git_dir = git_dir.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else {
            return;
        };
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        if event
            .paths
            .iter()
            .any(|path| is_ref_path(&watched_git_dir, path))
        {
            on_change();
        }
    })
    .map_err(|source| watch_error(&git_dir, source))?;
    watcher
        .watch(&refs_dir, RecursiveMode::Recursive)
        .map_err(|source| watch_error(&refs_dir, source))?;
    watcher
        .watch(&git_dir, RecursiveMode::NonRecursive)
        .map_err(|source| watch_error(&git_dir, source))?;
    Ok(LocalWatch { _watcher: watcher })
}

fn watch_error(path: &Path, source: notify::Error) -> SourceError {
    SourceError::Watch {
        path: PathBuf::from(path),
        source,
    }
}

/// Ref files (not their `.lock` siblings), `HEAD` and `packed-refs`.
fn is_ref_path(git_dir: &Path, path: &Path) -> bool {
    if path.extension().is_some_and(|ext| ext == "lock") {
        return false;
    }
    if path.starts_with(git_dir.join("refs")) {
        return true;
    }
    path.parent() == Some(git_dir)
        && path
            .file_name()
            .is_some_and(|name| name == "HEAD" || name == "packed-refs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_paths_are_recognised() {
        let git_dir = Path::new("/r/.git");
        assert!(is_ref_path(git_dir, Path::new("/r/.git/refs/heads/main")));
        assert!(is_ref_path(git_dir, Path::new("/r/.git/HEAD")));
        assert!(is_ref_path(git_dir, Path::new("/r/.git/packed-refs")));
        assert!(!is_ref_path(
            git_dir,
            Path::new("/r/.git/refs/heads/main.lock")
        ));
        assert!(!is_ref_path(git_dir, Path::new("/r/.git/index")));
        assert!(!is_ref_path(git_dir, Path::new("/r/.git/objects/ab/cdef")));
    }
}
