//! The engine's input: everything it decides from.

use chrono::{DateTime, Utc};
use tollgate_model::policy::RolloutPolicy;
use tollgate_model::snapshot::{ApprovalEvent, Snapshot};

use crate::depends_on::Dependency;
use crate::measurement::Measurement;
use crate::observed::Observed;
use crate::status::PromotionStatus;

#[derive(Clone, Copy, Debug)]
pub struct StepInput<'a> {
    pub desired: Desired<'a>,
    /// Every approval event of this promotion, in first-parent order.
    pub approvals: &'a [ApprovalEvent],
    pub observed: &'a Observed,
    /// The status persisted after the last step whose actions all succeeded; `None` = never ran.
    pub status: Option<&'a PromotionStatus>,
    pub now: DateTime<Utc>,
    /// The RolloutPolicy governing the promotion; `None`: stages wait forever (upstream). With a
    /// `policy_problem`, the last valid version of the policy that governed the run, if any.
    pub policy: Option<&'a RolloutPolicy>,
    /// Why the policy governing the promotion cannot be resolved now (two policies select it, its
    /// annotation names a missing policy, its policy's file does not parse), naming file, line and
    /// the fix. Fails closed: the run in progress goes on under `policy`, nothing new starts.
    pub policy_problem: Option<&'a str>,
    /// The `policy_problem` is a change no admin approved yet (`PolicyChangeUnapproved`, issue
    /// #44), not an error: `policy` is the version in force, and the promotion is held.
    pub policy_unapproved: bool,
    /// Analysis measurements the controller's runner took for this promotion and the step has
    /// not recorded yet (results of other runs or already recorded ones are ignored).
    pub measurements: &'a [Measurement],
    /// The promotion's snapshots in git (oldest first): a rollback restores earlier ones.
    pub history: &'a [Snapshot],
    /// Why a watch of the cluster fails, if one does: `observed` may be stale. Reported in the
    /// `WatchesHealthy` condition.
    pub watch_problem: Option<&'a str>,
    /// Why the branch tip does not run (`--verify-commits`): the commit that failed verification
    /// and why; the last verified snapshot keeps running. Reported in the `CommitVerified`
    /// condition, and told once as a `CommitNotVerified` warning.
    pub unverified: Option<&'a str>,
    /// The branch was rewritten and the promotion's newest snapshot is no longer in its history
    /// (issue #44): told once (a `BranchRewound` condition, Warning event and notice); under
    /// `onRewind: Hold` nothing new starts while it lasts.
    pub rewound: Option<&'a str>,
    /// The promotions this one depends on (`tollgate.dev/depends-on`), as observed: a stage
    /// starts only once the same stage of each completed its current run.
    pub dependencies: &'a [Dependency<'a>],
    /// Why its `tollgate.dev/depends-on` is refused (a cycle, an unknown promotion), naming the
    /// file: no stage of it starts until fixed; a stage in progress goes on.
    pub dependency_problem: Option<&'a str>,
}

#[derive(Clone, Copy, Debug)]
pub enum Desired<'a> {
    /// The promotion exists in git. `current` is its last good snapshot; `invalid` carries the
    /// error text when the file at HEAD does not parse or validate (`current` keeps running).
    Snapshot {
        current: &'a Snapshot,
        invalid: Option<&'a str>,
    },
    /// The promotion is gone from git but the blast-radius guard holds its removal until a person
    /// confirms it: everything stays frozen where it is, nothing is applied or deleted, and the
    /// status says why (`reason`, with how to confirm). `last` is its last good snapshot, if any.
    RemovalHeld {
        last: Option<&'a Snapshot>,
        reason: &'a str,
    },
    /// The promotion's file has never been valid: nothing runs; the status reports `error`.
    NeverValid {
        /// `metadata.name` of the promotion.
        promotion: &'a str,
        error: &'a str,
    },
    /// The promotion is gone from git (the controller has already applied its blast-radius
    /// guard). `last` is its last good snapshot, if there ever was one.
    Removed {
        /// `metadata.name` of the promotion (needed when there never was a good snapshot).
        promotion: &'a str,
        last: Option<&'a Snapshot>,
    },
}
