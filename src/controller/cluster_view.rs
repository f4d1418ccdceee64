//! What the scheduler reads of the management cluster: a few questions answered from the watches'
//! in-memory caches (no request), behind a trait so that its tests answer them from plain sets.

use super::reconcile::Context;
use crate::cluster::observe::ObservedCaches;
use crate::cluster::statuses::{StatusCache, confirms_prune};

pub trait ClusterView {
    /// Every promotion with a GitPromotion state object (ones gone from git included).
    fn state_objects(&self) -> Vec<String>;
    /// Whether the cluster shows something of the promotion a removal would withdraw: its
    /// persisted status records a run (or cannot be read), or profiles generated for it exist.
    fn shows_a_run(&self, name: &str) -> bool;
    /// Whether its GitPromotion confirms a held removal (see `guard`).
    fn confirms_prune(&self, name: &str) -> bool;
    /// The promotion a ClusterProfile was generated for.
    fn promotion_of_profile(&self, profile: &str) -> Option<String>;
}

/// The real answers: the caches the watches fill.
pub struct Cached<'a> {
    pub caches: &'a ObservedCaches,
    pub statuses: &'a StatusCache,
}

impl<'a> Cached<'a> {
    /// The caches of the controller's context.
    pub fn of(ctx: &'a Context) -> Self {
        Cached {
            caches: &ctx.caches,
            statuses: &ctx.statuses,
        }
    }
}

impl ClusterView for Cached<'_> {
    fn state_objects(&self) -> Vec<String> {
        self.statuses.names()
    }

    fn shows_a_run(&self, name: &str) -> bool {
        let ran = self.statuses.get(name).is_some_and(|persisted| {
            persisted
                .status
                .is_none_or(|status| status.snapshot_index.is_some())
        });
        let mut owns_profiles = false;
        self.caches
            .profiles
            .visit_indexed(name, |_, _, _, _| owns_profiles = true);
        ran || owns_profiles
    }

    fn confirms_prune(&self, name: &str) -> bool {
        self.statuses
            .annotations(name)
            .is_some_and(|annotations| confirms_prune(&annotations))
    }

    fn promotion_of_profile(&self, profile: &str) -> Option<String> {
        self.caches.promotion_of_profile(profile)
    }
}
