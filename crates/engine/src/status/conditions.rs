//! Kubernetes-style conditions on the promotion's status, for what holds *now* beside the phase:
//! whether the controller's watches work (a failing watch means the observed state the steps
//! decide from may be stale), whether the governing RolloutPolicy resolves, and whether the newest
//! snapshot recommits rejected content.
//!
//! A healthy state needs no condition until it has once been unhealthy, so steady state writes
//! nothing new; a transition time changes only when the condition's status does.

use chrono::{DateTime, Utc};

use crate::status::{Condition, PromotionStatus};

/// `type` of the condition saying whether every cluster watch works.
pub const WATCHES_HEALTHY: &str = "WatchesHealthy";
/// `type` of the condition saying whether the RolloutPolicy governing the promotion resolves.
pub const POLICY_VALID: &str = "PolicyValid";
/// `type` of the condition saying whether the branch tip passed commit verification.
pub const COMMIT_VERIFIED: &str = "CommitVerified";
/// `type` of the condition saying the branch was rewritten under the newest snapshot.
pub const BRANCH_REWOUND: &str = "BranchRewound";
/// `type` of the condition saying the newest snapshot has the content of a rejected one.
pub const REJECTED_CONTENT: &str = "RejectedContent";

/// A condition's wanted state: `problem` set means unhealthy.
pub(crate) struct Wanted<'a> {
    pub type_: &'static str,
    /// `(status, reason)` when healthy.
    pub healthy: (&'static str, &'static str),
    /// `(status, reason)` when there is a problem.
    pub unhealthy: (&'static str, &'static str),
    pub problem: Option<&'a str>,
}

/// Sets a condition. Returns true when the problem is new or its message changed (worth telling).
pub(crate) fn set(status: &mut PromotionStatus, wanted: Wanted<'_>, now: DateTime<Utc>) -> bool {
    let ((state, reason), message) = match wanted.problem {
        None => (wanted.healthy, String::new()),
        Some(problem) => (wanted.unhealthy, problem.to_string()),
    };
    let existing = status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == wanted.type_);
    match existing {
        Some(c) => {
            let news = wanted.problem.is_some() && (c.status != state || c.message != message);
            if c.status != state {
                c.last_transition_time = now;
            }
            c.status = state.to_string();
            c.reason = reason.to_string();
            c.message = message;
            news
        }
        None if wanted.problem.is_none() => false,
        None => {
            status.conditions.push(Condition {
                type_: wanted.type_.to_string(),
                status: state.to_string(),
                reason: reason.to_string(),
                message,
                last_transition_time: now,
            });
            true
        }
    }
}

/// Sets the `WatchesHealthy` condition.
pub(crate) fn set_watch_health(
    status: &mut PromotionStatus,
    problem: Option<&str>,
    now: DateTime<Utc>,
) {
    let wanted = Wanted {
        type_: WATCHES_HEALTHY,
        healthy: ("True", "WatchesCurrent"),
        unhealthy: ("False", "WatchFailing"),
        problem,
    };
    set(status, wanted, now);
}

/// Sets the `PolicyValid` condition; true when a new problem should be told (`PolicyInvalid`).
/// `unapproved`: the problem is a change waiting for an admin (`PolicyChangeUnapproved`).
pub(crate) fn set_policy_valid(
    status: &mut PromotionStatus,
    problem: Option<&str>,
    unapproved: bool,
    now: DateTime<Utc>,
) -> bool {
    let reason = match unapproved {
        true => "PolicyChangeUnapproved",
        false => "PolicyInvalid",
    };
    let wanted = Wanted {
        type_: POLICY_VALID,
        healthy: ("True", "PolicyResolved"),
        unhealthy: ("False", reason),
        problem,
    };
    set(status, wanted, now)
}

/// Sets the `RejectedContent` condition; true when it is new (`RejectedContentRecommitted`).
pub(crate) fn set_rejected_content(
    status: &mut PromotionStatus,
    note: Option<&str>,
    now: DateTime<Utc>,
) -> bool {
    let wanted = Wanted {
        type_: REJECTED_CONTENT,
        healthy: ("False", "NoRejectedContent"),
        unhealthy: ("True", "RejectedContentRecommitted"),
        problem: note,
    };
    set(status, wanted, now)
}

/// Sets the `BranchRewound` condition; true when the rewrite is new (worth telling).
pub(crate) fn set_branch_rewound(
    status: &mut PromotionStatus,
    note: Option<&str>,
    now: DateTime<Utc>,
) -> bool {
    let wanted = Wanted {
        type_: BRANCH_REWOUND,
        healthy: ("False", "BranchFollowed"),
        unhealthy: ("True", "BranchRewound"),
        problem: note,
    };
    set(status, wanted, now)
}

/// Sets the `CommitVerified` condition; true when a refusal is new (`CommitNotVerified`).
pub(crate) fn set_commit_verified(
    status: &mut PromotionStatus,
    refusal: Option<&str>,
    now: DateTime<Utc>,
) -> bool {
    let wanted = Wanted {
        type_: COMMIT_VERIFIED,
        healthy: ("True", "Verified"),
        unhealthy: ("False", "CommitNotVerified"),
        problem: refusal,
    };
    set(status, wanted, now)
}

/// The condition of `type_`, when it reports a problem now.
pub fn problem<'s>(status: &'s PromotionStatus, type_: &str) -> Option<&'s Condition> {
    let unhealthy = match type_ {
        REJECTED_CONTENT => "True",
        _ => "False",
    };
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == unhealthy)
}
