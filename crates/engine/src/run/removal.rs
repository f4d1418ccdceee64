//! A promotion gone from git: delete every profile tollgate generated for it, unless its last
//! snapshot asked to keep them (`preserveClusterProfilesOnDelete`, which works here: D9).

use tollgate_model::hash::HASH_SCHEME;
use tollgate_model::snapshot::Snapshot;

use crate::effects::{Effects, Outgoing};
use crate::input::StepInput;
use crate::output::EventReason;
use crate::output::{EngineEvent, StepOutput};
use crate::status::{Phase, PromotionStatus};

/// Gone from git, removal held by the guard: frozen like a pause (nothing applied, nothing
/// deleted), so the removed promotion neither advances to another stage nor loses its profiles
/// while a person decides; a Warning says so once.
pub(crate) fn step_held(input: &StepInput<'_>, reason: &str) -> StepOutput {
    let mut status = input.status.cloned().unwrap_or_else(PromotionStatus::empty);
    let message = format!("Removal held: {reason}");
    let mut events = Vec::new();
    if status.phase != Phase::RemovalHeld || status.message.as_ref() != Some(&message) {
        events.push(EngineEvent::warning(
            EventReason::RemovalHeld,
            format!("Removed from git, removal held: {reason}"),
        ));
    }
    status.phase = Phase::RemovalHeld;
    status.message = Some(message);
    let effects = Effects {
        events,
        ..Effects::default()
    };
    effects.into_output(status, Outgoing::EventsOnly)
}

pub(crate) fn step_removed(
    input: &StepInput<'_>,
    promotion: &str,
    last: Option<&Snapshot>,
) -> StepOutput {
    let mut status = input.status.cloned().unwrap_or_else(PromotionStatus::empty);
    status.hash_scheme = HASH_SCHEME;
    status.paused_since = None;
    let preserve = last.is_some_and(|s| s.promotion.spec.preserve_cluster_profiles_on_delete);
    let owned: Vec<_> = input
        .observed
        .profiles
        .values()
        .filter(|p| p.is_owned_by(promotion))
        .collect();
    let first_time = !matches!(status.phase, Phase::Removing | Phase::Removed);
    let mut events = Vec::new();

    if preserve {
        status.phase = Phase::Removed;
        status.message = Some(format!(
            "removed from git; kept {} ClusterProfiles (preserveClusterProfilesOnDelete: true)",
            owned.len()
        ));
        if first_time {
            events.push(EngineEvent::normal(
                EventReason::Removing,
                "Removed from git; generated ClusterProfiles are kept (preserveClusterProfilesOnDelete)"
                    .to_string(),
            ));
        }
        let effects = Effects {
            events,
            ..Effects::default()
        };
        return effects.into_output(status, Outgoing::EventsOnly);
    }

    let deletes: Vec<String> = owned
        .iter()
        .filter(|p| !p.deleting)
        .map(|p| p.name.clone())
        .collect();
    if owned.is_empty() {
        status.phase = Phase::Removed;
        status.message =
            Some("removed from git; every generated ClusterProfile is gone".to_string());
    } else {
        status.phase = Phase::Removing;
        status.message = Some(format!(
            "removed from git; deleting {} generated ClusterProfiles",
            owned.len()
        ));
    }
    if first_time && !owned.is_empty() {
        events.push(EngineEvent::normal(
            EventReason::Removing,
            format!(
                "Removed from git; deleting {} generated ClusterProfiles",
                owned.len()
            ),
        ));
    }
    let effects = Effects {
        deletes,
        events,
        ..Effects::default()
    };
    effects.into_output(status, Outgoing::ActionsOnly)
}
