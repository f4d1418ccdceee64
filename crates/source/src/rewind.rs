//! A branch rewritten so that what ran is no longer in its history (issue #44): a force-push
//! that rewinds it, or rewrites commits under the running snapshot. The source notes which
//! promotions lost their newest snapshot's commit; the controller tells it (a Warning event and a
//! `BranchRewound` notice) and, under `onRewind: Hold`, starts nothing new until the branch
//! moves on from the rewritten tip (a new accepted commit on top) or has that commit back.

use std::collections::BTreeMap;

use git2::{Oid, Repository};
use tollgate_model::snapshot::short_sha;

/// What a rewrite took out of the branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewind {
    pub branch: String,
    /// The branch tip before and after.
    pub from: String,
    pub to: String,
    /// Per promotion: its newest snapshot before the rewrite (index, commit) that the new
    /// history no longer has.
    pub lost: BTreeMap<String, (u64, String)>,
}

impl Rewind {
    /// Why `promotion` is told, if the rewrite took its snapshot.
    pub fn note(&self, promotion: &str) -> Option<String> {
        let (index, sha) = self.lost.get(promotion)?;
        Some(format!(
            "branch {} was rewritten from {} to {}: snapshot #{index} (commit {}) is no longer in its history",
            self.branch,
            short_sha(&self.from),
            short_sha(&self.to),
            short_sha(sha)
        ))
    }
}

/// Whether `old` is still in the history of `tip` (the same commit, or an ancestor).
pub(crate) fn kept(repo: &Repository, tip: Oid, old: Oid) -> bool {
    tip == old || repo.graph_descendant_of(tip, old).unwrap_or(false)
}

/// The rewind from `from` to `to`, given each promotion's newest snapshot before it; `None`
/// when `from` is still in the history of `to` (a rebuild that took nothing out).
pub(crate) fn detect(
    repo: &Repository,
    branch: &str,
    (from, to): (Oid, Oid),
    newest: BTreeMap<String, (u64, String)>,
) -> Option<Rewind> {
    if kept(repo, to, from) {
        return None;
    }
    let lost: BTreeMap<String, (u64, String)> = newest
        .into_iter()
        .filter(|(_, (_, sha))| Oid::from_str(sha).map_or(true, |old| !kept(repo, to, old)))
        .collect();
    Some(Rewind {
        branch: branch.to_string(),
        from: from.to_string(),
        to: to.to_string(),
        lost,
    })
}
