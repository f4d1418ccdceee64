//! What an edit reads: the tracked branch of a local clone, synced and verified as the controller
//! would, its tip, its promotions and their snapshots, and a file as of a commit.

use std::path::Path;

use git2::{Commit, ObjectType, Repository};
use tollgate_manifest::Snapshot;

use super::{EditError, git_error};
use crate::config::SourceConfig;
use crate::error::SourceError;
use crate::report::PromotionView;
use crate::source::GitSource;

/// Where to read from: a local clone, its branch and the manifests' sub-path.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub repo: &'a Path,
    pub branch: &'a str,
    pub path: &'a str,
    /// The controller's verification (issue #44): snapshots are numbered as the controller
    /// numbers them, and with a `--verify-commits` mode nothing is committed on a tip that
    /// carries a commit that would not verify (a signed commit on top would vouch for it).
    pub trust: Option<&'a crate::TrustConfig>,
    /// Commit on a fresh branch name when the edit's own is taken (`name-2`, …; the web view's
    /// repeated buttons) instead of refusing (the command line's choice; see `edit::branch`).
    pub fresh_branch: bool,
}

pub(crate) struct Loaded {
    pub repo: Repository,
    pub source: GitSource,
}

pub(crate) fn load(target: &Target<'_>) -> Result<Loaded, EditError> {
    let source_error = |source| EditError::Source {
        repo: target.repo.display().to_string(),
        branch: target.branch.to_string(),
        source: Box::new(source),
    };
    let repo_text = target.repo.to_string_lossy().into_owned();
    let repo = Repository::open(target.repo).map_err(|source| {
        source_error(SourceError::Open {
            repo: repo_text.clone(),
            source,
        })
    })?;
    // Local repositories are read in place: the cache directory is never used.
    let mut config = SourceConfig::new(repo_text, target.branch, target.path, std::env::temp_dir());
    if let Some(trust) = target.trust {
        config.trust = trust.clone();
    }
    let mut source = GitSource::open(config).map_err(source_error)?;
    source.sync().map_err(source_error)?;
    if let Some(refusal) = source.refusal() {
        return Err(EditError::UnverifiedTip {
            branch: target.branch.to_string(),
            refusal: refusal.message(),
        });
    }
    Ok(Loaded { repo, source })
}

pub(crate) fn tip<'r>(repo: &'r Repository, branch: &str) -> Result<Commit<'r>, EditError> {
    repo.find_reference(&format!("refs/heads/{branch}"))
        .and_then(|r| r.peel_to_commit())
        .map_err(git_error(format!("read the tip of branch {branch}")))
}

/// The content of `path` at `commit`, `None` when there is no such file.
pub fn read_file_at(
    repo: &Repository,
    commit: &Commit<'_>,
    path: &str,
) -> Result<Option<Vec<u8>>, EditError> {
    let tree = commit
        .tree()
        .map_err(git_error(format!("read the tree of {}", commit.id())))?;
    let entry = match tree.get_path(Path::new(path)) {
        Ok(entry) => entry,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(git_error(format!("find {path} at {}", commit.id()))(e)),
    };
    if entry.kind() != Some(ObjectType::Blob) {
        return Ok(None);
    }
    let blob = repo
        .find_blob(entry.id())
        .map_err(git_error(format!("read {path} at {}", commit.id())))?;
    Ok(Some(blob.content().to_vec()))
}

/// The current snapshot of promotion `name` at the tip; an invalid or unknown promotion is a
/// request error.
pub(crate) fn current_snapshot<'s>(
    source: &'s GitSource,
    name: &str,
    branch: &str,
) -> Result<&'s Snapshot, EditError> {
    match source.promotion(name) {
        None => Err(unknown_promotion(source, name, branch)),
        Some(PromotionView::Invalid { errors, .. }) => {
            let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
            Err(EditError::InvalidAtTip {
                name: name.to_string(),
                branch: branch.to_string(),
                errors: errors.join("; "),
            })
        }
        Some(PromotionView::Valid { snapshot }) => Ok(snapshot),
    }
}

pub(super) fn unknown_promotion(source: &GitSource, name: &str, branch: &str) -> EditError {
    let known: Vec<&str> = source.promotions().map(|(n, _)| n).collect();
    EditError::UnknownPromotion {
        name: name.to_string(),
        branch: branch.to_string(),
        known: if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        },
    }
}

/// `#N`, `N`, or a snapshot-id prefix.
pub(super) fn select_snapshot<'s>(
    history: &'s [Snapshot],
    name: &str,
    selector: &str,
) -> Result<&'s Snapshot, EditError> {
    let unknown = || EditError::UnknownSnapshot {
        name: name.to_string(),
        selector: selector.to_string(),
        count: history.len(),
    };
    let number = selector.strip_prefix('#').unwrap_or(selector);
    if let Ok(index) = number.parse::<u64>()
        && (selector.starts_with('#') || number.len() < 12)
    {
        return history
            .iter()
            .find(|s| s.index == index)
            .ok_or_else(unknown);
    }
    let prefix = selector.to_ascii_lowercase();
    let mut matching = history.iter().filter(|s| s.id().starts_with(&prefix));
    match (matching.next(), matching.next()) {
        (Some(snapshot), None) => Ok(snapshot),
        (Some(_), Some(_)) => Err(EditError::AmbiguousSnapshot {
            name: name.to_string(),
            selector: selector.to_string(),
        }),
        (None, _) => Err(unknown()),
    }
}
