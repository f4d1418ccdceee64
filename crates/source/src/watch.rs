//! Filesystem watches, so a change is seen within moments instead of at the next poll: a local
//! repository's refs (a new commit), and the trusted-keys directory (a key added, changed or
//! removed, docs/trust.md#trusted-keys).

use std::path::{Path, PathBuf};

use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
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

/// Calls `on_change` when the trusted-keys directory `dir` changes: a file added, removed,
/// renamed (an editor's atomic save) or written and closed, and the `..data` link swapped by
/// which the kubelet updates a mounted Secret or ConfigMap (its key files are links through
/// `..data`, so they change without being written). Calls come in bursts; treat them as "sync
/// soon" ([`crate::Poker::poke`]): the sync re-reads the directory and re-verifies the history
/// when the keys changed.
pub fn watch_keys(
    dir: &Path,
    on_change: impl Fn() + Send + 'static,
) -> Result<LocalWatch, SourceError> {
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if key_change_complete(&event) {
            on_change();
        }
    })
    .map_err(|source| watch_error(dir, source))?;
    // Not recursive: key files sit in the directory itself, and a Secret's timestamped data
    // directory is seen through the rename of `..data`.
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(|source| watch_error(dir, source))?;
    Ok(LocalWatch { _watcher: watcher })
}

/// Whether `event` may leave the keys directory in a new, complete state. Skipped: reads, and
/// writes still in progress (a write, or the creation of a regular file, is followed by a
/// close-after-write once the file is complete), so a sync does not read a half-written key.
/// Anything else (renames, removals, links, metadata, a lost-event rescan, a watch error) is a
/// change.
fn key_change_complete(event: &notify::Result<notify::Event>) -> bool {
    let Ok(event) = event else {
        return true;
    };
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Data(_)) => false,
        EventKind::Create(CreateKind::File) => !event.paths.iter().all(|path| {
            std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_file())
        }),
        _ => true,
    }
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
    use notify::event::{DataChange, RemoveKind, RenameMode};

    #[test]
    fn key_changes_count_once_complete() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("alice.asc");
        std::fs::write(&file, "key").expect("write");
        let link = dir.path().join("bob.asc");
        std::os::unix::fs::symlink("..data/bob.asc", &link).expect("link");
        let event =
            |kind: EventKind, path: &Path| Ok(notify::Event::new(kind).add_path(path.into()));
        let complete = |kind: EventKind, path: &Path| key_change_complete(&event(kind, path));

        assert!(complete(
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            &file
        ));
        assert!(complete(
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            &file
        ));
        assert!(complete(EventKind::Remove(RemoveKind::File), &file));
        assert!(
            complete(EventKind::Create(CreateKind::File), &link),
            "a new link is complete"
        );
        assert!(complete(
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            &dir.path().join("..data")
        ));
        assert!(key_change_complete(&Err(notify::Error::generic(
            "lost events"
        ))));

        assert!(
            !complete(EventKind::Create(CreateKind::File), &file),
            "written next"
        );
        assert!(!complete(
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            &file
        ));
        assert!(!complete(
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            &file
        ));
        assert!(!complete(
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            &file
        ));
    }

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
