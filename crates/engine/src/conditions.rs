//! Kubernetes-style conditions on the promotion's status, for what the engine is told rather than
//! what it decides: today whether the controller's watches of the cluster work (a failing watch
//! means the observed state the steps decide from may be stale).

use chrono::{DateTime, Utc};

use crate::status::{Condition, PromotionStatus};

/// `type` of the condition saying whether every cluster watch works.
pub const WATCHES_HEALTHY: &str = "WatchesHealthy";

/// Sets the `WatchesHealthy` condition; its transition time changes only when its status does.
pub(crate) fn set_watch_health(
    status: &mut PromotionStatus,
    problem: Option<&str>,
    now: DateTime<Utc>,
) {
    let wanted = match problem {
        None => ("True", "WatchesCurrent", String::new()),
        Some(problem) => ("False", "WatchFailing", problem.to_string()),
    };
    let existing = status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == WATCHES_HEALTHY);
    match existing {
        Some(c) => {
            if c.status != wanted.0 {
                c.last_transition_time = now;
            }
            c.status = wanted.0.to_string();
            c.reason = wanted.1.to_string();
            c.message = wanted.2;
        }
        // Healthy watches need no condition until one has failed: steady state writes nothing new.
        None if problem.is_none() => {}
        None => status.conditions.push(Condition {
            type_: WATCHES_HEALTHY.to_string(),
            status: wanted.0.to_string(),
            reason: wanted.1.to_string(),
            message: wanted.2,
            last_transition_time: now,
        }),
    }
}
