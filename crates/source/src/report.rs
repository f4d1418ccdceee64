//! What a sync tells its caller: the current view of each promotion and what changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tollgate_manifest::{CommitInfo, Snapshot};

use crate::blob::Diagnostic;

/// A promotion as of the branch head.
///
/// The snapshot is shared: the controller keeps a clone of every view, and a copy of a snapshot
/// (hashes, file, commit) per promotion is what that would cost otherwise.
#[derive(Clone, Debug, PartialEq)]
pub enum PromotionView {
    Valid {
        snapshot: Arc<Snapshot>,
    },
    /// The head content is invalid (or its name is defined twice); the last good snapshot keeps
    /// running.
    Invalid {
        errors: Vec<Diagnostic>,
        last_good: Option<Arc<Snapshot>>,
    },
}

impl PromotionView {
    /// The snapshot the controller should run: the current one, or the last good one.
    pub fn effective_snapshot(&self) -> Option<&Arc<Snapshot>> {
        match self {
            PromotionView::Valid { snapshot } => Some(snapshot),
            PromotionView::Invalid { last_good, .. } => last_good.as_ref(),
        }
    }
}

/// How a promotion changed between the previous head and the new one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Added,
    /// A new snapshot: which of the two content hashes changed.
    SpecChanged {
        profile_spec: bool,
        stages: bool,
    },
    /// Same snapshot, but triggers, annotations or other non-hashed fields changed.
    TriggerOnly,
    /// No longer defined at head (reported once).
    Removed,
    /// Invalid at head (newly, or with different diagnostics); see [`PromotionView::Invalid`].
    Invalid,
    /// Was invalid, is valid again.
    Recovered,
    Unchanged,
}

#[derive(Clone, Debug)]
pub struct SyncReport {
    pub head: Option<CommitInfo>,
    pub head_moved: bool,
    /// Every promotion defined before or after this sync, when the head moved; empty otherwise.
    pub changes: BTreeMap<String, Change>,
    /// The tracked sub-path does not exist at the head commit.
    pub path_missing: bool,
    /// Whether any RolloutPolicy's content or errors changed in this sync (see
    /// [`crate::GitSource::policies`]): every promotion should be stepped again.
    pub policies_changed: bool,
    /// Whether the whole index was rebuilt (first sync, or history was rewritten).
    pub rebuilt: bool,
    pub duration: Duration,
}
