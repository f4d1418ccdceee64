//! The blast-radius guard (docs/operations.md#blast-radius-guard): a single sync that would remove more than a configured
//! share of the promotions — or all of them, or whose tracked path vanished — is not pruned until
//! confirmed, by `--confirm-prune` for the whole process or by annotating the held GitPromotion
//! `tollgate.dev/confirm-prune: "true"`.
//!
//! Only promotions that may have applied something count: one that never had a valid snapshot
//! (a file that never parsed, say) has no blast radius, so its removal is neither held nor counted.

use super::cluster_view::ClusterView;
use super::git_task::PromotionGit;

#[derive(Debug, Clone, Copy)]
pub struct PruneGuard {
    /// Removals above this share (0–100) of the known promotions are held.
    pub max_share_percent: u32,
    /// Process-wide confirmation.
    pub confirmed: bool,
}

impl Default for PruneGuard {
    fn default() -> Self {
        PruneGuard {
            max_share_percent: 50,
            confirmed: false,
        }
    }
}

impl PruneGuard {
    /// Why removing `removed` of `known` promotions must wait for confirmation, if it must.
    pub fn hold_reason(&self, removed: usize, known: usize, path_missing: bool) -> Option<String> {
        if self.confirmed || removed == 0 {
            return None;
        }
        if path_missing {
            return Some(format!(
                "the tracked path vanished from the branch, which would remove {removed} of {known} promotions"
            ));
        }
        if removed >= known {
            return Some(format!("the commit removes all {known} promotions"));
        }
        let share = removed * 100 / known.max(1);
        (share > self.max_share_percent as usize).then(|| {
            format!(
                "the commit removes {removed} of {known} promotions ({share}% > {}%)",
                self.max_share_percent
            )
        })
    }
}

/// Whether removing `name` could withdraw anything from the fleet: git has a valid snapshot of it
/// (current or last good), or the cluster shows a run of it (see [`ClusterView::shows_a_run`]).
pub fn has_blast_radius(name: &str, git: Option<&PromotionGit>, cluster: &dyn ClusterView) -> bool {
    git.is_some_and(|git| git.view.effective_snapshot().is_some()) || cluster.shows_a_run(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_mass_removals_and_vanished_paths() {
        let guard = PruneGuard::default();
        assert_eq!(guard.hold_reason(1, 10, false), None);
        assert_eq!(guard.hold_reason(5, 10, false), None);
        assert!(guard.hold_reason(6, 10, false).is_some());
        assert!(guard.hold_reason(1, 1, false).is_some());
        assert!(guard.hold_reason(1, 10, true).is_some());
        let confirmed = PruneGuard {
            confirmed: true,
            ..guard
        };
        assert_eq!(confirmed.hold_reason(10, 10, true), None);
    }
}
